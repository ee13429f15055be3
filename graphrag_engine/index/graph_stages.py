"""The stages after chunking, each over all chunks (texts read back from the staged tables a
window at a time; model calls over all the missing texts at once), as a list of `Stage`
objects run by one runner: embed chunks -> knowledge units (knapsack-chosen core chunks by
LLM, sentences for the rest) -> NER -> LLM triple extraction -> entity resolution and graphs
-> communities (and their reports) -> embeddings of units, entities and relations.

The runner times every stage, diffs the LLM ledger around the stages that use the LLM and
writes each stage's stats into the manifest (a dry run never gets here: graphrag_engine/index/forecast.py
forecasts the LLM stages from the chunks alone). A new stage is an addition to STAGES.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from graphrag_engine.config import IndexConfig
from graphrag_engine.exec import make_executor
from graphrag_engine.index.communities import community_reports, detect_communities
from graphrag_engine.index.extract import extract_configured, summarize_descriptions
from graphrag_engine.index.extractive_reports import extractive_reports
from graphrag_engine.index.graphs import build_graphs, edge_table
from graphrag_engine.index.resolve import resolve
from graphrag_engine.index.synonyms import synonym_edges
from graphrag_engine.index.units import llm_units, select_core_chunks, unit_batches
from graphrag_engine.index.vectors import embed_stage, write_vectors
from graphrag_engine.models import make_llm
from graphrag_engine.models.base import Usage, outcome_line
from graphrag_engine.models.embed_cache import EMBED_CACHE, EmbeddingCache
from graphrag_engine.models.ner import skip_labels
from graphrag_engine.models.ner_cache import NERCache
from graphrag_engine.models.text_cache import WINDOW
from graphrag_engine.store import IndexWriter
from graphrag_engine.store.schemas import schema_for

LLM_CACHE = "llm_cache.sqlite"  # beside the index: the ledger that makes re-runs free
NER_CACHE = "ner_cache.sqlite"
RAY_PARTS = ".staging-ray-parts"
"""Where Ray pool actors write their results as Parquet parts for the driver to commit; a
staging name, so a build that starts clears what a killed one left."""
NER_EARLY_FROM = 1000
"""Chunks from which a fresh local build (its NER cache empty) starts its NER worker processes
before the chunks embed, so they load meanwhile; otherwise the executor starts them when the
NER stage has enough untagged units (graphrag_engine/exec/local.py)."""


@dataclass
class Build:
    """What the stages of one index build share: inputs, outputs so far, models and stats."""

    writer: IndexWriter
    out: Path
    config: IndexConfig
    chunks: Any
    stats: dict[str, Any]
    models: dict[str, str]
    executor: Any
    embedder: Any = None
    cache: EmbeddingCache | None = None
    llm: Any = None
    ner_cache_db: NERCache | None = None
    chunk_vecs: np.ndarray | None = None
    unit_ids: pa.Table | None = None  # (unit_id, chunk_id) of every unit; texts stay staged
    extracted: list | None = None
    entities: list[dict] = field(default_factory=list)
    relations: list[dict] = field(default_factory=list)
    unit_entity: pa.Table | None = None  # (unit_id, entity_id): which entities each unit names

    def unit_texts(self) -> Iterator[list[str]]:
        """Every unit's text in table order, read back from staging WINDOW at a time."""
        for batch in self.writer.staged_batches("units", ["text"], WINDOW):
            yield batch.column(0).to_pylist()

    def ner_cache(self) -> NERCache:
        """The NER cache beside the index, opened once per build."""
        if self.ner_cache_db is None:
            self.ner_cache_db = NERCache(self.out / NER_CACHE)
        return self.ner_cache_db

    def stage_llm(self):
        """The LLM of the index stages, made once: response cache beside the index, engines in
        the executor's workers where it has them (Ray), recorded in the manifest's models."""
        if self.llm is None:
            self.llm = make_llm(
                self.config.models.llm,
                default_cache=self.out / LLM_CACHE,
                backend=self.executor.llm_backend(self.config.models.llm),
            )
            self.models["llm"] = self.llm.model_id
        return self.llm


