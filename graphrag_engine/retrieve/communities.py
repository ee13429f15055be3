"""An index's communities and their reports as query operators read them (GraphRAG's local and
global search, PankRAG): each entity's community at a level, reports by level, and the
hierarchical report search of PankRAG's abstract sub-questions."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from graphrag_engine.errors import BadInputError
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.retrieve.context import QueryContext

NEEDS_REPORTS = (
    "the index has no community reports; rebuild it with `graphrag-engine index` and a config "
    "with communities.enabled: true and communities.reports: true (they need an LLM)"
)


@dataclass
class Communities:
    """Communities (level, members) and their reports (title, text, rating), by row."""

    ids: list[str]
    level: list[int]
    parent: list[int]
    """Parent community row (-1 for a root)."""
    members: list[list[int]]
    """Entity rows of each community."""
    report: dict[int, tuple[str, str, float]]
    """community row -> (title, full text, rating), for the communities that have a report."""

    def report_text(self, c: int) -> str:
        """Community row `c`'s report as context text: title, then the full report."""
        title, text, _ = self.report[c]
        return f"{title}\n{text}"

    def reported_at(self, level: int) -> list[int]:
        """Rows of the leaf-most reported communities at or below `level`, as GraphRAG selects
        them: those at `level`, and those above it that never split into reported children
        at or above `level` (so every part of the graph is covered once)."""
        return sorted(
            c
            for c in self.report
            if self.level[c] <= level
            and not any(
                self.level[k] <= level and k in self.report for k in self.children.get(c, [])
            )
        )

    @cached_property
    def children(self) -> dict[int, list[int]]:
        """community row -> rows of its child communities."""
        out: dict[int, list[int]] = {}
        for k, p in enumerate(self.parent):
            if p >= 0:
                out.setdefault(p, []).append(k)
        return out

    def roots(self) -> list[int]:
        """Rows of the top-level communities."""
        return [k for k, p in enumerate(self.parent) if p < 0]

    def of_entity(self, level: int) -> dict[int, int]:
        """entity row -> its community row at the deepest level <= `level`."""
        out: dict[int, tuple[int, int]] = {}
        for c, (lv, members) in enumerate(zip(self.level, self.members, strict=True)):
            if lv > level:
                continue
            for e in members:
                if e not in out or out[e][0] < lv:
                    out[e] = (lv, c)
        return {e: c for e, (_, c) in out.items()}


def communities(ctx: QueryContext, need_reports: bool = False) -> Communities | None:
    """The index's communities (None when it has none); BadInputError when reports are needed
    and the index has none."""
    if need_reports and not (ctx.index.has("communities") and ctx.index.has("reports")):
        raise BadInputError(f"{ctx.index.root}: {NEEDS_REPORTS}")
    if not ctx.index.has("communities"):
        return None
    return ctx.memo("communities", lambda: _build(ctx))


def _build(ctx: QueryContext) -> Communities:
    rows = ctx.index.table(
        "communities", ["community_id", "level", "parent_id", "entity_ids"]
    ).to_pydict()
    ent_row = {e: i for i, e in enumerate(ctx.entities["entity_id"])}
    members = [[ent_row[e] for e in ids if e in ent_row] for ids in rows["entity_ids"]]
    row = {c: i for i, c in enumerate(rows["community_id"])}
    parent = [row.get(p, -1) if p else -1 for p in rows["parent_id"]]
    report: dict[int, tuple[str, str, float]] = {}
    if ctx.index.has("reports"):
        rep = ctx.index.table("reports", ["community_id", "title", "full_text", "rating"])
        for cid, title, text, rating in zip(*rep.to_pydict().values(), strict=True):
            if cid in row:
                report[row[cid]] = (title, text, float(rating or 0.0))
    return Communities(rows["community_id"], rows["level"], parent, members, report)


def report_search(
    ctx: QueryContext, comms: Communities, texts: list[str], top_k: int
) -> list[list[tuple[int, float]]]:
    """Per text, up to `top_k` (community row, cosine) reports, best first, chosen walking down
    the hierarchy: from the top reported communities, a report gives way to those of its
    reported children at least as similar to the text (a narrower report, no less relevant),
    and otherwise stays (the broader overview). One embedding call for the texts and one
    similarity matrix; the reports' vectors are embedded once per run."""
    rows = sorted(comms.report)
    if not rows or not texts:
        return [[] for _ in texts]
    col = {c: i for i, c in enumerate(rows)}
    vectors = report_vectors(ctx, comms)
    sims = l2_normalize(ctx.encode_queries(texts)) @ vectors.T
    top = [c for c in rows if _reported_ancestor(comms, c) < 0]
    kids_of = {c: _reported_children(comms, c) for c in rows}  # once, not per question
    out = []
    for q in range(len(texts)):
        score = sims[q]
        frontier, chosen = top, []
        while frontier:
            deeper = []
            for c in frontier:
                kids = [k for k in kids_of[c] if score[col[k]] >= score[col[c]]]
                if kids:
                    deeper.extend(kids)
                else:
                    chosen.append(c)
            frontier = deeper
        chosen.sort(key=lambda c: (-round(float(score[col[c]]), 6), c))
        out.append([(c, float(score[col[c]])) for c in chosen[:top_k]])
    return out


def report_vectors(ctx: QueryContext, comms: Communities) -> np.ndarray:
    """Every report's vector (title and full text, normalised), rows in sorted community
    order; embedded once per run."""
    rows = sorted(comms.report)
    return ctx.memo(
        "report_vectors",
        lambda: l2_normalize(ctx.encode_queries([comms.report_text(c) for c in rows])),
    )


def _reported_ancestor(comms: Communities, c: int) -> int:
    p = comms.parent[c]
    while p >= 0 and p not in comms.report:
        p = comms.parent[p]
    return p


def _reported_children(comms: Communities, c: int) -> list[int]:
    """The nearest reported descendants of community row `c`."""
    out, stack = [], list(comms.children.get(c, []))
    while stack:
        k = stack.pop()
        if k in comms.report:
            out.append(k)
        else:
            stack.extend(comms.children.get(k, []))
    return sorted(out)
