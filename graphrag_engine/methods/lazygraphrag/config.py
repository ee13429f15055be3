"""LazyGraphRAG's settings: the relevance-test budget that sets how far a search goes, and the
choices the blog post leaves open (each named as ours on the method page)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal


@dataclass
class LazyGraphRAGConfig:
    """LazyGraphRAG's query: refine the question, match chunks best-first through the concept
    communities under a budget of relevance tests, map claims, reduce them to the context."""

    PAPER: ClassVar[dict[str, str]] = {  # the blog post (Edge, Trinh, Larson, Nov 2024)
        "budget": "100, 500 or 1,500 relevance tests (Z100, Z500, Z1500)",
        "subqueries": "3 to 5",
        "assessor": "llm (a low-cost model)",
        "claims": "llm",
        "refine": "llm",
    }

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "budget": ">= 1",
        "subqueries": ">= 1",
        "community_chunks": ">= 1",
        "tests_per_community": ">= 1",
        "z": ">= 1",
        "threshold": "[-1, 1]",
        "claim_tokens": ">= 1",
        "refine_max_tokens": ">= 1",
        "claims_max_tokens": ">= 1",
    }

    budget: int = 100
    """Relevance tests per question, shared evenly by its subqueries (the post's Z100)."""
    refine: Literal["llm", "none"] = "llm"
    """llm: the question split into subqueries plus one expanded query that recombines them;
    none: the question is its only subquery."""
    subqueries: int = 3
    """Most subqueries the refinement may give."""
    concepts: int = 3
    """Concepts (graph entities) nearest a subquery appended to it (0: none)."""
    community_chunks: int = 3
    """A community is ranked by the mean rank of its best this many chunks (ours)."""
    tests_per_community: int = 3
    """Untested chunks of a community tested on each visit (ours)."""
    z: int = 3
    """Successive communities without a relevant chunk before the search deepens into the
    sub-communities of those that had one."""
    assessor: Literal["llm", "similarity"] = "llm"
    """Who tests a chunk: the LLM names its relevant sentences, or (similarity, a deviation)
    a sentence is relevant when its vector's cosine to the subquery reaches `threshold`."""
    threshold: float = 0.7
    """similarity assessor: the cosine a sentence needs to be relevant (MiniLM's best R@5 on
    the train sets at Z100, bench/results/text_graph-lazy-train.json)."""
    claims: Literal["llm", "sentences"] = "llm"
    """llm: claims drawn from each community's relevant chunks by the LLM; sentences: the
    relevant sentences themselves."""
    claim_tokens: int = 8000
    """Tokens of claims in the answer's context (best by cosine to the expanded query)."""
    refine_max_tokens: int = 160
    """Completion tokens of the refinement (subqueries and expanded query)."""
    claims_max_tokens: int = 256
    """Completion tokens of one community's claims."""

    def context_budget(self) -> int:
        """Published size of the answer's context (the claims)."""
        return self.claim_tokens

    def unseen_stages(self) -> list[tuple[str, int, int | None, str]]:
        """The stages a dry run cannot count: the tests and claims follow earlier answers; the
        budget bounds the tests of every question."""
        out = []
        if self.assessor == "llm":
            out.append(("lazy_relevance", self.budget, 48, "at most `budget` tests a question"))
        if self.claims == "llm":
            out.append(("lazy_claims", self.budget, self.claims_max_tokens,
                        "at most one claims prompt per relevant community"))  # fmt: skip
        return out

    def llm_use(self) -> str | None:
        """Refinement, LLM tests and LLM claims need the LLM even with --retrieval-only."""
        if self.refine == "llm" or self.assessor == "llm" or self.claims == "llm":
            return "method 'lazygraphrag'"
        return None
