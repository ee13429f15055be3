"""Context lines: ranked rows (entities, relations, chunks) rendered only when a budget keeps
them, and cut to token budgets by counts the index stores once.

Every entity line, relation line and titled chunk is fixed by the index, so its token count is
too: it is counted once over the whole index (by the build's last stage,
graphrag_engine/index/line_tokens.py, or by the first query run that opens an index built
without it) and kept under `line_tokens/` beside the index (graphrag_engine/store/beside.py),
named by the sha256 of the tokenizer and of the lines themselves, so a changed line format or table is
counted again, never read stale. A budget then adds stored numbers instead of tokenizing, and
renders only the lines it keeps. Lines without stored counts (a read-only index folder never
counted, per-question lines) are counted through `QueryContext.count_tokens`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, overload

import numpy as np

from graphrag_engine.models.tokenizer import count_lines, counts_add_at_spaces
from graphrag_engine.retrieve.context import TOKEN_COUNTS_KEPT, QueryContext
from graphrag_engine.retrieve.entity_graph import entity_graph
from graphrag_engine.retrieve.types import Section
from graphrag_engine.store.beside import (
    line_tokens_path,
    read_line_tokens,
    save_line_tokens,
    writable,
)

MAX_BLOCK = 256
"""The most lines a budget counts in one call while it reads a ranked list."""


class Lines(Sequence[str]):
    """The context lines of ranked rows (entities, relations, chunks), each built when it is
    read: a budget reads only the leading lines it keeps, not one line per row found."""

    def __init__(
        self,
        rows: Sequence[Any],
        render: Callable[[Any], str],
        counts: np.ndarray | Callable[[Sequence[Any]], Sequence[int]] | None = None,
    ) -> None:
        """`render(row)` is a row's line; its tokens are `counts[row]` where they are stored,
        `counts(rows)` where they are derived from known parts, else counted when read."""
        self.rows, self.render, self.counts = rows, render, counts

    def __len__(self) -> int:
        """How many rows there are."""
        return len(self.rows)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        """A row's line, or the lines of a slice of rows."""
        if isinstance(i, slice):
            return [self.render(r) for r in self.rows[i]]
        return self.render(self.rows[i])

    def take(self, positions: Sequence[int] | np.ndarray) -> list[str]:
        """The lines at several positions, in their order (their rows gathered at once)."""
        rows = np.asarray(self.rows)[np.asarray(positions, dtype=np.int64)]
        return [self.render(r) for r in rows.tolist()]

    def head(self, n: int) -> Lines:
        """The first `n` lines."""
        return Lines(self.rows[:n], self.render, self.counts)

    @property
    def stored(self) -> bool:
        """Whether every line's tokens are stored (an array indexed by row)."""
        return isinstance(self.counts, np.ndarray)

    def fitting(self, budget: int) -> int:
        """How many leading lines sum to at most `budget` tokens, from the stored counts."""
        if not len(self.rows):
            return 0
        used = np.cumsum(self.counts[np.asarray(self.rows, dtype=np.int64)])
        return int(np.searchsorted(used, budget, side="right"))


def within_budget(
    ctx: QueryContext, texts: Sequence[str], budget: int, block: int = 16
) -> list[str]:
    """The leading texts whose token counts sum to at most `budget` (LightRAG's truncation of
    a ranked list by token size)."""
    return list(texts[: fitting(ctx, texts, budget, block)])


def fitting(ctx: QueryContext, texts: Sequence[str], budget: int, block: int = 16) -> int:
    """How many leading texts sum to at most `budget` tokens: from stored counts where the
    lines carry them, else read and counted a block at a time, only as far as needed (counts
    of texts seen before come from the context's memory). Each block is twice the one before,
    up to MAX_BLOCK, so a long list that fits costs a few calls, and at most about as many
    texts as kept are counted past the budget."""
    if isinstance(texts, Lines) and texts.stored:
        return texts.fitting(budget)
    count, items = _counter(ctx, texts)
    kept = used = start = 0
    while start < len(items):
        for n in count(items[start : start + block]):
            if used + n > budget:
                return kept
            kept += 1
            used += n
        start += block
        block = min(2 * block, MAX_BLOCK)
    return kept


def leading_tokens(ctx: QueryContext, lines: Sequence[str], n: int) -> int:
    """Tokens of the first `n` lines (from stored counts where the lines carry them)."""
    if isinstance(lines, Lines) and lines.stored:
        return int(lines.counts[np.asarray(lines.rows[:n], dtype=np.int64)].sum())
    count, items = _counter(ctx, lines)
    return int(sum(count(items[:n])))


def _counter(
    ctx: QueryContext, texts: Sequence[str]
) -> tuple[Callable[[Sequence[Any]], Sequence[int]], Sequence[Any]]:
    """How a block of `texts` is counted, and what the blocks are cut from: the lines' own
    count of their rows where they derive one, else the context's count of the texts."""
    if isinstance(texts, Lines) and texts.counts is not None:
        return texts.counts, texts.rows
    return (lambda part: ctx.count_tokens(list(part))), texts


