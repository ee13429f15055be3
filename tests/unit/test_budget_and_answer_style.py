"""The papers' context budgets fitted to the answer window, and the fair answer protocol: which
prompt each method answers with under each style."""

from __future__ import annotations

import pytest

from graphrag_engine.methods import method_spec, query_config
from graphrag_engine.retrieve.answer import answer_style, long_prompt, prompt_for
from graphrag_engine.retrieve.budget import (
    PROMPT_ROOM,
    UNBOUNDED,
    config_budget,
    resolve_budget,
)
from tests.paths import REPO

SHIPPED = sorted(
    [*(REPO / "configs" / "methods").glob("*.yaml"), *(REPO / "configs" / "lego").rglob("*.yaml")]
)
"""Every query config the project ships (the method configs and LEGO's instances)."""


def test_published_budgets_are_the_defaults() -> None:
    assert query_config("lightrag").options.context_budget() == 12_000
    assert query_config("graphrag_local").options.context_budget() == 12_000
    assert query_config("rograg").options.context_budget() == 28_000
    assert query_config("graphrag_global").options.context_budget() == 8_000
    assert query_config("pankrag").options.context_budget() == 12_000
    assert query_config("regraphrag").options.context_budget() == 16_000


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO / "configs")))
def test_every_shipped_config_runs_at_its_papers_budgets_with_a_128k_model(path) -> None:
    """No shipped config pins an answer window: with a model that declares 128k tokens, every
    method runs its paper's section budgets unscaled (a small model's window comes from the
    model, or from the run's own settings: the demo's, a bench's)."""
    from graphrag_engine.methods import load_query_config

    cfg = load_query_config(path)
    assert cfg.generation.max_context_tokens is None, f"{path.name} pins an answer window"
    assert config_budget(cfg, 131_072).scale == 1.0
    if getattr(cfg.options, "context_budget", None):  # and SmolLM2's 2,048 shrinks them
        assert config_budget(cfg, 2048).scale < 1.0
    cfg.models.llm.context_window = 131_072  # declared in the config instead: the same
    assert config_budget(cfg, None).scale == 1.0


def test_budgets_shrink_in_proportion_to_a_smaller_window_and_say_so() -> None:
    b = resolve_budget(12_000, 2048, None, 48, True)
    assert b.scale == pytest.approx(2048 / 12_000) and b.tokens == 2048
    assert "shrink x0.17 to fit an answer window of 2,048 tokens" in b.note("lightrag")
    assert b.as_dict()["scale"] == pytest.approx(0.1707, abs=1e-4)
    # the model's own window, less the answer and the prompt's words
    m = resolve_budget(12_000, None, 8192, 48, True)
    assert m.window == 8192 - 48 - PROMPT_ROOM and "the model's window of 8,192" in m.basis
    # a window that holds the published budgets changes nothing, and says nothing
    big = resolve_budget(12_000, 32_000, None, 48, True)
    assert big.scale == 1.0 and big.note("lightrag") is None
    # unknown window, or retrieval only: unbounded
    for answering, window in ((True, None), (False, 8192)):
        free = resolve_budget(12_000, None, window, 48, answering)
        assert free.scale == 1.0 and free.tokens == UNBOUNDED and free.window is None


def test_answer_style_picks_one_shared_short_prompt_or_each_papers_long_one() -> None:
    assert answer_style("auto", ["passage", "passage"]) == "short"
    assert answer_style("auto", ["abstract", "abstract"]) == "long"
    assert answer_style("auto", ["evidence"]) == "long"
    assert answer_style("auto", ["abstract", "passage"]) == "short"
    assert answer_style("method", ["abstract"]) == "method"
    regraphrag, lightrag, clue = (method_spec(n) for n in ("regraphrag", "lightrag", "clue"))
    local, naive = method_spec("graphrag_local"), method_spec("naive")
    # short: every method the shared instruction, even those that registered their own
    assert all(prompt_for(s, "short") is None for s in (regraphrag, lightrag, clue, local))
    # long: the paper's (or its project's) long-form prompt where it has one, else the shared
    for spec in (regraphrag, lightrag, local):
        assert prompt_for(spec, "long") is spec.answer_prompt is not None
        (system, user) = spec.answer_prompt("Why?", ["row one", "row two"])
        assert "question" in system["content"] and "row two" in user["content"]
    assert prompt_for(naive, "long") is long_prompt
    assert prompt_for(clue, "long") is long_prompt  # its paper prompt asks for a few words
    assert prompt_for(clue, "method") is clue.answer_prompt


def test_long_form_sets_get_an_answer_length_that_fits() -> None:
    """A run whose style resolves to long answers in `long_max_tokens`; short sets keep
    `max_tokens`, the same number for every method."""
    from graphrag_engine.eval.datasets import Question
    from graphrag_engine.query.run import with_answer_style

    cfg = query_config("lightrag")
    long_set = [Question(qid="a", question="How do farms adapt?", kind="abstract")]
    short_set = [Question(qid="b", question="Who founded it?", kind="passage")]
    long_cfg = with_answer_style(cfg, long_set)
    assert long_cfg.generation.answer_style == "long"
    assert long_cfg.generation.max_tokens == cfg.generation.long_max_tokens == 512
    short_cfg = with_answer_style(cfg, short_set)
    assert (short_cfg.generation.answer_style, short_cfg.generation.max_tokens) == ("short", 48)
    cfg.generation.answer_style = "short"  # a short style on a long-form set: short answers
    assert with_answer_style(cfg, long_set).generation.max_tokens == 48
