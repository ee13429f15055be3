"""The method registry and the answer stage's seams: every method is reachable by name with its
own config section, a method registered from outside the engine runs end to end without
touching anything central, preset answers skip generation, and whole sections are never cut."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from graphrag_engine.errors import ConfigError
from graphrag_engine.eval.datasets import demo_questions_path, load_questions
from graphrag_engine.methods import METHODS, load_query_config, method_names, query_config
from graphrag_engine.methods.base import register
from graphrag_engine.methods.run import run_query
from graphrag_engine.retrieve.types import Context, Retrieved, Section
from graphrag_engine.store import open_index

BUILT_IN = {"none", "naive", "bm25", "hyde", "hipporag", "clue", "lego"}


def test_every_built_in_method_is_registered_and_listed(run_cli) -> None:
    assert BUILT_IN <= set(method_names())
    res = run_cli("methods")
    assert res.returncode == 0
    listed = {line.split()[0] for line in res.stdout.splitlines()}
    assert listed == set(method_names())
    help_text = run_cli("query", "--help").stdout
    assert all(name in help_text for name in BUILT_IN)
    bad = run_cli("query", "none", "demo", "--method", "nope", "--out", "/tmp/never")
    assert bad.returncode == 2 and "lego" in bad.stderr and "hipporag" in bad.stderr


def test_a_method_section_is_its_own_config(tmp_path) -> None:
    off = "generation:\n  enabled: false\n"
    assert query_config("clue").options.depth == 3 and query_config("bm25").options is None
    own = tmp_path / "ok.yaml"
    own.write_text("method: clue\nclue:\n  depth: 2\n" + off)
    assert load_query_config(own).options.depth == 2
    other = tmp_path / "other.yaml"
    other.write_text("method: lego\nclue:\n  depth: 2\n")
    with pytest.raises(ConfigError, match=r"other.yaml:2: unknown key 'clue'"):
        load_query_config(other)
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: clue\nclue:\n  depth: 0\n" + off)
    with pytest.raises(ConfigError, match="clue.anchor_k, depth"):
        load_query_config(bad)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("retrieval:\n  top_k: 3\nmethod: nope\n")
    with pytest.raises(ConfigError, match=r"unknown.yaml:3: unknown method 'nope'"):
        load_query_config(unknown)


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
    register("test_echo", config=_EchoConfig, paper="test", needs="nothing")(_echo)
    try:
        cfg = query_config("test_echo")
        cfg.models.llm.backend = "transformers"
        cfg.generation.max_tokens = 8
        cfg.generation.max_context_tokens = 150
        questions = load_questions(demo_questions_path())[28:34]
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


def test_every_shipped_query_config_loads() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "configs"
    files = sorted([*root.glob("methods/*.yaml"), *root.glob("lego/**/*.yaml")])
    assert len(files) >= 45
    for f in files:
        cfg = load_query_config(f)
        assert cfg.method in METHODS, f
        spec = METHODS[cfg.method]
        assert (cfg.options is None) == (spec.config is None), f
