"""ROGRAG on the demo index with a fault-injection server (named as such: it says planted
answers) standing in for the LLM: the stage chain moves on when the verifier says no, and a
question no stage supports gets the preset refusal without a generation call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.rograg import rograg
from graphrag_engine.methods.rograg.dual_level import match_keys
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.linking import query_mentions
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index
from tests.fault_server import FaultInjector

KEYS = {"low_level_keywords": ["Port Calloway"], "high_level_keywords": ["founded"]}
FACT = "say:" + json.dumps({"intent": "fact", "domain": "local history"})
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

    question = load_questions(questions_path())[:1]
    with FaultInjector([]) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        cfg = query_config("rograg")
        cfg.generation.enabled = False
        cfg.models.llm.backend = "openai"
        cfg.models.llm.parse_retries = 0
        ctx = QueryContext(open_index(demo_index), cfg, tmp_path, llm_backend=backend)
        fault.plan = [FACT, "say:" + json.dumps(KEYS), "say:" + json.dumps(FORM), "say:Ada Vell"]
        fault.plan += ["say:" + json.dumps({"supported": v}) for v in verdicts]
        r = rograg(ctx, question, StageClock())
        assert not fault.plan  # every planted answer was asked for, no more
    e, c = r.extras[0], r.contexts[0]
    assert e["stage"] == stage and e["logic_form"] == ["retrieve"]
    assert e["intent"] == "fact" and e["domain"] == "local history"
    assert r.tokens[0]["logic_step"] > 0 and r.tokens[0]["verify"] > 0
    ranked = [int(i) for i in r.ranking.ids[0] if i >= 0]
    if stage == "refused":
        assert c.preset_answer == cfg.options.refusal and not c.sections
        assert ranked == []  # nothing retrieved reaches a refused question
    elif stage == "logic_form":
        assert c.sections[0].items == ["Who founded Port Calloway? -> Ada Vell"]
        lookup = [[FORM["steps"][0]["query"]]]
        (m,) = match_keys(ctx, lookup, lookup, cfg.options.top_ks(), cfg.options.floor)
        # Algorithm 1 chose some of the lookup's passages: they lead the ranking and are the
        # context's sources; the rest of the lookup's chunks follow in their order
        sources = c.sections[1]
        assert sources.title == "-----Sources-----" and 1 <= len(sources.items) <= 8
        titled = ctx.chunks["titled"]
        assert [titled[k] for k in ranked[: len(sources.items)]] == sources.items
        rest = [k for k in m.chunks if k not in ranked[: len(sources.items)]]
        assert ranked[len(sources.items) :] == rest[: len(ranked) - len(sources.items)]
    else:
        assert [s.title for s in c.sections] == [
            "-----Entities-----",
            "-----Relations-----",
            "-----Sources-----",
        ]


def test_a_document_added_with_add_is_found_by_exact_and_fuzzy_keys(
    tmp_path, demo_index_copy
) -> None:
    """`index --add` of a new document, then dual-level matching of its entity's name finds the
    new entity and the new document's chunk (exact by name, fuzzy by embedding)."""
    from graphrag_engine.cli import main
    from graphrag_engine.retrieve.entity_graph import entity_graph

    out = demo_index_copy
    new = tmp_path / "new.jsonl"
    text = "Orrin Vale is a shepherd on Mount Kesh. Orrin Vale breeds goats with Talia Brenn."
    new.write_text(json.dumps({"id": "new-1", "title": "Orrin Vale", "text": text}) + "\n")
    assert main(["index", str(new), "--out", str(out), "--add"]) == 0
    cfg = query_config("rograg")
    ctx = QueryContext(open_index(out), cfg, tmp_path / "run")
    g = entity_graph(ctx)
    for match in ("name", "exact", "fuzzy"):
        (m,) = match_keys(ctx, [["Orrin Vale"]], [["breeds goats"]], (5, 5), 0.4, match)
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
        args = ["query", str(demo_index), str(questions_path()), "--method", str(spec)]
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

    questions = load_questions(questions_path())[:2]
    with FaultInjector([]) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        cfg = query_config("rograg")
        cfg.generation.enabled = False
        cfg.options.check = "result"
        cfg.models.llm.backend = "openai"
        cfg.models.llm.parse_retries = 0
        ctx = QueryContext(open_index(demo_index), cfg, tmp_path, llm_backend=backend)
        said = [FACT, FACT, *("say:" + json.dumps(x) for x in (KEYS, KEYS, FORM, FORM))]
        fault.plan = [*said, "say:Ada Vell", "say:first answer", "say:second answer"]
        fault.plan += ["say:" + json.dumps({"supported": v}) for v in (True, False)]
        fault.plan += ["say:third answer", "say:" + json.dumps({"supported": True})]
        r = rograg(ctx, questions, StageClock())
        assert not fault.plan
    assert [e["stage"] for e in r.extras] == ["logic_form", "dual_level"]
    assert [c.preset_answer for c in r.contexts] == ["first answer", "third answer"]
    assert all(t["result_answer"] > 0 and t["verify"] > 0 for t in r.tokens)


