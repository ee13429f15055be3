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

from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import ClassVar, Literal

import numpy as np

from graphrag_engine.errors import ConfigError
from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.components_jit import edge_components
from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.reorganize import Reorganization, reorganize
from graphrag_engine.kernels.segments import first_occurrences
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import KEYED_GRAPH_SEARCH
from graphrag_engine.methods.regraphrag.perspectives import expand, unexpanded
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import EntityGraph, by_similarity, entity_graph, search
from graphrag_engine.retrieve.lines import line_tokens, prefixed_lines, within_budget
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.types import Context, Retrieved, Section, StageClock

ACROSS_ALL = "Across all"


@dataclass
class ReGraphRAGConfig:
    """ReGraphRAG's settings (paper section 5.1: m = 4, n = 3, 30 nodes per sub-query) and the
    ablation switches of its Table 2."""

    PAPER: ClassVar[dict[str, str]] = {  # the paper's values (graphrag_engine/settings_tables.py)
        "perspectives": "4 (m, section 5.1)",
        "sub_queries": "3 (n, section 5.1)",
        "top_k": "30 nodes a sub-query (section 5.1)",
        "expansion": "true (the full method)",
        "reorganize": "true (the full method)",
        "rerank": "true (the full method)",
        "context_tokens": "none; Table 4: about 18,000 tokens a question in all",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (setting_ranges.py)
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
    relation text with both ends' descriptions (`with_ends`, one batched call per batch; as
    good on MuSiQue train, worse on HotpotQA train and far slower, docs/benchmarks/graph_pick.md)."""
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

    def validate(self, where: str) -> None:
        """Positive sizes (the paper sweeps m in 1..6, n in 1..4)."""
        if min(self.perspectives, self.sub_queries, self.top_k, self.context_tokens) < 1:
            raise ConfigError(f"{where}: regraphrag sizes and context_tokens must be >= 1")

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


@dataclass(slots=True)
class Triplet:
    """One edge of a reorganized graph: a relation row, or a bridge (relation -1)."""

    a: int
    b: int
    relation: int
    score: float = 0.0
    key: tuple[int, int, int] = field(init=False, repr=False, compare=False)
    """Identity across perspectives (a bridge is its unordered node pair); set once, as
    scoring, grouping and sorting read it for every triplet of every perspective."""

    def __post_init__(self) -> None:
        self.key = (min(self.a, self.b), max(self.a, self.b), self.relation)


def triplets(g: EntityGraph, graph: Reorganization, edges: str) -> list[Triplet]:
    """Every relation touching (`incident`) or among (`among`) the reorganized nodes, in
    relation order, then the bridges."""
    inside = np.zeros(len(g.names), bool)
    inside[graph.nodes] = True
    touch = inside[g.src] | inside[g.dst] if edges == "incident" else inside[g.src] & inside[g.dst]
    rels = np.flatnonzero(touch)
    ends = zip(g.src[rels].tolist(), g.dst[rels].tolist(), rels.tolist(), strict=True)
    out = [Triplet(a, b, r) for a, b, r in ends]
    return out + [Triplet(u, v, -1) for u, v, _ in graph.bridges]


def describe(g: EntityGraph, t: Triplet) -> str:
    """The edge's description: the relation's, or a bridge's two end descriptions joined."""
    if t.relation >= 0:
        return g.rel_descriptions[t.relation] or "co-occurrence"
    ends = [g.descriptions[t.a] or g.names[t.a], g.descriptions[t.b] or g.names[t.b]]
    return " ".join(ends)


def edge_text(g: EntityGraph, t: Triplet) -> str:
    """What reranking embeds: the two ends, the edge's description and the ends' own."""
    own = "; ".join(d for d in (g.descriptions[t.a], g.descriptions[t.b]) if d)
    return f"{g.names[t.a]} - {g.names[t.b]}: {describe(g, t)}" + (f" ({own})" if own else "")


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
    every = [t for per_q in found for _, ts in per_q for t in ts]
    if not every:
        return
    keys = list(dict.fromkeys(t.key for t in every))
    row = {k: i for i, k in enumerate(keys)}
    if cfg.edge_text == "with_ends":
        first = {}
        for t in every:
            first.setdefault(t.key, t)
        vecs = ctx.encode_queries([edge_text(g, first[k]) for k in keys])
    else:
        relation = np.asarray([k[2] for k in keys], dtype=np.int64)
        stored = ctx.vectors("relation_vectors")
        vecs = np.zeros((len(keys), stored.shape[1]), np.float32)
        vecs[relation >= 0] = stored[relation[relation >= 0]]
        bridges = np.flatnonzero(relation < 0)
        if bridges.size:
            vecs[bridges] = ctx.encode_queries(
                [edge_text(g, Triplet(keys[i][0], keys[i][1], -1)) for i in bridges.tolist()]
            )
    vecs = l2_normalize(np.asarray(vecs, dtype=np.float32))
    for q, per_q in enumerate(found):  # each question scores its own triplets, not the batch's
        own = np.asarray(list(dict.fromkeys(row[t.key] for _, ts in per_q for t in ts)), np.int64)
        scores = dict(zip(own.tolist(), np.round(vecs[own] @ q_vecs[q], 5).tolist(), strict=True))
        for _, ts in per_q:
            for t in ts:
                t.score = scores[row[t.key]]
            ts.sort(key=lambda t: (-t.score, t.key))


def behind(g: EntityGraph, t: Triplet) -> np.ndarray:
    """The chunks a triplet came from: its relation's, or a bridge's two ends'."""
    if t.relation >= 0:
        return g.relation_chunks[t.relation]
    return np.concatenate([g.entity_chunks[t.a], g.entity_chunks[t.b]])