def prefixed_lines(
    ctx: QueryContext,
    kind: str,
    prefix: str,
    rows: Sequence[Any],
    body: Callable[[Any], str],
    key: Callable[[Any], Hashable],
    stored: Callable[[Sequence[Any]], np.ndarray] | None = None,
) -> Lines:
    """Lines `prefix + " " + body(row)`: a section's fixed prefix (a perspective, a query) and
    a body that recurs across questions. Where the tokenizer's counts add at spaces, every
    line's tokens are known at once, as the prefix's plus its body's (less one encode's special
    tokens): a body's from `stored(rows)` (a whole encode's count for each row, -1 where none is
    stored), else counted once a run and remembered under `kind` by `key(row)`; so a budget
    renders only the lines it keeps. Otherwise each line is counted whole as a budget reads it."""

    def render(at: int) -> str:
        return f"{prefix} {body(rows[at])}"

    positions = np.arange(len(rows))
    if not ctx.memo("counts_add_at_spaces", lambda: counts_add_at_spaces(ctx.tokenizer)):
        return Lines(positions, render)
    empty, head = ctx.count_tokens(["", prefix])
    bodies = np.full(len(rows), -1, np.int64)
    if stored is not None and len(rows):
        bodies[:] = stored(rows)
    missing = np.flatnonzero(bodies < 0).tolist()
    if missing:
        known: dict[Hashable, int] = ctx.memo(("body_tokens", kind), dict)
        keys = [key(rows[at]) for at in missing]
        new = {k: at for k, at in zip(keys, missing, strict=True) if k not in known}
        if new:
            if len(known) + len(new) > TOKEN_COUNTS_KEPT:  # a bound on memory in a long run
                known.clear()
                new = dict(zip(keys, missing, strict=True))
            found = ctx.count_tokens([body(rows[at]) for at in new.values()])
            known.update(zip(new, found, strict=True))
        bodies[missing] = [known[k] for k in keys]
    return Lines(positions, render, head + bodies - empty)


def budgeted_sections(
    ctx: QueryContext, parts: list[tuple[str, Sequence[str], float]]
) -> list[Section]:
    """(title, ranked lines, token budget) -> whole sections cut to their budgets; an empty
    one is left out."""
    kept = (
        budgeted_section(ctx, lines, budget, f"-----{title}-----") for title, lines, budget in parts
    )
    return [s for s in kept if s is not None]


def budgeted_section(
    ctx: QueryContext, lines: Sequence[str], budget: float, title: str
) -> Section | None:
    """The leading lines that fit `budget` tokens as one whole titled section, with the token
    counts the budget read (so the answer stage does not count them again); None if none fit."""
    n = fitting(ctx, lines, int(budget))
    if not n:
        return None
    if isinstance(lines, Lines) and lines.stored:
        counts = lines.counts[np.asarray(lines.rows[:n], dtype=np.int64)].tolist()
    else:
        count, items = _counter(ctx, lines)
        counts = [int(c) for c in count(items[:n])]
    return Section(list(lines[:n]), title=title, whole=True, counts=counts)


# -- the index's lines and their stored counts ---------------------------------------------------
def entity_lines(ctx: QueryContext, rows: Sequence[int]) -> Lines:
    """Entity rows as context lines (name, type, description)."""
    g = entity_graph(ctx)
    return Lines(rows, g.entity_line, line_tokens(ctx, "entities"))


def relation_lines(ctx: QueryContext, rows: Sequence[int]) -> Lines:
    """Relation rows as context lines (ends, description, keywords)."""
    g = entity_graph(ctx)
    return Lines(rows, g.relation_line, line_tokens(ctx, "relations"))


def chunk_lines(ctx: QueryContext, rows: Sequence[int]) -> Lines:
    """Chunk rows as context lines ("title\\ntext")."""
    return Lines(rows, ctx.chunks["titled"].__getitem__, line_tokens(ctx, "chunks"))


def _all_lines(ctx: QueryContext, kind: str) -> list[str]:
    """Every line of `kind` in the index, in row order."""
    if kind == "chunks":
        return ctx.chunks["titled"]
    g = entity_graph(ctx)
    if kind == "entities":
        return [g.entity_line(e) for e in range(len(g.names))]
    return [g.relation_line(r) for r in range(len(g.src))]


def line_tokens(
    ctx: QueryContext, kind: str, every: Callable[[], list[str]] | None = None
) -> np.ndarray | None:
    """Tokens of every line of `kind` (entities, relations, chunks, or a method's own kind
    whose lines `every()` gives) in row order, read from beside the index or counted once and
    kept there; None where the folder is read-only and holds none (lines are then counted as
    budgets read them)."""
    return ctx.memo(("line_tokens", kind), lambda: _stored_counts(ctx, kind, every))


def line_token_counts(
    ctx: QueryContext,
    kind: str,
    lines: Sequence[str],
    every: Callable[[], list[str]] | None = None,
) -> np.ndarray:
    """Tokens of each of `lines` (every line of `kind`, in row order): the stored counts of
    `line_tokens`, else counted now."""
    stored = line_tokens(ctx, kind, every)
    return np.asarray(stored if stored is not None else ctx.count_tokens(list(lines)), np.int64)


def _stored_counts(
    ctx: QueryContext, kind: str, every: Callable[[], list[str]] | None
) -> np.ndarray | None:
    lines = every() if every is not None else _all_lines(ctx, kind)
    path = line_tokens_path(ctx.index.root, kind, ctx.tokenizer.to_str(), lines)
    counts = read_line_tokens(path, len(lines))
    if counts is not None:
        return counts
    if not writable(ctx.index.root):
        return None
    counts = count_lines(ctx.tokenizer, lines, kind)
    save_line_tokens(path, counts)
    return counts
