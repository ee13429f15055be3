"""Query configuration (`graphrag-engine query --method CONFIG`): what every method shares
(retrieval, generation, models, batching); a method's own section is its config class in its
folder. Loaded and validated by the same strict YAML reader as the index config (config.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from graphrag_engine.config import ModelsConfig
from graphrag_engine.config.ranges import check_ranges
from graphrag_engine.errors import ConfigError


@dataclass
class AnnConfig:
    """Approximate nearest-neighbour search of large vector tables (faiss), behind the same
    call as the exact search; tables below `min_vectors` rows are searched exactly."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "min_vectors": ">= 1",
        "hnsw_m": ">= 2",
        "hnsw_ef_construction": ">= 1",
        "hnsw_ef_search": ">= 1",
        "ivf_probe": ">= 1",
    }

    backend: Literal["auto", "exact", "hnsw", "ivf"] = "auto"
    """exact: every vector scored (blocked cosine top-k); hnsw / ivf: a faiss index built once
    per vector table and cached beside the index; auto: hnsw for tables of at least
    min_vectors rows (ivf on a GPU), exact below."""
    min_vectors: int = 1_000_000
    """Rows from which `auto` (and hnsw / ivf) search approximately; smaller tables are exact."""
    hnsw_m: int = 32
    """HNSW graph degree (memory grows with it; recall too)."""
    hnsw_ef_construction: int = 80
    """HNSW build-time candidate list (build time against graph quality)."""
    hnsw_ef_search: int = 128
    """HNSW search-time candidate list (q/s against recall); at least the k searched."""
    ivf_lists: int = 0
    """IVF inverted lists; 0: 4 * sqrt(rows), at most rows / 40 (k-means points per list)."""
    ivf_probe: int = 32
    """IVF lists searched per query (q/s against recall)."""
    cache: bool = True
    """Save built ANN indexes under the index folder's ann/ (keyed by the vectors' sha256) and
    reuse them; false (or a read-only index folder): built in memory for each run."""


@dataclass
class RetrievalConfig:
    """How many passages a method ranks and how many reach the answer prompt."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "top_k": "[1, 100000]",
        "candidates": "[1, 100000]",
    }

    top_k: int = 5
    """Passages (chunks) given to the answer prompt."""
    candidates: int = 20
    """Ranked passages kept per question for Recall@k / Hit@k (k <= candidates)."""
    ann: AnnConfig = field(default_factory=AnnConfig)
    """Approximate search of large vector tables (chunks, units, entities, relations)."""
    device: str = "auto"
    """Where exact vector search and PPR run: cpu, cuda or cuda:N; auto: the embedder's device
    when it is a CUDA device that torch sees, else cpu. On a GPU the vector tables stay on the
    device for the run and PPR keeps only each question's best passages there."""


@dataclass
class GenerationConfig:
    """The answer stage shared by every method."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "max_tokens": ">= 1",
        "long_max_tokens": ">= 1",
        "max_context_tokens": ">= 1",
    }

    enabled: bool = True
    """Generate answers (false: retrieval only, as --retrieval-only)."""
    max_tokens: int = 48
    """Completion tokens of one short answer, the same for every method of a comparison."""
    long_max_tokens: int = 512
    """Completion tokens of one long-form answer: they replace `max_tokens` when the run's
    answer style is long (`auto` on UltraDomain and MultiHop-RAG), room for the several
    paragraphs the long-form prompts ask for."""
    answer_style: Literal["auto", "short", "long", "method"] = "auto"
    """Which answer prompt: short (one shared few-words instruction for every method), long
    (each method's paper prompt where it is a long-form one, else one shared long-form
    prompt), method (each method's own prompt as registered), auto (long for question sets
    without short gold answers: UltraDomain, MultiHop-RAG; short otherwise)."""
    max_context_tokens: int | None = None
    """The answer window: contexts are cut (whole passages) to fit this many tokens of the
    embedder's tokenizer, and a method's published section budgets shrink in proportion when
    they exceed it. Unset: the answering model's context window less the answer (where the
    backend tells it), else unbounded (graphrag_engine/retrieve/budget.py)."""


@dataclass
class QueryConfig:
    """Everything `graphrag-engine query` needs: the method, the shared retrieval and answer
    settings, the models, and the method's own section (`options`).

    A method's section is its config dataclass, registered with the method
    (graphrag_engine.methods.base.register); in YAML it sits under the method's name (`lego:`, `clue:`).
    Build one with `graphrag_engine.methods.query_config(name)` or `load_query_config(path)`."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "batch_size": ">= 1",
    }

    method: str = "naive"
    """A registered method name (`graphrag-engine methods` lists them)."""
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    batch_size: int = 1024
    """Questions per batch; each finished batch is checkpointed in the run folder."""
    options: Any = field(default=None, metadata={"section": True})
    """The method's own settings (its registered config dataclass), None for a method without."""

    def validate(self, where: str) -> None:
        """Cross-field checks that a type alone cannot express, then the method's own."""
        check_ranges(self, where)
        r = self.retrieval
        if r.top_k < 1 or r.candidates < r.top_k:
            raise ConfigError(
                f"{where}: need 1 <= retrieval.top_k <= retrieval.candidates, got "
                f"top_k={r.top_k}, candidates={r.candidates}"
            )
        if not (r.device in ("auto", "cpu", "cuda") or r.device.startswith("cuda:")):
            raise ConfigError(
                f"{where}: retrieval.device must be auto, cpu, cuda or cuda:N, got {r.device!r}"
            )
        if self.options is not None and hasattr(self.options, "validate"):
            self.options.validate(where)

    def validate_llm(self, where: str) -> None:
        """That an LLM backend is set when the answer stage or the method needs one; checked
        once the command line's overrides (--retrieval-only, --llm-backend) are applied."""
        method_llm = self.method_llm_use()
        if (self.generation.enabled or method_llm) and self.models.llm.backend == "none":
            what = method_llm or "generation.enabled"
            raise ConfigError(
                f"{where}: {what} needs an LLM, but models.llm.backend is 'none'; pass "
                "--llm-backend transformers (or set models.llm.backend), or run retrieval only "
                "(--retrieval-only, or generation.enabled: false)"
            )

    def method_llm_use(self) -> str | None:
        """What the method itself asks of an LLM (beyond the answer stage), or None."""
        return getattr(self.options, "llm_use", lambda: None)()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every setting, defaults included; the method's section under its name."""
        out = dataclasses.asdict(dataclasses.replace(self, options=None))
        del out["options"]
        if self.options is not None:
            out[self.method] = dataclasses.asdict(self.options)
        return out
