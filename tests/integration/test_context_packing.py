"""Contexts packed from remembered token counts: on the real demo index, with budgets small
enough to cut every section, each context-building method's contexts equal those packed with
every line counted afresh, batched and one question at a time, and each whole section fits the
budget a fresh count gives it."""

from __future__ import annotations

import pytest

from bench.llm_free import method_config
from graphrag_engine.eval.datasets import demo_questions_path, load_questions
from graphrag_engine.methods import method_spec
from graphrag_engine.retrieve import context as context_module
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index

BUILDERS = ["lightrag_hybrid_ner", "graphrag_local", "regraphrag_no_expansion"]
BUILDERS += ["pankrag_no_path", "rograg_dual_level_ner"]
"""The LLM-free bench configurations of the methods that build their own contexts."""
WINDOW = 300
"""An answer window that shrinks every method's published budgets to a few lines a section."""


@pytest.fixture(scope="module")
def demo(demo_index, tmp_path_factory):
    return open_index(demo_index), load_questions(demo_questions_path())[:10], tmp_path_factory


def _run(index, questions, run_dir, name: str, window: int = WINDOW, single: bool = False):
    """The method's contexts for `questions` in one batch (or one question at a time), and the
    context that counted their tokens."""
    cfg = method_config(name, "cpu")
    cfg.generation.max_context_tokens = window
    ctx = QueryContext(index, cfg, run_dir)
    retrieve = method_spec(cfg.method).retrieve
    if single:
        return [c for q in questions for c in retrieve(ctx, [q], StageClock()).contexts], ctx
    return retrieve(ctx, questions, StageClock()).contexts, ctx


def _items(contexts) -> int:
    return sum(len(s.items) for c in contexts for s in c.sections)


@pytest.mark.parametrize("name", BUILDERS)
def test_remembered_counts_pack_what_fresh_counts_pack(demo, name, monkeypatch) -> None:
    index, questions, tmp = demo
    packed, ctx = _run(index, questions, tmp.mktemp(name), name)
    single, _ = _run(index, questions, tmp.mktemp(name), name, single=True)
    with monkeypatch.context() as m:
        m.setattr(context_module, "TOKEN_COUNTS_KEPT", 0)  # every call counts every text anew
        fresh, _ = _run(index, questions, tmp.mktemp(name), name)
    assert packed == fresh == single
    wide, _ = _run(index, questions, tmp.mktemp(name), name, window=10**6)
    assert _items(packed) < _items(wide), "the small window cut nothing"
    lines = [t for c in packed + wide for s in c.sections for t in s.items]
    assert lines
    remembered = ctx.count_tokens(lines)  # the run's memory holds most of them
    assert remembered == [len(ctx.tokenizer.encode(t).ids) for t in lines]
