"""Clue-RAG's Q-Iter retrieval over the chunk-unit-entity graph (the paper's Algorithms 3, 4).

For the whole batch at once:

1. Entity anchoring. Spreading activation: the query's entities (NER) are matched to their
   top-K entity nodes by embedding. Knowledge anchoring: the top-K units by query embedding
   add their entities.
2. Iterative retrieval, depth 1..D, every query advancing together. A beam element is a path
   (a chain of units) with its own query vector. From every frontier entity of every path,
   the top-K units holding that entity (not yet on the path) by the path's query vector are
   the extensions (one similarity call for the batch); each extended path's vector drops the
   new unit's direction, phi_v <- phi_v - phi(k); every extended path is scored as a whole
   against the question (one call for the batch): its units' texts joined, as the paper
   reranks them (every distinct text of the batch's paths embedded once per depth); pooling the
   units' stored vectors by their characters is the faster option (`path_scoring: pooled`).
   The best M paths per query are kept. Their last units' entities are the next frontier.
3. The chunks of every unit on a kept path are reranked against the question (one call) and
   the top N lead the ranking; dense hits fill the rest of the candidate list.

Ablations (config `clue:`): no knowledge anchoring, no spreading activation, no query update.
The reranker is `models.reranker` through the scorer registry: the bi-encoder reuses the
index's unit and chunk vectors (the same cosine it would compute); a cross-encoder reads texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import ClassVar, Literal

import numpy as np

from graphrag_engine.descriptions import sentence_weights
from graphrag_engine.errors import ConfigError
from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.similarity import l2_normalize, rowwise_dot
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.models.rerank import Scorer
from graphrag_engine.retrieve.beam import beam_step
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.cue_graph import cue_adjacency
from graphrag_engine.retrieve.dense import dense_search
from graphrag_engine.retrieve.linking import link_and_embed
from graphrag_engine.retrieve.ranking import lead_then_fill
from graphrag_engine.retrieve.scoring import make_scorer, reuses_index_vectors, score_flat
from graphrag_engine.retrieve.types import Retrieved, StageClock
from graphrag_engine.retrieve.vector_search import nearest

ANSWER_PROMPT = """Context:
{context}

Read the context above and answer the question.
Question: {question}
Answer in as few words as possible.
Answer:"""


def answer_prompt(question: str, passages: list[str] | None, cfg=None) -> list[dict]:
    """Clue-RAG's answer prompt: the context first, then the question repeated, terse answer."""
    context = "\n\n".join(passages or [])
    return [{"role": "user", "content": ANSWER_PROMPT.format(context=context, question=question)}]


@dataclass
class ClueRAGConfig:
    """Clue-RAG's Q-Iter retrieval (paper defaults K=3, D=3, M=5, N=5) and its ablations."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "anchor_k": "3 (K, appendix A.1)",
        "depth": "3 (D, appendix A.1)",
        "beam": "5 (M, appendix A.1)",
        "top_n": "5 (N, appendix A.1)",
        "spreading_activation": "true (the full method, 4.4)",
        "knowledge_anchoring": "true (the full method, 4.4)",
        "query_update": "true (the full method, 4.4)",
        "path_scoring": "text (Algorithm 3 line 13)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "anchor_k": ">= 1",
        "depth": ">= 1",
        "beam": ">= 1",
        "top_n": ">= 1",
    }

    anchor_k: int = 3
    """K: entity nodes per query entity (spreading activation) and units (knowledge anchoring)."""
    depth: int = 3
    """D: iterations of beam retrieval over units."""
    beam: int = 5
    """M: units kept per query per depth."""
    top_n: int = 5
    """N: the graph's chunks that lead the ranking after the final reranking (Algorithm 3
    line 23); dense hits fill the candidate list after them."""
    spreading_activation: bool = True
    """False: the ablation without spreading activation over the entity graph."""
    knowledge_anchoring: bool = True
    """False: the ablation without anchoring on units linked to the query's entities."""
    query_update: bool = True
    """phi_v <- phi_v - phi(k): remove the selected units' direction from the query embedding."""
    path_scoring: Literal["text", "pooled", "mean"] = "text"
    """A multi-unit path's score: its units' texts joined and scored as one text (`text`,
    Algorithm 3 line 13: one encoder pass over every distinct candidate path); or, with the
    index's bi-encoder and no encoder pass, its units' stored vectors summed, each weighted by
    its characters as mean pooling their joined text weighs it (`pooled`, far faster, lower
    recall: docs/methods/clue.md), or unweighted (`mean`)."""

    def validate(self, where: str) -> None:
        """At least one way to find the first entities."""
        if not (self.spreading_activation or self.knowledge_anchoring):
            raise ConfigError(
                f"{where}: clue needs spreading_activation or knowledge_anchoring to find its first entities"
            )


