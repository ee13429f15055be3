"""LinearRAG on real data: its rankings equal a question-at-a-time reference written from the
paper's algorithm over the index tables with igraph's PPR, batched equals one question at a
time, and the ablations do what they say."""

from __future__ import annotations

import math

import igraph as ig
import numpy as np
import pytest

from graphrag_engine.eval.datasets import Question, load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.linearrag import linearrag
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.linking import link_entities, query_mentions
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index


@pytest.fixture(scope="module")
def setup(musique_subset: dict, tmp_path_factory):
    index = open_index(musique_subset["index"])
    questions = load_questions(musique_subset["questions"])
    return index, questions, tmp_path_factory.mktemp("linearrag")


def _run(index, questions, run_dir, **options):
    cfg = query_config("linearrag")
    cfg.generation.enabled = False
    for k, v in options.items():
        setattr(cfg.options, k, v)
    ctx = QueryContext(index, cfg, run_dir)
    return ctx, linearrag(ctx, questions, StageClock())


def _reference(ctx: QueryContext, question: str, depth: int) -> tuple[list[int], list[float]]:
    """One question through the paper's steps, in plain Python over the index tables, with
    igraph's PPR (the batched code shares only the entity linking with it)."""
    cfg = ctx.cfg.options
    units = ctx.index.table("units", ["unit_id", "chunk_id"]).to_pydict()
    links = ctx.index.table("unit_entity").to_pydict()
    unit_row = {u: i for i, u in enumerate(units["unit_id"])}
    ent_row = {e: i for i, e in enumerate(ctx.entities["entity_id"])}
    chunk_row = {c: i for i, c in enumerate(ctx.chunks["ids"])}
    sentences_of: dict[int, list[int]] = {}
    entities_of: dict[int, list[int]] = {}
    count: dict[tuple[int, int], int] = {}
    for u, e in zip(links["unit_id"], links["entity_id"], strict=True):
        ur, er = unit_row[u], ent_row[e]
        sentences_of.setdefault(er, []).append(ur)
        entities_of.setdefault(ur, []).append(er)
        key = (chunk_row[units["chunk_id"][ur]], er)
        count[key] = count.get(key, 0) + 1
    qv = ctx.encode_queries([question])[0]
    seeds = link_entities(ctx, [question], top_k=1)[0][0]
    if not seeds:
        return [], []
    weight = dict(seeds)
    active = {e: (s, 1) for e, s in seeds.items()}
    frontier = list(seeds.items())
    used: set[int] = set()
    for tier in range(2, cfg.rounds + 2):
        taken: set[int] = set()
        new: dict[int, float] = {}
        for e, s in frontier:
            if s < cfg.threshold:
                continue
            cands = sorted({u for u in sentences_of.get(e, []) if u not in used})
            if not cands:
                continue
            sims = [float(np.dot(ctx.unit_vectors[u], qv)) for u in cands]
            best = sorted(range(len(cands)), key=lambda i: -sims[i])[: cfg.top_sentences]
            for i in best:
                if cands[i] in taken:
                    continue
                taken.add(cands[i])
                for e2 in entities_of[cands[i]]:
                    ns = s * sims[i]
                    if ns >= cfg.threshold:
                        weight[e2] = weight.get(e2, 0.0) + ns
                        new[e2] = max(new.get(e2, -1.0), ns)
        used |= taken
        for e2, ns in new.items():
            active[e2] = (ns, tier)
        frontier = sorted(new.items())
    n_c, n_e = len(ctx.chunks["ids"]), len(ctx.entities["entity_id"])
    dense = np.asarray(ctx.chunk_vectors) @ qv
    norm = (dense - dense.min()) / (dense.max() - dense.min())
    bonus = np.zeros(n_c)
    for (c, e), k in count.items():
        if e in active:
            s, t = active[e]
            bonus[c] += s * math.log(1 + k) / t
    reset = np.zeros(n_c + n_e)
    reset[:n_c] = cfg.passage_node_weight * (cfg.passage_ratio * norm + np.log1p(bonus))
    for e, w in weight.items():
        reset[n_c + e] += w
    total = {c: 0 for c in range(n_c)}
    for (c, _), k in count.items():
        total[c] += k
    edges = list(count)
    g = ig.Graph(n=n_c + n_e, edges=[(c, n_c + e) for c, e in edges], directed=False)
    g.es["weight"] = [count[ce] / total[ce[0]] for ce in edges]
    ppr = g.personalized_pagerank(
        damping=cfg.damping, directed=False, weights="weight", reset=reset.tolist()
    )
    scores = np.asarray(ppr[:n_c])
    order = np.argsort(-scores, kind="stable")[:depth]
    return order.tolist(), scores[order].tolist()


