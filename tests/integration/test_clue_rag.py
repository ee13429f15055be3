"""Clue-RAG Q-Iter on real data: batched equals one query at a time, the bi-encoder fast path
equals the reranker on texts, paths grow one unit per depth along shared entities, ablations
change what they say, the answer prompt's shape."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.clue_rag.method import answer_prompt, clue_rag
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.cue_graph import cue_adjacency
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index


@pytest.fixture(scope="module")
def setup(musique_subset: dict, tmp_path_factory):
    index = open_index(musique_subset["index"])
    questions = load_questions(musique_subset["questions"])
    return index, questions, tmp_path_factory.mktemp("clue")


def _run(index, questions, run_dir: Path, **clue):
    cfg = query_config("clue")
    cfg.generation.enabled = False
    for k, v in clue.items():
        setattr(cfg.options, k, v)
    ctx = QueryContext(index, cfg, run_dir)
    return ctx, clue_rag(ctx, questions, StageClock())


@pytest.mark.parametrize(("scoring", "n"), [("pooled", 8), ("text", 3)])
def test_batched_equals_one_query_at_a_time(setup, scoring: str, n: int) -> None:
    """The default scoring on 8 questions; the paper's text scoring (an encoder pass over every
    candidate path, one call for the batch) on 3."""
    index, questions, tmp = setup
    _, batch = _run(index, questions[:n], tmp, path_scoring=scoring)
    for q in range(n):
        _, single = _run(index, questions[q : q + 1], tmp, path_scoring=scoring)
        assert single.ranking.row(0)[0] == batch.ranking.row(q)[0]
        np.testing.assert_allclose(single.ranking.row(0)[1], batch.ranking.row(q)[1], atol=1e-5)


def test_cue_adjacency_matches_tables(setup) -> None:
    index, _, tmp = setup
    ctx = QueryContext(index, query_config("clue"), tmp)
    adj = cue_adjacency(ctx)
    units = index.table("units", ["unit_id", "chunk_id"]).to_pydict()
    chunk_row = {c: i for i, c in enumerate(ctx.chunks["ids"])}
    assert adj.unit_chunk.tolist() == [chunk_row[c] for c in units["chunk_id"]]
    ue = index.table("unit_entity").to_pydict()
    unit_row = {u: i for i, u in enumerate(units["unit_id"])}
    ent_row = {e: i for i, e in enumerate(ctx.entities["entity_id"])}
    pairs = {(unit_row[u], ent_row[e]) for u, e in zip(ue["unit_id"], ue["entity_id"], strict=True)}
    got = {
        (u, int(e)) for u in range(len(units["unit_id"])) for e in adj.entities_of(np.array([u]))
    }
    assert got == pairs
    e = next(iter(pairs))[1]
    assert set(adj.units_of(np.array([e])).tolist()) == {u for u, x in pairs if x == e}


def test_paths_follow_shared_entities(setup) -> None:
    index, questions, tmp = setup
    ctx, r = _run(index, questions[:5], tmp, depth=3)
    adj = cue_adjacency(ctx)
    text_row = {t: i for i, t in enumerate(ctx.units["text"])}
    for extras in r.extras:
        assert 0 < extras["paths"] <= 3 * 5  # at most M paths kept per depth
        for path in extras["top_paths"]:
            assert 1 <= len(path) <= 3 and len(set(path)) == len(path)
            rows = [text_row[t] for t in path]
            # every unit of a path shares an entity with another unit of the path
            if len(rows) > 1:
                ents = [set(adj.entities_of(np.array([u])).tolist()) for u in rows]
                assert all(
                    any(ents[i] & ents[j] for j in range(len(rows)) if j != i)
                    for i in range(len(rows))
                )


def test_fast_path_equals_bi_encoder_on_texts(setup, minilm) -> None:
    from graphrag_engine.models.rerank import BiEncoderReranker

    index, questions, tmp = setup
    ctx, r = _run(index, questions[:3], tmp)
    rr = BiEncoderReranker(minilm)
    for q in range(3):
        rows, scores = r.ranking.row(q)
        texts = [ctx.chunks["titled"][c] for c in rows[:5]]
        ref = rr.score(questions[q].question, texts)
        np.testing.assert_allclose(scores[:5], ref, atol=1e-4)


def test_ablations_change_anchoring(setup) -> None:
    """Each of the paper's three ablations changes what it says it changes. Paths are scored by
    their mean unit vector here: no switch depends on how a path is scored."""
    index, questions, tmp = setup
    mean = {"path_scoring": "mean"}
    _, full = _run(index, questions[:10], tmp, **mean)
    _, no_sa = _run(index, questions[:10], tmp, spreading_activation=False, **mean)
    _, no_ka = _run(index, questions[:10], tmp, knowledge_anchoring=False, **mean)
    _, no_up = _run(index, questions[:10], tmp, query_update=False, **mean)
    n_full = [len(e["anchor_entities"]) for e in full.extras]
    assert all(len(a["anchor_entities"]) <= b for a, b in zip(no_sa.extras, n_full, strict=True))
    assert [e["top_paths"] for e in no_ka.extras] != [e["top_paths"] for e in full.extras]
    # without the update the same query vector keeps pulling the same neighbourhood
    assert not np.array_equal(no_up.ranking.ids, full.ranking.ids)


def test_the_best_n_graph_chunks_lead_then_dense_hits(setup) -> None:
    """Algorithm 3 lines 19-23: the best N graph chunks lead the ranking (the same chunks
    whatever N), and the dense hits follow in their own order."""
    from graphrag_engine.kernels.similarity import l2_normalize
    from graphrag_engine.retrieve.dense import dense_search

    index, questions, tmp = setup
    ctx, two = _run(index, questions[:4], tmp, top_n=2)
    _, five = _run(index, questions[:4], tmp)
    assert ctx.cfg.options.top_n == 2 and query_config("clue").options.top_n == 5
    depth = 2 * ctx.cfg.retrieval.candidates
    dense = dense_search(
        ctx, l2_normalize(ctx.encode_queries([q.question for q in questions[:4]])), depth
    )
    for q in range(4):
        lead = two.ranking.row(q)[0][:2]
        assert lead == five.ranking.row(q)[0][:2]
        assert (
            two.ranking.row(q)[0][2:]
            == [c for c in dense.row(q)[0] if c not in lead][: len(two.ranking.row(q)[0]) - 2]
        )


def test_a_path_is_scored_by_its_joined_text(setup) -> None:
    """Algorithm 3 line 13: a multi-unit path's score is the reranker's (here the bi-encoder's
    cosine) on its units' texts joined; `path_scoring: mean` reads the summed unit vectors and
    `pooled` weighs each by its characters."""
    from graphrag_engine.kernels.similarity import l2_normalize
    from graphrag_engine.methods.clue_rag.method import _path_scores
    from graphrag_engine.retrieve.scoring import make_scorer

    index, questions, tmp = setup
    ctx, _ = _run(index, questions[:1], tmp, path_scoring="text")
    phi = l2_normalize(ctx.encode_queries([questions[0].question]))
    paths = [(0,), (3, 7), (1, 2, 5)]
    scorer = make_scorer("bi-encoder", ctx)
    got = _path_scores(ctx, scorer, [questions[0].question], phi, np.zeros(3, np.int64), paths)
    joined = [" ".join(ctx.units["text"][u] for u in p) for p in paths]
    ref = l2_normalize(ctx.encode_queries(joined)) @ phi[0]
    np.testing.assert_allclose(got[1:], ref[1:], atol=1e-5)
    np.testing.assert_allclose(got[0], ctx.unit_vectors[0] @ phi[0], atol=1e-5)
    ctx.cfg.options.path_scoring = "mean"
    mean = _path_scores(ctx, scorer, [questions[0].question], phi, np.zeros(3, np.int64), paths)
    summed = l2_normalize(ctx.unit_vectors[[3, 7]].sum(axis=0)[None])[0]
    np.testing.assert_allclose(mean[1], summed @ phi[0], atol=1e-5)
    ctx.cfg.options.path_scoring = "pooled"  # each unit weighted by its characters, up to 300
    pooled = _path_scores(ctx, scorer, [questions[0].question], phi, np.zeros(3, np.int64), paths)
    for i, path in enumerate(paths[1:], start=1):
        chars = np.array([min(len(ctx.units["text"][u]), 300) for u in path], np.float32)
        vec = l2_normalize((chars[:, None] * ctx.unit_vectors[list(path)]).sum(axis=0)[None])[0]
        np.testing.assert_allclose(pooled[i], vec @ phi[0], atol=1e-5)
    np.testing.assert_allclose(pooled[0], got[0], atol=1e-6)


def test_answer_prompt_repeats_the_question_after_the_context() -> None:
    (msg,) = answer_prompt("Who?", ["P1", "P2"])
    text = msg["content"]
    assert text.index("P1") < text.index("Question: Who?")
    assert "as few words as possible" in text
