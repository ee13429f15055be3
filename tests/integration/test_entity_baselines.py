"""LightRAG-style dual-level retrieval and GraphRAG-style local search on the real demo index:
keyword retrieval finds a question's planted entity and relation, budgets never split a
section, batched runs equal one question at a time, and LLM keywords are parsed or counted."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.graphrag_local import graphrag_local
from graphrag_engine.methods.lightrag import lightrag
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import chunks_by_entities, entity_graph
from graphrag_engine.retrieve.local_search import relationships
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index


@pytest.fixture(scope="module")
def demo(demo_index, tmp_path_factory):
    questions = load_questions(questions_path())
    return open_index(demo_index), questions, tmp_path_factory.mktemp("entity-baselines")


def _ctx(index, tmp, method: str, **options) -> QueryContext:
    cfg = query_config(method)
    cfg.generation.enabled = False
    for k, v in options.items():
        setattr(cfg.options, k, v)
    return QueryContext(index, cfg, tmp)


@pytest.mark.parametrize("mode", ["local", "global", "hybrid", "mix"])
def test_keyword_retrieval_finds_the_planted_entity_and_relation(demo, mode) -> None:
    index, questions, tmp = demo
    q = next(q for q in questions if q.qid == "demo-q01")  # founder of Port Calloway
    ctx = _ctx(index, tmp, "lightrag", keywords="ner", mode=mode)
    r = lightrag(ctx, [q], StageClock())
    text = "\n".join(s.text() for s in r.contexts[0].sections)
    assert r.extras[0]["low_level_keywords"] == ["Port Calloway"]
    if mode != "global":  # entity vectors embed "name: the sentences naming it", so an
        # entity whose sentences all name Port Calloway ("Vesk and Port Calloway") may lead
        assert "Port Calloway" in r.extras[0]["entities"][:3]
    assert "Ilsa Varnholt" in text  # the founder, through a relation or a source chunk
    gold = set(q.supporting_ids)
    top = {ctx.chunks["passage"][c] for c in r.ranking.row(0)[0][:5]}
    assert gold & top
    titles = [s.title for s in r.contexts[0].sections]
    assert titles == [
        t for t in ("-----Entities-----", "-----Relations-----", "-----Sources-----") if t in titles
    ]
    assert all(s.whole for s in r.contexts[0].sections)


def test_section_budgets_hold_and_the_answer_budget_never_splits_a_section(demo) -> None:
    index, questions, tmp = demo
    ctx = _ctx(index, tmp, "lightrag", keywords="ner", entity_tokens=40, relation_tokens=60)
    r = lightrag(ctx, questions[:8], StageClock())
    for c in r.contexts:
        for s in c.sections:
            limit = {"E": 40, "R": 60, "S": ctx.cfg.options.chunk_tokens}[s.title[5]]
            assert sum(ctx.count_tokens(s.items)) <= limit
    from graphrag_engine.retrieve.answer import fit_context

    for c in r.contexts:
        fitted = fit_context(c, ctx.count_tokens, 120)
        assert fitted.sections == c.sections[: len(fitted.sections)]  # whole sections only
        assert fitted.sections  # the first always stays


@pytest.mark.parametrize("method", ["lightrag", "graphrag_local", "graphrag_local_vector"])
def test_batched_equals_one_question_at_a_time(demo, method) -> None:
    index, questions, tmp = demo
    fn = lightrag if method == "lightrag" else graphrag_local
    opts = {
        "lightrag": {"keywords": "ner"},
        "graphrag_local": {},
        "graphrag_local_vector": {"text_unit_order": "vector"},
    }[method]
    ctx = _ctx(index, tmp, method.removesuffix("_vector"), **opts)
    batch = fn(ctx, questions[:12], StageClock())
    for i, q in enumerate(questions[:12]):
        one = fn(ctx, [q], StageClock())
        assert one.contexts[0] == batch.contexts[i]
        assert one.ranking.row(0)[0] == batch.ranking.row(i)[0]


def test_graphrag_local_search_order_and_budget(demo) -> None:
    index, questions, tmp = demo
    ctx = _ctx(index, tmp, "graphrag_local", max_tokens=600)
    r = graphrag_local(ctx, questions[:6], StageClock())
    g = entity_graph(ctx)
    for c, e in zip(r.contexts, r.extras, strict=True):
        assert sum(sum(ctx.count_tokens(s.items)) for s in c.sections) <= 600
        assert not e["reports_in_index"]  # the demo index has no community reports
        assert len(e["entities"]) == 10
    # in-network relationships come before out-of-network ones
    sel = [g.names.index(n) for n in r.extras[0]["entities"]]
    rels = relationships(g, sel, 1000)
    inside = [g.src[x] in sel and g.dst[x] in sel for x in rels]
    assert inside == sorted(inside, reverse=True)


def test_graphrag_local_text_units_by_entity_or_by_cosine(demo) -> None:
    index, questions, tmp = demo
    ctx = _ctx(index, tmp, "graphrag_local", text_unit_order="graphrag")
    by_entity = graphrag_local(ctx, questions[:6], StageClock())
    by_vector = graphrag_local(
        _ctx(index, tmp, "graphrag_local", text_unit_order="vector"), questions[:6], StageClock()
    )
    g = entity_graph(ctx)
    q_vecs = ctx.encode_queries([q.question for q in questions[:6]])
    for i in range(6):
        ents = [g.names.index(n) for n in by_entity.extras[i]["entities"]]
        assert by_vector.extras[i]["entities"] == by_entity.extras[i]["entities"]
        units = chunks_by_entities(g, ents)
        depth = len(by_entity.ranking.row(i)[0])
        assert by_entity.ranking.row(i)[0] == units[:depth]
        got = by_vector.ranking.row(i)[0]
        q = q_vecs[i] / np.linalg.norm(q_vecs[i])
        cos = np.round(np.asarray(ctx.chunk_vectors[got], dtype=np.float32) @ q, 5)
        assert set(got) <= set(units) and len(got) == depth and np.all(np.diff(cos) <= 0)
        left = [c for c in units if c not in got]  # the ranking keeps the most similar ones
        if left:
            rest = np.asarray(ctx.chunk_vectors[left], dtype=np.float32) @ q
            assert rest.max() <= cos[-1] + 1e-5


def test_llm_keywords_parse_or_fall_back_counted(demo, smollm, tmp_path) -> None:
    from graphrag_engine.query.run import run_query

    index, questions, _ = demo
    cfg = query_config("lightrag")
    cfg.models.llm.backend = "transformers"
    cfg.generation.enabled = False
    summary = run_query(index, questions[:6], cfg, tmp_path / "run", "demo", llm_backend=smollm)
    rows = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").open()]
    usage = summary["llm"]
    key = next(k for k in usage if k.startswith("keywords/"))
    fallbacks = sum(r["extras"]["keyword_fallback"] for r in rows)
    assert usage[key]["parse_failures"] == fallbacks  # every fallback is a counted failure
    for r in rows:
        e = r["extras"]
        assert e["low_level_keywords"] and e["high_level_keywords"]
        if e["keyword_fallback"]:
            assert e["low_level_keywords"] == [r["question"]]
    assert summary["query_tokens_per_question"]["keywords"] > 0


def test_global_search_reduce_keeps_the_top_scored_points(demo) -> None:
    from graphrag_engine.methods.graphrag_global import NO_DATA, reduce_points

    index, _, tmp = demo
    ctx = _ctx(index, tmp, "lightrag", keywords="ner")  # any context: the tokenizer is the index's
    points = [("low", 10), ("zero", 0), ("top", 95), ("mid", 50), ("tie", 50), ("x " * 300, 40)]
    c = reduce_points(ctx, points, 60)
    assert c.sections[0].items == [
        "(importance 95) top",
        "(importance 50) mid",
        "(importance 50) tie",
    ]
    assert reduce_points(ctx, [("zero", 0)], 60).preset_answer == NO_DATA
    assert reduce_points(ctx, [], 60).preset_answer == NO_DATA


@pytest.mark.parametrize("style", ["short", "long"])
def test_the_reduce_step_is_its_own_stage_and_prompt(demo_index, tmp_path, style) -> None:
    """Against the FAULT INJECTOR (planted answers): questions with key points get one reduce
    prompt each, in one batched call under its own stage, GraphRAG's report-style prompt for
    long answers and the shared short instruction otherwise; its answer is the question's
    (kept whole when long); a question without points sends nothing."""
    from graphrag_engine.methods.graphrag_global import NO_DATA, reduce_answers, reduce_points
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM
    from tests.fault_server import FaultInjector

    cfg = query_config("graphrag_global")
    cfg.models.llm.backend = "openai"
    cfg.generation.answer_style = style
    with FaultInjector(["say:Port Calloway was founded by Ada Vell.\nShe came by sea."]) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        ctx = QueryContext(open_index(demo_index), cfg, tmp_path / style, llm_backend=backend)
        contexts = [
            reduce_points(ctx, [("Ada Vell founded Port Calloway", 90)], 500),
            reduce_points(ctx, [("nothing", 0)], 500),
        ]
        spent = reduce_answers(ctx, ["Who founded Port Calloway?", "Why?"], contexts)
        (request,) = fault.requests
    system = request["body"]["messages"][0]["content"]
    assert ("key points that analysts drew" in system) == (style == "long")
    assert (
        "(importance 90) Ada Vell founded Port Calloway"
        in request["body"]["messages"][-1]["content"]
    )
    whole = "Port Calloway was founded by Ada Vell.\nShe came by sea."
    assert contexts[0].preset_answer == (whole if style == "long" else whole.split("\n")[0])
    assert contexts[1].preset_answer == NO_DATA and spent[1] == {}
    assert spent[0]["global_reduce_prompt"] > 0
    assert ctx.llm.ledger.get("global_reduce", backend.model_id).calls == 1


def test_global_search_needs_reports(run_cli, demo_index, tmp_path) -> None:
    res = run_cli(
        "query", str(demo_index), "demo", "--method", "graphrag_global", "--llm-backend",
        "transformers", "--retrieval-only", "--out", str(tmp_path / "g"),
    )  # fmt: skip
    assert res.returncode == 2
    assert "community_reports" in res.stderr and "communities.reports: true" in res.stderr


def test_equal_vectors_rank_by_id_whatever_the_batch(demo) -> None:
    """Entities of the same name have equal vectors; their order (and who makes the top k) must
    not depend on whether a text was encoded alone or in a padded batch."""
    from graphrag_engine.retrieve.entity_graph import search

    index, questions, tmp = demo
    ctx = _ctx(index, tmp, "lightrag", keywords="ner")
    base = ctx.entity_vectors
    copies = np.concatenate([base, np.repeat(base[:1], 5, axis=0)])  # ids n..n+4 copy id 0
    ctx.__dict__["entity_vectors"] = copies  # the table the search reads (a cached property)
    texts = [q.question for q in questions[:12]] + [entity_graph(ctx).names[0]]
    ids, _ = search(ctx, texts, "entity_vectors", 8)
    for i, t in enumerate(texts):
        alone, _ = search(ctx, [t], "entity_vectors", 8)
        assert alone[0].tolist() == ids[i].tolist()
    tied = [e for e in ids[-1].tolist() if e == 0 or e >= len(base)]
    assert tied == sorted(tied) and len(tied) == 6  # the name finds itself and its 5 copies


def test_placeholder_keywords_are_not_keys() -> None:
    """SmolLM2 copies the format line's "..." as keys (19 of 100 MuSiQue and HotpotQA questions
    in the retired bench/rograg_refusal.py): such keys are dropped, and an answer of nothing else is
    invalid, so it is re-asked and then falls back, counted, instead of matching nothing."""
    from graphrag_engine.models.structured import ParseError
    from graphrag_engine.retrieve.keywords import KEYWORDS

    low, high = KEYWORDS.parse(
        '{"low_level_keywords": ["...", "Mach\'s principle"], "high_level_keywords": ["…", " "]}'
    )
    assert (low, high) == (["Mach's principle"], [])
    with pytest.raises(ParseError, match="placeholder"):
        KEYWORDS.parse('{"low_level_keywords": ["...", "..."], "high_level_keywords": ["..."]}')
