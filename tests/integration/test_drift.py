"""DRIFT search on the demo index with community reports. With a fault-injection server
(named as such: it says planted answers) standing in for the LLM, the search is checked by
hand: which follow-ups are queued, how many each round takes, what a failed answer costs,
what the reduce reads. With SmolLM2 (a floor for quality) every stage runs and is counted, and
a batch asks exactly the prompts its questions ask one at a time."""

from __future__ import annotations

import json

import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.drift import drift
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index
from tests.fault_server import FaultInjector


def _say(value: object) -> str:
    return "say:" + (value if isinstance(value, str) else json.dumps(value))


def _answer(key: str, text: str, score: int, follow: list[str]) -> str:
    return _say({key: text, "score": score, "follow_up_queries": follow})


def test_follow_ups_are_queued_once_taken_by_rounds_and_reduced(demo_reports_index, tmp_path):
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

    question = load_questions(questions_path())[:1]
    born = "Where was Ilsa Varnholt born?"
    plan = [
        _say({"answer": "Ilsa Varnholt founded Port Calloway; she was born in Hollowmere."}),
        _answer("intermediate_answer", "Ilsa Varnholt founded it.", 60, [born, "When?"]),
        _answer("intermediate_answer", "Varnholt Hall honours her.", 40, [born, "Her ship?"]),
        _answer("response", "She was born in Hollowmere.", 90, ["What is Hollowmere?"]),
        _say("not an answer"),  # fails to parse: recorded, nothing queued
        _answer("response", "A fishing town.", 10, []),
        _answer("response", "The Grey Heron.", 10, [born]),  # asked already: not queued again
        _say("Hollowmere"),  # the reduce
    ]
    with FaultInjector(plan) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        cfg = query_config("drift")
        cfg.models.llm.backend = "openai"
        cfg.models.llm.parse_retries = 0
        cfg.options.k_followups, cfg.options.primer_folds, cfg.options.n_depth = 2, 2, 2
        ctx = QueryContext(open_index(demo_reports_index), cfg, tmp_path, llm_backend=backend)
        r = drift(ctx, question, StageClock())
        assert not fault.plan  # every planted answer was asked for, no more
        sent = [m["content"] for q in fault.requests for m in q["body"]["messages"]]
    e, c = r.extras[0], r.contexts[0]
    assert e["reports"] == 2 and e["primer_score"] == 50.0
    assert e["asked"] == [2, 2] and e["depth"] == 2 and e["pending"] == 0
    assert e["failures"] == 1
    assert c.preset_answer == "Hollowmere"
    items = c.sections[0].items
    assert items[0] == "Ilsa Varnholt founded it.\n\nVarnholt Hall honours her."
    assert items[1:] == ["She was born in Hollowmere.", "A fishing town.", "The Grey Heron."]
    assert sum(born in s and "Follow-up query: " + born in s for s in sent) == 1
    assert set(r.tokens[0]) >= {"drift_hyde", "drift_primer", "drift_local"}
    assert r.ranking is not None and r.ranking.row(0)[0]  # the local searches' text units


@pytest.mark.slow
def test_smollm2_runs_every_stage_and_a_batch_asks_what_single_questions_ask(
    demo_reports_index, tmp_path
) -> None:
    questions = load_questions(questions_path())[:2]
    cfg = query_config("drift")
    cfg.models.llm.backend = "transformers"
    cfg.models.llm.cache = str(tmp_path / "llm_cache.sqlite")
    cfg.models.llm.parse_retries = 1
    cfg.models.llm.max_failed_share = 1.0  # short budgets cut some answers: recorded
    cfg.models.llm.dtype = "fast"  # the cache, not the dtype, makes a single run ask the same
    cfg.generation.max_tokens = 24
    cfg.generation.max_context_tokens = 512
    o = cfg.options
    o.hyde, o.primer_folds, o.k_followups, o.n_depth, o.followups = False, 1, 2, 1, 2
    o.primer_max_tokens, o.local_max_answer_tokens = 128, 96
    index = open_index(demo_reports_index)
    batched = drift(QueryContext(index, cfg, tmp_path / "batch"), questions, StageClock())
    for q, e in enumerate(batched.extras):
        assert e["depth"] <= 1 and all(n <= 2 for n in e["asked"])
        assert batched.tokens[q]["drift_primer"] > 0
        if e["asked"][0]:
            assert batched.tokens[q]["drift_local"] > 0
    assert any(e["asked"][0] for e in batched.extras), "no primer raised a follow-up"
    ctx = QueryContext(index, cfg, tmp_path / "single")
    single = [drift(ctx, [q], StageClock()) for q in questions]
    used = ctx.llm.ledger.total()
    assert used.calls == 0 and used.cached_calls > 0  # the batch's cache answered every prompt
    assert [s.contexts[0] for s in single] == batched.contexts
    assert [s.extras[0] for s in single] == batched.extras


def test_bad_settings_exit_2_naming_the_file_and_key(demo_reports_index, tmp_path, capsys):
    for bad in ("k_followups: 0", "n_depth: -1", "primer_folds: many"):
        cfg = tmp_path / "drift.yaml"
        cfg.write_text(f"method: drift\ndrift:\n  {bad}\n")
        args = ["query", str(demo_reports_index), "demo", "--method", str(cfg)]
        assert main([*args, "--out", str(tmp_path / "run"), "--retrieval-only"]) == 2
        err = capsys.readouterr().err
        assert str(cfg) in err and bad.split(":")[0] in err
    assert not (tmp_path / "run").exists()
