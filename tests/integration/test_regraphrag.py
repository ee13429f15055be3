"""ReGraphRAG on the real demo index: the perspective-grouped prompt with its "[Across all]"
dedupe, reorganization connecting every perspective, ablation switches, batched == one question
at a time, and perspective expansion re-asked, then fallen back and counted."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.kernels.reorganize import reorganize
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods import query_config
from graphrag_engine.methods.regraphrag.method import (
    ACROSS_ALL,
    Triplet,
    Triplets,
    edge_text,
    path_graph,
    question_components,
    regraphrag,
    rerank,
    sections,
    triplets,
)
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import entity_graph
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index
from tests.fault_server import FaultInjector


@pytest.fixture(scope="module")
def demo(demo_index, tmp_path_factory):
    questions = load_questions(questions_path())
    return open_index(demo_index), questions, tmp_path_factory.mktemp("regraphrag")


def _ctx(index, tmp, llm_backend=None, **options) -> QueryContext:
    cfg = query_config("regraphrag")
    cfg.generation.enabled = False
    cfg.options.expansion = False
    for k, v in options.items():
        setattr(cfg.options, k, v)
    return QueryContext(index, cfg, tmp, llm_backend=llm_backend)


def test_triplets_of_several_perspectives_are_listed_once_under_across_all(demo) -> None:
    index, _, tmp = demo
    ctx = _ctx(index, tmp)
    g = entity_graph(ctx)
    r0, r1, r2 = 0, 1, 2
    shared = Triplet(int(g.src[r0]), int(g.dst[r0]), r0, 0.9)
    per_q = [
        ("History", [shared, Triplet(int(g.src[r1]), int(g.dst[r1]), r1, 0.5)]),
        ("People", [Triplet(shared.a, shared.b, r0, 0.9), Triplet(int(g.src[r2]), int(g.dst[r2]), r2, 0.1)]),
    ]  # fmt: skip
    q_vec = ctx.encode_queries(["Who founded the town?"])[0]
    secs, chunks = sections(ctx, g, per_q, 3000, q_vec)
    assert [s.title for s in secs] == [
        f"Perspective: {n}" for n in (ACROSS_ALL, "History", "People")
    ]
    assert len(secs[0].items) == 1 and secs[0].items[0].startswith(
        f"[{ACROSS_ALL}]: {g.names[shared.a]}"
    )
    assert "is connected to" in secs[1].items[0] and secs[1].items[0].endswith("relation.")
    assert all(len(s.items) == 1 and s.whole for s in secs)
    assert set(chunks) == {int(c) for r in (r0, r1, r2) for c in g.relation_chunks[r]}

    def by_cosine(rows: list[int]) -> list[int]:
        sims = np.asarray(ctx.chunk_vectors)[rows] @ (q_vec / np.linalg.norm(q_vec))
        return [rows[i] for i in np.argsort(-np.round(sims, 5), kind="stable")]

    # every triplet is listed: the chunks behind them all come by cosine to the question
    every = list(dict.fromkeys(int(c) for r in (r0, r1, r2) for c in g.relation_chunks[r]))
    assert chunks == by_cosine(every)
    # prompt order: the first triplet's chunks first, by cosine among themselves
    _, in_prompt_order = sections(ctx, g, per_q, 3000, q_vec, "prompt")
    first = [int(c) for c in g.relation_chunks[r0]]
    assert in_prompt_order[: len(first)] == by_cosine(first)
    assert set(in_prompt_order) == set(chunks)
    # a tight budget drops lines from each section's own share, never splits an item
    tight, _ = sections(ctx, g, per_q, 30, q_vec)
    for s in tight:
        assert sum(ctx.count_tokens(s.items)) <= 10


def test_reorganization_connects_each_perspective_and_switches_off(demo) -> None:
    index, questions, tmp = demo
    full = regraphrag(_ctx(index, tmp, top_k=5), questions[:8], StageClock())
    plain = regraphrag(_ctx(index, tmp, top_k=5, reorganize=False), questions[:8], StageClock())
    for f, p in zip(full.extras, plain.extras, strict=True):
        assert f["subgraphs"] == p["subgraphs"] == 1  # one sub-query: one subgraph
        assert f["after_bridges"] == 1 and f["node_components"] >= 1
        assert p["path_nodes_added"] == p["bridges_added"] == 0
        assert p["node_components"] >= f["node_components"] - f["bridges_added"]
        # one perspective: the question's graph is that perspective's graph
        assert len(f["components"]) == f["node_components"]
        assert len(p["components"]) == p["node_components"]
    # with several subgraphs (one per question) the groups end as one component
    ctx = _ctx(index, tmp, top_k=3)

    g = entity_graph(ctx)
    ids = [[g.names.index("Port Calloway")], [g.names.index("Ilsa Varnholt")], [0]]
    r = reorganize(
        path_graph(ctx, g, "hops"), ids, l2_normalize(np.asarray(ctx.entity_vectors)), False
    )
    assert r.components_after_paths - len(r.bridges) == 1


def test_a_subgraphs_edges_are_its_nodes_relations_or_those_among_them(demo) -> None:
    index, questions, tmp = demo
    ctx = _ctx(index, tmp, top_k=5)
    g = entity_graph(ctx)
    nodes = [g.names.index("Port Calloway"), g.names.index("Ilsa Varnholt")]
    vectors = l2_normalize(np.asarray(ctx.entity_vectors))
    r = reorganize(path_graph(ctx, g, "hops"), [nodes], vectors, False, False, False)
    picked = set(nodes)
    touching = {i for i in range(len(g.src)) if {int(g.src[i]), int(g.dst[i])} & picked}
    between = {i for i in touching if {int(g.src[i]), int(g.dst[i])} <= picked}
    assert [t.relation for t in triplets(g, r, "incident")] == sorted(touching)  # row order
    assert [t.relation for t in triplets(g, r, "among")] == sorted(between)
    assert len(touching) > len(between)
    # over a run: the one-hop relations hold those among the nodes, and a far end hangs on a
    # node, so it never adds a component
    wide = regraphrag(_ctx(index, tmp, top_k=5), questions[:6], StageClock())
    narrow = regraphrag(_ctx(index, tmp, top_k=5, edges="among"), questions[:6], StageClock())
    for w, n in zip(wide.extras, narrow.extras, strict=True):
        assert w["triplets"] >= n["triplets"]
        assert w["node_components"] <= n["node_components"]


def test_rerank_orders_triplets_by_cosine_of_either_edge_text(demo) -> None:
    index, _, tmp = demo
    for text in ("relation", "with_ends"):
        ctx = _ctx(index, tmp, edge_text=text)
        g = entity_graph(ctx)
        q_vec = ctx.encode_queries(["Who founded the town of Port Calloway?"])
        ts = [Triplet(int(g.src[r]), int(g.dst[r]), r) for r in range(min(12, g.src.size))]
        ts.append(Triplet(ts[0].a, ts[-1].b, -1))  # a bridge: its text is embedded either way
        found = [[("Question", Triplets.of(ts))]]
        rerank(ctx, g, ctx.cfg.options, found, q_vec)
        got = found[0][0][1]
        if text == "relation":
            rel = np.asarray(ctx.vectors("relation_vectors"))
            vecs = [rel[t.relation] if t.relation >= 0 else None for t in ts]
        else:
            vecs = [None] * len(ts)
        todo = [i for i, v in enumerate(vecs) if v is None]
        for i, v in zip(todo, ctx.encode_queries([edge_text(g, ts[i]) for i in todo]), strict=True):
            vecs[i] = v
        unit = l2_normalize(np.asarray(vecs, dtype=np.float32))
        want = unit @ l2_normalize(np.asarray(q_vec, dtype=np.float32))[0]
        score = {t.key: t.score for t in got}
        assert [score[t.key] for t in ts] == pytest.approx(want.tolist(), abs=1e-4)
        assert [t.score for t in got] == sorted((t.score for t in got), reverse=True)


def test_question_components_match_networkx() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        nodes = [np.unique(rng.integers(0, 40, rng.integers(1, 12))) for _ in range(3)]
        every = np.unique(np.concatenate(nodes))
        ts = []
        for _ in range(int(rng.integers(0, 15))):
            a, b = rng.choice(every, 2)
            ts.append(Triplet(int(a), int(b), int(rng.integers(-1, 5))))
        g = nx.Graph()
        g.add_nodes_from(every.tolist())
        g.add_edges_from((t.a, t.b) for t in ts)
        want = sorted(sorted(c) for c in nx.connected_components(g))
        assert sorted(question_components(nodes, Triplets.of(ts))) == want


def test_batched_equals_one_question_at_a_time(demo) -> None:
    index, questions, tmp = demo
    ctx = _ctx(index, tmp, top_k=10)
    batch = regraphrag(ctx, questions[:10], StageClock())
    for i, q in enumerate(questions[:10]):
        one = regraphrag(ctx, [q], StageClock())
        assert one.contexts[0] == batch.contexts[i]
        assert one.ranking.row(0)[0] == batch.ranking.row(i)[0]
        assert one.extras[0] == batch.extras[i]


def test_the_planted_answer_is_in_the_graph(demo) -> None:
    index, questions, tmp = demo
    q = next(q for q in questions if q.qid == "demo-q01")  # founder of Port Calloway
    ctx = _ctx(index, tmp)
    r = regraphrag(ctx, [q], StageClock())
    text = "\n".join(s.text() for s in r.contexts[0].sections)
    assert "Port Calloway" in text.split("\n")[1]  # the best-scored triplet names it
    top = {ctx.chunks["passage"][c] for c in r.ranking.row(0)[0][:5]}
    assert set(q.supporting_ids) & top


def test_wrong_shaped_perspectives_are_reasked_then_fall_back_counted(demo) -> None:
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

    index, questions, tmp = demo
    good = {
        "perspectives": [
            {"perspective": p, "queries": [f"{p} of Port Calloway"]} for p in ("Origins", "People")
        ]
    }
    wrong = {"perspectives": [{"perspective": "Origins", "queries": ["a", "b", "c"]}]}
    same = ("Harbour", "harbour ")
    dup = {"perspectives": [{"perspective": p, "queries": ["Port Calloway harbour"]} for p in same]}
    # question 1: wrong, then valid on the re-ask; question 2: wrong three times;
    # question 3: two perspectives of one name, merged with their sub-query kept once
    plan = ["say:" + json.dumps(wrong), "say:" + json.dumps(good)]
    plan += ["say:" + json.dumps(wrong)] * 3 + ["say:" + json.dumps(dup)]
    with FaultInjector([]) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        ctx = _ctx(index, tmp / "exp", backend, expansion=True, perspectives=2, sub_queries=1)
        ctx.cfg.models.llm.backend = "openai"
        ctx.cfg.models.llm.parse_retries = 2
        ctx.cfg.models.llm.max_failed_share = 1.0  # the planted failures are recorded, not fatal
        fault.plan = plan[:2]
        r1 = regraphrag(ctx, questions[:1], StageClock())
        fault.plan = plan[2:5]
        r2 = regraphrag(ctx, questions[1:2], StageClock())
        fault.plan = plan[5:]
        r3 = regraphrag(ctx, questions[2:3], StageClock())
    assert (
        r1.extras[0]["perspectives"] == ["Origins", "People"]
        and not r1.extras[0]["expansion_fallback"]
    )
    assert r1.extras[0]["sub_queries"] == ["Origins of Port Calloway", "People of Port Calloway"]
    assert r2.extras[0]["expansion_fallback"] and r2.extras[0]["perspectives"] == ["Question"]
    assert r2.extras[0]["sub_queries"] == [questions[1].question]
    assert r3.extras[0]["perspectives"] == ["Harbour"] and not r3.extras[0]["expansion_fallback"]
    assert r3.extras[0]["sub_queries"] == ["Port Calloway harbour"]
    usage = ctx.llm.ledger.get("perspectives", backend.model_id)
    assert usage.parse_failures == 1 and usage.calls == 6


def test_reorganization_joins_the_subgraphs_of_an_expanded_question(demo) -> None:
    """Expansion on (perspectives planted through the fault server): two perspectives of two
    sub-queries about different people and places give four subgraphs; reorganization joins
    each perspective's (paths, then bridges) into one component, where without it they stay
    apart. The prompt carries the worked examples."""
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

    index, questions, tmp = demo
    planted = {
        "perspectives": [
            {"perspective": "Founding", "queries": ["Who founded Port Calloway?", "Port Calloway harbour"]},
            {"perspective": "People", "queries": ["Ilsa Varnholt", "Ada Vell"]},
        ]
    }  # fmt: skip
    runs = {}
    with FaultInjector([]) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        for reorganize_on in (True, False):
            ctx = _ctx(
                index, tmp / f"join-{reorganize_on}", backend, expansion=True, perspectives=2,
                sub_queries=2, top_k=3, reorganize=reorganize_on,
            )  # fmt: skip
            ctx.cfg.models.llm.backend = "openai"
            fault.plan = ["say:" + json.dumps(planted)]
            runs[reorganize_on] = regraphrag(ctx, questions[:1], StageClock())
        prompt = fault.requests[0]["body"]["messages"][-1]["content"]
    assert "Example 1. Question:" in prompt and "Example 2. Question:" in prompt
    joined, apart = runs[True].extras[0], runs[False].extras[0]
    # figures summed over the two perspectives: more subgraphs than perspectives to join
    assert joined["perspectives"] == ["Founding", "People"]
    assert joined["subgraphs"] == apart["subgraphs"] > 2
    assert apart["node_components"] > 2 and apart["bridges_added"] == 0
    assert joined["after_bridges"] == 2  # each perspective's subgraphs end as one component
    assert joined["path_nodes_added"] + joined["bridges_added"] > 0
