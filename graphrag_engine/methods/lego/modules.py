"""LEGO-GraphRAG's three modules, each batch-first over all questions of a batch:

* subgraph extraction (SE): PPR or RWR from each question's topic entities keeps its `max_ent`
  best nodes; an optional scorer then drops nodes and triples under thresholds and keeps each
  node's `window` best triples;
* path filtering (PF): every shortest path from each topic entity, complete paths
  (every simple path up to `max_hops`, capped) or iterative beam search scored by a scorer;
* path refinement (PR): a scorer ranks the filtered paths and the `top_k` stay.

Every module returns, per question, what it kept, so the harness can score each module's
answer-entity precision / recall.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from graphrag_engine.errors import ConfigError
from graphrag_engine.kernels.ppr import personalized_pagerank, sampled_rwr
from graphrag_engine.methods.lego.graph import InducedCut, TripleGraph, pretty_relation
from graphrag_engine.methods.lego.paths import PathText
from graphrag_engine.models.rerank import Scorer
from graphrag_engine.retrieve.beam import beam_step, flatten
from graphrag_engine.retrieve.scoring import score_flat, scorer_names

SCORER_DOC = """How a LEGO module scores texts against the question: any registered scorer
(graphrag_engine.retrieve.scoring): none, random, bm25, bi-encoder (the embedder), cross-encoder
(models.reranker), llm (the query LLM), or a fine-tuned bi-encoder-ft / llm-ft read from `model`
(a local folder)."""


@dataclass
class LegoSEConfig:
    """LEGO subgraph extraction: PPR or RWR from the topic entities, then an optional scorer."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "restart_prob": "0.8 (section 5.1)",
        "max_ent": "2,000 (section 5.1)",
        "window": "24 (section 5.1)",
        "walks": "64 paths (`path_num`, section 5.1)",
        "eps": "none: igraph's PPR solver, run to convergence (section 5)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "restart_prob": "(0, 1)",
        "max_ent": ">= 1",
        "node_threshold": "any",
        "edge_threshold": "any",
        "window": ">= 1",
        "walks": ">= 1",
        "eps": "> 0",
    }

    method: Literal["ppr", "rwr"] = "ppr"
    """ppr: exact personalized PageRank; rwr: Monte-Carlo random walks with restart."""
    restart_prob: float = 0.8
    """Restart probability of PPR / RWR (teleport back to the topic entities)."""
    max_ent: int = 2000
    """Nodes kept by their PPR / RWR score (topic entities always)."""
    eps: float = 1e-7
    """ppr: the forward push stops once every node's residual is under eps x its degree, so
    each score is within eps x degree of the exact PPR. The default is the largest power of
    ten whose top-20 equalled 1e-9's on MuSiQue's train questions (docs/methods/lego.md)."""
    scorer: str = "none"
    """Node/edge scorer after the walk: none, random, bm25, bi-encoder, cross-encoder, llm, bi-encoder-ft, llm-ft."""
    model: str | None = None
    """The scorer's local model folder (cross-encoder, fine-tuned and LLM scorers)."""
    node_threshold: float | None = None
    """Scorer: nodes scoring below it are dropped (topic entities stay)."""
    edge_threshold: float | None = None
    """Scorer: edges scoring below it are dropped."""
    window: int = 24
    """Scorer: each node keeps at most its `window` best-scoring edges."""
    walks: int = 2000
    """rwr: walks started per question."""
    prefilter: int = 64
    """LLM scorers (llm, llm-ft): the bi-encoder ranks the candidates first and only the best
    `prefilter` go to the LLM, as the paper's LLM modules do; 0 sends every candidate."""

    def validate(self, where: str) -> None:
        """A known scorer (single-field ranges are in RANGES)."""
        _check_scorer(where, "lego.se", self.scorer)