def test_the_verdict_prompt_carries_the_context_cut_like_the_answer_prompt(demo_index) -> None:
    from graphrag_engine.methods.rograg.verify import context_verdict_prompt
    from graphrag_engine.retrieve.types import Context, Section

    cfg = query_config("rograg")
    cfg.generation.max_context_tokens = 120
    ctx = QueryContext(open_index(demo_index), cfg, Path("/tmp/rograg-verdict"))
    items = [f"Fact {i}: Ada Vell founded Port Calloway in year {1800 + i}." for i in range(200)]
    prompt = context_verdict_prompt(
        ctx, cfg.options.check, "Who founded Port Calloway?", Context([Section(items)]), None
    )
    assert "Fact 0:" in prompt and "Fact 199:" not in prompt
    assert len(ctx.tokenizer.encode(prompt).ids) < 120 + 120  # context budget + the prompt's words


def test_analysis_refuses_a_message_that_asks_nothing_and_keeps_a_failed_one(
    demo_index, tmp_path
) -> None:
    """Question analysis (Figure 2) through the fault server: the first message is read as
    not a question and refused with no other call; the second's analysis never validates, is
    recorded, and that question runs the chain (dual-level only, no verdicts)."""
    from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

    questions = load_questions(questions_path())[:2]
    with FaultInjector([]) as fault:
        backend = OpenAICompatLLM("fault", HTTPSettings(base_url=fault.url, concurrency=1))
        cfg = query_config("rograg")
        cfg.generation.enabled = False
        cfg.options.stages, cfg.options.check = ["dual_level"], "none"
        cfg.models.llm.backend = "openai"
        cfg.models.llm.parse_retries = 0
        cfg.models.llm.max_failed_share = 1.0
        ctx = QueryContext(open_index(demo_index), cfg, tmp_path, llm_backend=backend)
        chat = "say:" + json.dumps({"intent": "not_a_question", "domain": "chat"})
        fault.plan = [chat, "say:no json", "say:" + json.dumps(KEYS)]
        r = rograg(ctx, questions, StageClock())
        assert not fault.plan and len(fault.requests) == 3  # one keys call: the second question
    first, second = r.extras
    assert first == {"stage": "refused", "intent": "not_a_question", "domain": "chat"}
    assert r.contexts[0].preset_answer == cfg.options.refusal and not r.contexts[0].sections
    assert [int(i) for i in r.ranking.ids[0] if i >= 0] == []
    assert second["intent"] is None and second["stage"] == "dual_level"
    keys = KEYS["low_level_keywords"]  # then the question's named entities (expand_low_keys)
    assert second["low_keys"][: len(keys)] == keys and len(second["low_keys"]) > len(keys)
    assert second["low_keys"][len(keys) :] == [
        k for k in query_mentions(ctx, [questions[1].question])[0] if k not in keys
    ]
    assert ctx.llm.ledger.get("rograg_analysis", backend.model_id).parse_failures == 1
    assert r.tokens[0]["rograg_analysis"] > 0 and "keys" not in r.tokens[0]


