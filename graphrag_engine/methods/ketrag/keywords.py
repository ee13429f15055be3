"""KET-RAG's keyword channel: the question's nearest keywords, each word's chunks by their
cosine to the question, gathered until twice the channel's budget, then the best of them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.lines import line_token_counts

BLOCK = 256
"""Questions whose (questions x words) scores are held at once."""


@dataclass
class KeywordIndex:
    """The text-keyword bipartite graph as the channel reads it."""

    vectors: np.ndarray
    """(words, d) each word's mean unit vector (not normalised: a word of many different
    sentences scores lower, as in the authors' inner-product search)."""
    indptr: np.ndarray
    chunks: np.ndarray
    """Word w's chunk rows: chunks[indptr[w]:indptr[w + 1]]."""
    tokens: np.ndarray
    """Every chunk line's tokens."""


def load_keywords(ctx: QueryContext) -> KeywordIndex:
    """The `keywords` table and its vectors, with the chunk lines' token counts."""
    lists = ctx.index.table("keywords", ["chunks"]).column("chunks").combine_chunks()
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    chunks = np.asarray(lists.values, dtype=np.int64)
    tokens = line_token_counts(ctx, "chunks", ctx.chunks["titled"])
    vectors = np.asarray(ctx.vectors("keyword_vectors"), dtype=np.float32)
    return KeywordIndex(vectors, offsets, chunks, tokens)


def nearest_words(index: KeywordIndex, qvec: np.ndarray, k: int) -> list[np.ndarray]:
    """Each question's k words of the largest inner product, best first (the lower word first
    on ties), one (questions x words) product per block."""
    k = min(k, len(index.vectors))
    out = []
    for lo in range(0, len(qvec), BLOCK):
        scores = qvec[lo : lo + BLOCK] @ index.vectors.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k] if k < scores.shape[1] else None
        for row, s in enumerate(scores):
            cand = np.arange(len(s)) if top is None else top[row]
            out.append(cand[np.lexsort((cand, -s[cand]))])
    return out


def keyword_chunks(
    index: KeywordIndex, words: np.ndarray, chunk_scores: np.ndarray, budget: int
) -> list[int]:
    """One question's channel: walk its words in order; each word's chunks by cosine (the
    question's `chunk_scores`), each chunk once, until the chunks met would pass twice
    `budget` tokens; the chunks kept, best cosine first."""
    picked: list[int] = []
    seen: set[int] = set()
    total = 0
    for w in words.tolist():
        rows = index.chunks[index.indptr[w] : index.indptr[w + 1]]
        for c in rows[np.argsort(-chunk_scores[rows], kind="stable")].tolist():
            if total + int(index.tokens[c]) > 2 * budget:
                return _by_score(picked, chunk_scores)
            if c in seen:
                continue
            seen.add(c)
            total += int(index.tokens[c])
            picked.append(c)
    return _by_score(picked, chunk_scores)


def _by_score(rows: list[int], scores: np.ndarray) -> list[int]:
    order = np.argsort(-scores[np.asarray(rows, dtype=np.int64)], kind="stable")
    return [rows[i] for i in order.tolist()]