@dataclass
class LegoPFConfig:
    """LEGO path filtering over the extracted subgraph."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "max_hops": "none (section 5.1)",
        "max_paths": "none (section 5.1)",
        "beam_width": "128 (section 5.1)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "max_hops": ">= 1",
        "max_paths": ">= 1",
        "beam_width": ">= 1",
    }

    method: Literal["spf", "cpf", "beam"] = "spf"
    """spf: every shortest path from each topic entity to every node it reaches (the paper's
    shortest path-filtering); cpf: every simple path; beam: iterative beam search that scores
    partial paths."""
    max_hops: int = 2
    """Longest path, in edges, from a topic entity. The paper sets none (its paths run within
    the SE subgraph); 2 is the engine's: WebQSP's answers lie within two hops of the topic
    entity, and a bound keeps path counts finite on dense subgraphs."""
    max_paths: int = 1000
    """spf and cpf: paths kept per question, the shortest first (the paper sets no cap; this
    one bounds memory on hub-heavy subgraphs)."""
    scorer: str = "bi-encoder"
    """Path scorer (beam search and path ranking): one of SE's scorer names."""
    model: str | None = None
    """The scorer's local model folder."""
    beam_width: int = 128
    """beam: paths kept per hop."""
    prefilter: int = 64
    """LLM scorers (llm, llm-ft): the bi-encoder ranks the candidates first and only the best
    `prefilter` go to the LLM, as the paper's LLM modules do; 0 sends every candidate."""

    def validate(self, where: str) -> None:
        """A known scorer, and a scorer for beam search."""
        _check_scorer(where, "lego.pf", self.scorer)
        if self.method == "beam" and self.scorer == "none":
            raise ConfigError(f"{where}: lego.pf.method 'beam' needs a scorer (lego.pf.scorer)")


