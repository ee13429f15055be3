"""The index config's typed sections (ingest, chunking, graph, extraction, communities,
models): each field's docstring is its documentation, `RANGES` its bounds (config/ranges.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from graphrag_engine.config.ranges import check_ranges
from graphrag_engine.config.skeleton_section import SkeletonConfig
from graphrag_engine.config.tree_section import TreeConfig
from graphrag_engine.errors import ConfigError
from graphrag_engine.jsonl import MAX_RECORD_MB


@dataclass
class IngestConfig:
    """How corpus records are read: which fields hold the id, title and text."""

    RANGES: ClassVar[dict[str, str]] = {"max_record_mb": "> 0"}  # others: >= 0 (ranges.py)

    id_field: str = "id"
    """JSONL/Parquet field holding the record's own id (kept as external_id; gold passage ids refer to it)."""
    title_field: str = "title"
    """Field holding the title (.txt/.md: a first-line `# ` heading, else the file name)."""
    text_field: str = "text"
    """Field holding the text to index."""
    skip_bad: bool = False
    """Skip and count malformed records (and unreadable files) instead of stopping."""
    strict_ids: bool = False
    """A corpus id given to two different texts is an error (otherwise a counted warning)."""
    max_record_mb: float = MAX_RECORD_MB
    """Largest JSONL line (one record) in MiB: a longer one is a bad record, refused before it
    is read whole (reading a record holds it several times over)."""


