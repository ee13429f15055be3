"""`graphrag-engine index`: ingest -> chunk -> units -> NER -> resolve -> graphs -> embed ->
line tokens -> commit.

Ingest and chunking stream from the corpus files into the store (a huge document's chunks as
they are cut). The graph stages read chunk and unit texts back from the staged tables a window
at a time and send each stage's missing texts to its model in few large calls (one per stage
unless they pass text_cache.PENDING_CHARS); what they hold per row is Arrow ids and numbers, so
memory grows with the index's tables, not with its text. The LLM response cache and
the embedding cache live beside the index (`llm_cache.sqlite`, `embed_cache.sqlite`), so a
killed run re-run pays for nothing twice, and `--add` extracts and embeds only new text.
Nothing becomes visible until the final atomic commit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from graphrag_engine.config import IndexConfig
from graphrag_engine.errors import IngestError
from graphrag_engine.index.build import Build, peak_rss_mb, run_graph_stages, run_stages
from graphrag_engine.index.chunking import chunk_documents
from graphrag_engine.index.communities import BUILD_COMMUNITIES
from graphrag_engine.index.extract import BUILD_EXTRACT
from graphrag_engine.index.forecast import forecast_index
from graphrag_engine.index.ingest import Document, DocumentReader
from graphrag_engine.index.line_tokens import BUILD_LINE_TOKENS
from graphrag_engine.index.resolve import BUILD_NER, BUILD_RESOLVE_GRAPHS
from graphrag_engine.index.skeleton import BUILD_KEYWORDS, BUILD_SKELETON
from graphrag_engine.index.synonyms import BUILD_SYNONYMS
from graphrag_engine.index.tree import BUILD_TREE
from graphrag_engine.index.units import BUILD_UNITS
from graphrag_engine.index.vectors import BUILD_EMBED, BUILD_EMBED_CHUNKS
from graphrag_engine.models.text_cache import WINDOW
from graphrag_engine.names import titled_chunk
from graphrag_engine.progress import progress
from graphrag_engine.store import IndexWriter, open_index
from graphrag_engine.store.schemas import schema_for

WRITE_BATCH = 2048
STAGES = {
    s.name: s
    for s in (
        BUILD_EMBED_CHUNKS,
        BUILD_SKELETON,
        BUILD_UNITS,
        BUILD_NER,
        BUILD_EXTRACT,
        BUILD_RESOLVE_GRAPHS,
        BUILD_COMMUNITIES,
        BUILD_EMBED,
        BUILD_SYNONYMS,
        BUILD_KEYWORDS,
        BUILD_TREE,
        BUILD_LINE_TOKENS,
    )
}
"""Every index stage after chunking, by name."""
GRAPH_PIPELINE = [
    "embed_chunks",
    "skeleton",
    "units",
    "ner",
    "extract",
    "resolve_graphs",
    "communities",
    "embed",
    "synonyms",
    "keywords",
    "tree",
    "line_tokens",
]
"""The stages of a build with a graph, in order; counting line tokens is always the last."""
MODEL_FREE = frozenset({"line_tokens"})
"""Stages that run no model (no executor is started for them alone)."""
TEXT_PIPELINE = ["line_tokens"]
"""The stages of a build without a graph (`graph.enabled: false`): no model runs."""


def run_pipeline(
    writer: IndexWriter,
    out: Path,
    config: IndexConfig,
    chunks: StagedChunks,
    stats: dict[str, Any],
    models: dict[str, str],
    names: Sequence[str],
    **known: Any,
) -> None:
    """Run the stages `names` in order into `writer` (`known`: what earlier stages would have
    made, as an import brings it); the model executor starts only when a stage needs it."""
    stages = [STAGES[name] for name in names]
    if any(name not in MODEL_FREE for name in names):
        run_graph_stages(writer, out, config, chunks, stats, models, stages, **known)
    else:
        run_stages(Build(writer, out, config, chunks, stats, models, None, **known), stages)


@dataclass
class StagedChunks:
    """The chunks this build wrote, as the graph stages read them: ids and token counts held
    as compact arrays, texts read back from the staged table a window at a time (so no stage
    holds every chunk's text)."""

    writer: IndexWriter
    ids: pa.Array
    n_tokens: np.ndarray

    @classmethod
    def read(cls, writer: IndexWriter) -> StagedChunks:
        """The chunks table the build just wrote (it takes no more rows)."""
        schema = schema_for("chunks")
        table = pa.Table.from_batches(
            writer.staged_batches("chunks", ["chunk_id", "n_tokens"]),
            schema=pa.schema([schema.field("chunk_id"), schema.field("n_tokens")]),
        )
        ids = table["chunk_id"].combine_chunks()
        return cls(writer, ids, table["n_tokens"].to_numpy().astype(np.int64))

    def __len__(self) -> int:
        return len(self.ids)

    def pairs(self) -> Iterator[tuple[str, str]]:
        """(chunk id, text) of every chunk in table order, read WINDOW at a time."""
        for batch in self.writer.staged_batches("chunks", ["chunk_id", "text"], WINDOW):
            yield from zip(*(c.to_pylist() for c in batch.columns), strict=True)

    def titled(self) -> Iterator[list[str]]:
        """Every chunk as "title, newline, text" (what chunk embeddings see), WINDOW at a time:
        each chunk's title is found by walking the documents table beside the chunks (both are
        in document order), so no title map of the corpus is held."""
        docs = (
            pair
            for batch in self.writer.staged_batches("documents", ["doc_id", "title"], WINDOW)
            for pair in zip(*(c.to_pylist() for c in batch.columns), strict=True)
        )
        doc_id = title = None
        for batch in self.writer.staged_batches("chunks", ["doc_id", "text"], WINDOW):
            window = []
            for of, text in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                while of != doc_id:
                    row = next(docs, None)
                    if row is None:
                        raise RuntimeError(f"a chunk of document {of} has no document row")
                    doc_id, title = row
                window.append(titled_chunk(title, text))
            yield window


def indexed_documents(out: Path) -> Iterator[Document]:
    """Documents of the index in `out` (for `--add`), streamed from its documents table."""
    index = open_index(out)
    for batch in index.iter_batches("documents"):
        for row in batch.to_pylist():
            meta = json.loads(row["meta"]) if row["meta"] else {}
            yield Document(
                row["doc_id"], row["title"], row["text"], row["source"], row["external_id"], meta
            )


def build_index(
    corpus: Sequence[str | Path],
    out: str | Path,
    config: IndexConfig,
    add: bool = False,
    dry_run: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Index the corpus into `out` and return the committed manifest (or, with dry_run, the
    forecast of every LLM stage: nothing is written, embedded or sent).

    With add=True the documents already in `out` are indexed together with the new ones; the
    caches make that cost only what the new documents add. force=True rebuilds over a manifest
    that cannot be read (without it such a target is refused before any work).
    """
    out = Path(out)
    before = indexed_documents(out) if add else ()
    reader = DocumentReader(corpus, config.ingest, before=before)
    if dry_run:
        return dry_run_forecast(reader, corpus, out, config)
    stats: dict[str, Any] = {"stages": {}}
    with IndexWriter(out, force=force) as writer:
        started = time.perf_counter()
        n_chunks, n_tokens = _ingest_and_chunk(reader, writer, config)
        _refuse_empty(reader, corpus, out)
        stats["ingest"] = reader.stats.as_dict()
        stats["stages"]["ingest_chunk"] = {
            "items": reader.stats.documents,
            "chunks": n_chunks,
            "tokens": n_tokens,
            "seconds": round(time.perf_counter() - started, 3),
            "model_calls": 0,
            "peak_rss_mb": peak_rss_mb(),
        }
        models = {"tokenizer": config.chunking.tokenizer}
        pipeline = GRAPH_PIPELINE if config.graph.enabled else TEXT_PIPELINE
        run_pipeline(writer, out, config, StagedChunks.read(writer), stats, models, pipeline)
        return writer.commit(
            config=config.to_dict(),
            config_hash=config.config_hash(),
            models=models,
            stats=stats,
        )


def _ingest_and_chunk(
    reader: DocumentReader, writer: IndexWriter, config: IndexConfig
) -> tuple[int, int]:
    """Stream the documents and their chunks into the `documents` and `chunks` tables,
    WRITE_BATCH chunks at a time (a huge document's as they are cut); (chunks, tokens)."""
    n_chunks = n_tokens = 0
    docs_table, chunks_table = writer.table("documents"), writer.table("chunks")
    doc_rows: list[dict[str, Any]] = []
    chunk_rows: list[dict[str, Any]] = []
    bar = progress("ingest+chunk", total=reader.total_bytes, unit="B", unit_scale=True)
    for doc, doc_chunks in chunk_documents(reader, config.chunking):
        doc_rows.append(doc.to_row())
        bar.update(reader.stats.bytes_read - bar.n)
        for c in doc_chunks:
            chunk_rows.append(c.to_row())
            n_chunks += 1
            n_tokens += c.n_tokens
            if len(chunk_rows) >= WRITE_BATCH:
                docs_table.write(doc_rows)
                chunks_table.write(chunk_rows)
                doc_rows, chunk_rows = [], []
                bar.set_postfix(docs=reader.stats.documents, chunks=n_chunks)
        bar.set_postfix(docs=reader.stats.documents, chunks=n_chunks, refresh=False)
    docs_table.write(doc_rows)
    chunks_table.write(chunk_rows)
    bar.close()
    return n_chunks, n_tokens


def _refuse_empty(reader: DocumentReader, corpus: Sequence[str | Path], out: Path) -> None:
    """No document was read: say so, with what was skipped."""
    if reader.stats.documents == 0:
        where = ", ".join(map(str, corpus)) or str(out)
        raise IngestError(
            f"{where}: no documents to index ({reader.stats.skipped_bad} bad records skipped, "
            f"{reader.stats.duplicates} duplicates)"
        )


def dry_run_forecast(
    reader: DocumentReader, corpus: Sequence[str | Path], out: Path, config: IndexConfig
) -> dict[str, Any]:
    """Read and chunk the corpus in memory, then forecast every LLM stage; writes nothing."""
    texts: list[str] = []
    n_tokens: list[int] = []
    bar = progress("ingest+chunk", total=reader.total_bytes, unit="B", unit_scale=True)
    for _, doc_chunks in chunk_documents(reader, config.chunking):
        for c in doc_chunks:
            texts.append(c.text)
            n_tokens.append(c.n_tokens)
        bar.update(reader.stats.bytes_read - bar.n)
    bar.close()
    _refuse_empty(reader, corpus, out)
    stages = forecast_index(texts, n_tokens, config, out) if config.graph.enabled else []
    return {
        "dry_run": True,
        "documents": reader.stats.documents,
        "chunks": len(texts),
        "tokens": sum(n_tokens),
        "forecast": [s.as_dict() for s in stages],
    }
