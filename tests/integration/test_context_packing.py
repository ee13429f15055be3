"""Contexts packed from stored and remembered token counts: on the real demo corpus indexed with
communities, extractive reports and both trees, with budgets small enough to cut every section,
each context-building method's contexts (entity and relation lines, chunks, reports, LEGO's
paths, tree nodes) equal those packed with every line counted afresh, batched and one question
at a time; the answer stage's fit of each equals a reference packer written here from the rule
(items cut from a section's end, a whole section kept or dropped) that counts every string with
the tokenizer itself. The counts the build stores beside the index are the tokenizer's, and
are read, counted again or left alone as their folder allows."""

from __future__ import annotations

import os
import shutil

import pytest

from bench.llm_free import method_config
from bench.text_graph import TREE_RUNS
from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import method_spec, query_config
from graphrag_engine.retrieve import context as context_module
from graphrag_engine.retrieve import lines as lines_module
from graphrag_engine.retrieve.answer import fit_context
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import Context, Section, StageClock
from graphrag_engine.store import open_index

BUILDERS = ["lightrag_hybrid_ner", "graphrag_local", "regraphrag_no_expansion"]
BUILDERS += ["pankrag_no_path", "rograg_dual_level_ner", "lego_index"]
BUILDERS += ["raptor", "raptor_traversal", "sirerag", "ketrag"]
"""The LLM-free bench configurations of the methods that build their own contexts."""
TOP_K_ONLY = {"sirerag", "lego_index"}
"""Builders that take a number of items, not a budget (the answer stage cuts their contexts)."""
WINDOW = 300
"""An answer window that shrinks every method's published budgets to a few lines a section."""


@pytest.fixture(scope="module")
def demo(demo_reports_index, tmp_path_factory):
    """The session's demo index with communities, extractive reports (so local search and
    PankRAG read reports) and both trees."""
    return open_index(demo_reports_index), load_questions(questions_path())[:10], tmp_path_factory


def _reference_fit(context: Context, budget: int, tokenizer) -> list[list[str]]:
    """The answer stage's rule, written out: sections in order, every string counted by the
    tokenizer (a title with its section's first item); a whole section is kept when it fits (or
    is first), else dropped with all after it; another loses items from its end and ends the
    context there; the first item always stays."""
    out: list[list[str]] = []
    used = 0
    for section in context.sections:
        counts = [len(tokenizer.encode(t).ids) for t in section.items]
        if section.title and counts:
            counts[0] += len(tokenizer.encode(section.title).ids)
        if section.whole:
            if out and used + sum(counts) > budget:
                break
            out.append(list(section.items))
            used += sum(counts)
            continue
        kept = []
        for text, n in zip(section.items, counts, strict=True):
            if (out or kept) and used + n > budget:
                break
            kept.append(text)
            used += n
        if kept:
            out.append(kept)
        if len(kept) < len(section.items):
            break
    return out


def _run(index, questions, run_dir, name: str, window: int = WINDOW, single: bool = False):
    """The method's contexts for `questions` in one batch (or one question at a time), and the
    context that counted their tokens."""
    cfg = _config(name)
    cfg.generation.max_context_tokens = window
    ctx = QueryContext(index, cfg, run_dir)
    retrieve = method_spec(cfg.method).retrieve
    if single:
        return [c for q in questions for c in retrieve(ctx, [q], StageClock()).contexts], ctx
    return retrieve(ctx, questions, StageClock()).contexts, ctx


def _config(name: str):
    """The bench's LLM-free config of `name` (a tree run: the tree bench's settings)."""
    if name not in TREE_RUNS:
        return method_config(name, "cpu")
    method, settings = TREE_RUNS[name]
    cfg = query_config(method)
    for key, value in settings.items():
        setattr(cfg.options, key, value)
    cfg.generation.enabled = False
    return cfg


def _items(contexts) -> int:
    return sum(len(s.items) for c in contexts for s in c.sections)


