"""What a query run reads from an index and which models it holds, loaded lazily and once.

Every retrieval operator takes a `QueryContext`, so a method loads only the tables, vectors,
graphs and models it actually uses. The models that must match the index (embedder, NER,
tokenizer) come from the index manifest; derived structures (adjacency, BM25 indexes, graphs)
are built once through `memo`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from graphrag_engine.config import EmbedderConfig, GraphConfig
from graphrag_engine.config.query import QueryConfig
from graphrag_engine.errors import BadInputError, IndexFormatError
from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.models import make_embedder, make_llm
from graphrag_engine.models.base import UsageLedger
from graphrag_engine.models.embed import query_encoder
from graphrag_engine.models.ner import NUMERIC_LABELS, entity_recognizer
from graphrag_engine.models.tokenizer import DEFAULT_TOKENIZER, load_tokenizer
from graphrag_engine.names import titled_chunk
from graphrag_engine.retrieve.budget import ContextBudget, config_budget
from graphrag_engine.retrieve.lazy_vectors import LAZY_TEXTS, lazy_vectors
from graphrag_engine.store.index_store import Index, built_config

log = logging.getLogger(__name__)

T = TypeVar("T")
TOKEN_COUNTS_KEPT = 1 << 18
"""Distinct context texts whose token counts an opened index keeps; past it, it starts again."""


def skipped_labels(graph: dict[str, Any]) -> tuple[str, ...]:
    """The entity labels an index's graph config left out: its `ner_skip_labels`; every numeric
    label for an index built before that setting existed; the default for one that records no
    graph config (an import)."""
    default = NUMERIC_LABELS if graph else GraphConfig().ner_skip_labels
    return tuple(graph.get("ner_skip_labels", default))


def embedder_config(cfg: QueryConfig, index: Index) -> EmbedderConfig:
    """The embedder a query uses: its config's, or, where that is left at the default, the
    backend and model the index was built with (a query must embed as its index did)."""
    own = cfg.models.embedder
    built = built_config(index, "models").get("embedder")
    if not built or own != EmbedderConfig():
        return own
    prefixes = {k: built[k] for k in ("query_prefix", "passage_prefix") if k in built}
    return dataclasses.replace(own, backend=built["backend"], model=built["model"], **prefixes)


QUERY_VECTORS_KEPT = 1 << 16
"""Query texts whose vectors a run keeps for reuse (about 100 MB at 384 dimensions)."""


class QueryContext:
    """Index tables, vectors, graphs and models shared by the operators of one query run."""

    def __init__(
        self,
        index: Index,
        cfg: QueryConfig,
        run_dir: Path,
        dry_run: bool = False,
        llm_backend=None,
    ) -> None:
        """`llm_backend` replaces the backend the config names (an engine already loaded)."""
        self.index = index
        self._llm_backend = llm_backend
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.dry_run = dry_run
        self.ledger = UsageLedger()  # every LLM of the run (query LLM, fine-tuned scorers)
        self._memo: dict[Any, Any] = {}
        self._preset_vectors: dict[str, np.ndarray] = {}
        self._query_vectors: dict[str, np.ndarray] = {}
        """Every query text embedded in this run (or preset), by text."""
        self._token_counts: dict[str, int] = {}

    def memo(self, key: Any, build: Callable[[], T]) -> T:
        """A structure derived from the index (adjacency, a BM25 index, a graph), built once
        per run by `build` and kept under `key`."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    # -- passages ------------------------------------------------------------------------------
    @cached_property
    def chunks(self) -> dict[str, list]:
        """Chunk ids, texts, "title\\ntext" strings and the corpus id of each chunk's document."""
        docs = self.index.table("documents", ["doc_id", "external_id", "title"]).to_pydict()
        ext = dict(zip(docs["doc_id"], docs["external_id"], strict=True))
        title = dict(zip(docs["doc_id"], docs["title"], strict=True))
        ch = self.index.table("chunks", ["chunk_id", "doc_id", "text"]).to_pydict()
        titled = [titled_chunk(title[d], t) for d, t in zip(ch["doc_id"], ch["text"], strict=True)]
        return {
            "ids": ch["chunk_id"],
            "texts": ch["text"],
            "titled": titled,
            "passage": [ext[d] or d for d in ch["doc_id"]],
            "title": [title[d] for d in ch["doc_id"]],
        }

    @cached_property
    def chunk_vectors(self) -> np.ndarray:
        """L2-normalised chunk embeddings of "title\\ntext" (memory-mapped)."""
        return self._vectors("chunk_vectors")

    def vectors(self, name: str) -> np.ndarray:
        """Vector table `name` of the index (unit vectors held in memory, the rest mapped), opened
        once per run."""
        if name in ("chunk_vectors", "unit_vectors", "entity_vectors"):
            return getattr(self, name)
        return self.memo(("vectors", name), lambda: self._vectors(name))

    def _vectors(self, name: str) -> np.ndarray:
        if not self.index.has(name):
            if name in LAZY_TEXTS and built_config(self.index, "graph").get(name) == "lazy":
                return lazy_vectors(self.index, name, self.embedder, lambda: self.unit_vectors)
            raise IndexFormatError(
                f"{self.index.root}: the index has no {name}; rebuild it with graph.embed: true"
            )
        return self.index.vectors(name)

    @cached_property
    def units(self) -> dict[str, list]:
        """Knowledge unit ids and texts, in graph node order."""
        return self.index.table("units", ["unit_id", "text"]).to_pydict()

    @cached_property
    def unit_vectors(self) -> np.ndarray:
        """Unit embeddings, loaded into memory (they are gathered at random every depth)."""
        return np.ascontiguousarray(self._vectors("unit_vectors"))

    # -- entities and graphs -------------------------------------------------------------------
    @cached_property
    def entities(self) -> dict[str, list]:
        """Entity ids and names, in graph node order."""
        if not self.index.has("entities"):
            raise IndexFormatError(
                f"{self.index.root}: the index has no entities; rebuild it with graph.enabled: true"
            )
        return self.index.table("entities", ["entity_id", "name"]).to_pydict()

    @cached_property
    def entity_vectors(self) -> np.ndarray:
        """Entity embeddings ("name: description" or the name), in graph node order."""
        return self._vectors("entity_vectors")

    def graph_parts(self, name: str) -> dict[str, list[int]]:
        """Node ranges of a multi-partite graph, e.g. {"chunk": [0, C], "entity": [C, C+E]}."""
        return self.index.manifest["stats"]["graphs"][name]["parts"]

    def graph(self, name: str) -> CSRGraph:
        """An index graph as CSR (undirected graphs hold both edge directions)."""
        return self.memo(("graph", name), lambda: self._load_graph(name))

    def _load_graph(self, name: str) -> CSRGraph:
        if not self.index.has(name):
            raise IndexFormatError(
                f"{self.index.root}: the index has no {name}; rebuild it with graph.enabled: true"
            )
        layout = self.index.manifest.get("stats", {}).get("graphs", {}).get(name, {})
        e = self.index.table(name).to_pydict()
        src, dst = np.asarray(e["src"]), np.asarray(e["dst"])
        w = np.asarray(e["weight"], dtype=np.float32)
        n = int(layout.get("nodes", max(src.max(initial=-1), dst.max(initial=-1)) + 1))
        return CSRGraph.from_edges(
            src, dst, w, n_nodes=n, directed=bool(layout.get("directed", False))
        )

    @cached_property
    def device(self) -> str:
        """Where vector search and PPR run: `retrieval.device`, auto resolved to the embedder's
        CUDA device when torch sees one, else the CPU."""
        wanted = self.cfg.retrieval.device
        if wanted == "auto":
            wanted = self.cfg.models.embedder.device
            if not wanted.startswith("cuda"):
                return "cpu"
        if wanted == "cpu":
            return "cpu"
        import torch

        if not torch.cuda.is_available():
            if self.cfg.retrieval.device == "auto":
                return "cpu"  # the embedder will say that CUDA is missing
            raise BadInputError(
                f"retrieval.device is {wanted} but torch sees no CUDA device; set it to cpu"
            )
        return wanted

    # -- models --------------------------------------------------------------------------------
    @property
    def built_with(self) -> dict[str, str]:
        """The models the index was built with (manifest `models`: embedder, ner, llm)."""
        return self.index.manifest.get("models", {}) or {}

    @cached_property
    def embedder(self):
        """The embedder the index was built with (a different one would compare apples to pears)."""
        emb = make_embedder(embedder_config(self.cfg, self.index))
        self._check_embedder(emb.model_id)
        return emb

    def _check_embedder(self, model_id: str) -> None:
        """Refuse query vectors of another model than the index's."""
        built = self.built_with.get("embedder")
        if built and built != model_id:
            raise BadInputError(
                f"{self.index.root}: the index was embedded with {built}, the query config uses "
                f"{model_id}; set models.embedder to the index's model"
            )

    @cached_property
    def llm(self):
        """The LLM front with its response cache in the run folder (the resume ledger)."""
        return make_llm(
            self.cfg.models.llm,
            default_cache=None if self.dry_run else self.run_dir / "llm_cache.sqlite",
            dry_run=self.dry_run,
            backend=self._llm_backend,
            ledger=self.ledger,
        )

    @cached_property
    def budget(self) -> ContextBudget:
        """The method's published context budget fitted to the run's answer window (noticed once
        when it shrinks; summary.json keeps it)."""
        gen, llm = self.cfg.generation, self.cfg.models.llm
        window = None
        if llm.context_window is None and gen.max_context_tokens is None and gen.enabled:
            if llm.backend != "none":  # the backend knows its model's window, where it can tell
                asks = getattr(self.llm.backend, "context_window", None)
                window = asks() if asks is not None else None
        budget = config_budget(self.cfg, window)
        note = budget.note(self.cfg.method)
        if note and not self.dry_run:
            log.info(note)
        return budget

    def scaled(self, tokens: float) -> int:
        """A section budget of the method's config, shrunk to the run's answer window."""
        return max(int(tokens * self.budget.scale), 1)

    @property
    def context_tokens(self) -> int:
        """Tokens a context may hold in the answer (and verdict) prompts."""
        return self.budget.tokens

    @cached_property
    def ner(self):
        """The entity recognizer the index used (its manifest's NER backend; "auto" for an
        index built without NER)."""
        backend = self.built_with.get("ner", "auto").split(":")[0]
        known = ("spacy", "spacy_concepts", "rules")
        return entity_recognizer(backend if backend in known else "auto")

    @cached_property
    def ner_skip_labels(self) -> tuple[str, ...]:
        """Entity labels the index left out of its graph, so questions leave them out too."""
        return skipped_labels(built_config(self.index, "graph"))

    @cached_property
    def tokenizer(self):
        """The tokenizer the index counted chunk tokens with, for counting context tokens."""
        chunking = built_config(self.index, "chunking")
        return load_tokenizer(chunking.get("tokenizer", DEFAULT_TOKENIZER))

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text by the index's tokenizer. A context line (chunk, entity,
        relation, report) recurs across questions: each distinct text is encoded once per
        opened index (one batched encode for those not seen before), then read from memory."""
        known = self._token_counts
        new = list(dict.fromkeys(t for t in texts if t not in known))
        if new:
            if len(known) + len(new) > TOKEN_COUNTS_KEPT:  # a bound on memory in a long run
                known.clear()
                new = list(dict.fromkeys(texts))
            encoded = self.tokenizer.encode_batch(new)
            known.update((t, len(e.ids)) for t, e in zip(new, encoded, strict=True))
        return [known[t] for t in texts]

    def head_tokens(self, text: str, tokens: int) -> str:
        """`text` cut after its first `tokens` tokens by the index's tokenizer (whole when it
        fits): for one item that alone exceeds a prompt's budget."""
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        if len(encoding.ids) <= tokens:
            return text
        return text[: encoding.offsets[max(tokens, 1) - 1][1]]

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """One batched embedding call for the texts not embedded before in this run (those
        given to `preset_query_vectors` are taken from there); each distinct text is embedded
        once however many steps ask for it."""
        if not texts:
            return np.asarray(query_encoder(self.embedder)([]), dtype=np.float32)
        known = self._query_vectors
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:  # the embedder is loaded only for texts it was not given
            if len(known) + len(missing) > QUERY_VECTORS_KEPT:
                known.clear()
                known.update(self._preset_vectors)
            found = np.asarray(query_encoder(self.embedder)(missing), dtype=np.float32)
            known.update(zip(missing, found, strict=True))
        return np.stack([known[t] for t in texts]).astype(np.float32, copy=False)

    def encode_query_groups(self, *groups: list[str]) -> list[np.ndarray]:
        """Vectors of several lists of query texts (questions, keys, ...) from one batched
        embedding call, each distinct non-empty text embedded once; an empty text gets a zero
        vector (searches skip empty texts)."""
        distinct = list(dict.fromkeys(t for group in groups for t in group if t.strip()))
        vectors = self.encode_queries(distinct) if distinct else None
        width = 0 if vectors is None else vectors.shape[1]
        row = {t: i for i, t in enumerate(distinct)}
        out = []
        for group in groups:
            block = np.zeros((len(group), width), dtype=np.float32)
            for i, t in enumerate(group):
                if t in row:
                    block[i] = vectors[row[t]]
            out.append(block)
        return out

    def preset_query_vectors(self, texts: list[str], vectors: np.ndarray, model_id: str) -> None:
        """Vectors of query texts embedded elsewhere (the Ray query job's question pipeline) by
        `model_id`, which must be the index's embedder; replaces any set before."""
        self._check_embedder(model_id)
        self._preset_vectors = dict(zip(texts, np.asarray(vectors, np.float32), strict=True))
        self._query_vectors = dict(self._preset_vectors)
