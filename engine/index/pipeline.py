"""`graphrag-engine index`: ingest -> chunk -> commit, streaming from corpus files to the store.

Later stages (extraction, entities, graphs, embeddings, communities) plug in after chunking.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.config import IndexConfig
from engine.errors import IngestError
from engine.index.chunking import chunk_documents
from engine.index.ingest import DocumentReader
from engine.progress import progress
from engine.store import IndexWriter

WRITE_BATCH = 2048


def build_index(
    corpus: Sequence[str | Path], out: str | Path, config: IndexConfig
) -> dict[str, Any]:
    """Index the corpus files into `out` and return the committed manifest.

    Nothing becomes visible until the final atomic commit: on bad input or a crash the
    previous index in `out` (if any) stays as it was.
    """
    reader = DocumentReader(corpus, config.ingest)
    started = time.perf_counter()
    n_chunks = n_tokens = 0
    with IndexWriter(Path(out)) as writer:
        docs_table, chunks_table = writer.table("documents"), writer.table("chunks")
        doc_rows: list[dict[str, Any]] = []
        chunk_rows: list[dict[str, Any]] = []
        bar = progress("ingest+chunk", total=reader.total_bytes, unit="B", unit_scale=True)
        seen_bytes = 0
        for doc, chunks in chunk_documents(reader, config.chunking):
            doc_rows.append(doc.to_row())
            chunk_rows.extend(c.to_row() for c in chunks)
            n_chunks += len(chunks)
            n_tokens += sum(c.n_tokens for c in chunks)
            if len(chunk_rows) >= WRITE_BATCH:
                docs_table.write(doc_rows)
                chunks_table.write(chunk_rows)
                doc_rows, chunk_rows = [], []
            bar.update(reader.stats.bytes_read - seen_bytes)
            seen_bytes = reader.stats.bytes_read
            bar.set_postfix(docs=reader.stats.documents, chunks=n_chunks, refresh=False)
        docs_table.write(doc_rows)
        chunks_table.write(chunk_rows)
        bar.close()
        if reader.stats.documents == 0:
            raise IngestError(
                f"{', '.join(map(str, corpus))}: no documents to index "
                f"({reader.stats.skipped_bad} bad records skipped, {reader.stats.duplicates} duplicates)"
            )
        seconds = time.perf_counter() - started
        stats = {
            "ingest": reader.stats.as_dict(),
            "stages": {
                "ingest_chunk": {
                    "items": reader.stats.documents,
                    "chunks": n_chunks,
                    "tokens": n_tokens,
                    "seconds": round(seconds, 3),
                    "model_calls": 0,
                }
            },
        }
        return writer.commit(
            config=config.to_dict(),
            config_hash=config.config_hash(),
            models={"tokenizer": config.chunking.tokenizer},
            stats=stats,
        )
