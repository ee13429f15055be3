"""ReGraphRAG (2025): perspective expansion, graph reorganization, query-aware triplet
reranking, over the shared entity graph, for the whole batch at once.

1. Perspective expansion (4.1): one batched structured LLM call gives every question m
   perspectives x n sub-queries (`expansion: false`: the question is its only sub-query).
2. Retrieval: all sub-queries of all questions are embedded in one call and matched against
   the entity vectors in one top-k call (`top_k` nodes each); each sub-query's nodes are a
   subgraph, and equal subgraphs within a perspective are kept once. A subgraph's edges are
   its nodes' one-hop relations (`edges: among`: only those between its nodes).
3. Graph reorganization (4.2, Algorithm 1, graphrag_engine/kernels/reorganize.py), per perspective: shortest
   paths between subgraphs merged in ascending length (union-find), then similarity bridges
   between the most similar node pairs of what is still apart, until one component remains
   (`reorganize: false`: the subgraphs as retrieved).
4. Query-aware reranking (4.3): the reorganized graph as triplets (its nodes' relations, and
   the bridges), ordered by the cosine of the edge's embedding to the question
   (`rerank: false`: relation order, bridges last).
5. Prompt (4.4): "[Perspective]: <a> is connected to <b> with {description} relation." lines,
   grouped by perspective; a triplet of several perspectives is listed once under
   "[Across all]". Each group is one section, cut whole under its share of `context_tokens`.

The chunk ranking (for Recall@k) is the chunks behind the listed triplets, then those behind
the triplets the budget left out, each part by cosine to the question (`chunk_order: prompt`:
triplet by triplet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.reorganize import Reorganization, reorganize
from graphrag_engine.kernels.segments import first_occurrences
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import KEYED_GRAPH_SEARCH
from graphrag_engine.methods.regraphrag.perspectives import expand, unexpanded
from graphrag_engine.methods.regraphrag.triplets import (
    Triplet,
    Triplets,
    chunks_behind,
    component_labels,
    edge_text,
    graph_components,
    graph_nodes,
    question_components,
    sentence_tokens,
    sentences,
    triplet_text,
    triplets,
)
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import EntityGraph, by_similarity, entity_graph, search
from graphrag_engine.retrieve.lines import budgeted_section, line_tokens, prefixed_lines
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.types import Context, Retrieved, Section, StageClock

ACROSS_ALL = "Across all"


@dataclass
class ReGraphRAGConfig:
    """ReGraphRAG's settings (paper section 5.1: m = 4, n = 3, 30 nodes per sub-query) and the
    ablation switches of its Table 2."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "perspectives": "4 (m, section 5.1)",
        "sub_queries": "3 (n, section 5.1)",
        "top_k": "30 nodes a sub-query (section 5.1)",
        "expansion": "true (the full method)",
        "reorganize": "true (the full method)",
        "rerank": "true (the full method)",
        "context_tokens": "none; Table 4: about 18,000 tokens a question in all",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "perspectives": ">= 1",
        "sub_queries": ">= 1",
        "top_k": ">= 1",
        "context_tokens": ">= 1",
    }

    perspectives: int = 4
    """m: perspectives per question."""
    sub_queries: int = 3
    """n: sub-queries per perspective."""
    top_k: int = 30
    """Entity nodes retrieved per sub-query."""
    expansion: bool = True
    """False: w/o P-exp (the question is its only sub-query; no LLM before the answer)."""
    reorganize: bool = True
    """False: w/o Reorg (the subgraphs as retrieved, no paths or bridges)."""
    rerank: bool = True
    """False: w/o Rerank (triplets in relation order, bridges last)."""
    edges: Literal["incident", "among"] = "incident"
    """A subgraph's edges: every relation touching one of its nodes (`incident`: the one-hop
    relations LightRAG's node retrieval returns, on whose index and retriever the paper builds),
    or only the relations among its nodes (`among`)."""
    path_lengths: Literal["hops", "inverse_weight"] = "hops"
    """Step 1's path length: hop count (BFS), or the sum of 1/weight (Dijkstra)."""
    edge_text: Literal["relation", "with_ends"] = "relation"
    """Reranking reuses the index's relation vectors (`relation`: an extracted relation's
    "a - b: description", a sentence-described one's sentences), or embeds each edge as its
    relation text with both ends' descriptions (`with_ends`, one batched call per batch; far
    slower, docs/benchmarks/train_picks.md compares them)."""
    chunk_order: Literal["vector", "prompt"] = "vector"
    """The chunk ranking (for Recall@k; the prompt holds triplets): the chunks behind the listed
    triplets by cosine to the question, then those behind the triplets the budget left out
    (`vector`, the chunk pick the other entity-graph methods share), or triplet by triplet in
    prompt order (`prompt`)."""
    context_tokens: int = 16000
    """Token budget of the triplet sections, shared equally among them. The paper gives none;
    its Table 4 counts about 18,000 tokens a question with expansion (3,700 without), most of
    them the triplets of 12 sub-queries x 30 nodes, so the triplets get 16,000 (shrunk in
    proportion to a smaller answer window)."""

    def context_budget(self) -> int:
        """Total of the triplet sections."""
        return self.context_tokens

    def llm_use(self) -> str | None:
        """Perspective expansion needs the LLM even with --retrieval-only."""
        return "regraphrag.expansion" if self.expansion else None


