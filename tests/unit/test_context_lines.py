"""Budgets read lazily built context lines: the same lines kept as from a built list, and only
the lines up to the first one that does not fit are ever built."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_engine.retrieve.lines import Lines, leading_tokens, within_budget


class WordCounts:
    """A context whose token counts are word counts, recording every text it was asked about."""

    def __init__(self) -> None:
        self.counted: list[str] = []

    def count_tokens(self, texts: list[str]) -> list[int]:
        self.counted.extend(texts)
        return [len(t.split()) for t in texts]


def render(row: int) -> str:
    return " ".join(["w"] * (1 + row % 4)) + f" row{row}"


@pytest.mark.parametrize("budget", [0, 1, 7, 40, 10**6])
def test_lazy_lines_keep_what_a_built_list_keeps(budget: int) -> None:
    rows = [5, 2, 9, 0, 11, 3] * 7
    built = [render(r) for r in rows]
    ctx = WordCounts()
    assert within_budget(ctx, Lines(rows, render), budget, block=4) == within_budget(
        WordCounts(), built, budget, block=4
    )
    kept = within_budget(WordCounts(), built, budget, block=4)
    assert len(ctx.counted) <= min(len(rows), 4 * (len(kept) // 4 + 1))  # a block past the last


def test_lines_index_and_slice_like_a_list() -> None:
    rows = [3, 1, 4, 1, 5]
    lines = Lines(rows, render)
    built = [render(r) for r in rows]
    assert len(lines) == 5 and lines[2] == built[2] and lines[-1] == built[-1]
    assert lines[1:4] == built[1:4] and lines[3:] == built[3:] and lines[9:] == []


@pytest.mark.parametrize("budget", [0, 1, 7, 40, 10**6])
def test_stored_counts_keep_what_counting_keeps_and_render_only_that(budget: int) -> None:
    rows = [5, 2, 9, 0, 11, 3] * 7
    counts = np.asarray([len(render(r).split()) for r in range(12)], dtype=np.int32)
    rendered: list[int] = []

    def recording(row: int) -> str:
        rendered.append(row)
        return render(row)

    ctx = WordCounts()
    kept = within_budget(ctx, Lines(rows, recording, counts), budget)
    assert kept == within_budget(WordCounts(), [render(r) for r in rows], budget)
    assert ctx.counted == [] and len(rendered) == len(kept)  # nothing tokenized, none extra
    assert leading_tokens(ctx, Lines(rows, render, counts), len(kept)) == sum(
        len(t.split()) for t in kept
    )
