"""`graphrag-engine info`: what an index holds, as text (tables, rows, sizes, models, config,
stage summaries), or its manifest as JSON; `verify` checks every file against its sha256."""

from __future__ import annotations

import json
from pathlib import Path

from graphrag_engine.errors import IndexFormatError
from graphrag_engine.store.index_store import open_index


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def stage_lines(manifest: dict) -> list[str]:
    """One line per build stage with its figures."""
    return [
        f"stage {stage}: " + ", ".join(f"{k}={v}" for k, v in s.items())
        for stage, s in manifest["stats"].get("stages", {}).items()
    ]


def table_lines(manifest: dict) -> list[str]:
    """The files of a commit: name, rows, size and path."""
    lines = [f"{'table':<22}{'rows':>10}{'size':>12}  file"]
    for name, entry in sorted(manifest["files"].items()):
        rows = entry.get("rows", entry.get("shape", ["?"])[0])
        lines.append(f"{name:<22}{rows:>10}{_human_bytes(entry['bytes']):>12}  {entry['path']}")
    return lines


def describe_index(root: str | Path, verify: bool = False, as_json: bool = False) -> str:
    """The description of the index at `root` that `info` prints."""
    index = open_index(root)
    m = index.manifest
    out: list[str] = []
    if verify:
        problems = index.verify()
        if problems:
            raise IndexFormatError(
                f"{len(problems)} of {len(m['files'])} files fail the check: "
                + "; ".join(problems)
                + "; rebuild the index with `graphrag-engine index`"
            )
        out.append(f"verified: all {len(m['files'])} files match their sha256 in the manifest")
    if as_json:
        return "\n".join([*out, json.dumps(m, indent=2, sort_keys=True)])
    total = sum(size for _, size in index.file_sizes())
    out.append(
        f"index {index.root}  schema v{m['schema_version']}  generation {m['generation']}  {m['created_at']}"
    )
    out.append(f"config hash {m['config_hash']}  total {_human_bytes(total)}")
    out.append("models: " + ", ".join(f"{k}={v}" for k, v in sorted(m["models"].items())))
    out += table_lines(m)
    out += stage_lines(m)
    ingest = m["stats"].get("ingest")
    if ingest:
        out.append(
            f"ingest: {ingest['files']} files, {ingest['records']} records, {ingest['documents']} documents, "
            f"{ingest['duplicates']} duplicates, {ingest['skipped_bad']} skipped"
        )
    out.append("config: " + json.dumps(m["config"], sort_keys=True))
    return "\n".join(out)
