"""LazyGraphRAG (Edge, Trinh and Larson, Microsoft Research blog, November 2024; restated in
../shared/papers/lazygraphrag.md): every LLM call deferred to query time, under a budget of
relevance tests. The index is the LLM-free concept graph (noun phrases and named entities,
`graph.ner: spacy_concepts`) with hierarchical communities and no reports
(`configs/index-lazygraphrag.yaml`).

For the whole batch at once, each LLM step one batched call across questions:

1. Refine: each question split into at most `subqueries` subqueries and one expanded query
   (`lazy_refine`); each subquery gets its `concepts` nearest graph concepts appended.
2. Match, every subquery at once, round by round (search.py): rank the chunks by cosine to
   the subquery, the communities by their best chunks' ranks; visit the communities best
   first, testing each one's best untested chunks (`lazy_relevance`: which sentences help);
   after `z` visits in a row without a relevant chunk, deepen into the sub-communities of
   the communities that had one; stop when none had, or at the subquery's share of `budget`.
   Every test of every subquery of a round is one batched call.
3. Map: the relevant sentences of each community's relevant chunks become claims
   (`lazy_claims`, one batched call), or are the claims (`claims: sentences`).
4. Reduce: the claims best first by cosine to the expanded query, cut to `claim_tokens`, are
   the answer's context. The chunk ranking (for Recall@k) is the relevant chunks, best test
   first, then every chunk by cosine to the question.
"""

from __future__ import annotations

import numpy as np

from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.segments import group_by_owner
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods.base import register
from graphrag_engine.methods.lazygraphrag.config import LazyGraphRAGConfig
from graphrag_engine.methods.lazygraphrag.prompts import (
    CLAIMS_STAGE,
    MAX_SENTENCES,
    REFINE_STAGE,
    RELEVANCE_STAGE,
)
from graphrag_engine.methods.lazygraphrag.search import (
    ConceptCommunities,
    Match,
    next_tests,
    record,
)
from graphrag_engine.methods.needs import Part
from graphrag_engine.models.base import GenParams
from graphrag_engine.models.structured import generate_structured
from graphrag_engine.retrieve.communities import communities
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import entity_graph, search
from graphrag_engine.retrieve.lines import within_budget
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.types import Context, Retrieved, Section, StageClock

NO_DATA = "I do not know: the search kept no claim on this question."


def _ask(ctx: QueryContext, stage, prompts: list, max_tokens: int, schema, spent, owners, name):
    """One batched structured call; each answer's tokens go to its question's `name`."""
    run = generate_structured(
        ctx.llm, prompts, schema, GenParams(max_tokens=max_tokens), stage=stage.name,
        retries=ctx.cfg.models.llm.parse_retries,
    )  # fmt: skip
    for q, res in zip(owners, run.results, strict=True):
        spent[q][name] = spent[q].get(name, 0) + res.tokens
    return run.results


def unit_queries(ctx: QueryContext, texts: list[str]) -> np.ndarray:
    """Unit vectors of query texts (the run embeds each distinct text once)."""
    return l2_normalize(np.asarray(ctx.encode_queries(texts), np.float32))


def refine(ctx: QueryContext, cfg: LazyGraphRAGConfig, texts: list[str], spent) -> tuple:
    """Each question's subqueries (with their nearest concepts) and its expanded query."""
    subs, expanded = [[t] for t in texts], list(texts)
    if cfg.refine == "llm":
        schema = REFINE_STAGE.schema(n=cfg.subqueries)
        budget = REFINE_STAGE.max_tokens(budget=cfg.refine_max_tokens, n=cfg.subqueries)
        prompts = [REFINE_STAGE.prompt(t, cfg.subqueries) for t in texts]
        results = _ask(ctx, REFINE_STAGE, prompts, budget, schema, spent, range(len(texts)),
                       "lazy_refine")  # fmt: skip
        for q, res in enumerate(results):
            if res.ok and res.value[0]:  # a subquery given twice is searched once
                subs[q] = list(dict.fromkeys(res.value[0]))[: cfg.subqueries]
                expanded[q] = res.value[1] or texts[q]
    if cfg.concepts > 0:
        flat = [s for group in subs for s in group]
        ids, _ = search(ctx, flat, "entity_vectors", cfg.concepts)
        names = entity_graph(ctx).names
        near = iter([", ".join(names[e] for e in row if e >= 0) for row in ids])
        subs = [[f"{s} ({c})" if (c := next(near)) else s for s in group] for group in subs]
    return subs, expanded


