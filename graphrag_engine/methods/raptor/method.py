"""RAPTOR (Sarthi et al., ICLR 2024): retrieval from every level of a recursive tree of
cluster summaries over the chunks (the tree: graphrag_engine/index/tree.py, an index built
with `tree.enabled: true`).

For a batch of questions:

1. Embed the questions (one call) and score every node of the tree, chunks and summaries
   alike, by cosine: one (questions x nodes) product per block of questions.
2. Collapsed tree (the default, the paper's better mode): each question's nodes best first,
   taken while their tokens fit `context_tokens` (the paper's 2,000), stopping at the first
   that does not (as the authors' code does).
   Tree traversal (`retrieval: traversal`): the `top_k` best nodes of the top level, then the
   `top_k` best of their children, level by level down to the chunks; the nodes picked on
   every level, top first, are the context, cut to the same budget.
3. The context is the picked nodes' texts in that order. The chunk ranking (for Recall@k)
   lists the chunks the picked nodes stand for, in their order (a summary's chunks by their
   own cosine to the question), then every other chunk by cosine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.lines import line_tokens
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.types import Context, Retrieved, Section, StageClock

BLOCK = 256
"""Questions whose (questions x nodes) score matrix is held at once."""


@dataclass
class RaptorConfig:
    """RAPTOR's retrieval: the collapsed tree under a token budget, or tree traversal."""

    PAPER: ClassVar[dict[str, str]] = {  # the paper's values (config/settings_tables.py)
        "retrieval": "collapsed (section 3: it does better than traversal)",
        "context_tokens": "2,000 (section 4: the collapsed tree's budget)",
        "top_k": "5 (authors' code: nodes per level in traversal)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "context_tokens": ">= 1",
        "top_k": ">= 1",
    }

    retrieval: Literal["collapsed", "traversal"] = "collapsed"
    """collapsed: every node ranked at once, taken to the token budget; traversal: the best
    `top_k` nodes per level, from the top level down through their children."""
    context_tokens: int = 2000
    """Tokens of picked node texts in the context (shrunk in proportion to a smaller answer
    window)."""
    top_k: int = 5
    """traversal: nodes kept on each level."""

    def context_budget(self) -> int:
        """The picked nodes' budget."""
        return self.context_tokens


@dataclass
class Tree:
    """The index's tree as retrieval reads it: nodes are the chunks (0 .. n_chunks - 1), then
    the summaries in table order."""

    n_chunks: int
    texts: list[str]
    """Every node's context line: a titled chunk, or a summary's text."""
    tokens: np.ndarray
    """Every node's tokens by the index's tokenizer."""
    levels: np.ndarray
    """Every node's level (0 for chunks)."""
    children: list[np.ndarray]
    """Children of every summary node (node numbers), by summary row."""
    leaves: list[np.ndarray]
    """Chunk rows below every summary node, by summary row."""


def load_tree(ctx: QueryContext) -> Tree:
    """The tree of the index, with its nodes' token counts (stored once beside the index)."""
    rows = ctx.index.table("tree", ["level", "text", "children", "leaves"]).to_pydict()
    chunks = ctx.chunks["titled"]
    summaries = rows["text"]
    tokens = [
        line_tokens(ctx, "chunks"),
        line_tokens(ctx, "raptor_summaries", lambda: summaries),
    ]
    counted = [
        np.asarray(t if t is not None else ctx.count_tokens(list(lines)), dtype=np.int64)
        for t, lines in zip(tokens, (chunks, summaries), strict=True)
    ]
    return Tree(
        len(chunks),
        list(chunks) + list(summaries),
        np.concatenate(counted),
        np.concatenate([np.zeros(len(chunks), np.int64), np.asarray(rows["level"], np.int64)]),
        [np.asarray(c, np.int64) for c in rows["children"]],
        [np.asarray(c, np.int64) for c in rows["leaves"]],
    )


def node_vectors(ctx: QueryContext) -> np.ndarray:
    """Chunk vectors then summary vectors, one matrix (held for the run)."""
    return np.concatenate(
        [np.asarray(ctx.chunk_vectors), np.asarray(ctx.vectors("tree_vectors"))]
    ).astype(np.float32)