@dataclass(frozen=True)
class Stage:
    """One index stage: its name, the tables it reads and writes, when it runs, its run
    function (returns its stats)."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    run: Callable[[Build], dict[str, Any]]
    enabled: Callable[[IndexConfig], bool] = lambda cfg: True
    uses_llm: bool = False
    """The runner adds the LLM calls and tokens it spent (cached ones included)."""


def run_graph_stages(
    writer: IndexWriter,
    out: Path,
    config: IndexConfig,
    chunks,
    stats: dict[str, Any],
    models: dict[str, str],
    stages: list[Stage] | None = None,
    **known: Any,
) -> None:
    """Run STAGES (or `stages`) into `writer`; `known` presets what earlier stages would have
    made (an import brings its own units, entities and relations and runs only the vectors)."""
    executor = make_executor(
        config.executor,
        config.models.embedder,
        config.graph.ner,
        config.ray_address,
        config.workers,
        config.gpus_per_worker(),
        parts=out / RAY_PARTS,
    )
    try:
        build = Build(writer, out, config, chunks, stats, models, executor, **known)
        g = config.graph
        if g.embed or g.alpha > 0:
            build.embedder = executor
            build.cache = EmbeddingCache(out / EMBED_CACHE)
            models["embedder"] = executor.model_id
        stats["executor"] = executor.name
        start_ner_workers = getattr(executor, "start_ner_workers", None)
        runs_ner = any(s.name == "ner" for s in (STAGES if stages is None else stages))
        if start_ner_workers is not None and runs_ner and len(chunks) >= NER_EARLY_FROM:
            if not build.ner_cache().holds(executor.ner_model_id):
                start_ner_workers()
        run_stages(build, STAGES if stages is None else stages)
    finally:
        executor.close()


def run_stages(build: Build, stages: list[Stage]) -> None:
    """Run each enabled stage, timed, with its stats (and LLM usage) in the manifest."""
    for stage in stages:
        if not stage.enabled(build.config):
            continue
        t0 = time.perf_counter()
        before = build.llm.ledger.total() if build.llm is not None else Usage()
        values = stage.run(build)
        if stage.uses_llm:
            after = build.llm.ledger.total() if build.llm is not None else Usage()
            values.update(_usage_diff(before, after))
            spent = {k: getattr(after, k) - getattr(before, k) for k in OUTCOME_FIELDS}
            if any(spent.values()):  # one line per LLM stage that asked anything
                print(outcome_line(stage.name, spent), file=sys.stderr, flush=True)
        build.stats["stages"][stage.name] = {
            **values,
            "seconds": round(time.perf_counter() - t0, 3),
            "peak_rss_mb": peak_rss_mb(),
        }


OUTCOME_FIELDS = ("calls", "cached_calls", "retries", "parse_failures", "failed_prompts")


def peak_rss_mb() -> int:
    """This process's peak resident memory so far, in MiB (a stage's figure is the peak up to
    its end, so the first stage that raises it is where the memory went)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _usage_diff(before: Usage, after: Usage) -> dict[str, int]:
    """LLM calls and tokens spent between two ledger totals (cache hits counted as spent)."""
    return {
        "model_calls": after.calls - before.calls,
        "cached_calls": after.cached_calls - before.cached_calls,
        "prompt_tokens": (after.prompt_tokens + after.cached_prompt_tokens)
        - (before.prompt_tokens + before.cached_prompt_tokens),
        "completion_tokens": (after.completion_tokens + after.cached_completion_tokens)
        - (before.completion_tokens + before.cached_completion_tokens),
        **{
            k: getattr(after, k) - getattr(before, k)
            for k in ("schema_decoded", "json_mode_decoded", "free_decoded", "retries")
        },
    }


# -- the stages --------------------------------------------------------------------------------
def _embed_chunks(b: Build) -> dict[str, Any]:
    """Chunk vectors (also the knapsack's similarity values)."""
    if b.embedder is not None:
        write_vectors(b, {"chunk_vectors": (len(b.chunks), b.chunks.titled)})
        if b.config.graph.alpha > 0:  # the knapsack reads them, memory-mapped
            b.chunk_vecs = b.writer.staged_vectors("chunk_vectors")
    cache = b.cache
    return {
        "items": len(b.chunks),
        "cached": cache.hits if cache else 0,
        "embedded": cache.misses if cache else 0,
        "model_calls": int(bool(cache and cache.misses)),
    }


def _core_chunks(b: Build) -> np.ndarray:
    if b.chunk_vecs is None:
        return np.empty(0, np.int64)
    return select_core_chunks(b.chunk_vecs, b.chunks.n_tokens, b.config.graph.alpha)