def start(ctx: QueryContext, cfg: LazyGraphRAGConfig, tree: ConceptCommunities,
          subs: list[list[str]]) -> tuple[list[Match], np.ndarray]:  # fmt: skip
    """A match per subquery, its share of its question's budget (the first ones take the
    remainder), and the subqueries' vectors."""
    flat = [(q, i, s) for q, group in enumerate(subs) for i, s in enumerate(group)]
    vectors = unit_queries(ctx, [s for _, _, s in flat])
    chunk_vectors = np.asarray(ctx.chunk_vectors, dtype=np.float32)
    matches = []
    for (q, i, s), v in zip(flat, vectors, strict=True):
        ranks = np.empty(len(chunk_vectors), np.int64)
        ranks[np.argsort(-(chunk_vectors @ v), kind="stable")] = np.arange(len(chunk_vectors))
        n = len(subs[q])
        share = cfg.budget // n + (1 if i < cfg.budget % n else 0)
        frontier = tree.ranked(tree.roots, ranks, cfg.community_chunks)
        matches.append(Match(q, s, share, ranks, frontier))
    return matches, vectors


def sentences_of(ctx: QueryContext) -> list[np.ndarray]:
    """Each chunk's unit (sentence) rows, at most MAX_SENTENCES."""
    row = {c: i for i, c in enumerate(ctx.chunks["ids"])}
    owner = np.asarray(
        [row[c] for c in ctx.index.table("units", ["chunk_id"]).column(0).to_pylist()], np.int64
    )
    return [units[:MAX_SENTENCES] for units in group_by_owner(owner, len(row))]


def assess(ctx: QueryContext, cfg: LazyGraphRAGConfig, tests: list[tuple[Match, np.ndarray, int]],
           spent) -> tuple[list, list[bool]]:  # fmt: skip
    """Each (match, subquery vector, chunk) test's verdict, (score, relevant sentence
    positions) or None, in one batched call; and whether each test failed (an answer that
    did not parse, or named a sentence the chunk does not have: recorded, not relevant)."""
    units = ctx.memo("lazy_sentences", lambda: sentences_of(ctx))
    if cfg.assessor == "similarity":
        out = []
        for _, v, chunk in tests:
            cos = ctx.unit_vectors[units[chunk]] @ v if units[chunk].size else np.zeros(0)
            hit = np.flatnonzero(cos >= cfg.threshold)
            out.append((float(cos.max()), hit.tolist()) if hit.size else None)
        return out, [False] * len(tests)
    texts = ctx.units["text"]
    prompts = [RELEVANCE_STAGE.prompt(m.query, [texts[u] for u in units[c]]) for m, _, c in tests]
    results = _ask(ctx, RELEVANCE_STAGE, prompts, RELEVANCE_STAGE.max_tokens(),
                   RELEVANCE_STAGE.schema(), spent, [m.question for m, _, _ in tests],
                   "lazy_relevance")  # fmt: skip
    out, failed = [], []
    for (_, _, chunk), res in zip(tests, results, strict=True):
        bad = not res.ok or any(i >= len(units[chunk]) for i in res.value)
        failed.append(bad)
        out.append((float(len(res.value)), res.value) if not bad and res.value else None)
    return out, failed


def match_all(ctx: QueryContext, cfg: LazyGraphRAGConfig, tree: ConceptCommunities,
              matches: list[Match], vectors: np.ndarray, spent) -> list[int]:  # fmt: skip
    """Advance every match round by round until all stop; the failed tests per question."""
    failures = [0] * len(spent)
    while True:
        asked = [(i, next_tests(m, tree, cfg.tests_per_community, cfg.community_chunks, cfg.z))
                 for i, m in enumerate(matches)]  # fmt: skip
        asked = [(i, t) for i, t in asked if t]
        if not asked:
            return failures
        tests = [(matches[i], vectors[i], c) for i, chunks in asked for c in chunks]
        verdicts, failed = assess(ctx, cfg, tests, spent)
        at = 0
        for i, chunks in asked:
            record(matches[i], verdicts[at : at + len(chunks)])
            failures[matches[i].question] += sum(failed[at : at + len(chunks)])
            at += len(chunks)


