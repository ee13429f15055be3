"""Scheduled incremental re-index: make an index hold exactly what a source folder holds now.

A run takes the index's re-index lock (a second run started while one works exits 75 and
touches nothing), diffs the source's documents against the index's by content id, and stops
there when nothing changed (so a run repeated on an unchanged source writes nothing). Otherwise
it rebuilds the index from the source: new and changed documents are the only ones that cost
model work (chunk embeddings, NER and LLM answers come from the caches beside the index, keyed
by text), deleted documents are gone with everything only they supported (chunks, units,
mentions, relations, communities), and the commit is atomic as for any build.

A document is matched across runs by its corpus id (the `id` field, a .txt file's name); a
document without one is matched by its content, so an edit shows as one deletion and one
addition.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from graphrag_engine.config import IndexConfig
from graphrag_engine.errors import BusyError
from graphrag_engine.index.ingest import DocumentReader
from graphrag_engine.index.pipeline import build_index
from graphrag_engine.store import open_index
from graphrag_engine.store.locks import try_lock

REINDEX_LOCK = ".reindex.lock"


@dataclass
class SourceDiff:
    """How a source differs from an index: documents by corpus id (or content id)."""

    new: int = 0
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    config_changed: bool = False
    first_build: bool = False

    @property
    def any(self) -> bool:
        """Whether the index must be rebuilt."""
        return bool(
            self.new or self.changed or self.deleted or self.config_changed or self.first_build
        )

    def as_dict(self) -> dict[str, Any]:
        """The counts, for the job's report."""
        return asdict(self)


@contextmanager
def reindex_lock(out: Path) -> Iterator[None]:
    """Hold the index's re-index lock for the duration; refuse at once when it is held."""
    fd = try_lock(out / REINDEX_LOCK)
    if fd is None:
        raise BusyError(
            f"{out}: another re-index of this index is running; this run changed nothing "
            "(the next scheduled run picks up whatever it misses)"
        )
    try:
        yield
    finally:
        os.close(fd)


def _key(doc_id: str, external_id: str | None) -> str:
    return f"id:{external_id}" if external_id is not None else f"content:{doc_id}"


def diff_source(corpus: Sequence[str | Path], out: Path, config: IndexConfig) -> SourceDiff:
    """Compare the source's documents with the index's (streamed; only ids are kept)."""
    if not (out / "manifest.json").exists():
        return SourceDiff(first_build=True)
    index = open_index(out)
    held: dict[str, str] = {}
    for batch in index.iter_batches("documents", columns=["doc_id", "external_id"]):
        for doc_id, ext in zip(
            batch.column("doc_id").to_pylist(), batch.column("external_id").to_pylist(), strict=True
        ):
            held[_key(doc_id, ext)] = doc_id
    diff = SourceDiff(config_changed=index.manifest.get("config_hash") != config.config_hash())
    for doc in DocumentReader(corpus, config.ingest):
        was = held.pop(_key(doc.doc_id, doc.external_id), None)
        if was is None:
            diff.new += 1
        elif was != doc.doc_id:
            diff.changed += 1
        else:
            diff.unchanged += 1
    diff.deleted = len(held)
    return diff


def reindex(corpus: Sequence[str | Path], out: str | Path, config: IndexConfig) -> dict[str, Any]:
    """Bring the index in `out` up to date with `corpus` under the re-index lock; returns the
    diff and, when something changed, the new manifest (None when nothing was written)."""
    out = Path(out)
    with reindex_lock(out):
        diff = diff_source(corpus, out, config)
        if not diff.any:
            return {"diff": diff.as_dict(), "manifest": None}
        return {"diff": diff.as_dict(), "manifest": build_index(corpus, out, config)}
