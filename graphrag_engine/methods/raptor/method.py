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
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.trees import (
    Tree,
    collapsed,
    load_tree,
    pick_nodes,
    pool_vectors,
    tree_contexts,
    within,
)
from graphrag_engine.retrieve.types import Retrieved, StageClock

TABLES = ("tree",)


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
    tree = ctx.memo(("tree", TABLES), lambda: load_tree(ctx, TABLES))
    vectors = ctx.memo(("tree_vectors", TABLES), lambda: pool_vectors(ctx, TABLES))

    def pick(scores: np.ndarray) -> list[int]:
        if cfg.retrieval == "collapsed":
            return collapsed(scores, tree.tokens, budget)
        return within(traversal(scores, tree, cfg.top_k), tree.tokens, budget)

    picks, orders = pick_nodes(tree, vectors, qvec, pick, depth, clock)
    contexts, extras = tree_contexts(tree, picks)
    return Retrieved(
        from_orders(orders, depth), extras, [{} for _ in questions], clock.seconds, contexts
    )


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
