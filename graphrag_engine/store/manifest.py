"""The manifest of an index: read, checked for shape and version once, for every reader.

`manifest.json` is the only entry point of an index; a manifest of the wrong shape is a
"damaged manifest" (exit 2, naming what is wrong and saying to move the folder aside or
rebuild with `--force`), never an AttributeError or RecursionError further on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphrag_engine.errors import IndexFormatError
from graphrag_engine.store.schemas import SCHEMA_VERSION

MANIFEST = "manifest.json"
FORMAT = "graphrag-engine-index"


def read_manifest(root: str | Path) -> dict[str, Any] | None:
    """The validated manifest of the index at `root` (None when there is none); an
    IndexFormatError when it is damaged. Opens no table."""
    path = Path(root) / MANIFEST
    if not path.exists():
        return None
    return parse_manifest(path)


def _damaged(path: Path, what: str) -> IndexFormatError:
    return IndexFormatError(
        f"{path}: damaged manifest ({what}); move the folder aside and index again, or "
        "rebuild it in place with `graphrag-engine index ... --force`"
    )


def _check_shape(path: Path, manifest: dict[str, Any]) -> None:
    """The manifest's shape, checked once here for every reader: an integer generation, a
    mapping of files whose entries name a path, a kind and their bytes (and a vector table's
    shape), mappings for config, models and stats."""
    gen = manifest["generation"]
    if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
        raise _damaged(path, f"generation is {gen!r}, not a whole number")
    for key in ("files", "config", "models"):
        if not isinstance(manifest[key], dict):
            raise _damaged(path, f"'{key}' is a {type(manifest[key]).__name__}, not a mapping")
    if not isinstance(manifest.get("stats", {}), dict):
        raise _damaged(path, "'stats' is not a mapping")
    if not isinstance(manifest["config_hash"], str):
        raise _damaged(path, "'config_hash' is not a string")
    for name, entry in manifest["files"].items():
        if not isinstance(entry, dict):
            raise _damaged(path, f"file entry '{name}' is a {type(entry).__name__}")
        for key, kind in (("path", str), ("kind", str), ("bytes", int), ("sha256", str)):
            if not isinstance(entry.get(key), kind) or isinstance(entry.get(key), bool):
                raise _damaged(path, f"file entry '{name}' has no {kind.__name__} '{key}'")
        if entry["kind"] not in ("table", "vectors"):
            raise _damaged(path, f"file entry '{name}' is of unknown kind {entry['kind']!r}")
        shape = entry.get("shape")
        if entry["kind"] == "vectors" and not (
            isinstance(shape, list) and all(isinstance(d, int) for d in shape)
        ):
            raise _damaged(path, f"vector entry '{name}' has no shape")


def parse_manifest(path: Path) -> dict[str, Any]:
    """The manifest file at `path`, its shape, format and schema version checked."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexFormatError(
            f"{path}: manifest is not valid JSON ({exc}); move the folder aside and index "
            "again, or rebuild it in place with `graphrag-engine index ... --force`"
        ) from None
    except RecursionError:
        raise _damaged(path, "nested too deeply to read") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise IndexFormatError(
            f"{path}: not a graphrag-engine index manifest; move the folder aside, or rebuild "
            "it in place with `graphrag-engine index ... --force`"
        )
    version = manifest.get("schema_version")
    if not isinstance(version, int):
        raise IndexFormatError(
            f"{path}: manifest has no integer schema_version; move the folder aside, or "
            "rebuild it in place with `graphrag-engine index ... --force`"
        )
    if version > SCHEMA_VERSION:
        raise IndexFormatError(
            f"{path}: index has schema version {version}, but this graphrag-engine reads up to "
            f"version {SCHEMA_VERSION}; upgrade graphrag-engine to open it"
        )
    if version < SCHEMA_VERSION:
        raise IndexFormatError(
            f"{path}: index has schema version {version}, this graphrag-engine writes version "
            f"{SCHEMA_VERSION} and has no migration from it; rebuild the index with `index`"
        )
    for key in ("generation", "files", "config", "models", "config_hash"):
        if key not in manifest:
            raise IndexFormatError(f"{path}: manifest lacks '{key}'; rebuild the index")
    _check_shape(path, manifest)
    for name, entry in manifest["files"].items():
        where = Path(str(entry.get("path", "")))
        if where.is_absolute() or ".." in where.parts or not where.parts:
            raise IndexFormatError(
                f"{path}: file '{name}' is listed at {str(where)!r}, outside the index folder; "
                "the manifest is not one graphrag-engine wrote: rebuild the index"
            )
    return manifest
