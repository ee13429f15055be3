"""Sub-question plans (graphrag_engine/methods/pankrag/plans.py): validation re-orders, rejects cycles and
dangling references; levels and "#k" substitution; MuSiQue's gold plans load for every dev
question; an invalid LLM plan is re-asked by the structured stage."""

from __future__ import annotations

import json

import pytest

from graphrag_engine.methods.pankrag.plans import (
    Plan,
    ordered,
    plan_schema,
    substitute,
)
from graphrag_engine.models.structured import ParseError


def test_levels_and_substitution_follow_the_dag() -> None:
    # 1, 2 independent; 3 needs both; 4 needs 3
    steps = ordered(
        ["who founded A", "who founded B", "older of #1 and #2", "birthplace of #3"],
        [[], [], [], []],
        ["specific"] * 4,
    )
    plan = Plan(steps)
    assert plan.levels() == [[0, 1], [2], [3]]
    assert plan.edges() == [(0, 2), (1, 2), (2, 3)]
    assert substitute(steps[2].text, {0: "Ilsa", 1: "Corvin"}) == "older of Ilsa and Corvin"
    assert substitute("#3 and #9", {2: "x"}) == "x and #9"  # unresolved stays visible


def test_out_of_order_steps_are_renumbered_into_dependency_order() -> None:
    steps = ordered(["capital of #2", "country of Vesk"], [[2], []], ["specific"] * 2)
    assert [s.text for s in steps] == ["country of Vesk", "capital of #1"]
    assert steps[1].depends_on == (0,)


@pytest.mark.parametrize(
    "texts, listed, why",
    [
        (["a #2", "b #1"], [[], []], "cycle"),
        (["a", "b #3"], [[], []], "refers to step 3"),
        (["a #1"], [[]], "refers to step 1"),  # itself
        (["a", "b"], [[], [5]], "refers to step 5"),
    ],
)
def test_cycles_and_dangling_references_are_rejected(texts, listed, why) -> None:
    with pytest.raises(ParseError, match=why):
        ordered(texts, listed, ["specific"] * len(texts))


def test_plan_schema_validates_shape_and_rules() -> None:
    schema = plan_schema(4)
    good = {"steps": [
        {"question": "which county holds Van Hook", "depends_on": [], "scope": "specific"},
        {"question": "seat of #1", "depends_on": [1], "scope": "specific"},
    ]}  # fmt: skip
    plan = schema.parse(json.dumps(good))
    assert plan.levels() == [[0], [1]] and plan.source == "llm"
    cyclic = {"steps": [
        {"question": "aaa #2", "depends_on": [], "scope": "specific"},
        {"question": "bbb #1", "depends_on": [], "scope": "abstract"},
    ]}  # fmt: skip
    with pytest.raises(ParseError, match="cycle"):
        schema.parse(json.dumps(cyclic))
    too_many = {"steps": [good["steps"][0]] * 5}
    with pytest.raises(ParseError):
        schema.parse(json.dumps(too_many))


def test_planner_counts_asks_and_keeps_the_last_error() -> None:
    """Answers from the fault-injection server (named as such: it says planted plans): a
    question whose plan never validates falls back after 1 + 2 asks with the last ask's error
    kept; a valid plan takes one ask and has none."""
    from graphrag_engine.config import LLMConfig
    from graphrag_engine.methods.pankrag.plans import make_plans
    from graphrag_engine.models import make_llm
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM
    from tests.fault_server import FaultInjector

    def plan(*steps) -> str:
        keys = ("question", "depends_on", "scope")
        return "say:" + json.dumps({"steps": [dict(zip(keys, s, strict=True)) for s in steps]})

    cycle = plan(("Who wrote #2?", [2], "specific"), ("What did #1 write?", [1], "specific"))
    dangling = plan(("Who is it?", [], "specific"), ("When did #3 die?", [], "specific"))
    good = plan(("Who founded the club?", [], "specific"), ("Where was #1 born?", [1], "specific"))
    with FaultInjector([cycle, dangling, dangling, good]) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        cfg = LLMConfig(backend="openai", model="fault", max_failed_share=1.0)  # record failures
        llm = make_llm(cfg, backend=backend)
        bad = make_plans(llm, ["Where was the club's founder born?"], 5, retries=2)
        ok = make_plans(llm, ["Where was the founder born?"], 5, retries=2)
    assert bad.fallback == [True] and bad.attempts == [3] and "step 3" in (bad.errors[0] or "")
    assert bad.plans[0].source == "fallback"
    assert ok.fallback == [False] and ok.attempts == [1] and ok.errors == [None]
    assert len(ok.plans[0].steps) == 2 and ok.plans[0].edges() == [(0, 1)]


def test_a_stage_whose_answers_all_fail_stops_with_exit_4_naming_it() -> None:
    """At the default bound (more than half failed) a structured call raises instead of
    passing its failures on: the stage, the share and one failed answer are named."""
    from graphrag_engine.config import LLMConfig
    from graphrag_engine.errors import StageFailedError
    from graphrag_engine.methods.pankrag.plans import make_plans
    from graphrag_engine.models import make_llm
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM
    from tests.fault_server import FaultInjector

    garbage = "say:" + "not a plan at all"
    with FaultInjector([garbage] * 6) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        llm = make_llm(LLMConfig(backend="openai", model="fault"), backend=backend)
        with pytest.raises(StageFailedError) as err:
            make_plans(llm, ["Who?", "When?"], 5, retries=2)
    msg = str(err.value)
    assert err.value.exit_code == 4
    assert "'pankrag_plan'" in msg and "2 of 2 answers (100%" in msg and "not a plan" in msg
    (usage,) = [u for k, u in llm.ledger.summary().items() if k.startswith("pankrag_plan/")]
    assert usage["parse_failures"] == 2 and usage["retries"] == 4


def test_a_steps_search_follows_the_configured_scope() -> None:
    """plan: the planner's label (gold and direct plans: specific); query_type: the paper's
    choice by the question's type (long-form kinds abstract, the rest specific); a fixed one."""
    from graphrag_engine.methods import query_config
    from graphrag_engine.methods.pankrag.method import step_scope
    from graphrag_engine.methods.pankrag.plans import Plan, Step

    cfg = query_config("pankrag").options
    labelled = Plan((Step("Who wrote X?", (), "abstract"), Step("When?", (0,), "specific")))
    gold = Plan(labelled.steps, source="gold")
    assert cfg.scope == "plan"
    assert [step_scope(cfg, labelled, s) for s in (0, 1)] == ["abstract", "specific"]
    assert [step_scope(cfg, gold, s) for s in (0, 1)] == ["specific", "specific"]
    cfg.scope = "query_type"
    for kind, want in (("passage", "specific"), ("abstract", "abstract"), ("evidence", "abstract")):
        assert {step_scope(cfg, labelled, s, kind) for s in (0, 1)} == {want}, kind
    cfg.scope = "abstract"
    assert {step_scope(cfg, gold, s, "passage") for s in (0, 1)} == {"abstract"}
