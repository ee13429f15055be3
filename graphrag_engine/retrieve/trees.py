"""Retrieval over tree indexes (RAPTOR, SiReRAG): one pool of nodes, the chunks first and then
the rows of each tree table, scored all at once; the picks of a budget or a top-k; and the
chunk ranking the picked nodes stand for.

A tree table's row names its children as node numbers: below n_chunks a chunk, else n_chunks +
a row of the same table (graphrag_engine/index/tree.py). In the pool, a table's rows follow
the tables before it, and children are renumbered to match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.lines import line_token_counts
from graphrag_engine.retrieve.types import Context, Section, StageClock

BLOCK = 256
"""Questions whose (questions x nodes) score matrix is held at once."""

SCORE_DECIMALS = 5
"""Node scores are rounded to this many decimals before ranking, so that nodes whose cosines
differ only by float noise (a summary and an aggregate of the same sentences; one question's
product against a block's) rank by node number on every CPU."""


@dataclass
class Tree:
    """Tree nodes as retrieval reads them: the chunks (0 .. n_chunks - 1), then every tree
    table's rows in order."""

    n_chunks: int
    texts: list[str]
    """Every node's context line: a titled chunk, a summary or an aggregate's text."""
    tokens: np.ndarray
    """Every node's tokens by the index's tokenizer."""
    levels: np.ndarray
    """Every node's level (0 for chunks and proposition aggregates)."""
    tables: np.ndarray
    """Which table every node comes from (-1 for chunks, else its position in `tables`)."""
    children: list[np.ndarray]
    """Children (pool node numbers) of every node past the chunks, by node - n_chunks."""
    leaves: list[np.ndarray]
    """Chunk rows below every node past the chunks, by node - n_chunks."""

    def chunks_of(self, node: int) -> np.ndarray:
        """The chunk rows a node stands for (itself for a chunk)."""
        return np.asarray([node]) if node < self.n_chunks else self.leaves[node - self.n_chunks]


def load_tree(ctx: QueryContext, tables: tuple[str, ...]) -> Tree:
    """The pool of chunks and the rows of `tables`, with every node's token count (stored once
    beside the index)."""
    chunks = ctx.chunks["titled"]
    n = len(chunks)
    texts, tokens = list(chunks), [line_token_counts(ctx, "chunks", chunks)]
    levels, owner = [np.zeros(n, np.int64)], [np.full(n, -1, np.int64)]
    children: list[np.ndarray] = []
    leaves: list[np.ndarray] = []
    for t, name in enumerate(tables):
        rows = ctx.index.table(name, ["level", "text", "children", "leaves"]).to_pydict()
        offset = len(texts) - n  # this table's row r is pool node n + offset + r
        texts += rows["text"]
        tokens.append(
            line_token_counts(ctx, f"{name}_nodes", rows["text"], lambda rows=rows: rows["text"])
        )
        levels.append(np.asarray(rows["level"], np.int64))
        owner.append(np.full(len(rows["text"]), t, np.int64))
        for kids in rows["children"]:
            kids = np.asarray(kids, np.int64)
            children.append(np.where(kids < n, kids, kids + offset))
        leaves += [np.asarray(lv, np.int64) for lv in rows["leaves"]]
    return Tree(
        n,
        texts,
        np.concatenate(tokens),
        np.concatenate(levels),
        np.concatenate(owner),
        children,
        leaves,
    )


def pool_vectors(ctx: QueryContext, tables: tuple[str, ...]) -> np.ndarray:
    """Chunk vectors then each table's vectors, one matrix (held for the run)."""
    parts = [np.asarray(ctx.chunk_vectors)]
    parts += [np.asarray(ctx.vectors(f"{name}_vectors")) for name in tables]
    return np.concatenate(parts).astype(np.float32)


def best_first(scores: np.ndarray, head: int) -> np.ndarray:
    """The `head` best nodes, best first (ties by node number)."""
    if head >= len(scores):
        return np.argsort(-scores, kind="stable")
    top = np.argpartition(-scores, head - 1)[:head]
    return top[np.lexsort((top, -scores[top]))]


def collapsed(scores: np.ndarray, tokens: np.ndarray, budget: int) -> list[int]:
    """Nodes best first while their tokens fit `budget`, up to the first that does not. Only
    the best few hundred are sorted unless the budget reaches past them."""
    head = min(len(scores), 512)
    while True:
        order = best_first(scores, head)
        used = np.cumsum(tokens[order])
        n = int(np.searchsorted(used, budget, side="right"))
        if n < len(order) or head >= len(scores):
            return order[:n].tolist()
        head = min(len(scores), 4 * head)


def within(nodes: list[int], tokens: np.ndarray, budget: int) -> list[int]:
    """The leading nodes whose tokens fit `budget`."""
    used = np.cumsum(tokens[np.asarray(nodes, dtype=np.int64)]) if nodes else np.zeros(0)
    return nodes[: int(np.searchsorted(used, budget, side="right"))]


def chunk_order(nodes: list[int], scores: np.ndarray, tree: Tree, depth: int) -> list[int]:
    """The chunks the picked nodes stand for, in pick order (a node's chunks by their cosine to
    the question), then the other chunks by cosine: the first `depth`."""
    chunk_scores = scores[: tree.n_chunks]
    out: dict[int, None] = {}
    for n in nodes:
        rows = tree.chunks_of(n)
        out.update(dict.fromkeys(rows[np.lexsort((rows, -chunk_scores[rows]))].tolist()))
        if len(out) >= depth:
            break
    if len(out) < depth:
        top = best_first(chunk_scores, min(len(chunk_scores), depth + len(out)))
        out.update(dict.fromkeys(top.tolist()))
    return list(out)[:depth]


def tree_contexts(tree: Tree, picks: list[list[int]]) -> tuple[list[Context], list[dict]]:
    """Each question's picked node texts as one section (with their token counts), and how
    many nodes of each level it took (the run's extras)."""
    contexts, extras = [], []
    for nodes in picks:
        contexts.append(
            Context([Section([tree.texts[n] for n in nodes], counts=tree.tokens[nodes].tolist())])
        )
        levels = np.bincount(tree.levels[nodes], minlength=1).tolist() if nodes else []
        extras.append({"tree_nodes": len(nodes), "nodes_by_level": levels})
    return contexts, extras


def pick_nodes(
    tree: Tree,
    vectors: np.ndarray,
    queries: np.ndarray,
    pick: Callable[[np.ndarray], list[int]],
    depth: int,
    clock: StageClock,
) -> tuple[list[list[int]], list[list[int]]]:
    """Every question's picked nodes (`pick(scores)` over its row of node scores, rounded to
    SCORE_DECIMALS) and the first `depth` chunks they stand for: one (questions x nodes)
    product per BLOCK questions."""
    picks, orders = [], []
    for lo in range(0, len(queries), BLOCK):
        with clock.stage("score_nodes"):
            scores = np.round(queries[lo : lo + BLOCK] @ vectors.T, SCORE_DECIMALS)
        with clock.stage("pick_nodes"):
            for row in scores:
                nodes = pick(row)
                picks.append(nodes)
                orders.append(chunk_order(nodes, row, tree, depth))
    return picks, orders