@pytest.mark.parametrize("name", BUILDERS)
def test_remembered_counts_pack_what_fresh_counts_pack(demo, name, monkeypatch) -> None:
    index, questions, tmp = demo
    packed, ctx = _run(index, questions, tmp.mktemp(name), name)
    single, _ = _run(index, questions, tmp.mktemp(name), name, single=True)
    with monkeypatch.context() as m:
        m.setattr(context_module, "TOKEN_COUNTS_KEPT", 0)  # every call counts every text anew
        m.setattr(
            lines_module, "line_tokens", lambda ctx, kind, every=None: None
        )  # no stored counts,
        m.setattr(lines_module, "counts_add_at_spaces", lambda tok: False)  # nor derived ones
        fresh, _ = _run(index, questions, tmp.mktemp(name), name)
    assert packed == fresh == single
    wide, _ = _run(index, questions, tmp.mktemp(name), name, window=10**6)
    if name not in TOP_K_ONLY:
        assert _items(packed) < _items(wide), "the small window cut nothing"
    lines = [t for c in packed + wide for s in c.sections for t in s.items]
    assert lines
    remembered = ctx.count_tokens(lines)  # the run's memory holds most of them
    assert remembered == [len(ctx.tokenizer.encode(t).ids) for t in lines]
    carried = [
        (t, n)
        for c in packed
        for s in c.sections
        if s.counts is not None
        for t, n in zip(s.items, s.counts, strict=True)
    ]
    assert carried or name in TOP_K_ONLY, "no section carried the counts its budget read"
    assert [n for _, n in carried] == [len(ctx.tokenizer.encode(t).ids) for t, _ in carried]
    slow = ctx.tokenizer

    def recount(texts: list[str]) -> list[int]:
        return [len(slow.encode(t).ids) for t in texts]

    for budget in (40, 120, 400):  # the answer stage fits alike from carried counts or afresh
        for c in packed + wide:
            bare = Context([Section(s.items, s.title, s.whole) for s in c.sections])
            fitted = fit_context(c, ctx.count_tokens, budget)
            assert fitted == fit_context(bare, recount, budget)
            assert [s.items for s in fitted.sections] == _reference_fit(c, budget, slow)


def test_the_build_stores_each_lines_tokenizer_count(demo, monkeypatch) -> None:
    index, _, tmp = demo
    stored = {p.name.split("-")[0] for p in (index.root / "line_tokens").glob("*.npy")}
    assert {"chunks", "entities", "relations"} <= stored  # and a method's own, once it ran
    ctx = QueryContext(index, method_config("lightrag_hybrid_ner", "cpu"), tmp.mktemp("counts"))
    counted = 0

    def count_lines(*args, **kwargs):
        nonlocal counted
        counted += 1
        return real(*args, **kwargs)

    real = lines_module.count_lines
    monkeypatch.setattr(lines_module, "count_lines", count_lines)
    for kind in ("chunks", "entities", "relations"):
        texts = lines_module._all_lines(ctx, kind)
        counts = lines_module.line_tokens(ctx, kind)
        assert counts.tolist() == [len(ctx.tokenizer.encode(t).ids) for t in texts]
    assert counted == 0, "a query run counted what the build stored"


def test_stored_counts_follow_their_lines_and_their_folder(
    demo_index_copy, tmp_path, monkeypatch
) -> None:
    index = open_index(demo_index_copy)
    folder = demo_index_copy / "line_tokens"
    cfg = method_config("lightrag_hybrid_ner", "cpu")
    first = QueryContext(index, cfg, tmp_path / "a")
    original = lines_module.line_tokens(first, "entities").copy()
    (path,) = folder.glob("entities-*.npy")
    path.write_bytes(b"damaged")  # counted again and replaced
    again = QueryContext(index, cfg, tmp_path / "b")
    assert lines_module.line_tokens(again, "entities").tolist() == original.tolist()
    assert [p.name for p in folder.glob("entities-*.npy")] == [path.name]
    changed = QueryContext(index, cfg, tmp_path / "c")
    g = lines_module.entity_graph(changed)
    g.descriptions[0] += " and a sentence more"  # a changed line is another content: recounted
    counts = lines_module.line_tokens(changed, "entities")
    assert counts[0] > original[0] and counts[1:].tolist() == original[1:].tolist()
    assert [p.name for p in folder.glob("entities-*.npy")] != [path.name]
    shutil.rmtree(folder)
    writable = os.access  # read-only (as root may write anyway) and never counted:
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK and writable(p, mode))
    readonly = QueryContext(index, cfg, tmp_path / "d")
    assert lines_module.line_tokens(readonly, "entities") is None  # lines counted as read
    assert not folder.exists()
