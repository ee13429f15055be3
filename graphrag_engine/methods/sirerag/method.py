"""SiReRAG (Zhang et al., ICLR 2025): retrieval from one flat pool of two trees, one built on
similarity and one on relatedness (both: graphrag_engine/index/tree.py, an index built with
`tree.enabled: true` and `tree.relatedness: true`).

Index (the tree stage):

1. Similarity tree: RAPTOR's tree over the chunks (the `tree` table).
2. Relatedness tree: propositions and the entities they name (the index's knowledge units and
   their entities); every entity's propositions joined into one aggregate; the aggregates
   clustered and summarised level by level like the chunks (the `related_tree` table, the
   aggregates its level 0).

Retrieval, for a batch of questions:

3. Embed the questions (one call); score every node of the pool (chunks, similarity summaries,
   aggregates, relatedness summaries) by cosine, one (questions x nodes) product per block.
4. Each question's `top_k` best nodes (the authors' code: 20) are its context, best first.
5. The chunk ranking (for Recall@k) lists the chunks those nodes stand for, in their order (an
   aggregate's or a summary's chunks by their own cosine to the question), then every other
   chunk by cosine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.trees import (
    best_first,
    load_tree,
    pick_nodes,
    pool_vectors,
    tree_contexts,
)
from graphrag_engine.retrieve.types import Retrieved, StageClock

TABLES = ("tree", "related_tree")
"""The pool's trees after the chunks: similarity, then relatedness."""


@dataclass
class SiReRAGConfig:
    """SiReRAG's retrieval: the best nodes of both trees' flat pool."""

    PAPER: ClassVar[dict[str, str]] = {  # the paper's values (config/settings_tables.py)
        "top_k": "20 (authors' code: similarity_top_k of the collapsed pool)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "top_k": ">= 1",
    }

    top_k: int = 20
    """Nodes of the pool (chunks, summaries, aggregates) each question's context holds."""


@register(
    "sirerag",
    config=SiReRAGConfig,
    paper="SiReRAG (Zhang et al., ICLR 2025), similarity and relatedness trees in one pool",
    needs={Part.CHUNKS, Part.CHUNK_VECTORS, Part.TREE, Part.RELATED_TREE},
)
def sirerag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Pick every question's best pool nodes and rank the chunks they stand for."""
    cfg: SiReRAGConfig = ctx.cfg.options
    depth = 2 * ctx.cfg.retrieval.candidates
    with clock.stage("embed_queries"):
        qvec = ctx.encode_queries([q.question for q in questions])
    tree = ctx.memo(("tree", TABLES), lambda: load_tree(ctx, TABLES))
    vectors = ctx.memo(("tree_vectors", TABLES), lambda: pool_vectors(ctx, TABLES))
    top_k = min(cfg.top_k, len(vectors))
    picks, orders = pick_nodes(
        tree, vectors, qvec, lambda scores: best_first(scores, top_k).tolist(), depth, clock
    )
    contexts, extras = tree_contexts(tree, picks)
    return Retrieved(
        from_orders(orders, depth), extras, [{} for _ in questions], clock.seconds, contexts
    )
