"""KET-RAG on real data (MuSiQue passages, MiniLM): the skeleton equals a KNN graph built by
loops and ranked by networkx's PageRank, the keyword index equals one written from the units
table word by word, and retrieval keeps to the skeleton and the budgets; batched equals one
question at a time. With SmolLM2 the extraction reads the skeleton's chunks only."""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import corpus_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.index.skeleton import STOPWORDS
from graphrag_engine.methods import query_config
from graphrag_engine.methods.ketrag import ketrag
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import entity_graph
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index


@pytest.fixture(scope="module")
def ket_index(musique_subset: dict, tmp_path_factory):
    """The MuSiQue subset's passages indexed with KET-RAG's skeleton and keyword index."""
    root = tmp_path_factory.mktemp("ketrag")
    cfg = root / "index.yaml"
    cfg.write_text("skeleton:\n  enabled: true\n")
    corpus = str(musique_subset["root"] / "corpus.jsonl")
    assert main(["index", corpus, "--out", str(root / "index"), "--config", str(cfg)]) == 0
    return open_index(root / "index"), load_questions(musique_subset["questions"]), root


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[^\W_]+", text.lower()) if w not in STOPWORDS]


def test_the_skeleton_is_networkx_pagerank_on_a_knn_graph_built_by_loops(ket_index) -> None:
    index, _, root = ket_index
    ctx = QueryContext(index, query_config("ketrag"), root / "run-skeleton")
    titled = list(ctx.chunks["titled"])
    n = len(titled)
    sets = [{w for w in _words(t) if w.isalpha()} for t in titled]
    vectors = np.asarray(index.vectors("chunk_vectors"), dtype=np.float64)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = unit @ unit.T
    g = nx.Graph()
    g.add_nodes_from(range(n))
    for i in range(n):
        shared = [(-len(sets[i] & sets[j]), j) for j in range(n) if j != i]
        g.add_edge(i, min(shared)[1])
        near = max((round(cosine[i, j], 6), -j) for j in range(n) if j != i)
        g.add_edge(i, -near[1])
    ref = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=1000)
    rows = index.table("skeleton").to_pydict()
    assert rows["chunk_row"] == list(range(n))
    np.testing.assert_allclose(rows["pagerank"], [ref[i] for i in range(n)], atol=1e-8)
    best = sorted(range(n), key=lambda i: (-ref[i], i))[: int(0.8 * n)]
    assert sum(rows["core"]) == int(0.8 * n)
    assert set(np.flatnonzero(rows["core"]).tolist()) == set(best)


def test_each_keyword_holds_its_units_mean_vector_and_their_chunks(ket_index) -> None:
    index, _, _ = ket_index
    units = index.table("units", ["chunk_id", "text"]).to_pydict()
    chunk_row = {
        c: i for i, c in enumerate(index.table("chunks", ["chunk_id"]).column(0).to_pylist())
    }
    unit_vectors = np.asarray(index.vectors("unit_vectors"), dtype=np.float64)
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    chunks: dict[str, set[int]] = {}
    for u, (cid, text) in enumerate(zip(units["chunk_id"], units["text"], strict=True)):
        for w in _words(text):
            sums[w] = sums.get(w, 0) + unit_vectors[u]
            counts[w] = counts.get(w, 0) + 1
            chunks.setdefault(w, set()).add(chunk_row[cid])
    table = index.table("keywords").to_pydict()
    vectors = np.asarray(index.vectors("keyword_vectors"))
    assert table["word"] == list(sums)  # first seen first
    assert "the" not in sums and "1995" in sums  # stopwords out, numbers kept
    for i, w in enumerate(table["word"]):
        assert table["chunks"][i] == sorted(chunks[w])
        np.testing.assert_allclose(vectors[i], sums[w] / counts[w], atol=1e-5)


def _run(index, questions, run_dir, **options):
    cfg = query_config("ketrag")
    cfg.generation.enabled = False
    for k, v in options.items():
        setattr(cfg.options, k, v)
    ctx = QueryContext(index, cfg, run_dir)
    return ctx, ketrag(ctx, questions, StageClock())


def test_retrieval_keeps_to_the_skeleton_and_the_budgets(ket_index) -> None:
    index, questions, root = ket_index
    ctx, got = _run(index, questions, root / "run")
    core = np.asarray(index.table("skeleton", ["core"]).column(0).to_pylist())
    g = entity_graph(ctx)
    for q, (context, extra) in enumerate(zip(got.contexts, got.extras, strict=True)):
        titles = [s.title for s in context.sections]
        assert titles[-1] == "-----Text-----" and "-----Entities-----" in titles
        text = context.sections[-1]
        assert sum(text.counts) <= 6000  # (1 - theta) x 12,000
        assert sum(sum(s.counts) for s in context.sections) <= 12000
        names = {g.names[e] for e in range(len(g.names)) if core[g.entity_chunks[e]].any()}
        assert extra["entities"] and set(extra["entities"]) <= names
        sources = next(s for s in context.sections if s.title == "-----Sources-----")
        titled = list(ctx.chunks["titled"])
        core_lines = {t for t, c in zip(titled, core, strict=True) if c}
        assert set(sources.items) <= core_lines
        ranked = got.ranking.row(q)[0]
        kept = text.items[: len(ranked)]
        assert [titled[r] for r in ranked[: len(kept)]] == kept  # the keyword channel first
    single = [c for q in questions for c in _run(index, [q], root / "one")[1].contexts]
    assert single == got.contexts
    _, text_only = _run(index, questions[:3], root / "theta0", theta=0.0)
    _, skeleton_only = _run(index, questions[:3], root / "theta1", theta=1.0)
    assert all([s.title for s in c.sections] == ["-----Text-----"] for c in text_only.contexts)
    assert all(s.title != "-----Text-----" for c in skeleton_only.contexts for s in c.sections)


@pytest.mark.slow
def test_the_llm_extracts_triples_from_the_skeleton_only(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(corpus_path().read_text().splitlines()[:4]) + "\n")
    cfg = tmp_path / "x.yaml"
    cfg.write_text(
        "skeleton:\n  enabled: true\n  budget: 0.5\n"
        "extraction:\n  enabled: true\n  gleaning: 0\n  max_tokens: 48\n"
        "models:\n  llm:\n    backend: transformers\n    batch_size: 4\n"
        "    max_failed_share: 1.0\n"  # 48-token answers are often cut short: recorded
    )
    out = tmp_path / "idx"
    assert main(["index", str(corpus), "--out", str(out), "--config", str(cfg)]) == 0
    stages = open_index(out).manifest["stats"]["stages"]
    assert stages["skeleton"]["core_chunks"] == 2
    assert stages["extract"]["items"] == 2 and stages["extract"]["rounds"] == 2
