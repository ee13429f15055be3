"""Forward passes of a mixed-parameter call (models/transformers_llm.py): which prompts share
a pass, and which parameters may."""

from __future__ import annotations

from graphrag_engine.models.base import GenParams
from graphrag_engine.models.gather import rows_mix
from graphrag_engine.models.transformers_llm import PAD_SHARE, passes


def test_passes_hold_the_batch_size_and_no_prompt_padded_past_its_share() -> None:
    lengths = [2141, 600, 2139, 291, 599, 61, 290, 150, 601]
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    got = passes(order, lengths, 3, PAD_SHARE)
    assert [[lengths[i] for i in p] for p in got] == [
        [2141, 2139],
        [601, 600, 599],
        [291, 290, 150],
        [61],
    ]
    assert sorted(i for p in got for i in p) == list(range(len(lengths)))
    # one kind of parameters: passes are plain slices of batch size, as before
    assert passes(order, lengths, 4, 0.0) == [order[:4], order[4:8], order[8:]]


def test_greedy_rows_mix_and_sampled_rows_only_when_alike() -> None:
    greedy = [GenParams(max_tokens=8), GenParams(max_tokens=64, stop=("\n",))]
    warm = GenParams(temperature=0.7, seed=1)
    assert rows_mix(greedy) and rows_mix([warm, GenParams(temperature=0.7, seed=1, max_tokens=9)])
    assert not rows_mix([*greedy, warm])
    assert not rows_mix([warm, warm.with_seed(2)])
