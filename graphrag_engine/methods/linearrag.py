"""LinearRAG (Zhuang et al., arXiv 2510.10114, ICLR 2026): retrieval over a relation-free graph
of entities, sentences and passages, built with no LLM (spaCy NER and sentence embeddings; in
this index the LLM-free knowledge units are the sentences and the chunks the passages).

For a batch of questions:

1. Entity linking: one NER pass over the questions; each mention is linked to its nearest graph
   entity by embedding (one similarity call for the batch). A linked entity seeds the question
   with its cosine as weight (tier 1).
2. Semantic bridging, level by level across all questions: every frontier entity whose score is
   at least `threshold` reaches the sentences that mention it (not yet used by its question),
   keeps the `top_sentences` most similar to the question, and passes score x sentence
   similarity to every entity in them; those at or above the threshold add it to their weight
   and form the next frontier (tier + 1). `rounds` rounds (the public code's
   max_iterations 3 runs two).
3. Passage seeds: every passage gets `passage_ratio` x its min-max normalised dense similarity
   plus log(1 + entity bonus), where each activated entity adds score x log(1 + mentions in the
   passage) / tier; times `passage_node_weight`.
4. One PPR (damping 0.5) over the entity-passage graph, passage -> entity edges weighted by the
   entity's share of the passage's mentions, reset = entity weights + passage seeds; passages
   ranked by their PPR mass. A question that links no entity falls back to dense retrieval.

Ablations: `activation: false` keeps only the seed entities (no bridging); `dense_seeds: false`
drops the dense term of the passage seeds (passages are seeded by entity bonus alone).

Defaults are the public code's (one sentence per entity, passage ratio 1.5, passage weight 0.05,
damping 0.5, two rounds) but the threshold, chosen on train for MiniLM. Where the batch differs
from the public code's question-at-a-time loop: two frontier entities of a question that pick the
same sentence in the same round use it once (the code's loop gives the later one its next
sentence), and an entity reached twice in a round carries the larger score into the next round
(the code keeps the last).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.ppr import personalized_pagerank
from graphrag_engine.kernels.segments import csr_gather
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.cue_graph import CueAdjacency, cue_adjacency
from graphrag_engine.retrieve.dense import dense_scores, dense_search
from graphrag_engine.retrieve.linking import link_and_embed
from graphrag_engine.retrieve.types import Retrieved, StageClock

GRAPH = "graph_passage_entity"
BLOCK = 256
"""Questions whose (questions x passages) dense seed matrix is held at once."""


@dataclass
class LinearRAGConfig:
    """LinearRAG: semantic bridging through sentences, then PPR over entities and passages."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "threshold": "0.5 (authors' code, with an mpnet embedder)",
        "top_sentences": "1 (authors' code)",
        "rounds": "2 (authors' code: max_iterations 3)",
        "passage_ratio": "1.5 (authors' code)",
        "passage_node_weight": "0.05 (authors' code)",
        "damping": "0.5 (authors' code)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "threshold": "[-1, 1]",
        "top_sentences": ">= 1",
        "damping": "(0, 1)",
        "push_eps": "> 0",
    }

    threshold: float = 0.2
    """Activation floor: a frontier entity below it stops, a passed score below it is dropped
    (the public code's 0.5 goes with its mpnet embedder; 0.2 was best for MiniLM on the MuSiQue
    and HotpotQA train sets with dates as entities, bench/linearrag.py)."""
    top_sentences: int = 1
    """Sentences each frontier entity passes its score through (most similar to the question)."""
    rounds: int = 2
    """Bridging rounds after the seed entities."""
    activation: bool = True
    """Spread activation through sentences (false: the seed entities alone)."""
    dense_seeds: bool = True
    """Seed passages with their dense similarity (false: with the entity bonus alone)."""
    passage_ratio: float = 1.5
    """Weight of a passage's min-max normalised dense similarity in its seed score."""
    passage_node_weight: float = 0.05
    """Scale of passage seed scores against entity weights in the PPR reset."""
    damping: float = 0.5
    """PPR damping (probability of following an edge)."""
    ppr: Literal["exact", "local"] = "exact"
    """exact: batched power iteration; local: forward push (the dense seeds cover every passage,
    so a push touches the whole graph: exact is the default)."""
    push_eps: float = 1e-6
    """local: the push's residual threshold per unit of degree."""


@dataclass
class Activation:
    """Per question: entity weights summed over all rounds, and each activated entity's last
    (score, tier)."""

    weight: list[dict[int, float]]
    active: list[dict[int, tuple[float, int]]]