@dataclass
class ChunkingConfig:
    """Token-based chunking with overlap and sentence-aware boundaries."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "chunk_tokens": ">= 8",
        "batch_docs": ">= 1",
    }

    chunk_tokens: int = 200
    """Most tokens of one chunk (a hard cut where a window has no word boundary)."""
    overlap_tokens: int = 32
    """Tokens a chunk shares with the one before it."""
    tokenizer: str = "all-MiniLM-L6-v2"
    """`all-MiniLM-L6-v2` (the packaged default embedder's tokenizer) or a path to a tokenizer.json."""
    sentence_aware: bool = True
    """End chunks at sentence ends where one falls inside the window."""
    batch_docs: int = 256
    """Documents tokenized together; bounds memory when the corpus is larger than memory."""

    def validate(self, where: str) -> None:
        """The overlap leaves room in a chunk (single-field ranges are in RANGES)."""
        if not 0 <= self.overlap_tokens < self.chunk_tokens:
            raise ConfigError(
                f"{where}: chunking.overlap_tokens must be in [0, chunk_tokens), "
                f"got {self.overlap_tokens} with chunk_tokens={self.chunk_tokens}"
            )


@dataclass
class LLMConfig:
    """Which LLM answers prompts, and how it is reached."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "batch_size": ">= 1",
        "context_window": ">= 1",
        "concurrency": ">= 1",
        "connect_timeout_s": "> 0",
        "read_timeout_s": "> 0",
        "max_failed_share": "[0, 1]",
        "flush_every": ">= 1",
        "tensor_parallel_size": ">= 1",
        "gpu_memory_utilization": "(0, 1]",
    }

    backend: Literal["none", "transformers", "openai", "vllm"] = "none"
    """none (no LLM), transformers (in-process), openai (any OpenAI-compatible server), vllm (in-process, GPU)."""
    model: str | None = None
    """transformers: local folder (default: packaged SmolLM2 GGUF); openai: server model name; vllm: local folder."""
    gguf_file: str | None = None
    """transformers: the GGUF file inside `model`'s folder (default: the packaged SmolLM2 file)."""
    device: str = "cpu"
    """transformers: cpu, cuda or cuda:N."""
    batch_size: int = 8
    """transformers: prompts generated together in one forward batch."""
    constrained: bool = True
    """transformers: decode prompts that carry a JSON schema under its grammar (llguidance)."""
    dtype: Literal["float32", "bfloat16", "int8", "auto", "fast"] = "float32"
    """transformers: the weights' number type. int8: linear layers' weights in int8 (CPU only).
    auto: bfloat16 on a CPU with bf16 matrix units (AMX or AVX512-BF16, where it decodes
    faster; docs/models.md), float32 elsewhere; fast: the same, int8 on other CPUs. Answers
    differ between them, so each has its own cache."""
    context_window: int | None = None
    """The model's context window in tokens; unset, it is asked of the backend where it can tell
    (transformers: the model's config; vllm: max_model_len; a server: not known)."""
    base_url: str = "http://127.0.0.1:8000/v1"
    """openai: the server's base URL, ending in /v1."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (the key itself never goes in a file)."""
    concurrency: int = 8
    """openai: requests in flight at once."""
    connect_timeout_s: float = 5.0
    """openai: seconds to wait for a connection."""
    read_timeout_s: float = 120.0
    """openai: seconds to wait for an answer."""
    max_retries: int = 5
    """openai: retries of a request that timed out or got 429/5xx (Retry-After honoured)."""
    parse_retries: int = 2
    """Re-asks of a structured answer that does not parse or validate (then a recorded failure)."""
    max_failed_share: float = 0.5
    """A structured stage whose share of answers that still fail after the re-asks is above
    this fails the command (exit 4, nothing committed); at or below it the stage goes on and
    warns. 1.0 only warns."""
    flush_every: int = 64
    """Prompts per call for a backend that cannot report answers as they finish (the engine's
    own backends report each one, so a stage goes to them in one call and each answer is cached
    as it returns)."""
    tensor_parallel_size: int = 1
    """vllm: GPUs one model is split over."""
    gpu_memory_utilization: float = 0.9
    """vllm: share of GPU memory the engine may take."""
    cache: str | None = None
    """SQLite response cache; default `llm_cache.sqlite` beside the index (or the run's output)."""
    price_input_per_million: float | None = None
    """Price of a million prompt tokens (any currency); `index --dry-run` prices its forecast."""
    price_output_per_million: float | None = None
    """Price of a million completion tokens, in the same currency."""


@dataclass
class EmbedderConfig:
    """Which model turns texts into vectors."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "batch_size": ">= 1",
        "context_window": ">= 1",
    }

    backend: Literal["sentence-transformers", "onnx", "onnx-int8", "bge-m3", "openai"] = (
        "sentence-transformers"
    )
    """sentence-transformers; onnx (the same local model exported here to fp32 ONNX Runtime:
    faster on CPU, vectors equal to fp32's within float rounding; needs the `onnx` extra);
    onnx-int8 (exported to int8 ONNX Runtime, per-token activations and calibrated weights:
    faster again, index vectors of their own, queries at fp32; the `onnx` extra); bge-m3
    (FlagEmbedding); or openai (an embeddings endpoint)."""
    model: str = "all-MiniLM-L6-v2"
    """A local folder, or a packaged model: all-MiniLM-L6-v2 (the default) or
    all-mpnet-base-v2 (the `mpnet` extra); nothing is downloaded."""
    query_prefix: str = ""
    """Put before every query-side text (a question, a key) when it is embedded: e5's
    "query: ", bge's retrieval instruction. The index records it, and queries reuse it."""
    passage_prefix: str = ""
    """Put before every passage-side text (a chunk, a unit, an entity) when it is embedded:
    e5's "passage: "."""
    device: str = "cpu"
    """cpu, cuda or cuda:N."""
    batch_size: int | None = None
    """Texts embedded per forward pass (or per request). Unset: texts sorted by length fill
    batches of a padded-token budget, 2,048 on the CPU (at most 256 texts; docs/measurements.md
    says why), 65,536 on a GPU (at most 1,024 texts; docs/throughput.md); 64 per request to an
    endpoint, 32 for bge-m3."""
    context_window: int | None = None
    """The model's context window in tokens; unset, it is asked of the backend where it can tell
    (transformers: the model's config; vllm: max_model_len; a server: not known)."""
    base_url: str = "http://127.0.0.1:8000/v1"
    """openai: the server's base URL, ending in /v1."""
    api_key_env: str | None = None
    """openai: name of the environment variable holding the API key."""


@dataclass
class RerankerConfig:
    """Which model reranks candidates against a query."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "batch_size": ">= 1",
    }

    backend: Literal["bi-encoder", "cross-encoder", "flag"] = "bi-encoder"
    """bi-encoder (reuses the embedder), cross-encoder (sentence-transformers) or flag (FlagEmbedding)."""
    model: str | None = None
    """cross-encoder / flag: a local model folder."""
    device: str = "cpu"
    """cpu, cuda or cuda:N."""
    batch_size: int = 32
    """Query-passage pairs scored per forward pass."""


@dataclass
class ModelsConfig:
    """LLM, embedder and reranker settings (a section of index and query configs)."""

    llm: LLMConfig = field(default_factory=LLMConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    reranker: RerankerConfig = field(default_factory=RerankerConfig)

    def gpus_needed(self) -> float:
        """GPUs one model-holding worker needs: 1 when the embedder, the reranker or an
        in-process LLM (transformers on CUDA, vllm) is configured on a GPU, else 0."""
        llm = self.llm
        on_gpu = self.embedder.device.startswith("cuda") or llm.backend == "vllm"
        on_gpu = on_gpu or self.reranker.device.startswith("cuda")
        on_gpu = on_gpu or (llm.backend == "transformers" and llm.device.startswith("cuda"))
        return 1.0 if on_gpu else 0.0


@dataclass
class GraphConfig:
    """Stages after chunking: knowledge units, NER, entity resolution, graphs, embeddings."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "alpha": "[0, 1]",
        "unit_max_tokens": ">= 1",
        "synonym_threshold": ">= -1",
        "synonym_top_k": ">= 1",
    }

    enabled: bool = True
    """Run the stages after chunking (false: documents and chunks only, for BM25-style methods)."""
    alpha: float = 0.0
    """Clue-RAG token budget for LLM-extracted units, in [0, 1]; 0 uses no LLM at all."""
    ner: Literal["auto", "spacy", "spacy_concepts", "rules"] = "auto"
    """Entity recognizer of units: spacy (packaged small English model), spacy_concepts (its
    named entities and concept noun phrases), rules, or auto (spacy when installed)."""
    ner_skip_labels: list[str] = field(default_factory=lambda: ["CARDINAL", "ORDINAL"])
    """spaCy entity labels left out of the graph (and out of questions' mentions): by default
    bare counts and ranks ("three", "second"), as LinearRAG's public code does; dates, times,
    amounts and percentages stay entities, so "1995" links the passages that name it.
    Changing it re-reads cached mentions, it does not tag again."""
    embed: bool = True
    """Embed chunks, units, entities and relations (dense methods need it)."""
    unit_max_tokens: int = 512
    """Completion budget of one LLM unit-extraction answer."""
    relation_vectors: Literal["index", "lazy"] = "index"
    """When relation texts are embedded: 'index' at build time; 'lazy' by the first query that
    searches relations (LightRAG-style global/hybrid, ROGRAG, ReGraphRAG), kept in the index's
    embedding cache for later runs. Lazy saves a build the most texts of an LLM-free index
    (46k of MuSiQue's 78k); methods that never search relations then never pay for them."""
    entity_sentences: int = 3
    """Without an LLM description, an entity is described by up to this many of the sentences
    (knowledge units) that mention it, those naming the most entities first (0: no description;
    3 chosen on train, bench/descriptions.py; dev in bench/text_graph.py)."""
    relation_sentences: int = 2
    """Without an LLM description, a relation is described by up to this many of the sentences
    where its two ends co-occur, and its keywords are their content words (0: no description,
    keyword "co-occurrence"). Such a relation's vector is the mean of its sentences' unit
    vectors (no embedding of its text), unless unit_vectors is lazy and relation_vectors is not."""
    entity_vectors: Literal["pooled", "text"] = "pooled"
    """An entity described by its sentences (no LLM description): 'pooled' gives it its name's
    vector and its sentences' unit vectors summed, weighted by their characters (each sentence
    embedded once, as a unit); 'text' embeds "name: sentences" as one text, the sentences again
    inside every entity that they name. Pooled needs unit_vectors: index (else text)."""
    synonym_threshold: float = 0.8
    """Entities whose name vectors have at least this cosine are joined by a synonym edge
    (graph_synonym; HippoRAG 2's 0.8); above 1: none."""
    synonym_top_k: int = 10
    """Nearest entities by name looked at per entity for synonym edges."""
    unit_vectors: Literal["index", "lazy"] = "index"
    """When knowledge-unit texts are embedded: 'index' at build time; 'lazy' by the first query
    that needs them (Clue-RAG), kept in the index's embedding cache as relation vectors are.
    Units hold about as many tokens as the chunks, so an index that no Clue-RAG run will query
    saves that much embedding."""


@dataclass
class ExtractionConfig:
    """LLM triple extraction (LightRAG / ReGraphRAG prompt family), optional."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "max_rounds": ">= 1",
        "max_tokens": ">= 1",
    }

    enabled: bool = False
    """Extract entity/relation triples with the LLM (needs models.llm)."""
    entity_types: list[str] = field(
        default_factory=lambda: ["person", "organization", "location", "event", "work", "concept"]
    )
    """Entity types the extraction prompt and schema allow."""
    gleaning: int = 1
    """Continuation rounds asking for missed entities (when loop is 'none')."""
    loop: Literal["none", "trial", "base"] = "none"
    """ROGRAG loop NER: 'trial' asks whether entities were missed, then continues; 'base' continues, then asks."""
    max_rounds: int = 2
    """'trial' / 'base' loops: most extraction rounds per chunk."""
    max_tokens: int = 1024
    """Completion tokens per round; the answer schema's bounds fit about 850 (a cut answer is
    invalid: with 512, 4 of 8 MuSiQue passages were cut under SmolLM2 + llama.cpp)."""
    retries: int = 1
    """Re-asks of a round whose answer does not validate (then the round counts as failed)."""
    summarize_above: int = 800
    """Joined entity descriptions longer than this many characters are summarised by the LLM (0: never)."""


@dataclass
class CommunitiesConfig:
    """Hierarchical Leiden communities of the entity graph and their LLM reports (optional)."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "max_cluster_size": ">= 1",
        "report_max_tokens": ">= 1",
    }

    enabled: bool = False
    """Detect hierarchical Leiden communities of the entity graph."""
    max_cluster_size: int = 10
    """Communities larger than this are split at the next level."""
    seed: int = 42
    """Leiden's random seed (same seed, same communities)."""
    reports: bool = False
    """Write an LLM report (title, summary, rating) per community (needs models.llm)."""
    extractive_reports: bool = True
    """Without LLM reports, write an extractive report per community: a title from its central
    entities, a summary and findings from its own sentences and relations (no LLM); with them,
    for each community whose LLM report failed to parse."""
    report_max_tokens: int = 512
    """Completion tokens of one report."""


