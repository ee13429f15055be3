"""DRIFT search's settings: Microsoft GraphRAG's defaults (its `DriftSearchDefaults`) as
`PAPER`, bounded completions for models that do not stop on their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphrag_engine.errors import ConfigError
from graphrag_engine.retrieve.local_search import GraphRAGLocalConfig


@dataclass
class DRIFTConfig:
    """DRIFT's primer over community reports, its rounds of local search on follow-up
    queries, and the reduce of every intermediate answer."""

    PAPER: ClassVar[dict[str, str]] = {  # Microsoft GraphRAG's code and docs (drift_search)
        "community_level": "2 (GraphRAG's default level)",
        "hyde": "true (GraphRAG's primer expands the query with a report as template)",
        "k_followups": "20 (GraphRAG's drift_k_followups)",
        "primer_folds": "5 (GraphRAG's primer_folds)",
        "n_depth": "3 (GraphRAG's n_depth)",
        "local_text_unit_prop": "0.9 (GraphRAG's local_search_text_unit_prop)",
        "local_community_prop": "0.1 (GraphRAG's local_search_community_prop)",
        "local_top_k_entities": "10 (GraphRAG's local_search_top_k_mapped_entities)",
        "local_top_k_relationships": "10 (GraphRAG's local_search_top_k_relationships)",
        "local_max_tokens": "12,000 (GraphRAG's local_search_max_data_tokens)",
        "reduce_tokens": "12,000 (GraphRAG's data_max_tokens)",
        "primer_tokens": "not given (GraphRAG sends a fold's reports whole)",
        "hyde_template_tokens": "not given (GraphRAG sends the template report whole; its "
        "reports are written to at most 2,000 tokens)",
        "followups": "at least 5 in the primer, up to k_followups in local search",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "k_followups": ">= 1",
        "primer_folds": ">= 1",
        "followups": ">= 1",
        "local_top_k_entities": ">= 1",
        "local_top_k_relationships": ">= 1",
        "local_max_tokens": ">= 1",
        "reduce_tokens": ">= 1",
        "primer_tokens": ">= 1",
        "hyde_template_tokens": ">= 1",
        "hyde_max_tokens": ">= 1",
        "primer_max_tokens": ">= 1",
        "local_max_answer_tokens": ">= 1",
        "local_text_unit_prop": "[0, 1]",
        "local_community_prop": "[0, 1]",
    }

    community_level: int = 2
    """Reports of the leaf-most communities at or below this level are the primer's pool."""
    hyde: bool = True
    """Expand the question into a hypothetical answer shaped like a report (one LLM call,
    the template a report picked by `seed`) and rank reports by its vector; false: by the
    question's vector."""
    k_followups: int = 20
    """Reports given to the primer, and follow-up queries answered per round."""
    primer_folds: int = 5
    """The primer's reports split into this many prompts, best first."""
    n_depth: int = 3
    """Rounds of local search on follow-up queries."""
    followups: int = 5
    """Most follow-up queries one primer or local answer may give."""
    local_text_unit_prop: float = 0.9
    """Share of a follow-up's local context for text units."""
    local_community_prop: float = 0.1
    """Share of a follow-up's local context for community reports."""
    local_top_k_entities: int = 10
    """Entities of a follow-up's local search."""
    local_top_k_relationships: int = 10
    """Relationships kept per entity in a follow-up's local search."""
    local_max_tokens: int = 12000
    """Token budget of a follow-up's local context."""
    primer_tokens: int = 12000
    """Report tokens of one primer prompt (a fold past it is cut)."""
    reduce_tokens: int = 12000
    """Tokens of intermediate answers the reduce step reads."""
    hyde_template_tokens: int = 2000
    """Tokens of the report the hypothetical answer takes as its template (a longer one is
    cut): GraphRAG's longest report."""
    hyde_max_tokens: int = 256
    """Completion tokens of the hypothetical answer."""
    primer_max_tokens: int = 512
    """Completion tokens of one primer answer (intermediate answer, score, follow-ups)."""
    local_max_answer_tokens: int = 384
    """Completion tokens of one follow-up's answer (answer, score, follow-ups)."""
    seed: int = 0
    """Picks the HyDE template report and the order follow-ups are taken in (GraphRAG draws
    both at random)."""

    def context_budget(self) -> int:
        """Published size of the largest prompt context (primer, local or reduce)."""
        return max(self.primer_tokens, self.local_max_tokens, self.reduce_tokens)

    def local(self) -> GraphRAGLocalConfig:
        """The local search each follow-up query runs (GraphRAG's own text-unit order)."""
        return GraphRAGLocalConfig(
            text_unit_order="graphrag",
            top_k_entities=self.local_top_k_entities,
            top_k_relationships=self.local_top_k_relationships,
            community_level=self.community_level,
            max_tokens=self.local_max_tokens,
            text_unit_prop=self.local_text_unit_prop,
            community_prop=self.local_community_prop,
        )

    def unseen_stages(self) -> list[tuple[str, int, int | None, str]]:
        """The stages a dry run cannot count: follow-ups come from the primer's answers."""
        return [
            ("drift_local", self.n_depth * self.k_followups, self.local_max_answer_tokens,
             "at most k_followups follow-up queries a round, n_depth rounds"),
            ("drift_reduce", 1, None, "one reduce prompt per question"),
        ]  # fmt: skip

    def llm_use(self) -> str:
        """The primer and the follow-ups need the LLM even with --retrieval-only."""
        return "method 'drift'"

    def validate(self, where: str) -> None:
        """Local shares that leave room for entities."""
        if self.local_text_unit_prop + self.local_community_prop > 1:
            raise ConfigError(
                f"{where}: drift.local_text_unit_prop + local_community_prop must be at most 1"
            )