def _units(b: Build) -> dict[str, Any]:
    """Knowledge units: the LLM's for the core chunks, sentences for the rest (and for core
    chunks whose answer never parsed), written batch by batch as they are made."""
    g = b.config.graph
    core = _core_chunks(b)
    by_llm: dict[str, list] = {}
    failures = 0
    if core.size:
        wanted = set(core.tolist())
        pairs = [pair for i, pair in enumerate(b.chunks.pairs()) if i in wanted]
        by_llm, failures = llm_units(
            b.stage_llm(),
            pairs,
            retries=b.config.models.llm.parse_retries,
            max_tokens=g.unit_max_tokens,
        )
    ids = []
    for batch in unit_batches(b.chunks.pairs(), by_llm):
        b.writer.table("units").write(batch)
        ids.append(batch.select(["unit_id", "chunk_id"]))
    schema = schema_for("units")
    b.unit_ids = pa.Table.from_batches(
        ids, pa.schema([schema.field("unit_id"), schema.field("chunk_id")])
    )
    return {
        "items": b.unit_ids.num_rows,
        "core_chunks": int(core.size),
        "llm_units": sum(len(v) for v in by_llm.values()),
        "parse_failures": failures,
    }


def _ner(b: Build) -> dict[str, Any]:
    """Entity mentions of every unit (blocks of units per executor call, cached by text; the
    resolve stage reads them back from the cache a window at a time)."""
    b.models["ner"] = b.executor.ner_model_id
    cache = b.ner_cache()
    cache.tag(b.executor, b.models["ner"], b.unit_texts(), total=b.unit_ids.num_rows)
    return {
        "items": b.unit_ids.num_rows,
        "cached": cache.hits,
        "tagged": cache.misses,
        "backend": b.models["ner"].split(":")[0],
        "worker_processes": getattr(b.executor, "ner_workers", 0),
    }


def _extract(b: Build) -> dict[str, Any]:
    """LLM triple extraction of every chunk (gleaning or loop NER rounds), then description
    summaries of entities whose joined descriptions are long."""
    texts = [text for _, text in b.chunks.pairs()]
    found = extract_configured(b.stage_llm(), texts, b.config.extraction)
    b.extracted = list(zip(b.chunks.ids.to_pylist(), found, strict=True))
    return {
        "items": len(found),
        "entities": sum(len(f.entities) for f in found),
        "relations": sum(len(f.relations) for f in found),
        "rounds": sum(f.rounds for f in found),
        "parse_failures": sum(f.failures for f in found),
    }


def _resolve_graphs(b: Build) -> dict[str, Any]:
    """Entity resolution (mentions and extracted triples), then the three graphs."""
    mentions_seen = 0
    model, cache = b.models["ner"], b.ner_cache()

    def unit_mentions():  # each unit's mentions, read back from the NER cache a window at a time
        nonlocal mentions_seen
        lo = 0
        for found, texts in zip(cache.mentions(model, b.unit_texts()), b.unit_texts(), strict=True):
            found = skip_labels(found, b.config.graph.ner_skip_labels)
            ids = b.unit_ids.slice(lo, len(found))  # the window's ids, held since the units stage
            lo += len(found)
            mentions_seen += sum(map(len, found))
            yield from zip(*(c.to_pylist() for c in ids.columns), found, texts, strict=True)

    g = b.config.graph
    b.entities, unit_entity, b.relations = resolve(
        unit_mentions(), b.extracted, g.entity_sentences, g.relation_sentences
    )
    b.unit_entity = unit_entity
    b.stats["stages"]["ner"]["mentions"] = mentions_seen
    x = b.config.extraction
    if b.extracted is not None and x.summarize_above > 0:
        b.stats["stages"]["extract"]["summarized"] = summarize_descriptions(
            b.llm, b.entities, x.summarize_above
        )
    b.writer.write_table("entities", b.entities)
    b.writer.write_table("unit_entity", unit_entity)
    b.writer.write_table("relations", b.relations)
    graphs, layouts = build_graphs(b.chunks.ids, b.unit_ids, b.entities, unit_entity, b.relations)
    for name, table in graphs.items():
        b.writer.write_table(name, table)
    b.stats["graphs"] = {k: {**v, "edges": graphs[k].num_rows} for k, v in layouts.items()}
    return {"items": len(b.entities), "relations": len(b.relations)}