def test_rankings_equal_a_question_at_a_time_reference_with_igraph(setup) -> None:
    index, questions, tmp = setup
    ctx, batch = _run(index, questions[:12], tmp)
    checked = 0
    for q in range(12):
        ids, scores = batch.ranking.row(q)
        ref_ids, ref_scores = _reference(ctx, questions[q].question, 10)
        if not ref_ids:
            assert batch.extras[q]["fallback"]
            continue
        checked += 1
        assert ids[:10] == ref_ids, q
        np.testing.assert_allclose(scores[:10], ref_scores, rtol=1e-4, atol=1e-7)
    assert checked >= 8
    assert sum(x["activated_entities"] > 0 for x in batch.extras) >= 3


def test_batched_equals_one_question_at_a_time(setup) -> None:
    index, questions, tmp = setup
    _, batch = _run(index, questions[:8], tmp)
    for q in range(8):
        _, single = _run(index, questions[q : q + 1], tmp)
        assert single.ranking.row(0)[0] == batch.ranking.row(q)[0]
        np.testing.assert_allclose(single.ranking.row(0)[1], batch.ranking.row(q)[1], atol=1e-6)
        assert single.extras[0] == batch.extras[q]


def test_ablations_change_what_they_say(setup) -> None:
    index, questions, tmp = setup
    _, full = _run(index, questions[:12], tmp)
    _, no_act = _run(index, questions[:12], tmp, activation=False)
    _, no_dense = _run(index, questions[:12], tmp, dense_seeds=False)
    assert all(x["activated_entities"] == 0 for x in no_act.extras)
    assert any(x["activated_entities"] > 0 for x in full.extras)
    differs = [full.ranking.row(q)[0] != no_dense.ranking.row(q)[0] for q in range(12)]
    assert sum(differs) >= 6
    # without dense seeds a passage is reached only through an activated entity it mentions
    for q in range(12):
        if not no_dense.extras[q]["fallback"]:
            assert len(no_dense.ranking.row(q)[0]) > 0


NUMERIC = ["CARDINAL", "DATE", "MONEY", "ORDINAL", "PERCENT", "QUANTITY", "TIME"]


def test_dates_are_entities_that_link_passages_counts_are_not(
    demo_index, demo_index_copy, tmp_path
) -> None:
    """LinearRAG's public code keeps every spaCy label but counts and ranks: a date the
    question names seeds the passages that name it. An index built to leave every numeric
    label out re-reads its cached mentions, and its questions lose their dates too."""
    from graphrag_engine.cli import main

    default = open_index(demo_index)
    kinds = dict(
        zip(*default.table("entities", ["name", "type"]).to_pydict().values(), strict=True)
    )
    assert kinds["November 1912"] == "DATE"
    assert not {"CARDINAL", "ORDINAL"} & set(kinds.values())
    config = tmp_path / "numeric.yaml"
    config.write_text(f"graph:\n  ner_skip_labels: [{', '.join(NUMERIC)}]\n")
    assert main(["index", "--demo", "--out", str(demo_index_copy), "--config", str(config)]) == 0
    numeric = open_index(demo_index_copy)
    assert numeric.manifest["stats"]["stages"]["ner"]["tagged"] == 0
    names = set(numeric.table("entities", ["name"]).to_pydict()["name"])
    assert names == {n for n, k in kinds.items() if k not in NUMERIC}

    question = "Which storm struck the islands in November 1912?"
    chunks = default.table("chunks", ["chunk_id", "text"]).to_pydict()
    naming = {c for c, t in zip(*chunks.values(), strict=True) if "November 1912" in t}
    assert len(naming) == 2
    questions = [Question(qid="q", question=question)]
    ctx, found = _run(default, questions, tmp_path / "default")
    assert query_mentions(ctx, [question]) == [["November 1912"]]
    assert found.extras[0]["linked_entities"] == ["November 1912"]
    ids = [ctx.chunks["ids"][i] for i in found.ranking.row(0)[0][:2]]
    assert set(ids) == naming
    ctx, found = _run(numeric, questions, tmp_path / "numeric")
    assert ctx.ner_skip_labels == tuple(NUMERIC)
    assert query_mentions(ctx, [question]) == [[]] and found.extras[0]["fallback"]
