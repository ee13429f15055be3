"""Clue-RAG's Q-Iter retrieval over the chunk-unit-entity graph (the paper's Algorithms 3, 4).

For the whole batch at once:

1. Entity anchoring. Spreading activation: the query's entities (NER) are matched to their
   top-K entity nodes by embedding. Knowledge anchoring: the top-K units by query embedding
   add their entities (and join the accumulated unit set).
2. Iterative retrieval, depth 1..D, every query advancing together: the candidate units are
   the unvisited units of the current entities; the (updated) query embedding scores them in
   one similarity call, the best `prefilter` per query go to the reranker (one call for the
   batch), the best M per query are kept; their entities become the next frontier, and the
   query embedding drops their direction: phi_v <- normalise(phi_v - phi(k)).
3. The accumulated units, scored by the reranker against the query, vote for their chunks;
   the candidate chunks are reranked against the query (one call) and the top N kept.

Ablations (config `clue:`): no knowledge anchoring, no spreading activation, no query update.
The default reranker is the bi-encoder: it reuses the index's unit and chunk vectors, which is
the same cosine the bi-encoder would compute; a cross-encoder gets the texts.
"""

from __future__ import annotations

import numpy as np

from engine.eval.datasets import Question
from engine.methods.base import Retrieved, StageClock, register
from engine.retrieve.context import QueryContext
from engine.retrieve.cue import cue_adjacency, rowwise_dot, segment_topk
from engine.retrieve.dense import dense_search
from engine.retrieve.linking import link_entities
from engine.retrieve.ranking import ChunkRanking
from kernels.similarity import cosine_topk

ANSWER_PROMPT = """Context:
{context}

Read the context above and answer the question.
Question: {question}
Answer in as few words as possible.
Answer:"""


def answer_prompt(question: str, passages: list[str] | None) -> list[dict]:
    """Clue-RAG's answer prompt: the context first, then the question repeated, terse answer."""
    context = "\n\n".join(passages or [])
    return [{"role": "user", "content": ANSWER_PROMPT.format(context=context, question=question)}]


