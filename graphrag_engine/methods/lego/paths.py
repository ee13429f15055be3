"""LEGO's paths over a TripleGraph: a question's node sequences with their scores, rendered as
text only where a context keeps them, and the passages behind a path's triples."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphrag_engine.methods.lego.graph import InducedCut, TripleGraph, pretty_relation


@dataclass
class PathSet:
    """The paths of one question: node sequences in a TripleGraph, with scores when scored."""

    paths: list[tuple[int, ...]]
    scores: np.ndarray | None = None


class PathText:
    """Renders paths of a TripleGraph, with every relation between consecutive nodes."""

    def __init__(self, tg: TripleGraph) -> None:
        """Paths of `tg`; a cut's are rendered through the triples of the graph it was cut
        from (the same triples, with no gather of the whole cut)."""
        self.tg, self.rows = (tg.source, tg.origin) if isinstance(tg, InducedCut) else (tg, None)
        self._joining: dict[tuple[int, int], list[int]] = {}  # paths share their first hops

    def _source(self, path: tuple[int, ...]) -> tuple[int, ...]:
        """The path as rows of the graph whose triples render it."""
        return path if self.rows is None else tuple(self.rows[list(path)].tolist())

    def _between(self, u: int, v: int) -> list[int]:
        """Triple rows joining u and v, in either direction, ascending (a self-loop once):
        read from the two nodes' own triples, so rendering a few paths costs no index over
        the whole batch graph; each pair is read once."""
        if (u, v) not in self._joining:
            self._joining[u, v] = self._read_between(u, v)
        return self._joining[u, v]

    def _read_between(self, u: int, v: int) -> list[int]:
        indptr, order = self.tg._edges_by_head
        tails = self.tg.tails
        rows = order[indptr[u] : indptr[u + 1]]
        found = rows[tails[rows] == v]
        if u != v:
            back = order[indptr[v] : indptr[v + 1]]
            found = np.concatenate([found, back[tails[back] == u]])
        return np.sort(found).tolist()

    def show(self, path: tuple[int, ...]) -> str:
        """`A -[r]-> B <-[s]- C`: the prompt's reasoning path, each relation in its stored
        direction, parallel relations joined by " / "."""
        tg, path = self.tg, self._source(path)
        out = [tg.names[path[0]]]
        for u, v in zip(path, path[1:], strict=False):
            labels = [
                f"-[{tg.relations[e]}]->" if tg.heads[e] == u else f"<-[{tg.relations[e]}]-"
                for e in self._between(u, v)
            ]
            out.append(f" {' / '.join(labels)} {tg.names[v]}")
        return "".join(out)

    def words(self, path: tuple[int, ...]) -> str:
        """The path as plain words for scorers."""
        tg, path = self.tg, self._source(path)
        parts = [tg.names[path[0]]]
        for u, v in zip(path, path[1:], strict=False):
            parts.append(" / ".join(pretty_relation(tg.relations[e]) for e in self._between(u, v)))
            parts.append(tg.names[v])
        return " ".join(parts)


def relation_chunks(ctx) -> dict[tuple[int, int], list[int]]:
    """The chunk rows each relation of the index graph comes from, keyed by its two entity rows
    (both orders), for the passages behind a path."""
    row = {e: i for i, e in enumerate(ctx.entities["entity_id"])}
    chunk_row = {c: i for i, c in enumerate(ctx.chunks["ids"])}
    rel = ctx.index.table("relations", ["src", "dst", "chunk_ids"]).to_pydict()
    out: dict[tuple[int, int], list[int]] = {}
    for s, d, cids in zip(rel["src"], rel["dst"], rel["chunk_ids"], strict=True):
        rows = [chunk_row[c] for c in cids if c in chunk_row]
        for key in ((row[s], row[d]), (row[d], row[s])):
            out.setdefault(key, []).extend(rows)
    return out


def path_passages(
    sub: TripleGraph, paths: list[tuple[int, ...]], chunks: dict[tuple[int, int], list[int]]
) -> list[int]:
    """The chunk rows behind a question's paths (each hop's relation), in path order, once."""
    seen: dict[int, None] = {}
    for path in paths:
        nodes = sub.origin[list(path)].tolist()
        for a, b in zip(nodes, nodes[1:], strict=False):
            for c in chunks.get((a, b), []):
                seen.setdefault(c, None)
    return list(seen)