ANSWER_SYSTEM = """You answer from a knowledge graph organised by perspective. Build the answer
only on the connections listed: cover each perspective under its own heading, in markdown,
precisely and without repeating yourself. General knowledge may explain a listed fact but must
never add a new one. Where the graph does not hold enough to answer fully, say what is missing
instead of guessing. Answer in the language of the question."""


def answer_prompt(question: str, texts: list[str] | None, cfg=None) -> list[dict]:
    """The response prompt of the paper's appendix A.3, in our words."""
    graph = "\n\n".join(texts or []) or "(nothing was retrieved)"
    user = f"Knowledge graph by perspective:\n{graph}\n\nQuestion: {question}\nAnswer:"
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": user}]


def path_graph(ctx: QueryContext, g: EntityGraph, lengths: str) -> CSRGraph:
    """The entity graph for step 1's paths (undirected; hop or 1/weight lengths)."""
    w = None if lengths == "hops" else 1.0 / np.maximum(g.weight, 1e-9)
    return ctx.memo(
        ("regraphrag_paths", lengths),
        lambda: CSRGraph.from_edges(g.src, g.dst, w, len(g.names), directed=False),
    )


def rerank(
    ctx: QueryContext,
    g: EntityGraph,
    cfg: ReGraphRAGConfig,
    found: list,
    question_vectors: np.ndarray,
) -> None:
    """Score every triplet of every question by cosine to its question's vector (one embedding
    call for the edges) and sort each perspective's triplets by it."""
    q_vecs = l2_normalize(np.asarray(question_vectors, dtype=np.float32))
    every = Triplets.joined([ts for per_q in found for _, ts in per_q])
    if not len(every):
        return
    # one vector row per distinct triplet of the batch, in the order they first occur
    _, first, inverse = np.unique(every.keys, return_index=True, return_inverse=True)
    appearance = np.argsort(first, kind="stable")
    row_of = np.empty(first.size, np.int64)
    row_of[appearance] = np.arange(first.size)
    rows = row_of[inverse.ravel()]
    distinct = every.take(first[appearance])
    if cfg.edge_text == "with_ends":
        vecs = ctx.encode_queries([edge_text(g, t) for t in distinct])
    else:
        relation = distinct.relation
        stored = ctx.vectors("relation_vectors")
        vecs = np.zeros((len(distinct), stored.shape[1]), np.float32)
        vecs[relation >= 0] = stored[relation[relation >= 0]]
        bridges = np.flatnonzero(relation < 0)
        if bridges.size:
            low, high = np.minimum(distinct.a, distinct.b), np.maximum(distinct.a, distinct.b)
            vecs[bridges] = ctx.encode_queries(
                [edge_text(g, Triplet(int(low[i]), int(high[i]), -1)) for i in bridges.tolist()]
            )
    vecs = l2_normalize(np.asarray(vecs, dtype=np.float32))
    score_of = np.zeros(len(distinct), np.float32)
    at = 0
    for q, per_q in enumerate(found):  # each question scores its own triplets, not the batch's
        mine = rows[at : at + sum(len(ts) for _, ts in per_q)]
        own = first_occurrences(mine)
        score_of[own] = np.round(vecs[own] @ q_vecs[q], 5)
        for i, (name, ts) in enumerate(per_q):
            ts.score = score_of[rows[at : at + len(ts)]].astype(np.float64)
            per_q[i] = (name, ts.best_first())
            at += len(ts)


