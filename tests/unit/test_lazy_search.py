"""LazyGraphRAG's match on a hierarchy small enough to follow by hand: which communities are
visited in which order, what each visit tests, where the search deepens, and where the budget
or the hierarchy stops it."""

from __future__ import annotations

import numpy as np
import pytest

from graphrag_engine.methods.lazygraphrag.prompts import REFINE_STAGE
from graphrag_engine.methods.lazygraphrag.search import (
    ConceptCommunities,
    Match,
    next_tests,
    record,
)
from graphrag_engine.models.structured import ParseError

# roots 0, 1, 2; 0 splits into 3 and 4, 1 into 5, 3 into 6; chunk i has rank i
TREE = ConceptCommunities(
    roots=[0, 1, 2],
    children={0: [3, 4], 1: [5], 3: [6]},
    chunks=[np.array(c) for c in ([0, 1, 2], [3, 4], [5], [0, 1], [2], [3], [0])],
)
RANKS = np.arange(6)
RELEVANT = {1, 2}


def _run(budget: int, z: int, per_visit: int = 2) -> Match:
    m = Match(0, "q", budget, RANKS, TREE.ranked(TREE.roots, RANKS, 2))
    while tests := next_tests(m, TREE, per_visit, 2, z):
        record(m, [(1.0, [0]) if c in RELEVANT else None for c in tests])
    return m


def test_communities_rank_by_their_best_chunks() -> None:
    assert TREE.ranked([2, 1, 0], RANKS, 2) == [0, 1, 2]  # means 0.5, 3.5, 5
    assert TREE.ranked([4, 3], RANKS, 2) == [3, 4]  # 0.5, 2


def test_the_search_deepens_after_z_misses_into_the_communities_that_yielded() -> None:
    m = _run(budget=10, z=2)
    assert m.visits == [
        (0, 0, [0, 1], True),  # chunk 1 is relevant
        (0, 1, [3, 4], False),
        (0, 2, [5], False),  # second miss: deepen into 0's children
        (1, 3, [], False),  # its chunks were all tested: a miss, no test spent
        (1, 4, [2], True),  # the level runs out: deepen into 4's children, it has none
    ]
    assert m.done and m.depth == 1 and m.spent == 6 and set(m.relevant) == {1, 2}


def test_one_miss_deepens_at_once_when_z_is_1() -> None:
    m = _run(budget=10, z=1)
    assert [v[:2] for v in m.visits] == [(0, 0), (0, 1), (1, 3)]
    assert m.done and m.spent == 4 and set(m.relevant) == {1}


def test_the_budget_stops_the_search_exactly() -> None:
    m = _run(budget=3, z=2)
    assert m.visits == [(0, 0, [0, 1], True), (0, 1, [3], False)]  # the last visit takes 1
    assert m.done and m.spent == 3


def test_a_refinement_without_words_is_a_parse_failure() -> None:
    """SmolLM2 copies the format line's "..." as a subquery: the stage must reject it (and so
    re-ask, then fall back to the question), while a worded answer passes trimmed."""
    schema = REFINE_STAGE.schema(n=3)
    assert "..." in REFINE_STAGE.prompt("Who wrote it?", 3)
    with pytest.raises(ParseError):
        schema.parse('{"subqueries": ["..."], "expanded": "Who wrote the book?"}')
    with pytest.raises(ParseError):
        schema.parse('{"subqueries": ["Who wrote it?"], "expanded": "...*"}')
    got = schema.parse('{"subqueries": [" Who wrote it? ", "When?"], "expanded": "Who, when?"}')
    assert got == (["Who wrote it?", "When?"], "Who, when?")