def _communities(b: Build) -> dict[str, Any]:
    """Hierarchical Leiden communities, and their LLM reports when asked (else extractive
    reports, unless those are turned off too); a community whose LLM report failed to parse
    gets its extractive report, so global search still covers the whole graph."""
    c = b.config.communities
    rows = detect_communities(b.relations, c.max_cluster_size, c.seed)
    b.writer.write_table("communities", rows)
    values: dict[str, Any] = {"items": len(rows), "levels": len({r["level"] for r in rows})}
    if not c.reports and c.extractive_reports:
        reports = extractive_reports(rows, b.entities, b.relations, _unit_entities(b))
        b.writer.write_table("reports", reports)
        values.update(reports=len(reports), reports_kind="extractive")
    if c.reports:
        reports, failures = community_reports(
            b.stage_llm(),
            rows,
            b.entities,
            b.relations,
            c.report_max_tokens,
            b.config.models.llm.parse_retries,
        )
        values.update(reports_kind="llm", parse_failures=failures)
        have = {r["community_id"] for r in reports}
        missing = [r for r in rows if r["community_id"] not in have]
        if missing and c.extractive_reports:  # a failed LLM report leaves no hole
            reports += extractive_reports(missing, b.entities, b.relations, _unit_entities(b))
            position = {r["community_id"]: i for i, r in enumerate(rows)}
            reports.sort(key=lambda r: position[r["community_id"]])
            values["extractive_for_failures"] = len(missing)
        b.writer.write_table("reports", reports)
        values["reports"] = len(reports)
    return values


def _unit_entities(b: Build) -> Iterator[tuple[str, list[str]]]:
    """Every knowledge unit's text with the entity ids it names, in table order."""
    named: dict[str, list[str]] = {}
    if b.unit_entity is not None:
        for unit, entity in zip(*(c.to_pylist() for c in b.unit_entity.columns), strict=True):
            named.setdefault(unit, []).append(entity)
    ids = iter(b.unit_ids.column("unit_id").to_pylist()) if b.unit_ids is not None else iter(())
    for texts in b.unit_texts():
        for text, unit in zip(texts, ids, strict=False):
            yield text, named.get(unit, [])


def _synonyms(b: Build) -> dict[str, Any]:
    """Synonym edges between entities whose names embed close together (graph_synonym)."""
    g = b.config.graph
    names = [e["name"] for e in b.entities]
    vectors = b.cache.encode(b.embedder, names, "entity names")
    src, dst, cosine = synonym_edges(vectors, g.synonym_threshold, g.synonym_top_k)
    b.writer.write_table("graph_synonym", edge_table(src, dst, cosine))
    n = len(names)
    b.stats["graphs"]["graph_synonym"] = {
        "nodes": n,
        "directed": False,
        "parts": {"entity": [0, n]},
        "edges": int(src.size),
    }
    return {"items": n, "edges": int(src.size)}


STAGES: list[Stage] = [
    Stage("embed_chunks", ("chunks",), ("chunk_vectors",), _embed_chunks),
    Stage(
        "units",
        ("chunks", "chunk_vectors"),
        ("units",),
        _units,
        uses_llm=True,
    ),
    Stage("ner", ("units",), (), _ner),
    Stage(
        "extract",
        ("chunks",),
        (),
        _extract,
        enabled=lambda cfg: cfg.extraction.enabled,
        uses_llm=True,
    ),
    Stage(
        "resolve_graphs",
        ("units",),
        ("entities", "unit_entity", "relations", "graph_*"),
        _resolve_graphs,
        uses_llm=True,  # the entity description summaries: their usage is this stage's
    ),
    Stage(
        "communities",
        ("relations",),
        ("communities", "reports"),
        _communities,
        enabled=lambda cfg: cfg.communities.enabled,
        uses_llm=True,
    ),
    Stage(
        "embed",
        ("units", "entities", "relations"),
        ("unit_vectors", "entity_vectors", "relation_vectors"),
        embed_stage,
        enabled=lambda cfg: cfg.graph.embed,
    ),
    Stage(
        "synonyms",
        ("entities",),
        ("graph_synonym",),
        _synonyms,
        enabled=lambda cfg: cfg.graph.embed and cfg.graph.synonym_threshold <= 1.0,
    ),
]
"""The index stages after chunking, in order."""