def sections(
    ctx: QueryContext,
    g: EntityGraph,
    per_q: list[tuple[str, Triplets]],
    budget: int,
    question_vector: np.ndarray,
    chunk_order: str = "vector",
) -> tuple[list[Section], list[int]]:
    """The perspective-grouped prompt of one question and its chunk ranking: the chunks behind
    the triplets it lists, then those behind the triplets the budget left out (by score); by
    cosine to the question within each part (`vector`), or triplet by triplet (`prompt`, a
    triplet's own chunks by cosine)."""
    per_q = [(name, ts if isinstance(ts, Triplets) else Triplets.of(ts)) for name, ts in per_q]
    groups = across_all(per_q) if len(per_q) > 1 else per_q
    groups = [(name, ts) for name, ts in groups if len(ts)]
    share = budget // max(len(groups), 1)
    counts = stored_sentence_tokens(ctx, g)
    out, listed, left_out = [], [], []
    for name, ts in groups:
        lines = prefixed_lines(
            ctx, "regraphrag", f"[{name}]:", range(len(ts)),
            sentences(g, ts),
            key=lambda i, ts=ts: (int(ts.a[i]), int(ts.b[i]), int(ts.relation[i])),
            stored=lambda rows, ts=ts: sentence_tokens(g, counts, ts)[np.asarray(rows)],
        )  # fmt: skip
        kept = budgeted_section(ctx, lines, share, f"Perspective: {name}")
        n = len(kept.items) if kept else 0
        listed.append(ts.take(slice(0, n)))
        left_out.append(ts.take(slice(n, None)))
        if kept:
            out.append(kept)
    shown, rest = Triplets.joined(listed), Triplets.joined(left_out).best_first()
    if chunk_order == "vector":
        parts = [shown, rest]
    else:
        both = Triplets.joined([shown, rest])
        parts = [both.take([i]) for i in range(len(both))]
    chunks: list[int] = []
    for part in (p for p in parts if len(p)):
        new = first_occurrences(chunks_behind(ctx, g, part))
        new = new[~np.isin(new, chunks)]
        chunks += by_similarity(ctx, question_vector, new.tolist())
    return out, chunks


def across_all(per_q: list[tuple[str, Triplets]]) -> list[tuple[str, Triplets]]:
    """The "[Across all]" group (each triplet found in several perspectives, once, by score),
    and then each perspective's own triplets: the groups a question's prompt lists."""
    own = [ts.keys for _, ts in per_q]
    keys, seen = np.unique(np.concatenate([np.unique(k) for k in own]), return_counts=True)
    several = keys[seen > 1]
    every = Triplets.joined([ts for _, ts in per_q])
    every_keys = np.concatenate(own)
    where = np.flatnonzero(np.isin(every_keys, several))[::-1]
    _, last = np.unique(every_keys[where], return_index=True)  # each one's last occurrence
    groups = [(ACROSS_ALL, every.take(where[last]).best_first())]
    return groups + [
        (name, ts.take(~np.isin(k, several))) for (name, ts), k in zip(per_q, own, strict=True)
    ]


def stored_sentence_tokens(ctx: QueryContext, g: EntityGraph) -> np.ndarray | None:
    """Tokens of every relation's sentence by relation row, counted once an index and kept
    beside it as its lines' counts are (None where the index folder is read-only)."""

    def every() -> list[str]:
        ends = zip(g.src.tolist(), g.dst.tolist(), strict=True)
        return [triplet_text(g, Triplet(a, b, r)) for r, (a, b) in enumerate(ends)]

    return line_tokens(ctx, "regraphrag", every)


STAT_KEYS = ("subgraphs", "after_paths", "after_bridges", "path_nodes_added", "bridges_added")
STAT_KEYS += ("node_components",)


