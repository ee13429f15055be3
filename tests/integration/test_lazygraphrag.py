"""LazyGraphRAG on the demo corpus indexed as its concept graph (noun phrases and named entities,
Leiden communities, no reports, no LLM). With the similarity assessor every search keeps to its
budget, visits communities best first and deepens only below those that yielded, and a batch
equals its questions one at a time. With a fault-injection server (named as such: it says
planted answers) standing in for the LLM, the refinement, the relevance tests (a test naming a
sentence the chunk lacks is recorded as failed) and the claims are checked by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.lazygraphrag import lazygraphrag
from graphrag_engine.methods.lazygraphrag.method import match_all, refine, start
from graphrag_engine.methods.lazygraphrag.search import ConceptCommunities
from graphrag_engine.retrieve.communities import communities
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import entity_graph
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index
from tests.fault_server import FaultInjector


@pytest.fixture(scope="module")
def concept_index(tmp_path_factory):
    """The demo corpus as LazyGraphRAG's index (configs/index-lazygraphrag.yaml)."""
    from tests.paths import REPO

    out = tmp_path_factory.mktemp("lazy") / "index"
    cfg = str(REPO / "configs" / "index-lazygraphrag.yaml")
    assert main(["index", "--demo", "--config", cfg, "--out", str(out)]) == 0
    return open_index(out)


def _config(**options):
    cfg = query_config("lazygraphrag")
    cfg.generation.enabled = False
    o = cfg.options
    o.refine, o.assessor, o.claims, o.threshold = "none", "similarity", "sentences", 0.4
    for k, v in options.items():
        setattr(o, k, v)
    return cfg


def test_searches_keep_to_the_budget_go_best_first_and_deepen_below_what_yielded(
    concept_index, tmp_path
) -> None:
    questions = load_questions(questions_path())[:12]
    cfg = _config(budget=17, z=2)
    ctx = QueryContext(concept_index, cfg, tmp_path)
    comms = communities(ctx)
    tree = ConceptCommunities.of(comms, entity_graph(ctx))
    spent = [{} for _ in questions]
    subs, _ = refine(ctx, cfg.options, [q.question for q in questions], spent)
    matches, _ = start(ctx, cfg.options, tree, subs)
    match_all(ctx, cfg.options, tree, matches, _, spent)
    deepened = 0
    for m in matches:
        assert m.done and m.spent <= 17 == m.budget
        assert m.spent == sum(len(t) for _, _, t, _ in m.visits)
        levels = sorted({d for d, *_ in m.visits})
        assert levels == list(range(len(levels)))
        for d in levels:
            visited = [c for dd, c, _, _ in m.visits if dd == d]
            pool = tree.roots if d == 0 else [
                k for dd, c, _, y in m.visits if dd == d - 1 and y for k in tree.children.get(c, [])
            ]  # fmt: skip
            assert visited == tree.ranked(pool, m.ranks, 3)[: len(visited)]  # best first
            deepened += d > 0
        for _, c, tests, _ in m.visits:  # a visit tests the community's best untested chunks
            own = tree.chunks[c][np.argsort(m.ranks[tree.chunks[c]], kind="stable")].tolist()
            assert tests == [x for x in own if x in tests][: len(tests)]
    assert deepened, "no search went below the top level"


def test_a_batch_equals_its_questions_one_at_a_time(concept_index, tmp_path) -> None:
    questions = load_questions(questions_path())[:8]
    cfg = _config(budget=30)
    ctx = QueryContext(concept_index, cfg, tmp_path)
    batched = lazygraphrag(ctx, questions, StageClock())
    single = [lazygraphrag(ctx, [q], StageClock()) for q in questions]
    assert [s.contexts[0] for s in single] == batched.contexts
    assert [s.extras[0] for s in single] == batched.extras
    assert [s.ranking.row(0)[0] for s in single] == [
        batched.ranking.row(q)[0] for q in range(len(questions))
    ]
    assert all(e["tests"] <= 30 for e in batched.extras)
    assert any(c.sections for c in batched.contexts), "no question found a claim"


def _say(value: object) -> str:
    return "say:" + json.dumps(value)


def test_llm_refines_tests_and_draws_claims(concept_index, tmp_path) -> None:
    """With planted answers: a subquery given twice is searched once, a relevance answer that
    does not parse or names a sentence past the schema's bound is asked again, and one that
    still fails is recorded as a failed test; the claims of the relevant text are the context."""
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

    question = load_questions(questions_path())[:1]
    plan = [
        _say({"subqueries": ["Who founded Port Calloway?"] * 2, "expanded": "Who founded it?"}),
        _say({"relevant": [1]}),
        "say:not an answer",  # does not parse: re-asked below
        _say({"relevant": [99]}),  # past any chunk's sentences: re-asked below
        _say({"relevant": []}),  # the re-ask of the second test: no relevant sentence
        _say({"relevant": [99]}),  # the third again: recorded as a failed test
        _say({"claims": ["Ilsa Varnholt founded Port Calloway in 1741."]}),
    ]
    with FaultInjector(plan) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        cfg = query_config("lazygraphrag")
        cfg.generation.enabled = False
        cfg.models.llm.backend = "openai"
        cfg.models.llm.parse_retries = 1
        cfg.options.budget, cfg.options.tests_per_community, cfg.options.concepts = 3, 3, 0
        ctx = QueryContext(concept_index, cfg, tmp_path, llm_backend=backend)
        r = lazygraphrag(ctx, question, StageClock())
        assert not fault.plan  # every planted answer was asked for, no more
        sent = [q["body"]["messages"][-1]["content"] for q in fault.requests]
    assert sent[4:6] == sent[2:4]  # the two answers that did not validate, asked again
    e, c = r.extras[0], r.contexts[0]
    assert e["subqueries"] == ["Who founded Port Calloway?"]  # given twice, searched once
    assert e["tests"] == 3 and e["relevant_chunks"] == 1 and e["failures"] == 1
    assert c.sections[0].items == ["Ilsa Varnholt founded Port Calloway in 1741."]
    assert set(r.tokens[0]) == {"lazy_refine", "lazy_relevance", "lazy_claims"}


def test_bad_budgets_exit_2_naming_the_file_and_key(concept_index, tmp_path, capsys) -> None:
    for bad in ("budget: 0", "budget: -5", "budget: many"):
        cfg = tmp_path / "lazy.yaml"
        cfg.write_text(f"method: lazygraphrag\nlazygraphrag:\n  {bad}\n")
        args = ["query", str(concept_index.root), "demo", "--method", str(cfg)]
        assert main([*args, "--out", str(tmp_path / "run"), "--retrieval-only"]) == 2
        err = capsys.readouterr().err
        assert str(cfg) in err and "budget" in err
    assert not (tmp_path / "run").exists()
