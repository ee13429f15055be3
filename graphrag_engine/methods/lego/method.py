"""LEGO-GraphRAG (Cao et al., VLDB 2025): retrieval as three composable modules over a
knowledge graph, each a config section; the instances are configs/lego/ (00-14 the paper's
fifteen main-experiment compositions, 15-20 the remaining module options).

    topic entities  <- question (names found in it; else the closest node by embedding)
    SE: subgraph    <- PPR / RWR from the topic entities (+ scorer thresholds and window)
    PF: paths       <- shortest | complete | beam search from the topic entities
    PR: top_k paths <- scorer over the filtered paths
    answer          <- the reasoning paths in the prompt (zero-, one- or few-shot)

The graph is each KBQA question's own triples (WebQSP) or the index's entity graph. Every
module runs once per batch; extras keep each module's entities for the LEGO metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Literal

from graphrag_engine.errors import BadInputError
from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods.base import register
from graphrag_engine.methods.lego.graph import (
    index_graph,
    names_of,
    question_graphs,
    topic_entities_by_name,
)
from graphrag_engine.methods.lego.modules import (
    LegoPFConfig,
    LegoPRConfig,
    LegoSEConfig,
    extract_subgraphs,
    filter_paths,
    refine_paths,
)
from graphrag_engine.methods.lego.paths import PathText, path_passages, relation_chunks
from graphrag_engine.methods.needs import Part
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.linking import link_entities
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.scoring import LLM_SCORERS, make_scorer
from graphrag_engine.retrieve.types import Context, Retrieved, StageClock

ANSWER_INSTRUCTION = (
    "Answer the question from the reasoning paths, which come from a knowledge graph. Keep the "
    "answer as short as possible; when several answers fit, give all of them, separated by commas."
)
# worked examples written for this project (not the paper's): shots 1 uses the first, 3 all
EXAMPLES = [
    (
        "Lake Victoria -[location.location.partially_containedby]-> Uganda\n"
        "Lake Victoria -[location.location.partially_containedby]-> Kenya",
        "which countries border lake victoria",
        "Uganda, Kenya",
    ),
    (
        "Pride and Prejudice -[book.written_work.author]-> Jane Austen "
        "-[people.person.place_of_birth]-> Steventon",
        "where was the author of pride and prejudice born",
        "Steventon",
    ),
    (
        "Ottawa <-[location.country.capital]- Canada",
        "what is the capital of canada",
        "Ottawa",
    ),
]


@dataclass
class LegoConfig:
    """A LEGO-GraphRAG instance: SE -> PF -> PR over a question's graph or the index's."""

    graph: Literal["question", "index"] = "question"
    """question: the KBQA question's own triples (WebQSP); index: the corpus entity graph."""
    se: LegoSEConfig = field(default_factory=LegoSEConfig)
    pf: LegoPFConfig = field(default_factory=LegoPFConfig)
    pr: LegoPRConfig = field(default_factory=LegoPRConfig)
    shots: Literal[0, 1, 3] = 0
    """Worked examples in the answer prompt: zero-, one- or few-shot."""
    seed: int = 0
    """Random scorer / RWR sampling seed."""

    def validate(self, where: str) -> None:
        """Each module's own checks."""
        self.se.validate(where)
        self.pf.validate(where)
        self.pr.validate(where)

    def needs(self) -> set[Part]:
        """KBQA questions' own triples, or the index's entity graph and its entity vectors."""
        if self.graph == "question":
            return {Part.QUESTION_GRAPHS}
        return {Part.CHUNKS, Part.ENTITY_GRAPH, Part.ENTITY_VECTORS}

    def llm_use(self) -> str | None:
        """An LLM scorer in any module needs the query LLM, even with --retrieval-only."""
        scorers = (self.se.scorer, self.pf.scorer, self.pr.scorer)
        return "an llm scorer" if "llm" in scorers else None


def answer_prompt(
    question: str, paths: list[str] | None, cfg: LegoConfig | None = None
) -> list[dict]:
    """The reasoning-path prompt with `lego.shots` worked examples."""
    shots = cfg.shots if cfg is not None else 0
    parts = [ANSWER_INSTRUCTION, ""]
    for ex_paths, ex_q, ex_a in EXAMPLES[:shots]:
        parts += [f"Reasoning paths:\n{ex_paths}", f"Question: {ex_q}", f"Answer: {ex_a}", ""]
    parts += [f"Reasoning paths:\n{chr(10).join(paths or [])}", f"Question: {question}", "Answer:"]
    return [{"role": "user", "content": "\n".join(parts)}]


