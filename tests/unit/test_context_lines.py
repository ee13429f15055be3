"""Budgets read lazily built context lines: the same lines kept as from a built list, and only
the lines up to the first one that does not fit are ever built."""

from __future__ import annotations

import numpy as np
import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from graphrag_engine.models.tokenizer import counts_add_at_spaces, load_tokenizer
from graphrag_engine.retrieve.lines import Lines, leading_tokens, prefixed_lines, within_budget


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
    picks = np.array([4, 0, 2, 2, -1])
    assert lines.take(picks) == [built[p] for p in picks] and lines.take([]) == []


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


class TokenizerCounts:
    """A context that counts with a real tokenizer and remembers derived structures."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.counted, self._memo = tokenizer, [], {}

    def memo(self, key, build):
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def count_tokens(self, texts: list[str]) -> list[int]:
        self.counted.extend(texts)
        return [len(e.ids) for e in self.tokenizer.encode_batch(texts)]


PARTS = ["Perspective: who founded it?", "Ōsaka", "北京 大学", "e.g.", "[x]:", "3.5%", "don't"]


def test_the_default_tokenizer_counts_add_at_spaces() -> None:
    tok = load_tokenizer()
    assert counts_add_at_spaces(tok)
    empty = len(tok.encode("").ids)
    for a in PARTS:
        for b in PARTS:
            assert len(tok.encode(f"{a} {b}").ids) == (
                len(tok.encode(a).ids) + len(tok.encode(b).ids) - empty
            ), (a, b)


def test_tokenizers_whose_counts_may_not_add_are_told_apart() -> None:
    byte_level = Tokenizer(models.BPE())
    byte_level.pre_tokenizer = pre_tokenizers.ByteLevel()
    assert not counts_add_at_spaces(byte_level)
    composing = Tokenizer(models.WordPiece({"[UNK]": 0}, unk_token="[UNK]"))
    composing.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    composing.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    assert not counts_add_at_spaces(composing)
    composing.normalizer = normalizers.Sequence([normalizers.Lowercase()])
    assert counts_add_at_spaces(composing)


@pytest.mark.parametrize("budget", [0, 9, 30, 75, 10**6])
def test_prefixed_lines_keep_what_whole_lines_keep(budget: int) -> None:
    tok = load_tokenizer()
    rows = [(i * 3) % len(PARTS) for i in range(20)]
    body = PARTS.__getitem__
    ctx = TokenizerCounts(tok)
    whole = [f"[Who?]: {body(r)}" for r in rows]
    lines = prefixed_lines(ctx, "t", "[Who?]:", rows, body, key=lambda r: r)
    assert list(lines) == whole
    assert within_budget(ctx, lines, budget, block=4) == within_budget(
        TokenizerCounts(tok), whole, budget, block=4
    )
    within_budget(ctx, lines, 10**6)
    before = len(ctx.counted)
    again = prefixed_lines(ctx, "t", "[Other perspective]:", rows, body, key=lambda r: r)
    assert within_budget(ctx, again, 10**6) == [f"[Other perspective]: {body(r)}" for r in rows]
    assert len(ctx.counted) - before == 2  # the new prefix and "": bodies are remembered


def test_prefixed_lines_read_stored_body_counts_without_counting() -> None:
    tok = load_tokenizer()
    rows = list(range(len(PARTS)))
    ctx = TokenizerCounts(tok)
    stored = [len(tok.encode(PARTS[r]).ids) for r in rows]
    stored[2] = -1  # not stored: counted
    lines = prefixed_lines(
        ctx, "t", "[Q]:", rows, PARTS.__getitem__, lambda r: r, lambda rs: [stored[r] for r in rs]
    )
    whole = [f"[Q]: {p}" for p in PARTS]
    assert within_budget(ctx, lines, 40) == within_budget(TokenizerCounts(tok), whole, 40)
    assert sorted(ctx.counted) == sorted(["", "[Q]:", PARTS[2]])  # no stored body was tokenized