def _unit_norm(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class _Reranker:
    """Scores flat (query, unit) or (query, chunk) pairs for the whole batch in one call."""

    def __init__(self, ctx: QueryContext, texts: list[str]) -> None:
        self.ctx = ctx
        self.texts = texts
        self.bi = ctx.cfg.models.reranker.backend == "bi-encoder"
        if not self.bi:
            from engine.models import make_reranker

            self.model = make_reranker(ctx.cfg.models.reranker, ctx.embedder)

    def units(self, phi: np.ndarray, owner: np.ndarray, units: np.ndarray) -> np.ndarray:
        if self.bi:
            return rowwise_dot(phi, owner, self.ctx.unit_vectors, units)
        return self._cross(owner, [self.ctx.units["text"][u] for u in units])

    def chunks(self, phi: np.ndarray, owner: np.ndarray, chunks: np.ndarray) -> np.ndarray:
        if self.bi:
            return rowwise_dot(phi, owner, self.ctx.chunk_vectors, chunks)
        return self._cross(owner, [self.ctx.chunks["titled"][c] for c in chunks])

    def _cross(self, owner: np.ndarray, texts: list[str]) -> np.ndarray:
        pairs, spans = [], []
        for q in np.unique(owner):
            idx = np.flatnonzero(owner == q)
            pairs.append((self.texts[q], [texts[i] for i in idx]))
            spans.append(idx)
        out = np.zeros(len(texts), dtype=np.float32)
        for idx, s in zip(spans, self.model.score_batch(pairs), strict=True):
            out[idx] = s
        return out


@register("clue", answer_prompt=answer_prompt)
def clue_rag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Q-Iter for every question of the batch."""
    cfg = ctx.cfg.clue
    texts = [q.question for q in questions]
    b = len(texts)
    adj = cue_adjacency(ctx)
    rerank = _Reranker(ctx, texts)
    with clock.stage("embed_queries"):
        phi0 = _unit_norm(ctx.encode_queries(texts))

    # 1. entity anchoring
    frontier: list[set[int]] = [set() for _ in range(b)]
    visited: list[set[int]] = [set() for _ in range(b)]
    acc: list[dict[int, float]] = [{} for _ in range(b)]
    found: list[list[int]] = [[] for _ in range(b)]  # units in discovery order (depth, rank)
    with clock.stage("anchor"):
        if cfg.spreading_activation:
            links, _ = link_entities(ctx, texts, top_k=cfg.anchor_k)
            for q, linked in enumerate(links):
                frontier[q].update(linked)
        if cfg.knowledge_anchoring:
            scores, units = cosine_topk(phi0, ctx.unit_vectors, cfg.anchor_k, normalized=True)
            for q in range(b):
                keep = units[q][units[q] >= 0]
                frontier[q].update(adj.entities_of(keep).tolist())
                visited[q].update(keep.tolist())
                acc[q].update(zip(keep.tolist(), scores[q][units[q] >= 0].tolist(), strict=True))
                found[q].extend(keep.tolist())
    anchored = [sorted(f) for f in frontier]

    # 2. iterative retrieval, all queries one depth at a time
    phi = phi0.copy()
    expanded: list[set[int]] = [set() for _ in range(b)]
    for _depth in range(cfg.depth):
        owner_l, unit_l = [], []
        for q in range(b):
            ents = np.fromiter(frontier[q] - expanded[q], dtype=np.int64)
            expanded[q] |= frontier[q]
            cand = adj.units_of(ents)
            if visited[q]:
                cand = cand[~np.isin(cand, np.fromiter(visited[q], dtype=np.int64))]
            owner_l.append(np.full(cand.size, q, dtype=np.int64))
            unit_l.append(cand)
        owner, units = np.concatenate(owner_l), np.concatenate(unit_l)
        if owner.size == 0:
            break
        with clock.stage("similarity"):
            sim = rowwise_dot(phi, owner, ctx.unit_vectors, units)
            pre = segment_topk(owner, sim, cfg.prefilter)
        owner, units = owner[pre], units[pre]
        with clock.stage("rerank_units"):
            score = rerank.units(phi0, owner, units)
        best = segment_topk(owner, score, cfg.beam)
        frontier = [set() for _ in range(b)]
        picked: list[list[int]] = [[] for _ in range(b)]
        for q, u, s in zip(owner[best], units[best], score[best], strict=True):
            acc[q][int(u)] = float(s)
            visited[q].add(int(u))
            picked[q].append(int(u))
            found[q].append(int(u))
        for q in range(b):
            if picked[q]:
                frontier[q] = set(adj.entities_of(np.asarray(picked[q])).tolist())
                if cfg.query_update:
                    step = ctx.unit_vectors[picked[q]].mean(axis=0)
                    phi[q] = _unit_norm(phi[q] - step)

    # 3. units vote for chunks; final chunk reranking
    depth_k = 2 * ctx.cfg.retrieval.candidates
    with clock.stage("dense_fill"):
        dense = dense_search(ctx, phi0, depth_k)
    with clock.stage("rerank_chunks"):
        owner_l, chunk_l = [], []
        for q in range(b):
            chunks = (
                np.unique(adj.unit_chunk[np.fromiter(acc[q], dtype=np.int64)]) if acc[q] else []
            )
            owner_l.append(np.full(len(chunks), q, dtype=np.int64))
            chunk_l.append(np.asarray(chunks, dtype=np.int64))
        owner, chunks = np.concatenate(owner_l), np.concatenate(chunk_l)
        cscore = rerank.chunks(phi0, owner, chunks)
        order = segment_topk(owner, cscore, depth_k)
    ids = np.full((b, depth_k), -1, dtype=np.int64)
    out = np.zeros((b, depth_k), dtype=np.float32)
    for q in range(b):
        mine = order[owner[order] == q]
        # the reranked graph chunks lead (top N first); dense hits fill the rest of the list
        score_of = dict(zip(*dense.row(q), strict=True))
        score_of.update(zip(chunks[mine].tolist(), cscore[mine].tolist(), strict=True))
        row = list(dict.fromkeys(chunks[mine].tolist() + dense.row(q)[0]))[:depth_k]
        ids[q, : len(row)] = row
        out[q, : len(row)] = [score_of[c] for c in row]
    extras = [
        {
            "anchor_entities": [ctx.entities["name"][e] for e in anchored[q][:20]],
            "units": len(acc[q]),
            "graph_chunks": len(set(adj.unit_chunk[list(acc[q])].tolist())) if acc[q] else 0,
            "top_units": [
                ctx.units["text"][u] for u in sorted(acc[q], key=acc[q].get, reverse=True)[:5]
            ],
        }
        for q in range(b)
    ]
    return Retrieved(ChunkRanking(ids, out), extras, [{} for _ in range(b)], clock.seconds)
