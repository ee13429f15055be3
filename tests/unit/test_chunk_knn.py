"""KET-RAG's kernels against slow references: the KNN chunk graph against pairwise loops, its
PageRank against networkx, the skeleton's pick, and the keyword channel's walk against a loop
written from the paper's steps."""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp

from graphrag_engine.index.skeleton import word_matrix, words_of
from graphrag_engine.kernels.chunk_knn import knn_chunk_graph, pagerank, top_share
from graphrag_engine.methods.ketrag.keywords import KeywordIndex, keyword_chunks, nearest_words


def _reference_graph(words: sp.csr_matrix, vectors: np.ndarray, k: int) -> nx.Graph:
    """Each chunk's k best by shared distinct words (lower index on ties) and k best by cosine,
    by pairwise loops."""
    n = words.shape[0]
    sets = [set(words[i].indices.tolist()) for i in range(n)]
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    for i in range(n):
        lexical = sorted(
            (j for j in range(n) if j != i), key=lambda j: (-len(sets[i] & sets[j]), j)
        )
        semantic = sorted(
            (j for j in range(n) if j != i), key=lambda j: (-round(float(unit[i] @ unit[j]), 6), j)
        )
        g.add_edges_from((i, j) for j in lexical[:k] + semantic[:k])
    return g


def test_the_knn_graph_and_its_pagerank_equal_loops_and_networkx() -> None:
    rng = np.random.default_rng(7)
    for n, k in ((40, 1), (120, 2), (300, 1)):
        words = sp.random(n, 60, density=0.08, random_state=n, format="csr")
        vectors = rng.normal(size=(n, 12)).astype(np.float32)
        graph = knn_chunk_graph(words, vectors, k)
        ref = _reference_graph(words, vectors, k)
        got = {
            (u, int(v))
            for u in range(n)
            for v in graph.indices[graph.indptr[u] : graph.indptr[u + 1]]
        }
        assert got == {(u, v) for u, v in ref.edges} | {(v, u) for u, v in ref.edges}
        scores = pagerank(graph, 0.85)
        expected = nx.pagerank(ref, alpha=0.85, tol=1e-12, max_iter=1000)
        np.testing.assert_allclose(scores, [expected[i] for i in range(n)], atol=1e-9)
        assert abs(scores.sum() - 1) < 1e-9


def test_the_skeleton_is_the_best_share_by_score_lower_row_on_ties() -> None:
    scores = np.array([0.1, 0.3, 0.3, 0.05, 0.25])
    assert top_share(scores, 0.6).tolist() == [1, 2, 4]
    assert top_share(scores, 0.4).tolist() == [1, 2]
    assert top_share(scores, 0.0).tolist() == []
    assert top_share(scores, 1.0).tolist() == [0, 1, 2, 3, 4]


def test_words_are_lower_cased_without_stopwords_and_counted_per_occurrence() -> None:
    assert words_of("The Heron Cup was made in 1891 by the silversmith.") == [
        "heron",
        "cup",
        "made",
        "1891",
        "silversmith",
    ]
    vocabulary: dict[str, int] = {}
    m = word_matrix(["Cup of the cup, 1891", "a heron"], vocabulary, alpha_only=True)
    assert vocabulary == {"cup": 0, "heron": 1}
    assert m.toarray().tolist() == [[2, 0], [0, 1]]


def _reference_walk(words, vectors, lists, tokens, chunk_vecs, q, budget, top):
    """The keyword channel written from the paper's steps, one word at a time."""
    scores = [float(q @ v) for v in vectors]
    order = sorted(range(len(words)), key=lambda w: (-round(scores[w], 6), w))[:top]
    picked, seen, total = [], set(), 0
    for w in order:
        ranked = sorted(lists[w], key=lambda c: -float(q @ chunk_vecs[c]))
        for c in ranked:
            if total + tokens[c] > 2 * budget:
                return sorted(picked, key=lambda c: -float(q @ chunk_vecs[c]))
            if c in seen:
                continue
            seen.add(c)
            total += tokens[c]
            picked.append(c)
    return sorted(picked, key=lambda c: -float(q @ chunk_vecs[c]))


def test_the_keyword_channel_walks_words_as_the_paper_does() -> None:
    rng = np.random.default_rng(3)
    n_words, n_chunks, d = 80, 50, 8
    chunk_vecs = rng.normal(size=(n_chunks, d))
    chunk_vecs /= np.linalg.norm(chunk_vecs, axis=1, keepdims=True)
    vectors = rng.normal(size=(n_words, d)).astype(np.float32)
    lists = [
        sorted(rng.choice(n_chunks, rng.integers(1, 8), replace=False).tolist())
        for _ in range(n_words)
    ]
    tokens = rng.integers(20, 120, n_chunks)
    indptr = np.concatenate([[0], np.cumsum([len(x) for x in lists])])
    index = KeywordIndex(vectors, indptr, np.concatenate(lists).astype(np.int64), tokens)
    qs = rng.normal(size=(6, d)).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    for top in (5, 30, 1000):
        found = nearest_words(index, qs, top)
        for q, words in zip(qs, found, strict=True):
            assert len(words) == min(top, n_words)
            for budget in (50, 400, 5000):
                got = keyword_chunks(index, words, chunk_vecs @ q, budget)
                ref = _reference_walk(
                    list(range(n_words)), vectors, lists, tokens, chunk_vecs, q, budget, top
                )
                assert got == ref
                assert sum(tokens[c] for c in got) <= 2 * budget