def claims_of(ctx: QueryContext, cfg: LazyGraphRAGConfig, matches: list[Match], spent,
              failures: list[int]) -> list[list[tuple[str, int | None]]]:  # fmt: skip
    """Each question's claims as (text, unit row of a sentence claim, else None): the
    relevant sentences themselves, or the LLM's claims from each community's relevant
    sentences (one batched call; a failed answer is recorded and gives none)."""
    units = ctx.memo("lazy_sentences", lambda: sentences_of(ctx))
    texts = ctx.units["text"]
    out: list[list[tuple[str, int | None]]] = [[] for _ in spent]
    groups = []  # (question, subquery, unit rows of the relevant sentences of one community)
    for m in matches:
        for _, _, tests, yielded in m.visits:
            if yielded:
                rows = [
                    int(units[c][i]) for c in tests if c in m.relevant for i in m.relevant[c][1]
                ]
                groups.append((m.question, m.query, rows))
    if cfg.claims == "sentences":
        for q, _, rows in groups:
            out[q] += [(texts[u], u) for u in rows]
        return out
    prompts = [CLAIMS_STAGE.prompt(s, "\n".join(texts[u] for u in rows)) for _, s, rows in groups]
    results = _ask(ctx, CLAIMS_STAGE, prompts, CLAIMS_STAGE.max_tokens(budget=cfg.claims_max_tokens),
                   CLAIMS_STAGE.schema(), spent, [q for q, _, _ in groups], "lazy_claims")  # fmt: skip
    for (q, _, _), res in zip(groups, results, strict=True):
        if res.ok:
            out[q] += [(c, None) for c in res.value]
        else:
            failures[q] += 1
    return out


def reduce(ctx: QueryContext, cfg: LazyGraphRAGConfig, claims: list[list[tuple[str, int | None]]],
           expanded: list[str]) -> list[Context]:  # fmt: skip
    """Each question's claims (each once) best first by cosine to its expanded query, cut to
    `claim_tokens`; a question without claims gets the "no data" answer. A sentence claim's
    vector is its unit's; the LLM's claims are embedded in one call."""
    distinct = [list(dict.fromkeys(group)) for group in claims]
    fresh = list(dict.fromkeys(t for group in distinct for t, u in group if u is None))
    drawn = dict(zip(fresh, unit_queries(ctx, fresh), strict=True)) if fresh else {}
    wanted = unit_queries(ctx, expanded)
    contexts = []
    for group, w in zip(distinct, wanted, strict=True):
        if not group:
            contexts.append(Context(preset_answer=NO_DATA))
            continue
        vectors = np.stack([drawn[t] if u is None else ctx.unit_vectors[u] for t, u in group])
        order = np.argsort(-(vectors @ w), kind="stable")
        kept = within_budget(ctx, [group[i][0] for i in order], ctx.scaled(cfg.claim_tokens))
        contexts.append(Context([Section(kept, title="-----Claims-----")]) if kept
                        else Context(preset_answer=NO_DATA))  # fmt: skip
    return contexts


@register(
    "lazygraphrag",
    config=LazyGraphRAGConfig,
    paper="LazyGraphRAG (Microsoft Research blog, 2024): query-time relevance tests on a budget",
    needs={
        Part.CHUNKS,
        Part.CHUNK_VECTORS,
        Part.ENTITY_GRAPH,
        Part.ENTITY_VECTORS,
        Part.UNIT_VECTORS,
        Part.COMMUNITIES,
    },  # fmt: skip
)
def lazygraphrag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """LazyGraphRAG for every question of the batch."""
    cfg: LazyGraphRAGConfig = ctx.cfg.options
    texts = [q.question for q in questions]
    spent: list[dict[str, int]] = [{} for _ in texts]
    tree = ctx.memo("lazy_tree", lambda: ConceptCommunities.of(communities(ctx), entity_graph(ctx)))
    with clock.stage("refine"):
        subs, expanded = refine(ctx, cfg, texts, spent)
    with clock.stage("match"):
        matches, vectors = start(ctx, cfg, tree, subs)
        failures = match_all(ctx, cfg, tree, matches, vectors, spent)
    with clock.stage("claims"):
        claims = claims_of(ctx, cfg, matches, spent, failures)
        contexts = reduce(ctx, cfg, claims, expanded)
    asked = unit_queries(ctx, texts)
    depth = 2 * ctx.cfg.retrieval.candidates
    orders, extras = [], []
    for q, v in enumerate(asked):
        mine = [m for m in matches if m.question == q]
        best = {}
        for m in mine:
            for c, (score, _) in m.relevant.items():
                best[c] = max(best.get(c, score), score)
        nearest = np.argsort(-(np.asarray(ctx.chunk_vectors) @ v), kind="stable")[:depth]
        ranked = sorted(best, key=lambda c: (-best[c], c))
        orders.append(list(dict.fromkeys(ranked + nearest.tolist())))
        extras.append({
            "subqueries": [m.query for m in mine],
            "tests": sum(m.spent for m in mine),
            "communities": sum(len(m.visits) for m in mine),
            "depth": max((m.depth for m in mine), default=0),
            "relevant_chunks": len(best),
            "claims": len(contexts[q].sections[0].items) if contexts[q].sections else 0,
            "failures": failures[q],
        })  # fmt: skip
    return Retrieved(from_orders(orders, depth), extras, spent, clock.seconds, contexts)