def structure(r: Reorganization, labels: tuple[int, np.ndarray]) -> tuple[int, ...]:
    """One perspective's figures: subgraphs (components before step 1), components after step
    1 and after step 2, path nodes and bridges added, and the connected components of its
    final node graph (`labels`: their count and each node's label)."""
    after_bridges = r.components_after_paths - len(r.bridges)
    return (
        r.groups,
        r.components_after_paths,
        after_bridges,
        r.path_nodes_added,
        len(r.bridges),
        labels[0],
    )


@register(
    "regraphrag",
    config=ReGraphRAGConfig,
    answer_prompt=answer_prompt,
    prompt_style="long",
    paper="ReGraphRAG (2025): perspective expansion, graph reorganization, triplet reranking",
    needs=KEYED_GRAPH_SEARCH,
    needs_note="descriptions when an LLM extracted triples",
)
def regraphrag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Perspective-wise reorganized knowledge graphs for every question of the batch."""
    cfg: ReGraphRAGConfig = ctx.cfg.options
    texts = [q.question for q in questions]
    g = entity_graph(ctx)
    with clock.stage("perspectives"):
        if cfg.expansion:
            exp = expand(ctx, texts, cfg.perspectives, cfg.sub_queries)
            views, fallback, tokens = exp.views, exp.fallback, exp.tokens
        else:
            views, fallback, tokens = [unexpanded(t) for t in texts], [False] * len(texts), None
    with clock.stage("node_search"):
        subs = [s for per_q in views for _, queries in per_q for s in queries]
        # one embedding call for the questions (reranking, chunk order) and the sub-queries;
        # without expansion they are the same texts
        asked = list(dict.fromkeys([*texts, *subs]))
        vector_of = dict(zip(asked, ctx.encode_queries(asked), strict=True))
        sub_vecs = np.asarray([vector_of[s] for s in subs], dtype=np.float32)
        ids, _ = search(ctx, subs, "entity_vectors", cfg.top_k, sub_vecs)
        q_vecs = np.stack([vector_of[t] for t in texts])
    paths = path_graph(ctx, g, cfg.path_lengths)
    vectors = ctx.memo(
        "regraphrag_unit_entity_vectors",
        lambda: l2_normalize(np.asarray(ctx.entity_vectors, dtype=np.float32)),
    )
    found, stats, components, row = [], [], [], 0
    with clock.stage("reorganize"):
        for per_q in views:
            mine, st, nodes = [], dict.fromkeys(STAT_KEYS, 0), []
            for name, queries in per_q:
                groups = dict.fromkeys(
                    tuple(sorted(x for x in ids[row + i].tolist() if x >= 0))
                    for i in range(len(queries))
                )
                row += len(queries)
                kept = [list(k) for k in groups if k]
                weighted = cfg.path_lengths != "hops"
                r = reorganize(paths, kept, vectors, weighted, cfg.reorganize, cfg.reorganize)
                ts = triplets(g, r, cfg.edges)
                mine.append((name, ts))
                nodes.append(graph_nodes(r.nodes, ts))
                labels = component_labels(nodes[-1], ts)
                for key, value in zip(STAT_KEYS, structure(r, labels), strict=True):
                    st[key] += value
            found.append(mine)
            stats.append(st)
            if len(mine) == 1:  # the question's graph is its one perspective's
                components.append(graph_components(nodes[0], labels[1]))
            else:
                every = Triplets.joined([ts for _, ts in mine])
                components.append(question_components(nodes, every))
    with clock.stage("rerank"):
        if cfg.rerank:
            rerank(ctx, g, cfg, found, q_vecs)
    contexts, orders, extras = [], [], []
    with clock.stage("build_context"):
        for q, per_q in enumerate(found):
            budget = ctx.scaled(cfg.context_tokens)
            secs, chunks = sections(ctx, g, per_q, budget, q_vecs[q], cfg.chunk_order)
            contexts.append(Context(secs))
            orders.append(chunks)
            extras.append(
                {
                    "perspectives": [name for name, _ in views[q]],
                    "sub_queries": [s for _, qs in views[q] for s in qs],
                    "expansion_fallback": fallback[q],
                    "triplets": sum(len(ts) for _, ts in per_q),
                    **stats[q],
                    "components": components[q],
                }
            )
    depth = 2 * ctx.cfg.retrieval.candidates
    llm = [{"perspectives": t} for t in tokens] if tokens else [{} for _ in texts]
    return Retrieved(from_orders(orders, depth), extras, llm, clock.seconds, contexts)
