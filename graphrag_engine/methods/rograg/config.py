"""ROGRAG's settings: the stage chain, the checks, the keys and matching, the budgets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from graphrag_engine.errors import ConfigError
from graphrag_engine.methods.rograg.verify import VERIFY_STAGE

Stage = Literal["logic_form", "dual_level"]


@dataclass
class ROGRAGConfig:
    """ROGRAG's stages, matching levers, verifier and refusal text."""

    PAPER: ClassVar[
        dict[str, str]
    ] = {  # the paper's values (graphrag_engine/config/settings_tables.py)
        "keys": "llm (3.2)",
        "check": "argument (6.3, Table 7)",
        "match": "fuzzy (6.1, Table 5)",
        "low_top_k": "6 (authors' code)",
        "high_top_k": "5 (authors' code)",
        "floor": "0.2 (authors' code)",
        "expand_low_keys": "true (Figure 1 e)",
        "entity_tokens": "8,000 (Figure 1 d)",
        "relation_tokens": "8,000 (Figure 1 d)",
        "chunk_tokens": "12,000 (Figure 1 d)",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "low_top_k": ">= 1",
        "high_top_k": ">= 1",
        "floor": "[-1, 1]",
        "max_steps": ">= 1",
        "step_answer_tokens": ">= 1",
        "select_max": ">= 1",
        "entity_tokens": ">= 1",
        "relation_tokens": ">= 1",
        "chunk_tokens": ">= 1",
    }

    stages: list[Stage] = field(default_factory=lambda: ["logic_form", "dual_level"])
    """The fallback chain, tried in order."""
    check: Literal["argument", "result", "none"] = "argument"
    """argument: a verdict on the context before answering; result: answer, then check it; none: first stage with a context."""
    keys: Literal["llm", "ner"] = "llm"
    """Where the dual-level keys come from: one batched LLM call (the paper), or the
    question's named entities (low) and the question itself (high), LLM-free."""
    refusal: str = "I cannot answer this from the knowledge base."
    """The answer given when no stage's context is judged to support one."""
    analysis: bool = True
    """Analyse each question's intent and domain first (one batched call); a message that asks
    nothing is refused without retrieval."""
    match: Literal["fuzzy", "exact", "name"] = "fuzzy"
    """fuzzy: a level's keys joined into one query (the paper); exact: each key matched on its
    own; name: low keys by normalized entity name. Matches are the top k above floor."""
    low_top_k: int = 6
    """Entities per low-level key (the authors' public code: 6; the paper gives none)."""
    high_top_k: int = 5
    """Relations per high-level key (the authors' public code: 5)."""
    chunk_pick: Literal["vector", "found"] = "vector"
    """Order of the dual-level chunk references: cosine to the question (the VECTOR pick of
    newer LightRAG releases), or the order the keys found them (close to the authors' code)."""
    floor: float = 0.2
    """Least cosine of a match (the authors' public code keeps matches scoring 0.2 or more)."""
    expand_low_keys: bool = True
    """Add the question's named entities as more low-level keys (Figure 1 e, Table 5: part of
    the paper's final system)."""
    long_query: bool = False
    """Add the question itself as a high-level key (the paper's other lever)."""
    max_steps: int = 5
    """Most steps of one logic form."""
    step_answer_tokens: int = 32
    """Completion tokens of one retrieve step's answer."""
    entity_tokens: int = 8000
    """Token budget of the dual-level Entities section (Figure 1 d: 8k for nodes)."""
    relation_tokens: int = 8000
    """Token budget of the dual-level Relations section (8k for edges)."""
    chunk_tokens: int = 12000
    """Token budget of the Sources section (12k for chunks)."""
    select: bool = True
    """Choose the logic form's passages by Algorithm 1's add / remove loop (false: none)."""
    select_max: int = 8
    """Most passages the selection keeps for a logic form's context."""

    def validate(self, where: str) -> None:
        """A non-empty chain of known stages (single-field ranges are in RANGES)."""
        if not self.stages or any(s not in ("logic_form", "dual_level") for s in self.stages):
            raise ConfigError(f"{where}: rograg.stages lists logic_form and/or dual_level")

    def top_ks(self) -> tuple[int, int]:
        """Entities per low key and relations per high key, as `match_keys` takes them."""
        return self.low_top_k, self.high_top_k

    def context_budget(self) -> int:
        """Published total of the dual-level context (8k + 8k + 12k)."""
        return self.entity_tokens + self.relation_tokens + self.chunk_tokens

    def llm_use(self) -> str | None:
        """LLM keys, logic forms and verdicts need the LLM even with --retrieval-only."""
        if (
            self.keys == "ner"
            and self.stages == ["dual_level"]
            and self.check == "none"
            and not self.analysis
        ):
            return None
        return "method 'rograg'"

    def unseen_stages(self) -> list[tuple[str, int, int, str]]:
        """Stages a dry run cannot count, since their prompts come from the logic forms it
        cannot make: (stage, most prompts per question, completion budget, note)."""
        if "logic_form" not in self.stages:
            return []
        rows = [
            (
                "logic_step", self.max_steps, self.step_answer_tokens,
                "one lookup per retrieve step; a filter step's lookups, one per item of the "
                "list it filters, come on top",
            )
        ]  # fmt: skip
        if self.check != "none":
            rows.append(
                (
                    "verify_logic_form", 1, VERIFY_STAGE.max_tokens(),
                    "one verdict on each logic form's context, on top of the verify row",
                )
            )  # fmt: skip
        return rows
