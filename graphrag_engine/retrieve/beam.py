"""One step of a batch beam search: every owner's (question's, path's) candidates are scored in
one call and the best `width` of each owner stay. Q-Iter's depths, LEGO's path beam and plan
levels all advance this way, all questions of a batch at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from graphrag_engine.kernels.segments import segment_topk

T = TypeVar("T")


def flatten(groups: Sequence[Sequence[T]]) -> tuple[np.ndarray, list[T]]:
    """The owner array and the flat candidate list of per-owner candidate lists."""
    owner = np.repeat(np.arange(len(groups), dtype=np.int64), [len(g) for g in groups])
    return owner, [c for g in groups for c in g]


def beam_step(
    owner: np.ndarray,
    candidates: list[T],
    score: Callable[[np.ndarray, list[T]], np.ndarray],
    width: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Score every candidate of every owner in one `score(owner, candidates)` call and keep the
    `width` best per owner. Returns the kept positions (owner-sorted, best first, ties in input
    order) and every candidate's score."""
    scores = np.asarray(score(owner, candidates))
    return segment_topk(owner, scores, width), scores
