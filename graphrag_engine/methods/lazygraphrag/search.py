"""LazyGraphRAG's match of one subquery: best-first through the concept communities, level by
level (iterative deepening), under its share of the relevance-test budget.

A `Match` is advanced by rounds: `next_tests` names the chunks it tests this round (the best
untested chunks of its next community), the caller tests every match's chunks in one batch,
and `record` takes the verdicts. After `z` communities in a row yield no relevant chunk (or
the level's communities run out) the match deepens into the sub-communities of those that
did; it stops when none did, or when its budget is spent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphrag_engine.retrieve.communities import Communities
from graphrag_engine.retrieve.entity_graph import EntityGraph


@dataclass
class ConceptCommunities:
    """The community hierarchy of the concept graph with each community's chunks."""

    roots: list[int]
    children: dict[int, list[int]]
    chunks: list[np.ndarray]
    """Chunk rows of each community: the chunks its concepts come from."""

    @classmethod
    def of(cls, comms: Communities, g: EntityGraph) -> ConceptCommunities:
        """The hierarchy of `comms` with the chunks of its member entities."""
        empty = np.zeros(0, np.int64)
        chunks = [
            np.unique(np.concatenate([g.entity_chunks[e] for e in members] or [empty]))
            for members in comms.members
        ]
        return cls(comms.roots(), comms.children, chunks)

    def ranked(self, rows: list[int], ranks: np.ndarray, k: int) -> list[int]:
        """`rows` best first: by the mean rank of each one's best k chunks (a community
        without chunks last), then by row."""

        def score(c: int) -> float:
            own = np.sort(ranks[self.chunks[c]])[:k]
            return float(own.mean()) if own.size else float("inf")

        return sorted(rows, key=lambda c: (score(c), c))


@dataclass
class Match:
    """One subquery's search."""

    question: int
    query: str
    budget: int
    ranks: np.ndarray
    """Every chunk's rank by cosine to the subquery (0: the nearest)."""
    frontier: list[int]
    pos: int = 0
    misses: int = 0
    depth: int = 0
    spent: int = 0
    done: bool = False
    found_here: list[int] = field(default_factory=list)
    tested: set[int] = field(default_factory=set)
    relevant: dict[int, tuple[float, list[int]]] = field(default_factory=dict)
    """Relevant chunk -> (its test's score, its relevant sentences, by position)."""
    visits: list[tuple[int, int, list[int], bool]] = field(default_factory=list)
    """Every visit: (depth, community, chunks tested, whether one was relevant)."""
    pending: tuple[int, list[int]] | None = None


def next_tests(m: Match, tree: ConceptCommunities, per_visit: int, k: int, z: int) -> list[int]:
    """The chunks `m` tests this round: up to `per_visit` best untested chunks of its next
    community, within its budget; deepens first when `z` visits in a row found nothing or the
    level is done; empty (and `m.done`) when the search stops."""
    while not m.done:
        if m.spent >= m.budget:
            m.done = True
        elif m.misses >= z or m.pos >= len(m.frontier):
            _deepen(m, tree, k)
        else:
            c = m.frontier[m.pos]
            m.pos += 1
            own = tree.chunks[c][np.argsort(m.ranks[tree.chunks[c]], kind="stable")]
            fresh = [x for x in own.tolist() if x not in m.tested]
            tests = fresh[: min(per_visit, m.budget - m.spent)]
            if not tests:
                m.visits.append((m.depth, c, [], False))
                m.misses += 1
                continue
            m.pending = (c, tests)
            m.tested.update(tests)
            m.spent += len(tests)
            return tests
    return []


def record(m: Match, verdicts: list[tuple[float, list[int]] | None]) -> None:
    """The verdicts of this round's tests (None: not relevant, or a failed test)."""
    c, tests = m.pending
    m.pending = None
    yielded = False
    for chunk, verdict in zip(tests, verdicts, strict=True):
        if verdict is not None:
            m.relevant[chunk] = verdict
            yielded = True
    m.visits.append((m.depth, c, tests, yielded))
    if yielded:
        m.found_here.append(c)
        m.misses = 0
    else:
        m.misses += 1


def _deepen(m: Match, tree: ConceptCommunities, k: int) -> None:
    kids = [x for c in m.found_here for x in tree.children.get(c, [])]
    if not kids:
        m.done = True
        return
    m.frontier = tree.ranked(kids, m.ranks, k)
    m.pos = m.misses = 0
    m.found_here = []
    m.depth += 1
