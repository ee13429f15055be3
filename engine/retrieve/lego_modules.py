"""LEGO-GraphRAG's three modules, each batch-first over all questions of a batch:

* subgraph extraction (SE): PPR or RWR from each question's topic entities keeps its `max_ent`
  best nodes; an optional scorer then drops nodes and triples under thresholds and keeps each
  node's `window` best triples;
* path filtering (PF): shortest paths (one multi-source BFS for the batch), complete paths
  (every simple path up to `max_hops`, capped) or iterative beam search scored by a scorer;
* path refinement (PR): a scorer ranks the filtered paths and the `top_k` stay.

Every module returns, per question, what it kept, so the harness can score each module's
answer-entity precision / recall.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.config import LegoPFConfig, LegoSEConfig
from engine.retrieve.kg import TripleGraph
from engine.retrieve.scorers import TextScorer
from kernels.paths import nearest_source_paths
from kernels.ppr import personalized_pagerank, sampled_rwr


def pretty_relation(rel: str) -> str:
    """A relation as words for scoring: Freebase's `a.b.c_d` becomes `a b c d`."""
    return rel.replace(".", " ").replace("_", " ")


@dataclass
class PathSet:
    """The paths of one question: node sequences in a TripleGraph, with scores when scored."""

    paths: list[tuple[int, ...]]
    scores: np.ndarray | None = None


class PathText:
    """Renders paths of a TripleGraph, with every relation between consecutive nodes."""

    def __init__(self, tg: TripleGraph) -> None:
        self.tg = tg
        self.pairs: dict[tuple[int, int], list[int]] = {}
        for e, (h, t) in enumerate(zip(tg.heads.tolist(), tg.tails.tolist(), strict=True)):
            self.pairs.setdefault((h, t), []).append(e)
            if h != t:
                self.pairs.setdefault((t, h), []).append(e)

    def show(self, path: tuple[int, ...]) -> str:
        """`A -[r]-> B <-[s]- C`: the prompt's reasoning path, each relation in its stored
        direction, parallel relations joined by " / "."""
        tg = self.tg
        out = [tg.names[path[0]]]
        for u, v in zip(path, path[1:], strict=False):
            labels = [
                f"-[{tg.relations[e]}]->" if tg.heads[e] == u else f"<-[{tg.relations[e]}]-"
                for e in self.pairs[(u, v)]
            ]
            out.append(f" {' / '.join(labels)} {tg.names[v]}")
        return "".join(out)

    def words(self, path: tuple[int, ...]) -> str:
        """The path as plain words for scorers."""
        tg = self.tg
        parts = [tg.names[path[0]]]
        for u, v in zip(path, path[1:], strict=False):
            parts.append(" / ".join(pretty_relation(tg.relations[e]) for e in self.pairs[(u, v)]))
            parts.append(tg.names[v])
        return " ".join(parts)


# -- SE ---------------------------------------------------------------------------------------
def extract_subgraphs(
    tg: TripleGraph,
    seeds: list[list[int]],
    questions: list[str],
    cfg: LegoSEConfig,
    scorer: TextScorer | None,
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
                tg.graph, specs, damping=1.0 - cfg.restart_prob, mode="local", eps=1e-9
            )
        else:
            res = sampled_rwr(tg.graph, specs, cfg.restart_prob, walks=cfg.walks, seed=seed)
        top, _ = res.topk(cfg.max_ent)
        for row, q in enumerate(has):
            nodes = top[row][top[row] >= 0]
            kept_nodes[q] = np.unique(np.concatenate([nodes, np.asarray(seeds[q], np.int64)]))
    edges_by_owner = tg.edges_by_question(n_q)
    mask = np.zeros(tg.n_nodes, dtype=bool)
    kept_edges = []
    for q in range(n_q):
        cand = edges_by_owner[q]
        mask[kept_nodes[q]] = True
        kept_edges.append(cand[mask[tg.heads[cand]] & mask[tg.tails[cand]]])
        mask[kept_nodes[q]] = False
    if scorer is not None:
        kept_nodes, kept_edges = _score_filter(
            tg, seeds, questions, kept_nodes, kept_edges, cfg, scorer
        )
    sub = tg.subgraphs(kept_nodes, kept_edges)
    local = {
        (int(o), int(n)): i for i, (o, n) in enumerate(zip(sub.node_owner, sub.origin, strict=True))
    }
    sub_seeds = [[local[(q, s)] for s in seeds[q] if (q, s) in local] for q in range(n_q)]
    return sub, sub_seeds


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
    scorer: TextScorer | None,
    text: PathText,
) -> list[PathSet]:
    """Candidate reasoning paths of every question from its topic entities."""
    n_q = len(questions)
    if cfg.method == "spf":
        _, paths = nearest_source_paths(sub.graph, [s for ss in seeds for s in ss], cfg.max_hops)
        out = [PathSet([]) for _ in range(n_q)]
        for p in paths:
            out[int(sub.node_owner[p[0]])].paths.append(p)
        for ps in out:
            ps.paths.sort(key=lambda p: (len(p), p))
        return out
    if cfg.method == "cpf":
        return [PathSet(_simple_paths(sub, ss, cfg.max_hops, cfg.max_paths)) for ss in seeds]
    return _beam_search(sub, seeds, questions, cfg, scorer, text)


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
        scores = scorer.score_batch(
            [(q, [text.words(p) for p in c]) for q, c in zip(questions, cands, strict=True)]
        )
        for q, (c, s) in enumerate(zip(cands, scores, strict=True)):
            best = np.argsort(-s, kind="stable")[: cfg.beam_width]
            beams[q] = [c[i] for i in best]
            kept[q].update({c[i]: float(s[i]) for i in best})
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
    scorer: TextScorer | None,
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