RERANKER_SCORER = {
    "bi-encoder": "bi-encoder",
    "cross-encoder": "cross-encoder",
    "flag": "cross-encoder",
}
"""models.reranker.backend -> the registered scorer that reranks paths and chunks."""


def _path_scores(
    ctx: QueryContext,
    scorer: Scorer,
    questions: list[str],
    phi: np.ndarray,
    owner: np.ndarray,
    paths: list[tuple[int, ...]],
) -> np.ndarray:
    """Scores of unit paths against their questions. A text scorer reads the joined texts. The
    index's bi-encoder reuses the stored vectors of single units and, for longer paths, pools
    their units' vectors (`path_scoring: pooled` or `mean`, `_pooled_paths`) or embeds every
    distinct joined text in one call (`path_scoring: text`, the paper's line 13)."""
    text = ctx.units["text"]
    if not reuses_index_vectors(scorer, ctx.embedder):
        return score_flat(scorer, questions, owner, [" ".join(text[u] for u in p) for p in paths])
    out = np.zeros(len(paths), dtype=np.float32)
    single = np.array([len(p) == 1 for p in paths], dtype=bool)
    if single.any():
        rows = np.array([p[0] for p, one in zip(paths, single, strict=True) if one])
        out[single] = rowwise_dot(phi, owner[single], ctx.unit_vectors, rows)
    multi_paths = [p for p, one in zip(paths, single, strict=True) if not one]
    if multi_paths and ctx.cfg.options.path_scoring != "text":
        vecs = _pooled_paths(ctx, multi_paths, weighted=ctx.cfg.options.path_scoring == "pooled")
        out[~single] = rowwise_dot(phi, owner[~single], vecs, np.arange(len(vecs)))
    elif multi_paths:
        multi = [" ".join(text[u] for u in p) for p in multi_paths]
        distinct = sorted(set(multi))
        row = {t: i for i, t in enumerate(distinct)}
        vecs = l2_normalize(ctx.encode_queries(distinct))
        out[~single] = rowwise_dot(phi, owner[~single], vecs, np.array([row[t] for t in multi]))
    return out


def _pooled_paths(ctx: QueryContext, paths: list[tuple[int, ...]], weighted: bool) -> np.ndarray:
    """Each path's normalised sum of its units' stored vectors, each weighted by its characters
    (`sentence_weights`, as entity vectors pool their sentences) or, unweighted, by one.
    Mean pooling over a joined text weighs each unit by its length; characters stand in for
    its tokens."""
    flat = np.fromiter(chain.from_iterable(paths), dtype=np.int64)
    starts = np.cumsum([0] + [len(p) for p in paths[:-1]])
    rows = np.asarray(ctx.unit_vectors[flat], dtype=np.float32)
    if weighted:
        rows = rows * _unit_weights(ctx)[flat, None]
    return l2_normalize(np.add.reduceat(rows, starts, axis=0))


def _unit_weights(ctx: QueryContext) -> np.ndarray:
    """Each unit's pooling weight, its characters capped as entity vectors cap their sentences'
    (once per run)."""
    return ctx.memo(
        "clue_unit_weights",
        lambda: sentence_weights(np.fromiter(map(len, ctx.units["text"]), dtype=np.int64)),
    )


def _chunk_scores(
    ctx: QueryContext,
    scorer: Scorer,
    questions: list[str],
    phi: np.ndarray,
    owner: np.ndarray,
    chunks: np.ndarray,
) -> np.ndarray:
    """Scores of candidate chunks ("title\ntext") against their questions."""
    if reuses_index_vectors(scorer, ctx.embedder):
        return rowwise_dot(phi, owner, ctx.chunk_vectors, chunks)
    return score_flat(scorer, questions, owner, [ctx.chunks["titled"][c] for c in chunks])


