"""KET-RAG's index (Huang, Zhang and Xiao, KDD 2025): a skeleton of core chunks and a
text-keyword bipartite graph, two stages of a build with `skeleton.enabled: true`.

    skeleton (after the chunk vectors, before any extraction):
        link every chunk to its knn_edges chunks sharing the most distinct words and to its
            knn_edges nearest chunks by cosine (one undirected KNN graph)
        PageRank on that graph; the best budget share of the chunks is the skeleton
        with extraction.enabled the LLM extracts triples from the skeleton's chunks only
    keywords (after the unit vectors):
        every word of the units (sentences, or the LLM's units), stopwords left out
        a word's vector is the mean of the vectors of the units that hold it, counted per
            occurrence; its chunks are the chunks of those units

The `skeleton` table has one row per chunk (its PageRank and whether it is a core chunk);
`keywords` one row per word (the word and its chunk rows), `keyword_vectors` their vectors.
The `ketrag` method searches both (graphrag_engine/methods/ketrag/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from bm25s.stopwords import STOPWORDS_EN_PLUS

from graphrag_engine.index.build import Build, Stage
from graphrag_engine.kernels.chunk_knn import knn_chunk_graph, pagerank, top_share
from graphrag_engine.store.schemas import schema_for

STOPWORDS = frozenset(STOPWORDS_EN_PLUS)
"""NLTK's English stopwords (the list KET-RAG's code filters with)."""
_WORD = re.compile(r"[^\W_]+")


def words_of(text: str) -> list[str]:
    """The lower-cased words of a text (letters and digits), stopwords left out, in order."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def word_matrix(
    texts: Iterable[str], vocabulary: dict[str, int], alpha_only: bool = False
) -> sp.csr_matrix:
    """(texts x vocabulary) occurrence counts; new words join `vocabulary` as they are met.
    `alpha_only` keeps only words of letters (the KNN graph's lexical words)."""
    rows: list[int] = []
    cols: list[int] = []
    n = 0
    for n, text in enumerate(texts, start=1):
        for w in words_of(text):
            if alpha_only and not w.isalpha():
                continue
            rows.append(n - 1)
            cols.append(vocabulary.setdefault(w, len(vocabulary)))
    data = np.ones(len(rows), np.float32)
    return sp.csr_matrix((data, (rows, cols)), shape=(n, len(vocabulary)))


def _skeleton(b: Build) -> dict[str, Any]:
    """Rank the chunks by PageRank on their KNN graph; write `skeleton` and keep the core
    chunks' rows for the extraction stage."""
    s = b.config.skeleton
    vectors = np.asarray(b.writer.staged_vectors("chunk_vectors"), dtype=np.float32)
    words = word_matrix(
        (text for window in b.chunks.titled() for text in window), {}, alpha_only=True
    )
    graph = knn_chunk_graph(words, vectors, s.knn_edges)
    scores = pagerank(graph, s.damping)
    core = top_share(scores, s.budget)
    b.core_chunks = core
    flags = np.zeros(len(scores), bool)
    flags[core] = True
    b.writer.write_table(
        "skeleton",
        pa.table(
            {
                "chunk_row": np.arange(len(scores), dtype=np.int64),
                "pagerank": scores,
                "core": flags,
            },
            schema=schema_for("skeleton"),
        ),
    )
    return {
        "items": len(scores),
        "core_chunks": int(core.size),
        "knn_edges": len(graph.indices) // 2,
    }


def _unit_vectors(b: Build) -> np.ndarray:
    """Every unit's vector: the staged table, or (unit_vectors: lazy) embedded through the
    index's embedding cache, where a later lazy query finds them."""
    if b.writer.staged("unit_vectors"):
        return np.asarray(b.writer.staged_vectors("unit_vectors"), dtype=np.float32)
    texts = [text for window in b.unit_texts() for text in window]
    return np.asarray(b.cache.encode(b.embedder, texts, "keyword sentences"), dtype=np.float32)


def _keywords(b: Build) -> dict[str, Any]:
    """Every word's mean unit vector and its chunks; write `keywords` and `keyword_vectors`."""
    vocabulary: dict[str, int] = {}
    counts = word_matrix((t for window in b.unit_texts() for t in window), vocabulary).T.tocsr()
    unit_chunks = b.unit_ids["chunk_id"].to_pylist()
    chunk_row = {cid: i for i, cid in enumerate(b.chunks.ids.to_pylist())}
    n_units, n_chunks = len(unit_chunks), len(chunk_row)
    in_chunk = sp.csr_matrix(
        (np.ones(n_units, np.float32), ([chunk_row[c] for c in unit_chunks], range(n_units))),
        shape=(n_chunks, n_units),
    )
    totals = np.asarray(counts.sum(axis=1)).ravel()
    vectors = np.asarray(counts @ _unit_vectors(b)) / np.maximum(totals, 1)[:, None]
    chunks = (counts @ in_chunk.T).tocsr()
    chunks.sort_indices()
    lists = [chunks.indices[chunks.indptr[i] : chunks.indptr[i + 1]] for i in range(len(totals))]
    b.writer.write_table(
        "keywords",
        pa.table(
            {"word": list(vocabulary), "chunks": [c.astype(np.int64) for c in lists]},
            schema=schema_for("keywords"),
        ),
    )
    b.writer.write_vectors("keyword_vectors", vectors.astype(np.float32), b.embedder.model_id)
    return {"items": len(vocabulary), "links": int(chunks.nnz)}


BUILD_SKELETON = Stage(
    "skeleton",
    ("chunks", "chunk_vectors"),
    ("skeleton",),
    _skeleton,
    enabled=lambda cfg: cfg.skeleton.enabled,
)
BUILD_KEYWORDS = Stage(
    "keywords",
    ("units", "unit_vectors"),
    ("keywords", "keyword_vectors"),
    _keywords,
    enabled=lambda cfg: cfg.skeleton.enabled,
)
