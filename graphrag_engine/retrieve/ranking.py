"""Ranked chunk lists of a whole batch, and their mapping to corpus passages."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, zip_longest

import numpy as np

from graphrag_engine.kernels.segments import segment_topk


@dataclass
class ChunkRanking:
    """(B, k) chunk row numbers and scores, best first; -1 pads rows with fewer hits."""

    ids: np.ndarray
    scores: np.ndarray

    def row(self, q: int) -> tuple[list[int], list[float]]:
        """Chunk rows and scores of query q, padding dropped."""
        keep = self.ids[q] >= 0
        return self.ids[q][keep].tolist(), self.scores[q][keep].astype(float).tolist()


def from_orders(orders: list[list[int]], depth: int) -> ChunkRanking:
    """Each question's chunk rows in a method's own order (no similarity behind it), the first
    `depth`; the score is the reciprocal rank."""
    ids = np.full((len(orders), depth), -1, dtype=np.int64)
    scores = np.zeros((len(orders), depth), dtype=np.float32)
    for q, rows in enumerate(orders):
        rows = rows[:depth]
        ids[q, : len(rows)] = rows
        scores[q, : len(rows)] = 1.0 / (1.0 + np.arange(len(rows)))
    return ChunkRanking(ids, scores)


def lead_then_fill(
    owner: np.ndarray,
    rows: np.ndarray,
    scores: np.ndarray,
    fill: ChunkRanking,
    depth: int,
    lead: int | None = None,
) -> ChunkRanking:
    """Each question's own scored chunks first (flat `owner` / `rows` / `scores`, best first;
    its best `lead` of them when given), then `fill`'s chunks not already listed, `depth` in
    all; a chunk keeps its own score."""
    b = fill.ids.shape[0]
    order = segment_topk(owner, scores, depth if lead is None else min(lead, depth))
    ids = np.full((b, depth), -1, dtype=np.int64)
    out = np.zeros((b, depth), dtype=np.float32)
    for q in range(b):
        mine = order[owner[order] == q]
        fill_rows, fill_scores = fill.row(q)
        score_of = dict(zip(fill_rows, fill_scores, strict=True))
        score_of.update(zip(rows[mine].tolist(), scores[mine].tolist(), strict=True))
        row = list(dict.fromkeys(rows[mine].tolist() + fill_rows))[:depth]
        ids[q, : len(row)] = row
        out[q, : len(row)] = [score_of[c] for c in row]
    return ChunkRanking(ids, out)


def passages_of(rows: list[int], passage_of_chunk: list[str]) -> list[str]:
    """Corpus passage ids in rank order of their first chunk (a passage appears once)."""
    seen: set[str] = set()
    out = []
    for r in rows:
        p = passage_of_chunk[r]
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def round_robin(*lists: list[int]) -> list[int]:
    """a[0], b[0], a[1], b[1], ... without duplicates (LightRAG's merge of its levels' lists;
    PankRAG's merge of its steps' chunks)."""
    out = dict.fromkeys(chain.from_iterable(zip_longest(*lists, fillvalue=_GAP)))
    out.pop(_GAP, None)
    return list(out)


_GAP = object()
"""What `round_robin` reads past the end of a shorter list."""