@register(
    "clue",
    config=ClueRAGConfig,
    answer_prompt=answer_prompt,
    paper="Clue-RAG (Su et al., 2025): Q-Iter over a chunk-unit-entity graph",
    needs={Part.CHUNKS, Part.CHUNK_VECTORS, Part.CUE_GRAPH, Part.UNIT_VECTORS, Part.ENTITY_VECTORS},
)
def clue_rag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Q-Iter for every question of the batch."""
    cfg: ClueRAGConfig = ctx.cfg.options
    texts = [q.question for q in questions]
    b = len(texts)
    adj = cue_adjacency(ctx)
    rerank = make_scorer(RERANKER_SCORER[ctx.cfg.models.reranker.backend], ctx)
    links: list[dict[int, float]] = []
    with clock.stage("embed_queries"):  # with the mentions the anchoring links: one call
        if cfg.spreading_activation:
            links, _, vectors = link_and_embed(ctx, texts, top_k=cfg.anchor_k)
        else:
            vectors = ctx.encode_queries(texts)
        phi0 = l2_normalize(vectors)

    # 1. entity anchoring: the first frontier of every query
    anchors: list[set[int]] = [set() for _ in range(b)]
    with clock.stage("anchor"):
        for q, linked in enumerate(links):
            anchors[q].update(linked)
        if cfg.knowledge_anchoring:
            _, units = nearest(ctx, "unit_vectors", phi0, cfg.anchor_k, normalized=True)
            for q in range(b):
                anchors[q].update(adj.entities_of(units[q][units[q] >= 0]).tolist())

    # the beam: paths (unit chains) with their query vectors; an item expands one path from
    # one of its frontier entities
    path_units: list[tuple[int, ...]] = [()] * b
    path_vec = phi0.copy()
    items = [(q, e, q) for q in range(b) for e in sorted(anchors[q])]
    kept: list[dict[tuple[int, ...], float]] = [{} for _ in range(b)]

    # 2. iterative retrieval, all queries one depth at a time
    for _depth in range(cfg.depth):
        if not items:
            break
        item_path = np.array([p for _, _, p in items])
        with clock.stage("expand"):  # each item's K nearest units through its entity
            owner, units, _ = adj.top_units(
                path_vec[item_path],
                [e for _, e, _ in items],
                [path_units[p] for p in item_path.tolist()],
                ctx.unit_vectors,
                cfg.anchor_k,
            )
        if owner.size == 0:
            break
        # extended paths, de-duplicated per query (the same unit set reached twice is one path)
        new: dict[tuple[int, tuple[int, ...]], tuple[int, int]] = {}
        for i, u in zip(owner.tolist(), units.tolist(), strict=True):
            q, _, p = items[i]
            key = (q, tuple(sorted(path_units[p] + (u,))))
            new.setdefault(key, (p, u))
        keys = list(new)
        cand_q = np.array([q for q, _ in keys])
        with clock.stage("rerank_paths"):
            best, score = beam_step(
                cand_q,
                [units_ for _, units_ in keys],
                lambda o, paths: _path_scores(ctx, rerank, texts, phi0, o, paths),
                cfg.beam,
            )
        next_units, next_vec, items = [], [], []
        for j in best.tolist():
            q, units_ = keys[j]
            parent, u = new[keys[j]]
            vec = path_vec[parent] - ctx.unit_vectors[u] if cfg.query_update else path_vec[parent]
            kept[q][units_] = float(score[j])
            pid = len(next_units)
            next_units.append(units_)
            next_vec.append(vec)
            items.extend((q, int(e), pid) for e in adj.entities_of(np.array([u])))
        path_units = next_units
        path_vec = np.asarray(next_vec, dtype=np.float32).reshape(-1, phi0.shape[1])

    # 3. the kept paths' chunks, reranked against the question; dense hits fill the list
    depth_k = 2 * ctx.cfg.retrieval.candidates
    with clock.stage("dense_fill"):
        dense = dense_search(ctx, phi0, depth_k)
    with clock.stage("rerank_chunks"):
        owner, chunks = adj.chunks_of([{u for path in kept[q] for u in path} for q in range(b)])
        cscore = _chunk_scores(ctx, rerank, texts, phi0, owner, chunks)
        ranking = lead_then_fill(owner, chunks, cscore, dense, depth_k, lead=cfg.top_n)
    extras = []
    for q in range(b):
        best_paths = sorted(kept[q], key=kept[q].get, reverse=True)[:3]
        extras.append(
            {
                "anchor_entities": [ctx.entities["name"][e] for e in sorted(anchors[q])[:20]],
                "paths": len(kept[q]),
                "graph_chunks": int(np.sum(owner == q)),
                "top_paths": [[ctx.units["text"][u] for u in path] for path in best_paths],
            }
        )
    return Retrieved(ranking, extras, [{} for _ in range(b)], clock.seconds)