@dataclass
class IndexConfig:
    """Everything `graphrag-engine index` needs; later stages add their sections here."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "workers": ">= 1",
    }

    ingest: IngestConfig = field(default_factory=IngestConfig)
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    communities: CommunitiesConfig = field(default_factory=CommunitiesConfig)
    tree: TreeConfig = field(default_factory=TreeConfig)
    skeleton: SkeletonConfig = field(default_factory=SkeletonConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    executor: Literal["local", "ray"] = "local"
    """Where the model stages run: local (this process) or ray (Ray Data pipelines over
    model-holding actors)."""
    ray_address: str = "local"
    """'local' starts a private Ray cluster (inside `ray job submit`: the cluster the job runs
    on); 'auto' joins the running one; or ray://host:port."""
    workers: int = 2
    """Ray actors per model stage: the Ray Data pool size (`concurrency`) for embedding, NER
    and in-process LLM generation (one model per actor, on a CPU or its GPUs)."""
    ray_gpus_per_worker: float | None = None
    """GPUs each Ray actor asks for; unset: 1 when the embedder, the reranker or an in-process LLM
    (transformers on CUDA, vllm) is configured on a GPU, else 0. A fraction shares a GPU between
    actors."""

    def gpus_per_worker(self) -> float:
        """ray_gpus_per_worker, or the GPU the configured models need per actor."""
        if self.ray_gpus_per_worker is not None:
            return self.ray_gpus_per_worker
        return self.models.gpus_needed()

    def validate(self, where: str) -> None:
        """Cross-field checks that a type alone cannot express."""
        check_ranges(self, where)
        self.chunking.validate(where)
        if self.extraction.enabled and self.models.llm.backend == "none":
            raise ConfigError(
                f"{where}: extraction.enabled needs an LLM, but models.llm.backend is 'none'"
            )
        if self.communities.reports and self.models.llm.backend == "none":
            raise ConfigError(
                f"{where}: communities.reports needs an LLM, but models.llm.backend is 'none'"
            )
        if self.tree.enabled and self.tree.summaries == "llm" and self.models.llm.backend == "none":
            raise ConfigError(
                f"{where}: tree.summaries: llm needs an LLM, but models.llm.backend is 'none'; "
                "set a backend or tree.summaries: extractive"
            )
        if self.tree.enabled and not (self.graph.enabled and self.graph.embed):
            raise ConfigError(
                f"{where}: tree.enabled clusters the chunk vectors, which only a build with "
                "graph.enabled: true and graph.embed: true makes; set both"
            )
        if self.skeleton.enabled and not (self.graph.enabled and self.graph.embed):
            raise ConfigError(
                f"{where}: skeleton.enabled ranks the chunks by their vectors and words, which "
                "only a build with graph.enabled: true and graph.embed: true makes; set both"
            )
        if self.graph.alpha > 0 and self.models.llm.backend == "none":
            raise ConfigError(
                f"{where}: graph.alpha = {self.graph.alpha} extracts units with an LLM, but models.llm.backend "
                "is 'none'; set a backend or alpha: 0"
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every setting, defaults included."""
        return dataclasses.asdict(self)

    def config_hash(self) -> str:
        """Stable hash of the settings that shape the index content."""
        payload = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]