@dataclass
class LegoPRConfig:
    """LEGO path refinement: score the filtered paths and keep the top_k."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "top_k": "64 (section 5.1)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "top_k": ">= 1",
    }

    scorer: str = "none"
    """Final path reranker: none (keep PF's order) or one of SE's scorer names."""
    model: str | None = None
    """The scorer's local model folder."""
    top_k: int = 64
    """Paths kept for the answer prompt."""
    prefilter: int = 64
    """LLM scorers (llm, llm-ft): the bi-encoder ranks the candidates first and only the best
    `prefilter` go to the LLM, as the paper's LLM modules do; 0 sends every candidate."""

    def validate(self, where: str) -> None:
        """A known scorer."""
        _check_scorer(where, "lego.pr", self.scorer)


def _check_scorer(where: str, part: str, scorer: str) -> None:
    """A scorer name the registry knows (retrieve/scoring.py), else a ConfigError."""
    if scorer not in scorer_names():
        raise ConfigError(
            f"{where}: {part}.scorer must be one of {', '.join(scorer_names())}, got {scorer!r}"
        )


@dataclass
class PathSet:
    """The paths of one question: node sequences in a TripleGraph, with scores when scored."""

    paths: list[tuple[int, ...]]
    scores: np.ndarray | None = None


# -- SE ---------------------------------------------------------------------------------------
def extract_subgraphs(
    tg: TripleGraph,
    seeds: list[list[int]],
    questions: list[str],
    cfg: LegoSEConfig,
    scorer: Scorer | None,
    seed: int = 0,
) -> tuple[TripleGraph, list[list[int]]]:
    """Each question's subgraph as a block of a new graph, and its topic entities there."""
    n_q = len(questions)
    has = [q for q in range(n_q) if seeds[q]]
    kept_nodes: list[np.ndarray] = [np.zeros(0, np.int64) for _ in range(n_q)]
    if has:
        specs = [seeds[q] for q in has]
        if cfg.method == "ppr":
            res = personalized_pagerank(
                tg.graph, specs, damping=1.0 - cfg.restart_prob, mode="local", eps=cfg.eps,
                topk=cfg.max_ent,
            )  # fmt: skip
        else:
            res = sampled_rwr(tg.graph, specs, cfg.restart_prob, walks=cfg.walks, seed=seed)
        top, _ = res.topk(cfg.max_ent)
        for row, q in enumerate(has):
            nodes = top[row][top[row] >= 0]
            kept_nodes[q] = np.unique(np.concatenate([nodes, np.asarray(seeds[q], np.int64)]))
    shared = bool(tg.edge_owner.size) and tg.edge_owner.min() < 0  # an index graph
    if shared and scorer is None:  # every triple between kept nodes, gathered when read
        sub: TripleGraph = InducedCut(tg, kept_nodes)
        return sub, [_rows_in_block(sub, q, seeds[q]) for q in range(n_q)]
    edges_by_owner = None if shared else tg.edges_by_question(n_q)
    mask = np.zeros(tg.n_nodes, dtype=bool)
    kept_edges = []
    for q in range(n_q):
        mask[kept_nodes[q]] = True
        if edges_by_owner is None:  # the kept nodes' own triples, not every triple's ends
            kept_edges.append(tg.induced_edges(kept_nodes[q], mask))
        else:
            cand = edges_by_owner[q]
            kept_edges.append(cand[mask[tg.heads[cand]] & mask[tg.tails[cand]]])
        mask[kept_nodes[q]] = False
    if scorer is not None:
        kept_nodes, kept_edges = _score_filter(
            tg, seeds, questions, kept_nodes, kept_edges, cfg, scorer
        )
    sub = tg.subgraphs(kept_nodes, kept_edges)
    return sub, [_rows_in_block(sub, q, seeds[q]) for q in range(n_q)]


def _rows_in_block(sub: TripleGraph, q: int, nodes: list[int]) -> list[int]:
    """The rows of `sub` that question q's block holds for `nodes` (rows of the graph it was
    cut from), in `nodes` order; a node the block lacks is left out."""
    lo, hi = np.searchsorted(sub.node_owner, [q, q + 1])
    block = sub.origin[lo:hi]
    order = np.argsort(block, kind="stable")
    wanted = np.asarray(nodes, dtype=np.int64)
    at = np.minimum(np.searchsorted(block[order], wanted), max(block.size - 1, 0))
    found = block[order][at] == wanted if block.size else np.zeros(wanted.size, bool)
    return (lo + order[at[found]]).tolist()


def _score_filter(tg, seeds, questions, nodes, edges, cfg: LegoSEConfig, scorer):
    """Thresholds on node and triple scores, then each node's `window` best triples. Nodes are
    scored only when there is a node threshold to apply."""
    if cfg.node_threshold is not None:
        node_scores = scorer.score_batch(
            [(q, [tg.names[n] for n in ns]) for q, ns in zip(questions, nodes, strict=True)]
        )
    edge_scores = scorer.score_batch(
        [
            (
                q,
                [
                    f"{tg.names[tg.heads[e]]} {pretty_relation(tg.relations[e])} {tg.names[tg.tails[e]]}"
                    for e in es
                ],
            )
            for q, es in zip(questions, edges, strict=True)
        ]
    )
    out_nodes, out_edges = [], []
    for q in range(len(questions)):
        ns, es, es_s = nodes[q], edges[q], edge_scores[q]
        if cfg.node_threshold is not None:
            keep = (node_scores[q] >= cfg.node_threshold) | np.isin(ns, seeds[q])
            ns = ns[keep]
        if cfg.edge_threshold is not None:
            keep = es_s >= cfg.edge_threshold
            es, es_s = es[keep], es_s[keep]
        # window: an edge stays if it is among the `window` best of one of its end nodes
        order = np.argsort(-es_s, kind="stable")
        count: dict[int, int] = {}
        chosen = []
        for i in order:
            h, t = int(tg.heads[es[i]]), int(tg.tails[es[i]])
            if count.get(h, 0) < cfg.window or count.get(t, 0) < cfg.window:
                chosen.append(es[i])
                count[h] = count.get(h, 0) + 1
                count[t] = count.get(t, 0) + 1
        out_nodes.append(ns)
        out_edges.append(np.asarray(sorted(chosen), np.int64))
    return out_nodes, out_edges


# -- PF ---------------------------------------------------------------------------------------
def filter_paths(
    sub: TripleGraph,
    seeds: list[list[int]],
    questions: list[str],
    cfg: LegoPFConfig,
    scorer: Scorer | None,
    text: PathText,
) -> list[PathSet]:
    """Candidate reasoning paths of every question from its topic entities."""
    if cfg.method == "spf":
        return [PathSet(_shortest_paths(sub, ss, cfg.max_hops, cfg.max_paths)) for ss in seeds]
    if cfg.method == "cpf":
        return [PathSet(_simple_paths(sub, ss, cfg.max_hops, cfg.max_paths)) for ss in seeds]
    return _beam_search(sub, seeds, questions, cfg, scorer, text)


def _shortest_paths(sub: TripleGraph, seeds: list[int], max_hops: int, cap: int):
    """Every shortest path from each topic entity to each node it reaches within `max_hops`
    (the paper's SPF), up to `cap` per question, the shortest first, then by their nodes."""
    by_length: dict[int, list[np.ndarray]] = {}
    for s in seeds:
        for level in sub.path_levels(s, max_hops, cap):
            by_length.setdefault(level.shape[1], []).append(level)
    out: list[tuple[int, ...]] = []
    for n in sorted(by_length):
        paths = np.concatenate(by_length[n])
        if len(by_length[n]) > 1:  # one walk's paths come in node order already
            paths = paths[np.lexsort(paths.T[::-1])]
        out.extend(map(tuple, paths[: cap - len(out)].tolist()))
        if len(out) >= cap:
            break
    return out


def _simple_paths(sub: TripleGraph, seeds: list[int], max_hops: int, cap: int):
    """Every simple path of 1..max_hops hops from a topic entity, up to `cap` (shortest first)."""
    g = sub.graph
    out: list[tuple[int, ...]] = []
    frontier = [(s,) for s in seeds]
    for _ in range(max_hops):
        nxt = []
        for p in frontier:
            for v in np.unique(g.neighbors(p[-1])):
                if int(v) not in p:
                    nxt.append(p + (int(v),))
        room = cap - len(out)
        out.extend(nxt[:room])
        if len(out) >= cap:
            break
        frontier = nxt
    return out


def _beam_search(sub, seeds, questions, cfg: LegoPFConfig, scorer, text: PathText):
    """Grow paths one hop at a time; each round scores every question's extensions in one
    scorer call and keeps the `beam_width` best per question. Returns every kept path."""
    g = sub.graph
    beams = [[(s,) for s in ss] for ss in seeds]
    kept: list[dict[tuple[int, ...], float]] = [{} for _ in questions]
    for _ in range(cfg.max_hops):
        cands = []
        for bs in beams:
            ext = []
            for p in bs:
                for v in np.unique(g.neighbors(p[-1])):
                    if int(v) not in p:
                        ext.append(p + (int(v),))
            cands.append(ext)
        if not any(cands):
            break
        owner, flat = flatten(cands)
        best, scores = beam_step(
            owner,
            flat,
            lambda o, paths: score_flat(scorer, questions, o, [text.words(p) for p in paths]),
            cfg.beam_width,
        )
        beams = [[] for _ in questions]
        for i in best.tolist():
            q = int(owner[i])
            beams[q].append(flat[i])
            kept[q][flat[i]] = float(scores[i])
    out = []
    for k in kept:
        items = sorted(k.items(), key=lambda kv: -kv[1])
        out.append(PathSet([p for p, _ in items], np.asarray([v for _, v in items])))
    return out


# -- PR ---------------------------------------------------------------------------------------
def refine_paths(
    paths: list[PathSet],
    questions: list[str],
    top_k: int,
    scorer: Scorer | None,
    text: PathText,
) -> list[PathSet]:
    """The `top_k` paths of each question by the scorer (in PF's order without one)."""
    if scorer is None:
        return [
            PathSet(ps.paths[:top_k], None if ps.scores is None else ps.scores[:top_k])
            for ps in paths
        ]
    scores = scorer.score_batch(
        [(q, [text.words(p) for p in ps.paths]) for q, ps in zip(questions, paths, strict=True)]
    )
    out = []
    for ps, s in zip(paths, scores, strict=True):
        best = np.argsort(-s, kind="stable")[:top_k]
        out.append(PathSet([ps.paths[i] for i in best], s[best]))
    return out
