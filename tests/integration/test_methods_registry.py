"""The method registry and the answer stage's seams: every method is reachable by name with its (the part that needs models, servers or real data)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import METHODS, query_config
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.query.run import run_query
from graphrag_engine.retrieve.types import Context, Retrieved, Section
from graphrag_engine.store import open_index


@dataclass
class _EchoConfig:
    """A test method's own section."""

    refuse: str = "comparison"
    """Questions of this type get a preset refusal."""


def _echo(ctx, questions, clock) -> Retrieved:
    """Two sections per question: a whole one that does not fit the budget after the first,
    and a cuttable one; questions of the configured kind are refused without the LLM."""
    contexts = []
    for q in questions:
        if q.qtype == ctx.cfg.options.refuse:
            contexts.append(Context(preset_answer="I cannot answer that."))
            continue
        first = Section([f"Fact about {q.question}"], title="[Across all]")
        whole = Section(["x " * 200, "y " * 200], title="[Perspective 1]", whole=True)
        contexts.append(Context([first, whole]))
    r = Retrieved.empty(len(questions), clock.seconds)
    r.contexts = contexts
    return r


def test_a_registered_method_runs_end_to_end_with_preset_answers(demo_index, smollm, tmp_path):
    register("test_echo", config=_EchoConfig, paper="test", needs={Part.CHUNKS})(_echo)
    try:
        cfg = query_config("test_echo")
        cfg.models.llm.backend = "transformers"
        cfg.generation.max_tokens = 8
        cfg.generation.max_context_tokens = 150
        questions = load_questions(questions_path())[28:34]
        refused = [q.qtype == "comparison" for q in questions]
        assert any(refused) and not all(refused)
        summary = run_query(
            open_index(demo_index), questions, cfg, tmp_path / "run", "demo", llm_backend=smollm
        )
        rows = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").open()]
        for row, was_refused in zip(rows, refused, strict=True):
            if was_refused:
                assert row["answer"] == "I cannot answer that." and row["context_text"] == []
                assert "answer_prompt" not in row["tokens"]
            else:  # the whole section (about 400 tokens) does not fit 150: dropped entire
                assert row["context_text"] == [f"[Across all]\nFact about {row['question']}"]
                assert row["tokens"]["answer_prompt"] > 0
        calls = sum(u["calls"] + u["cached_calls"] for u in summary["llm"].values())
        assert calls == sum(not r for r in refused)
    finally:
        METHODS.pop("test_echo", None)