@register(
    "raptor",
    config=RaptorConfig,
    paper="RAPTOR (Sarthi et al., ICLR 2024), recursive tree of cluster summaries",
    needs={Part.CHUNKS, Part.CHUNK_VECTORS, Part.TREE},
)
def raptor(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Pick tree nodes for every question (collapsed tree or traversal) and rank the chunks
    they stand for."""
    cfg: RaptorConfig = ctx.cfg.options
    depth = 2 * ctx.cfg.retrieval.candidates
    budget = ctx.scaled(cfg.context_tokens)
    with clock.stage("embed_queries"):
        qvec = ctx.encode_queries([q.question for q in questions])
    tree = ctx.memo("raptor_tree", lambda: load_tree(ctx))
    vectors = ctx.memo("raptor_vectors", lambda: node_vectors(ctx))
    picks, orders = [], []
    for lo in range(0, len(questions), BLOCK):
        with clock.stage("score_nodes"):
            scores = qvec[lo : lo + BLOCK] @ vectors.T
        with clock.stage("pick_nodes"):
            for row in scores:
                if cfg.retrieval == "collapsed":
                    nodes = collapsed(row, tree.tokens, budget)
                else:
                    nodes = within(traversal(row, tree, cfg.top_k), tree.tokens, budget)
                picks.append(nodes)
                orders.append(chunk_order(nodes, row, tree, depth))
    contexts = [
        Context([Section([tree.texts[n] for n in nodes], counts=tree.tokens[nodes].tolist())])
        for nodes in picks
    ]
    extras = [{"tree_nodes": len(nodes)} for nodes in picks]
    return Retrieved(
        from_orders(orders, depth), extras, [{} for _ in questions], clock.seconds, contexts
    )


def collapsed(scores: np.ndarray, tokens: np.ndarray, budget: int) -> list[int]:
    """Nodes best first while their tokens fit `budget`, up to the first that does not. Only
    the best few hundred are sorted unless the budget reaches past them."""
    head = min(len(scores), 512)
    while True:
        top = np.argpartition(-scores, head - 1)[:head] if head < len(scores) else None
        order = (
            top[np.argsort(-scores[top], kind="stable")]
            if top is not None
            else np.argsort(-scores, kind="stable")
        )
        used = np.cumsum(tokens[order])
        n = int(np.searchsorted(used, budget, side="right"))
        if n < len(order) or head >= len(scores):
            return order[:n].tolist()
        head = min(len(scores), 4 * head)


def traversal(scores: np.ndarray, tree: Tree, top_k: int) -> list[int]:
    """The `top_k` best nodes of the top level, then of their children, down to the chunks:
    every level's picks, top level first."""
    if not tree.children:  # no summaries: the chunks are the only level
        return np.argsort(-scores, kind="stable")[:top_k].tolist()
    level = tree.levels == tree.levels.max()
    layer = np.flatnonzero(level)
    picked: list[int] = []
    while layer.size:
        best = layer[np.argsort(-scores[layer], kind="stable")[:top_k]]
        picked += best.tolist()
        below = [tree.children[n - tree.n_chunks] for n in best if n >= tree.n_chunks]
        layer = np.unique(np.concatenate(below)) if below else np.zeros(0, np.int64)
    return picked


def within(nodes: list[int], tokens: np.ndarray, budget: int) -> list[int]:
    """The leading nodes whose tokens fit `budget`."""
    used = np.cumsum(tokens[np.asarray(nodes, dtype=np.int64)]) if nodes else np.zeros(0)
    return nodes[: int(np.searchsorted(used, budget, side="right"))]


def chunk_order(nodes: list[int], scores: np.ndarray, tree: Tree, depth: int) -> list[int]:
    """The chunks the picked nodes stand for, in pick order (a summary's by their cosine to
    the question), then the other chunks by cosine: the first `depth`."""
    chunk_scores = scores[: tree.n_chunks]
    out: dict[int, None] = {}
    for n in nodes:
        if n < tree.n_chunks:
            out[n] = None
            continue
        leaves = tree.leaves[n - tree.n_chunks]
        out.update(dict.fromkeys(leaves[np.argsort(-chunk_scores[leaves], kind="stable")].tolist()))
        if len(out) >= depth:
            break
    if len(out) < depth:
        head = min(len(chunk_scores), depth + len(out))
        top = np.argpartition(-chunk_scores, head - 1)[:head]
        out.update(dict.fromkeys(top[np.argsort(-chunk_scores[top], kind="stable")].tolist()))
    return list(out)[:depth]