def triplet_text(g: EntityGraph, t: Triplet) -> str:
    """A triplet as the paper's sentence: its ends connected by the edge's description."""
    return f"{g.names[t.a]} is connected to {g.names[t.b]} with {describe(g, t)} relation."


_sentence_key = attrgetter("a", "b", "relation")
"""What a triplet's sentence depends on (its ends in order and its relation)."""


def stored_sentence_tokens(ctx: QueryContext, g: EntityGraph) -> dict[tuple[int, int, int], int]:
    """Tokens of every relation's sentence by its key, counted once an index and kept beside it
    as its lines' counts are (none where the index folder is read-only)."""
    relations = [
        Triplet(a, b, r)
        for r, (a, b) in enumerate(zip(g.src.tolist(), g.dst.tolist(), strict=True))
    ]
    counts = line_tokens(ctx, "regraphrag", lambda: [triplet_text(g, t) for t in relations])
    if counts is None:
        return {}
    return {_sentence_key(t): int(n) for t, n in zip(relations, counts.tolist(), strict=True)}


def sections(
    ctx: QueryContext,
    g: EntityGraph,
    per_q: list,
    budget: int,
    question_vector: np.ndarray,
    chunk_order: str = "vector",
) -> tuple[list[Section], list[int]]:
    """The perspective-grouped prompt of one question and its chunk ranking: the chunks behind
    the triplets it lists, then those behind the triplets the budget left out (by score); by
    cosine to the question within each part (`vector`), or triplet by triplet (`prompt`, a
    triplet's own chunks by cosine)."""
    count: dict[tuple, int] = {}
    for _, ts in per_q:
        for key in {t.key for t in ts}:
            count[key] = count.get(key, 0) + 1
    shared = list({t.key: t for _, ts in per_q for t in ts if count[t.key] > 1}.values())
    shared.sort(key=lambda t: (-t.score, t.key))
    groups = [(ACROSS_ALL, shared)]
    groups += [(name, [t for t in ts if count[t.key] == 1]) for name, ts in per_q]
    groups = [(name, ts) for name, ts in groups if ts]
    share = budget // max(len(groups), 1)
    out, listed, left_out = [], [], []
    for name, ts in groups:
        lines = prefixed_lines(
            ctx, "regraphrag", f"[{name}]:", ts, partial(triplet_text, g), _sentence_key,
            partial(stored_sentence_tokens, ctx, g),
        )  # fmt: skip
        kept = within_budget(ctx, lines, share)
        listed += ts[: len(kept)]
        left_out += ts[len(kept) :]
        if kept:
            out.append(Section(kept, title=f"Perspective: {name}", whole=True))
    left_out.sort(key=lambda t: (-t.score, t.key))
    parts = [listed, left_out] if chunk_order == "vector" else [[t] for t in [*listed, *left_out]]
    chunks: list[int] = []
    for part in (p for p in parts if p):
        new = first_occurrences(np.concatenate([behind(g, t) for t in part]).astype(np.int64))
        new = new[~np.isin(new, chunks)]
        chunks += by_similarity(ctx, question_vector, new.tolist())
    return out, chunks


STAT_KEYS = ("subgraphs", "after_paths", "after_bridges", "path_nodes_added", "bridges_added")
STAT_KEYS += ("node_components",)


def graph_nodes(nodes: np.ndarray, ts: list[Triplet]) -> np.ndarray:
    """A reorganized graph's nodes and its triplets' far ends, ascending."""
    ends = np.asarray([e for t in ts for e in (t.a, t.b)], dtype=np.int64)
    return np.union1d(np.asarray(nodes, dtype=np.int64), ends)


def component_labels(nodes: np.ndarray, ts: list[Triplet]) -> tuple[int, np.ndarray]:
    """Connected components of a node graph whose edges are the triplets (`nodes` ascending,
    holding every triplet end): their count and each node's label."""
    n = nodes.size
    if not n:
        return 0, np.zeros(0, dtype=np.int32)
    rows = np.searchsorted(nodes, np.asarray([t.a for t in ts], dtype=np.int64))
    cols = np.searchsorted(nodes, np.asarray([t.b for t in ts], dtype=np.int64))
    count, labels = edge_components(n, rows, cols)
    return int(count), labels


def structure(r: Reorganization, ts: list[Triplet]) -> tuple[int, ...]:
    """One perspective's figures: subgraphs (components before step 1), components after step
    1 and after step 2, path nodes and bridges added, and the connected components of its
    final node graph (its triplets' edges over its nodes)."""
    after_bridges = r.components_after_paths - len(r.bridges)
    return (
        r.groups,
        r.components_after_paths,
        after_bridges,
        r.path_nodes_added,
        len(r.bridges),
        component_labels(graph_nodes(r.nodes, ts), ts)[0],
    )


def question_components(nodes: list[np.ndarray], ts: list[Triplet]) -> list[list[int]]:
    """The components of a question's whole reorganized graph (every perspective's nodes and
    triplets together), each as its ascending entity ids: what the bench checks gold against."""
    every = graph_nodes(np.concatenate(nodes) if nodes else np.zeros(0, np.int64), ts)
    _, labels = component_labels(every, ts)
    return [every[labels == c].tolist() for c in np.unique(labels)]


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
                nodes.append(r.nodes)
                for key, value in zip(STAT_KEYS, structure(r, ts), strict=True):
                    st[key] += value
            found.append(mine)
            stats.append(st)
            components.append(question_components(nodes, [t for _, ts in mine for t in ts]))
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
