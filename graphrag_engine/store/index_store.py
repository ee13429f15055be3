"""Index directory: Parquet tables, float32 vectors and a manifest, committed atomically.

Layout of an index directory::

    manifest.json          the only entry point; names every file of the current commit
    gen-000003/            files of commit 3 (tables *.parquet, vectors *.npy)
    gen-000002/            previous commit, kept so that a reader that opened it can finish
    .staging-*/            files of a commit being written (never referenced by a manifest)

A commit writes its files into a staging folder, fsyncs them, renames the folder to its
generation name, then writes `manifest.json.tmp`, fsyncs it and renames it over
`manifest.json`. A reader that opens the manifest sees either the old commit or the new one,
never a mix; a process killed at any point leaves the previous commit readable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_engine.errors import IndexFormatError
from graphrag_engine.store.manifest import MANIFEST, parse_manifest
from graphrag_engine.store.schemas import schema_for


def file_sha256(path: Path, block: int = 1 << 22) -> str:
    """sha256 of a file, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


class Index:
    """A committed index opened for reading; validated against its manifest and schemas."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        path = self.root / MANIFEST
        if not path.exists():
            raise IndexFormatError(
                f"{self.root}: no index here (no {MANIFEST}); build one with `graphrag-engine index`"
            )
        self.manifest = parse_manifest(path)
        self._finite: set[str] = set()
        self._validate()

    def _validate(self) -> None:
        root = self.root.resolve()
        for name, entry in self.manifest["files"].items():
            path = self.root / entry["path"]
            if root not in path.resolve().parents:
                raise IndexFormatError(
                    f"{path}: leads outside the index folder (to {path.resolve()}) through a "
                    "symbolic link; an index reads only its own files: rebuild the index"
                )
            if not path.exists():
                raise IndexFormatError(
                    f"{path}: listed in the manifest but missing; rebuild the index"
                )
            if path.stat().st_size != entry["bytes"]:
                raise IndexFormatError(
                    f"{path}: size {path.stat().st_size} differs from the manifest's {entry['bytes']}; "
                    "the index is damaged, rebuild it"
                )
            if entry["kind"] == "table":
                found = pq.read_schema(path)
                expected = schema_for(name)
                if not found.remove_metadata().equals(expected):
                    raise IndexFormatError(
                        f"{path}: table '{name}' does not have the expected schema; rebuild the index"
                    )
            elif entry["kind"] == "vectors":
                arr = np.load(path, mmap_mode="r")
                if list(arr.shape) != entry["shape"] or arr.dtype != np.float32:
                    raise IndexFormatError(
                        f"{path}: vectors have shape {arr.shape} {arr.dtype}, manifest says "
                        f"{entry['shape']} float32; rebuild the index"
                    )

    @property
    def generation(self) -> int:
        """Commit number of the opened index."""
        return int(self.manifest["generation"])

    def has(self, name: str) -> bool:
        """Whether the index holds table or vectors `name`."""
        return name in self.manifest["files"]

    def rows(self, name: str) -> int:
        """Row count of a table as recorded in the manifest."""
        return int(
            self.manifest["files"][name].get(
                "rows", self.manifest["files"][name].get("shape", [0])[0]
            )
        )

    def _path(self, name: str) -> Path:
        if name not in self.manifest["files"]:
            raise KeyError(
                f"index {self.root} has no '{name}' (has: {', '.join(self.manifest['files'])})"
            )
        return self.root / self.manifest["files"][name]["path"]

    def table(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """Read a whole table (or some columns)."""
        path = self._path(name)
        try:
            return pq.read_table(path, columns=columns)
        except (OSError, pa.ArrowException) as exc:
            raise self._damaged(path, exc) from None

    def iter_batches(
        self, name: str, batch_size: int = 65536, columns: list[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Stream a table in record batches with bounded memory."""
        path = self._path(name)
        try:
            yield from pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=columns)
        except (OSError, pa.ArrowException) as exc:
            raise self._damaged(path, exc) from None

    def vectors(self, name: str) -> np.ndarray:
        """Memory-mapped (n, d) float32 matrix; NaN or infinite values are refused."""
        path = self._path(name)
        arr = np.load(path, mmap_mode="r")
        if name not in self._finite:
            for lo in range(0, arr.shape[0], 65536):  # bounded memory
                if not np.isfinite(arr[lo : lo + 65536]).all():
                    raise IndexFormatError(
                        f"{path}: vectors hold NaN or infinite values; the index is damaged, "
                        "rebuild it with `graphrag-engine index`"
                    )
            self._finite.add(name)
        return arr

    def _damaged(self, path: Path, exc: Exception) -> IndexFormatError:
        return IndexFormatError(
            f"{path}: cannot be read ({str(exc)[:160]}); the index is damaged: "
            f"`graphrag-engine info {self.root} --verify` checks every file; rebuild the index"
        )

    def verify(self) -> list[str]:
        """Every file's sha256 against the manifest: one line per file that differs (or has
        no checksum recorded, from an index built before checksums)."""
        problems = []
        for _, entry in sorted(self.manifest["files"].items()):
            path = self.root / entry["path"]
            if "sha256" not in entry:
                problems.append(f"{path}: no checksum recorded (built before checksums)")
            elif file_sha256(path) != entry["sha256"]:
                problems.append(f"{path}: content differs from the manifest's sha256")
        return problems

    def file_sizes(self) -> Iterable[tuple[str, int]]:
        """(name, bytes) of every file in the commit."""
        return ((n, int(e["bytes"])) for n, e in self.manifest["files"].items())


def open_index(root: str | Path) -> Index:
    """Open and validate the current commit of the index at `root`."""
    return Index(root)


class NoIndex:
    """Stands in for an index when the questions carry their own graphs (KBQA, `query none`)."""

    root = Path("none")
    manifest: dict[str, Any] = {"files": {}, "stats": {}}
    generation = 0

    def has(self, name: str) -> bool:
        """Nothing is held."""
        return False

    def table(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """Always an error: this run has no index."""
        raise IndexFormatError(
            f"this run has no index (INDEX 'none') but the method reads its {name}; give an "
            "index folder, or a method that needs none (lego with lego.graph: question)"
        )

    def vectors(self, name: str) -> np.ndarray:
        """Always an error: this run has no index."""
        return self.table(name)  # raises


def built_config(index: Index, section: str) -> dict[str, Any]:
    """A section of the config the index was built with (empty when it records none)."""
    return (index.manifest.get("config") or {}).get(section) or {}