@register(
    "linearrag",
    config=LinearRAGConfig,
    paper="LinearRAG (Zhuang et al., ICLR 2026), relation-free entity-sentence-passage graph",
    needs={
        Part.CHUNKS,
        Part.CHUNK_VECTORS,
        Part.PASSAGE_ENTITY_GRAPH,
        Part.CUE_GRAPH,
        Part.ENTITY_VECTORS,
        Part.UNIT_VECTORS,
    },
)
def linearrag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Rank chunks for every question by PPR from its bridged entities and dense passages."""
    cfg: LinearRAGConfig = ctx.cfg.options
    depth = 2 * ctx.cfg.retrieval.candidates
    texts = [q.question for q in questions]
    with clock.stage("link_entities"):  # questions and their mentions: one embedding call
        links, mentions, qvec = link_and_embed(ctx, texts, top_k=1)
    with clock.stage("activation"):
        act = activate(cue_adjacency(ctx), ctx.unit_vectors, qvec, links, cfg)
    graph, c0, c1, e0 = passage_entity_graph(ctx)
    seeded = [q for q, lk in enumerate(links) if lk]
    ranking = dense_search(ctx, qvec, depth)  # the fallback of questions without entities
    for lo in range(0, len(seeded), BLOCK):
        block = seeded[lo : lo + BLOCK]
        with clock.stage("passage_seeds"):
            seeds = _reset_vectors(ctx, graph, qvec[block], [act.active[q] for q in block], cfg)
            for i, q in enumerate(block):
                nodes, weights = seeds[i]
                ent = np.fromiter(act.weight[q].keys(), np.int64, len(act.weight[q]))
                w = np.fromiter(act.weight[q].values(), np.float64, len(act.weight[q]))
                nodes, weights = np.concatenate([nodes, e0 + ent]), np.concatenate([weights, w])
                seeds[i] = (nodes[weights > 0], weights[weights > 0])
            live = [i for i, (nodes, _) in enumerate(seeds) if nodes.size]
            block, seeds = [block[i] for i in live], [seeds[i] for i in live]
        with clock.stage("ppr"):
            result = personalized_pagerank(
                graph, seeds, damping=cfg.damping, mode=cfg.ppr, eps=cfg.push_eps,
                device=ctx.device, topk=depth, within=(c0, c1),
            )  # fmt: skip
            nodes, scores = result.topk(depth)
            ids = np.where((nodes >= 0) & (scores > 0), nodes - c0, -1)
            ranking.ids[block] = ids
            ranking.scores[block] = np.where(ids >= 0, scores, 0.0).astype(np.float32)
    names = ctx.entities["name"]
    extras = [
        {
            "query_entities": mentions[q],
            "linked_entities": [names[e] for e in sorted(links[q], key=links[q].get, reverse=True)],
            "activated_entities": len(act.active[q]) - len(links[q]),
            "fallback": not links[q],
        }
        for q in range(len(questions))
    ]
    return Retrieved(ranking, extras, [{} for _ in questions], clock.seconds)


def activate(
    adj: CueAdjacency,
    unit_vectors: np.ndarray,
    qvec: np.ndarray,
    links: list[dict[int, float]],
    cfg: LinearRAGConfig,
) -> Activation:
    """Semantic bridging of every question's seed entities, one round at a time for the whole
    batch (flat arrays with a question owner, no per-question loop over sentences)."""
    weight = [dict(lk) for lk in links]
    active = [{e: (s, 1) for e, s in lk.items()} for lk in links]
    f_q = np.array([q for q, lk in enumerate(links) for _ in lk], dtype=np.int64)
    f_e = np.array([e for lk in links for e in lk], dtype=np.int64)
    f_s = np.array([s for lk in links for s in lk.values()], dtype=np.float64)
    n_units = np.int64(max(len(unit_vectors), 1))
    spent: list[set[int]] = [set() for _ in links]  # the sentences each question has passed
    for tier in range(2, cfg.rounds + 2 if cfg.activation else 2):
        keep = f_s >= cfg.threshold
        f_q, f_e, f_s = f_q[keep], f_e[keep], f_s[keep]
        if f_e.size == 0:
            break
        # each frontier entity's best sentences its question has not spent, nearest the
        # question first: one compiled pass over the entities' sentence lists, which grow
        # with the corpus (no gathered candidate matrix, no sort of every candidate)
        pair, units, sim = adj.top_units(
            qvec[f_q], f_e, [tuple(spent[q]) for q in f_q.tolist()], unit_vectors,
            cfg.top_sentences,
        )  # fmt: skip
        keys = f_q[pair] * n_units + units
        _, first = np.unique(keys, return_index=True)  # a sentence once per question and round
        top = np.sort(first)
        pair, units, sim = pair[top], units[top], sim[top].astype(np.float64)
        for q, u in zip(f_q[pair].tolist(), units.tolist(), strict=True):
            spent[q].add(u)
        hold, slots = csr_gather(adj.unit_indptr, units)  # every entity of each chosen sentence
        nq, ne = f_q[pair[hold]], adj.unit_ents[slots]
        ns = f_s[pair[hold]] * sim[hold]
        ok = ns >= cfg.threshold
        nq, ne, ns = nq[ok], ne[ok], ns[ok]
        for q, e, s in zip(nq.tolist(), ne.tolist(), ns.tolist(), strict=True):
            weight[q][e] = weight[q].get(e, 0.0) + s
        order = np.lexsort((-ns, ne, nq))  # per (question, entity) the largest score first
        code = nq[order] * np.int64(adj.ent_indptr.size) + ne[order]
        lead = np.ones(code.size, dtype=bool)
        lead[1:] = code[1:] != code[:-1]
        f_q, f_e, f_s = nq[order][lead], ne[order][lead], ns[order][lead]
        for q, e, s in zip(f_q.tolist(), f_e.tolist(), f_s.tolist(), strict=True):
            active[q][e] = (s, tier)
    return Activation(weight, active)


def passage_entity_graph(ctx: QueryContext) -> tuple[CSRGraph, int, int, int]:
    """The index's passage-entity graph with each passage -> entity edge weighted by the
    entity's share of the passage's mentions (LinearRAG's term frequency), its chunk range and
    first entity node; built once per run."""

    def build() -> tuple[CSRGraph, int, int, int]:
        parts = ctx.graph_parts(GRAPH)
        (c0, c1), e0 = parts["chunk"], parts["entity"][0]
        e = ctx.index.table(GRAPH).to_pydict()
        src, dst = np.asarray(e["src"], np.int64), np.asarray(e["dst"], np.int64)
        count = np.asarray(e["weight"], np.float64)
        total = np.bincount(src - c0, weights=count, minlength=c1 - c0)
        tf = count / np.maximum(total[src - c0], 1e-12)
        n = ctx.graph(GRAPH).n_nodes
        return CSRGraph.from_edges(src, dst, tf, n_nodes=n, directed=False), c0, c1, e0

    return ctx.memo("linearrag_graph", build)


def _reset_vectors(
    ctx: QueryContext,
    graph: CSRGraph,
    qvec: np.ndarray,
    active: list[dict[int, tuple[float, int]]],
    cfg: LinearRAGConfig,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Passage seeds of a block of questions: (chunk nodes, weights) per question."""
    pe = ctx.graph(GRAPH)  # mention counts: the number of a chunk's sentences naming the entity
    (c0, c1), e0 = ctx.graph_parts(GRAPH)["chunk"], ctx.graph_parts(GRAPH)["entity"][0]
    n_chunks = c1 - c0
    score = np.zeros((len(active), n_chunks))
    if cfg.dense_seeds:
        dense = dense_scores(ctx, qvec).astype(np.float64)
        lo, hi = dense.min(axis=1, keepdims=True), dense.max(axis=1, keepdims=True)
        score += cfg.passage_ratio * (dense - lo) / np.where(hi > lo, hi - lo, 1.0)
    a_q = np.array([q for q, a in enumerate(active) for _ in a], dtype=np.int64)
    a_e = np.array([e for a in active for e in a], dtype=np.int64)
    a_s = np.array([s for a in active for s, _ in a.values()], dtype=np.float64)
    a_t = np.array([t for a in active for _, t in a.values()], dtype=np.float64)
    if a_e.size:
        owner, slots = csr_gather(pe.indptr.astype(np.int64), e0 + a_e)
        chunk = pe.indices[slots].astype(np.int64) - c0
        bonus = np.zeros_like(score)
        np.add.at(bonus, (a_q[owner], chunk), a_s[owner] * np.log1p(pe.weights[slots]) / a_t[owner])
        score += np.log1p(bonus)
    score *= cfg.passage_node_weight
    out = []
    for row in score:
        nz = np.flatnonzero(row > 0)
        out.append((c0 + nz, row[nz]))
    return out
