"""What the index stages after chunking share: the build's state (`Build`), the stage type
(`Stage`: a name, the tables it reads and writes, when it runs, its function) and the runner.

Each stage's function lives next to the code it drives (units.py, resolve.py, extract.py,
communities.py, vectors.py, synonyms.py, line_tokens.py); index/pipeline.py lists them in
order. The runner times every stage, diffs the LLM ledger around the stages that use the LLM
and writes each stage's stats into the manifest (a dry run never gets here: index/forecast.py
forecasts the LLM stages from the chunks alone).
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from graphrag_engine.config import IndexConfig
from graphrag_engine.exec import make_executor
from graphrag_engine.models import make_llm
from graphrag_engine.models.base import Usage, outcome_line
from graphrag_engine.models.embed_cache import EMBED_CACHE, EmbeddingCache
from graphrag_engine.models.ner_cache import NERCache
from graphrag_engine.models.text_cache import WINDOW
from graphrag_engine.store import IndexWriter

log = logging.getLogger(__name__)

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
    core_chunks: np.ndarray | None = None  # rows of KET-RAG's skeleton chunks, when it is built

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
    stages: list[Stage],
    **known: Any,
) -> None:
    """Run `stages` into `writer`; `known` presets what earlier stages would have made (an
    import brings its own units, entities and relations and runs only the vectors)."""
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
        runs_ner = any(s.name == "ner" for s in stages)
        if start_ner_workers is not None and runs_ner and len(chunks) >= NER_EARLY_FROM:
            if not build.ner_cache().holds(executor.ner_model_id):
                start_ner_workers()
        run_stages(build, stages)
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
                log.info(outcome_line(stage.name, spent))
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