def test_fuzzy_matching_embeds_a_levels_keys_as_one_query(demo_index, tmp_path) -> None:
    """Table 5's two matchings: fuzzy finds the top-k of the joined keys' one vector, exact
    the union of each key's own top-k; with two keys about different things they differ."""
    from graphrag_engine.retrieve.entity_graph import search

    cfg = query_config("rograg")
    ctx = QueryContext(open_index(demo_index), cfg, tmp_path)
    low = [["Port Calloway", "Ada Vell"]]
    (fuzzy,) = match_keys(ctx, low, [[]], (3, 3), -1.0, "fuzzy")
    (exact,) = match_keys(ctx, low, [[]], (3, 3), -1.0, "exact")
    joined, _ = search(ctx, ["Port Calloway; Ada Vell"], "entity_vectors", 3)
    each, _ = search(ctx, low[0], "entity_vectors", 3)
    assert fuzzy.entities[:3] == [int(e) for e in joined[0] if e >= 0]
    assert exact.entities[: len({int(e) for e in each.ravel()})] == list(
        dict.fromkeys(int(e) for e in each.ravel() if e >= 0)
    )
    assert set(fuzzy.entities[:3]) != set(exact.entities[:6])


def test_matching_runs_at_the_authors_settings(demo_index, tmp_path) -> None:
    """By default a low-level key finds at most 6 entities and a high-level key at most 5
    relations, each at cosine 0.2 or more (the authors' public code), exactly the ones a
    brute-force cosine over the index's vectors ranks first; the entities' relations then
    join the matched relations. The question's named entities join the low-level keys
    (Figure 1 e)."""
    import numpy as np

    from graphrag_engine.retrieve.entity_graph import entity_graph

    cfg = query_config("rograg")
    assert cfg.options.top_ks() == (6, 5) and cfg.options.floor == 0.2
    assert cfg.options.expand_low_keys
    ctx = QueryContext(open_index(demo_index), cfg, tmp_path)
    low, high = [["Port Calloway"]], [["founded a harbour town"]]
    (m,) = match_keys(ctx, low, high, cfg.options.top_ks(), cfg.options.floor, "exact")
    hits = {}
    for key, table, k in ((low[0][0], "entity_vectors", 6), (high[0][0], "relation_vectors", 5)):
        cos = ctx.vectors(table) @ ctx.encode_queries([key])[0]
        hits[table] = [int(i) for i in np.argsort(-cos, kind="stable")[:k] if cos[i] >= 0.2]
        assert 0 < len(hits[table]) <= k, table
    assert m.entities[: len(hits["entity_vectors"])] == hits["entity_vectors"]
    assert m.relations[: len(hits["relation_vectors"])] == hits["relation_vectors"]
    g = entity_graph(ctx)
    linked = {r for e in hits["entity_vectors"] for r in g.relations_of(e).tolist()}
    assert linked <= set(m.relations)


def test_a_supported_logic_form_is_answered_end_to_end(demo_index, tmp_path) -> None:
    """`graphrag-engine query` with ROGRAG against the fault server: analysis, keys, a parsed
    logic form, its step's answer and a supported verdict, then the answer prompt, which
    carries the logic form's reasoning and its selected passages; the answer is written."""
    from graphrag_engine.cli import main
    from graphrag_engine.results import read_rows

    with FaultInjector([]) as fault:
        spec = tmp_path / "rograg.yaml"
        spec.write_text(
            "method: rograg\nmodels:\n  llm:\n    backend: openai\n    model: fault\n"
            f"    base_url: {fault.url}\n    concurrency: 1\n    parse_retries: 0\n"
        )
        fault.plan = [FACT, "say:" + json.dumps(KEYS), "say:" + json.dumps(FORM)]
        fault.plan += ["say:Ada Vell", "say:" + json.dumps({"supported": True}), "say:Ada Vell."]
        out = tmp_path / "run"
        args = ["query", str(demo_index), str(questions_path()), "--method", str(spec)]
        assert main([*args, "--limit", "1", "--out", str(out)]) == 0
        answer_prompt = fault.requests[-1]["body"]["messages"][-1]["content"]
        assert not fault.plan
    (row,) = read_rows(out / "results.parquet")
    assert row["answer"] == "Ada Vell." and row["extras"]["stage"] == "logic_form"
    assert "Who founded Port Calloway? -> Ada Vell" in answer_prompt
    assert "-----Sources-----" in answer_prompt