@register(
    "lego",
    config=LegoConfig,
    answer_prompt=answer_prompt,
    paper="LEGO-GraphRAG (Cao et al., VLDB 2025): SE -> PF -> PR modules, 21 instances",
    needs={Part.QUESTION_GRAPHS},
    needs_note="lego.graph: index needs entity_graph and entity_vectors instead",
)
def lego(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """SE -> PF -> PR for every question of the batch."""
    cfg: LegoConfig = ctx.cfg.options
    texts = [q.question for q in questions]
    with clock.stage("topic_entities"):
        if cfg.graph == "question":
            missing = [q.qid for q in questions if q.triples is None]
            if missing:
                raise BadInputError(
                    f"lego.graph 'question' needs KBQA questions with their own graph "
                    f"(e.g. webqsp); {missing[0]} has none. Use lego.graph: index for passage QA"
                )
            tg = question_graphs([q.triples or [] for q in questions])
            seeds = topic_entities_by_name(tg, texts, ctx.encode_queries)
        else:
            tg = ctx.memo("lego_index_graph", lambda: index_graph(ctx))  # once per run
            links, _ = link_entities(ctx, texts, top_k=1)
            seeds = [sorted(lk) for lk in links]
    parts = {"se": cfg.se, "pf": cfg.pf, "pr": cfg.pr}
    scorers = {
        name: make_scorer(part.scorer, ctx, part.model, cfg.seed, part.prefilter)
        for name, part in parts.items()
    }
    with clock.stage("se"):
        sub, sub_seeds = extract_subgraphs(tg, seeds, texts, cfg.se, scorers["se"], cfg.seed)
        show = PathText(sub)
    with clock.stage("pf"):
        filtered = filter_paths(sub, sub_seeds, texts, cfg.pf, scorers["pf"], show)
    with clock.stage("pr"):
        refined = refine_paths(filtered, texts, cfg.pr.top_k, scorers["pr"], show)
    n_q = len(questions)
    se_nodes = sub.nodes_by_question(n_q)
    se_triples = sub.edge_counts(n_q)
    extras = []
    for q in range(n_q):
        se_names = names_of(sub, se_nodes[q])
        pf_names = _names_on(sub, filtered[q].paths)
        pr_names = _names_on(sub, refined[q].paths)
        extras.append(
            {
                "topic_entities": [tg.names[s] for s in seeds[q]],
                "paths": [show.show(p) for p in refined[q].paths],
                "retrieved_entities": pr_names,
                "module_entities": {"se": se_names, "pf": pf_names, "pr": pr_names},
                "module_counts": {
                    "se_nodes": len(se_names),
                    "se_triples": int(se_triples[q]),
                    "pf_paths": len(filtered[q].paths),
                    "pr_paths": len(refined[q].paths),
                },
            }
        )
    tokens: list[dict[str, int]] = [{} for _ in questions]
    for name, scorer in scorers.items():
        for q, n in enumerate(scorer.take_tokens() if scorer is not None else []):
            tokens[q][f"lego_{name}_llm"] = n
    failures = {
        k: s.failures
        for k, s in scorers.items()
        if s is not None and parts[k].scorer in LLM_SCORERS
    }
    if failures:
        for e in extras:
            e["scorer_parse_failures"] = failures
    per_q = {f"{k}_seconds_per_question": clock.seconds[k] / n_q for k in ("se", "pf", "pr")}
    for e in extras:
        e["module_seconds"] = per_q
    contexts = [Context.of(e["paths"]) for e in extras]
    ranking = None
    if cfg.graph == "index":  # passage QA: the passages behind the paths, in path order
        chunks = ctx.memo("lego_relation_chunks", lambda: relation_chunks(ctx))
        orders = [path_passages(sub, refined[q].paths, chunks) for q in range(n_q)]
        ranking = from_orders(orders, 2 * ctx.cfg.retrieval.candidates)
    return Retrieved(ranking, extras, tokens, clock.seconds, contexts)


def _names_on(tg, paths: list[tuple[int, ...]]) -> list[str]:
    """Distinct node names on the paths, topic entities included, in first-seen order."""
    return list(dict.fromkeys(names_of(tg, list(dict.fromkeys(chain.from_iterable(paths))))))
