"""PankRAG's settings: the planner, the scopes, Eq. 4-5 reranking, the budgets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from graphrag_engine.errors import ConfigError
from graphrag_engine.methods.needs import Part
from graphrag_engine.methods.pankrag.plans import (
    REWRITE_STAGE,
)
from graphrag_engine.retrieve.local_search import (
    GraphRAGLocalConfig,
)

NEEDS = frozenset({Part.CHUNKS, Part.CHUNK_VECTORS, Part.ENTITY_GRAPH, Part.ENTITY_VECTORS})
"""What PankRAG reads at any setting (its config's `needs()` adds what settings ask for)."""


@dataclass
class PankRAGConfig:
    """PankRAG's execution settings (section 4.4: alpha 0.6 / beta 0.4 for specific questions,
    0.75 / 0.25 for abstract ones; alpha + beta = 1) and its ablations."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "plan": "llm (3.2)",
        "scope": "by query type (3.3.1; `query_type`)",
        "rerank": "true (3.3.2)",
        "alpha_specific": "0.6 (SCQ, Figure 4)",
        "alpha_abstract": "0.75 (ACQ, Figure 3)",
        "rewrite": "llm (3.2)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "max_steps": ">= 1",
        "alpha_specific": "[0, 1]",
        "alpha_abstract": "[0, 1]",
        "sub_answer_tokens": ">= 1",
        "top_k_reports": ">= 1",
        "report_tokens": ">= 1",
        "report_chunk_tokens": ">= 1",
    }

    plan: Literal["llm", "gold", "direct"] = "llm"
    """llm: the planner (one batched call); gold: MuSiQue's decomposition (oracle); direct:
    -Path (the question as its only step)."""
    max_steps: int = 5
    """Most sub-questions an LLM plan may have."""
    scope: Literal["plan", "query_type", "specific", "abstract"] = "plan"
    """Which search a step gets: the plan's label (gold and direct plans: specific);
    query_type: the paper's choice by the type of the question (3.3.1: specific for questions
    with short gold answers, SCQ; abstract for long-form ones, ACQ); or one for every step."""
    sub_answers: Literal["llm", "gold"] = "llm"
    """Who answers intermediate steps: the LLM (one batched call per level), or the gold
    decomposition's answers (gold plans only; no LLM before the final answer)."""
    rerank: bool = True
    """False: -Ank (no dependency-aware reranking)."""
    alpha_specific: float = 0.6
    """Eq. 5 weight of a specific step's own relevance (beta = 1 - alpha goes to its dependencies)."""
    alpha_abstract: float = 0.75
    """The same weight for abstract steps."""
    local: GraphRAGLocalConfig = field(default_factory=GraphRAGLocalConfig)
    """The local search of specific sub-questions (graphrag_local's keys)."""
    top_k_reports: int = 5
    """Community reports an abstract sub-question keeps."""
    report_tokens: int = 8000
    """Token budget of an abstract sub-question's reports (GraphRAG's 8,000 of report data)."""
    sub_answer_tokens: int = 48
    """Completion tokens of one intermediate answer."""
    rewrite: Literal["auto", "llm", "substitute"] = "auto"
    """Top-down disambiguation of dependent steps: llm (one batched rewrite per level, the
    paper), substitute (answers put in for "#k", LLM-free), auto (llm when the intermediate
    answers come from the LLM, else substitute)."""
    report_chunk_tokens: int = 4000
    """Token budget of the chunks behind an abstract step's reports (Eq. 5 order); with the
    reports, GraphRAG local search's 12,000."""

    def context_budget(self) -> int:
        """Published total of a step's context: local search's, or reports plus sources."""
        return max(self.local.max_tokens, self.report_tokens + self.report_chunk_tokens)

    def rewrites_by_llm(self) -> bool:
        """Whether dependent steps are rewritten by the LLM."""
        if self.rewrite == "auto":
            return self.sub_answers == "llm" and self.plan != "direct"
        return self.rewrite == "llm"

    def validate(self, where: str) -> None:
        """Gold answers need gold plans (single-field ranges are in RANGES)."""
        if self.sub_answers == "gold" and self.plan != "gold":
            raise ConfigError(f"{where}: pankrag.sub_answers 'gold' needs plan 'gold'")
        self.local.validate(f"{where}: pankrag.local")

    def needs(self) -> set[Part]:
        """The entity graph and vectors always; reports when every step is abstract, gold
        decompositions for gold plans."""
        parts = set(NEEDS)
        if self.scope == "abstract":  # query_type and plan serve an abstract step by local
            parts.add(Part.COMMUNITY_REPORTS)  # search where the index has no reports
        if self.plan == "gold":
            parts.add(Part.GOLD_DECOMPOSITIONS)
        return parts

    def llm_use(self) -> str | None:
        """The planner and LLM sub-answers need the LLM even with --retrieval-only."""
        if self.plan == "llm":
            return "pankrag.plan 'llm'"
        if self.plan == "gold" and self.sub_answers == "llm":
            return "pankrag.sub_answers 'llm'"
        if self.plan == "gold" and self.rewrites_by_llm():
            return "pankrag.rewrite 'llm'"
        return None  # direct plans are one step: nothing to answer before the final answer

    def unseen_stages(self) -> list[tuple[str, int, int]]:
        """Stages a dry run cannot count, since their prompts come from earlier answers:
        (stage, most prompts per question, completion budget). An LLM plan's intermediate
        steps each ask one sub-answer, at most max_steps - 1 per question."""
        rows = []
        if self.plan == "llm" and self.sub_answers == "llm":
            rows.append(("pankrag_sub", self.max_steps - 1, self.sub_answer_tokens))
        if self.plan == "llm" and self.rewrites_by_llm():
            rows.append(("pankrag_rewrite", self.max_steps - 1, REWRITE_STAGE.max_tokens()))
        return rows
