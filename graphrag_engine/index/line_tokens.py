"""The index's last stage: the token count of every context line the index can give (titled
chunks, entity lines, relation lines), kept beside the tables (store/beside.py) so that no
query run counts them. A line is rendered as a query renders it (graphrag_engine/names.py)
and counted by the index's tokenizer, a window of rows at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from graphrag_engine.index.build import Build, Stage
from graphrag_engine.models.text_cache import WINDOW
from graphrag_engine.models.tokenizer import load_tokenizer
from graphrag_engine.names import entity_line, relation_line
from graphrag_engine.progress import progress
from graphrag_engine.store.beside import LineDigest, read_line_tokens, save_line_tokens


def _line_tokens(b: Build) -> dict[str, Any]:
    """Count and keep every kind of line this build's tables give (a kind whose counts are
    already kept under the same fingerprint is counted again but not rewritten)."""
    tokenizer = load_tokenizer(b.config.chunking.tokenizer)
    spec = tokenizer.to_str()
    kinds = {"chunks": (len(b.chunks), b.chunks.titled)}
    if b.writer.staged("entities") and b.writer.staged("relations"):
        kinds["entities"] = (_rows(b, "entities", "entity_id"), lambda: _entity_lines(b))
        kinds["relations"] = (_rows(b, "relations", "src"), lambda: _relation_lines(b))
    kept = 0
    for kind, (rows, windows) in kinds.items():
        digest = LineDigest(spec)
        counts = np.zeros(rows, dtype=np.int32)
        bar = progress(f"count {kind} tokens", total=rows, unit="line")
        at = 0
        for window in windows():
            digest.update(window)
            counts[at : at + len(window)] = [
                len(e.ids) for e in tokenizer.encode_batch_fast(window)
            ]
            at += len(window)
            bar.update(len(window))
        bar.close()
        path = digest.path(b.out, kind)
        if read_line_tokens(path, rows) is None and save_line_tokens(path, counts):
            kept += 1
    return {"items": sum(rows for rows, _ in kinds.values()), "kinds": len(kinds), "written": kept}


def _rows(b: Build, table: str, column: str) -> int:
    """Rows of a table this build wrote (read through one of its columns)."""
    return sum(batch.num_rows for batch in b.writer.staged_batches(table, [column], WINDOW))


def _entity_lines(b: Build) -> Iterator[list[str]]:
    """Every entity's context line in table order, WINDOW rows at a time."""
    for batch in b.writer.staged_batches("entities", ["name", "type", "description"], WINDOW):
        yield [
            entity_line(name, kind or "", desc or "")
            for name, kind, desc in zip(*(c.to_pylist() for c in batch.columns), strict=True)
        ]


def _relation_lines(b: Build) -> Iterator[list[str]]:
    """Every relation's context line in table order, WINDOW rows at a time."""
    name_of = {}
    for batch in b.writer.staged_batches("entities", ["entity_id", "name"], WINDOW):
        name_of.update(zip(*(c.to_pylist() for c in batch.columns), strict=True))
    columns = ["src", "dst", "description", "keywords"]
    for batch in b.writer.staged_batches("relations", columns, WINDOW):
        yield [
            relation_line(name_of[src], name_of[dst], desc or "", keywords or "")
            for src, dst, desc, keywords in zip(
                *(c.to_pylist() for c in batch.columns), strict=True
            )
        ]


BUILD_LINE_TOKENS = Stage("line_tokens", ("chunks", "entities", "relations"), (), _line_tokens)
