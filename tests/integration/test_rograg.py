"""ROGRAG on the demo index with a fault-injection server (named as such: it says planted
answers) standing in for the LLM: the stage chain moves on when the verifier says no, and a
question no stage supports gets the preset refusal without a generation call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.eval.datasets import demo_questions_path, load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.rograg import rograg
from graphrag_engine.methods.rograg.dual_level import match_keys
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index
from tests.fault_server import FaultInjector

KEYS = {"low_level_keywords": ["Port Calloway"], "high_level_keywords": ["founded"]}
FORM = {
    "steps": [
        {
            "operator": "retrieve",
            "query": "Who founded Port Calloway?",
            "inputs": [],
            "relation": "none",
            "bound": "",
            "label": "",
        }
    ]
}


@pytest.mark.parametrize(
    ("verdicts", "stage"),
    [((True,), "logic_form"), ((False, True), "dual_level"), ((False, False), "refused")],
)
def test_the_verifier_walks_the_chain_and_refuses(demo_index, tmp_path, verdicts, stage) -> None:
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

    question = load_questions(demo_questions_path())[:1]
    with FaultInjector([]) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        cfg = query_config("rograg")
        cfg.generation.enabled = False
        cfg.models.llm.backend = "openai"
        cfg.models.llm.parse_retries = 0
        ctx = QueryContext(open_index(demo_index), cfg, tmp_path, llm_backend=backend)
        fault.plan = ["say:" + json.dumps(KEYS), "say:" + json.dumps(FORM), "say:Ada Vell"]
        fault.plan += ["say:" + json.dumps({"supported": v}) for v in verdicts]
        r = rograg(ctx, question, StageClock())
        assert not fault.plan  # every planted answer was asked for, no more
    e, c = r.extras[0], r.contexts[0]
    assert e["stage"] == stage and e["logic_form"] == ["retrieve"]
    assert r.tokens[0]["logic_step"] > 0 and r.tokens[0]["verify"] > 0
    ranked = [int(i) for i in r.ranking.ids[0] if i >= 0]
    if stage == "refused":
        assert c.preset_answer == cfg.options.refusal and not c.sections
        assert ranked == []  # nothing retrieved reaches a refused question
    elif stage == "logic_form":
        assert c.sections[0].items == ["Who founded Port Calloway? -> Ada Vell"]
        lookup = [[FORM["steps"][0]["query"]]]
        (m,) = match_keys(ctx, lookup, lookup, cfg.options.top_k, cfg.options.floor)
        assert ranked == m.chunks[: len(ranked)] and ranked  # the lookup's chunks, in order
    else:
        assert [s.title for s in c.sections] == [
            "-----Entities-----",
            "-----Relations-----",
            "-----Sources-----",
        ]


def test_a_document_added_with_add_is_found_by_exact_and_fuzzy_keys(tmp_path) -> None:
    """`index --add` of a new document, then dual-level matching of its entity's name finds the
    new entity and the new document's chunk (exact by name, fuzzy by embedding)."""
    from graphrag_engine.cli import main
    from graphrag_engine.retrieve.entity_graph import entity_graph

    out = tmp_path / "idx"
    assert main(["index", "--demo", "--out", str(out)]) == 0
    new = tmp_path / "new.jsonl"
    text = "Orrin Vale is a shepherd on Mount Kesh. Orrin Vale breeds goats with Talia Brenn."
    new.write_text(json.dumps({"id": "new-1", "title": "Orrin Vale", "text": text}) + "\n")
    assert main(["index", str(new), "--out", str(out), "--add"]) == 0
    cfg = query_config("rograg")
    ctx = QueryContext(open_index(out), cfg, tmp_path / "run")
    g = entity_graph(ctx)
    for exact in (True, False):
        (m,) = match_keys(ctx, [["Orrin Vale"]], [["breeds goats"]], 5, 0.4, exact=exact)
        assert "Orrin Vale" in {g.names[e] for e in m.entities}
        assert any(ctx.chunks["passage"][c] == "new-1" for c in m.chunks)


def test_ner_keys_dual_level_alone_needs_no_llm(demo_index, tmp_path) -> None:
    """`configs/methods/rograg_ner.yaml` (NER keys, dual-level only, no check) runs with
    --retrieval-only with no LLM reachable (its backend points at a closed port), every
    question taking the dual-level stage."""
    from graphrag_engine.cli import main

    for match in ("fuzzy", "exact"):
        spec = tmp_path / f"{match}.yaml"
        text = open("configs/methods/rograg_ner.yaml").read()
        text = text.replace("match: fuzzy", f"match: {match}")
        text = text.replace(
            "backend: transformers",
            "backend: openai\n    base_url: http://127.0.0.1:9/v1\n    model: none",
        )
        spec.write_text(text)
        out = tmp_path / match
        args = ["query", str(demo_index), str(demo_questions_path()), "--method", str(spec)]
        assert main([*args, "--retrieval-only", "--out", str(out)]) == 0
        rows = [json.loads(x) for x in (out / "results.jsonl").open()]
        extras = [r["extras"] for r in rows]
        assert {e["stage"] for e in extras} <= {"dual_level", "refused"}
        assert sum(e["stage"] == "dual_level" for e in extras) >= len(rows) // 2
        assert all(
            r["retrieved_ids"]
            for r, e in zip(rows, extras, strict=True)
            if e["stage"] == "dual_level"
        )


def test_result_checking_answers_first_and_keeps_the_answer_it_verified(
    demo_index, tmp_path
) -> None:
    """check: result, two questions: the first one's logic-form answer is verified and kept
    (no second generation), the second moves to dual-level, is answered and verified there;
    each question's answer tokens are counted under result_answer."""
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

    questions = load_questions(demo_questions_path())[:2]
    with FaultInjector([]) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        cfg = query_config("rograg")
        cfg.generation.enabled = False
        cfg.options.check = "result"
        cfg.models.llm.backend = "openai"
        cfg.models.llm.parse_retries = 0
        ctx = QueryContext(open_index(demo_index), cfg, tmp_path, llm_backend=backend)
        said = ["say:" + json.dumps(x) for x in (KEYS, KEYS, FORM, FORM)]
        fault.plan = [*said, "say:Ada Vell", "say:first answer", "say:second answer"]
        fault.plan += ["say:" + json.dumps({"supported": v}) for v in (True, False)]
        fault.plan += ["say:third answer", "say:" + json.dumps({"supported": True})]
        r = rograg(ctx, questions, StageClock())
        assert not fault.plan
    assert [e["stage"] for e in r.extras] == ["logic_form", "dual_level"]
    assert [c.preset_answer for c in r.contexts] == ["first answer", "third answer"]
    assert all(t["result_answer"] > 0 and t["verify"] > 0 for t in r.tokens)


def test_the_verdict_prompt_carries_the_context_cut_like_the_answer_prompt(demo_index) -> None:
    from graphrag_engine.methods.rograg import _verdict_prompt
    from graphrag_engine.retrieve.types import Context, Section

    cfg = query_config("rograg")
    cfg.generation.max_context_tokens = 120
    ctx = QueryContext(open_index(demo_index), cfg, Path("/tmp/rograg-verdict"))
    items = [f"Fact {i}: Ada Vell founded Port Calloway in year {1800 + i}." for i in range(200)]
    prompt = _verdict_prompt(ctx, "Who founded Port Calloway?", Context([Section(items)]), None)
    assert "Fact 0:" in prompt and "Fact 199:" not in prompt
    assert len(ctx.tokenizer.encode(prompt).ids) < 120 + 120  # context budget + the prompt's words
