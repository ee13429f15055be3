"""The stages after chunking, each over all chunks at once: embed chunks -> knowledge units
(knapsack-chosen core chunks by LLM, sentences for the rest) -> NER -> entity resolution ->
graphs -> embeddings of units, entities and relations."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import IndexConfig
from engine.exec import make_executor
from engine.index.graphs import build_graphs
from engine.index.resolve import resolve
from engine.index.units import llm_units, select_core_chunks, sentence_units
from engine.models import make_llm
from engine.models.embed_cache import EmbeddingCache
from engine.progress import progress
from engine.store import IndexWriter

NER_BATCH = 1024
LLM_CACHE = "llm_cache.sqlite"  # beside the index: the ledger that makes re-runs free
EMBED_CACHE = "embed_cache.sqlite"


def _stage(stats: dict, name: str, started: float, **values: Any) -> None:
    stats["stages"][name] = {**values, "seconds": round(time.perf_counter() - started, 3)}


def run_graph_stages(
    writer: IndexWriter,
    out: Path,
    config: IndexConfig,
    chunks,
    stats: dict[str, Any],
    models: dict[str, str],
    dry_run: bool = False,
) -> dict[str, int] | None:
    """Write units, entities, relations, unit_entity, the graphs and the vectors into `writer`.

    Returns the LLM cost estimate when dry_run (and writes nothing worth committing).
    """
    executor = make_executor(
        config.executor,
        config.models.embedder,
        config.graph.ner,
        config.ray_address,
        config.workers,
    )
    try:
        return _run(writer, out, config, chunks, stats, models, dry_run, executor)
    finally:
        executor.close()


def _run(writer, out, config, chunks, stats, models, dry_run, executor):
    g = config.graph
    embedder = executor if (g.embed or g.alpha > 0) else None
    cache = EmbeddingCache(out / EMBED_CACHE) if embedder is not None else None
    if embedder is not None:
        models["embedder"] = embedder.model_id
    stats["executor"] = executor.name

    # -- chunk vectors (also the knapsack's similarity values) --------------------------------
    t0 = time.perf_counter()
    chunk_vecs = None
    if embedder is not None:
        chunk_vecs = cache.encode(embedder, chunks.titled)
        writer.write_vectors("chunk_vectors", chunk_vecs, embedder.model_id)
    _stage(
        stats,
        "embed_chunks",
        t0,
        items=len(chunks.ids),
        cached=cache.hits if cache else 0,
        model_calls=int(bool(cache and cache.misses)),
    )

    # -- knowledge units ----------------------------------------------------------------------
    t0 = time.perf_counter()
    core = (
        select_core_chunks(chunk_vecs, np.asarray(chunks.n_tokens), g.alpha)
        if chunk_vecs is not None
        else np.empty(0, np.int64)
    )
    by_llm: dict[str, list] = {}
    failures = 0
    llm = None
    if core.size:
        llm = _stage_llm(config, out, executor, models, dry_run)
        pairs = [(chunks.ids[i], chunks.texts[i]) for i in core]
        if dry_run:
            from engine.index.units import UNIT_PROMPT
            from engine.models import GenParams

            estimate = llm.estimate(
                [UNIT_PROMPT.format(text=t) for _, t in pairs],
                GenParams(max_tokens=g.unit_max_tokens),
            )
            _stage(stats, "units", t0, items=len(chunks.ids), core_chunks=int(core.size))
            return _add_extraction_estimate(estimate, config, chunks, out)
        by_llm, failures = llm_units(
            llm, pairs, retries=config.models.llm.parse_retries, max_tokens=g.unit_max_tokens
        )
    units = []
    for cid, text in zip(chunks.ids, chunks.texts, strict=True):
        units.extend(by_llm.get(cid) or sentence_units(cid, text))
    unit_rows = [u.to_row() for u in units]
    writer.write_table("units", unit_rows)
    usage = llm.ledger.total() if llm is not None else None
    _stage(
        stats,
        "units",
        t0,
        items=len(unit_rows),
        core_chunks=int(core.size),
        llm_units=sum(len(v) for v in by_llm.values()),
        model_calls=usage.calls if usage else 0,
        cached_calls=usage.cached_calls if usage else 0,
        parse_failures=failures,
        prompt_tokens=(usage.prompt_tokens + usage.cached_prompt_tokens) if usage else 0,
        completion_tokens=(usage.completion_tokens + usage.cached_completion_tokens)
        if usage
        else 0,
    )
    if dry_run:
        return _add_extraction_estimate(
            {"prompts": 0, "prompt_tokens": 0, "max_completion_tokens": 0}, config, chunks, out
        )

    # -- NER, resolution, graphs ----------------------------------------------------------------
    t0 = time.perf_counter()
    models["ner"] = executor.ner_model_id
    mentions: list = []
    bar = progress("ner", total=len(unit_rows), unit="unit")
    for i in range(0, len(unit_rows), NER_BATCH):
        batch = [u["text"] for u in unit_rows[i : i + NER_BATCH]]
        mentions.extend(executor.ner(batch))
        bar.update(len(batch))
    bar.close()
    _stage(
        stats,
        "ner",
        t0,
        items=len(unit_rows),
        backend=models["ner"].split(":")[0],
        mentions=sum(len(m) for m in mentions),
    )

    extracted = None
    if config.extraction.enabled:
        t0 = time.perf_counter()
        from engine.index.extract import extract_triples

        if llm is None:
            llm = _stage_llm(config, out, executor, models)
        before = llm.ledger.total()
        x = config.extraction
        found = extract_triples(
            llm, chunks.texts, x.entity_types, x.gleaning, x.loop, x.max_rounds, x.max_tokens
        )
        extracted = list(zip(chunks.ids, found, strict=True))
        after = llm.ledger.total()
        _stage(
            stats,
            "extract",
            t0,
            items=len(found),
            entities=sum(len(f.entities) for f in found),
            relations=sum(len(f.relations) for f in found),
            rounds=sum(f.rounds for f in found),
            parse_failures=sum(f.failures for f in found),
            model_calls=after.calls - before.calls,
            cached_calls=after.cached_calls - before.cached_calls,
            prompt_tokens=(after.prompt_tokens + after.cached_prompt_tokens)
            - (before.prompt_tokens + before.cached_prompt_tokens),
            completion_tokens=(after.completion_tokens + after.cached_completion_tokens)
            - (before.completion_tokens + before.cached_completion_tokens),
        )

    t0 = time.perf_counter()
    entities, unit_entity, relations = resolve(unit_rows, mentions, extracted)
    if extracted is not None and config.extraction.summarize_above > 0:
        from engine.index.extract import summarize_descriptions

        stats["stages"]["extract"]["summarized"] = summarize_descriptions(
            llm, entities, config.extraction.summarize_above
        )
    writer.write_table("entities", entities)
    writer.write_table("unit_entity", unit_entity)
    writer.write_table("relations", relations)
    graphs, layouts = build_graphs(chunks.ids, unit_rows, entities, unit_entity, relations)
    for name, table in graphs.items():
        writer.write_table(name, table)
    stats["graphs"] = {k: {**v, "edges": graphs[k].num_rows} for k, v in layouts.items()}
    _stage(stats, "resolve_graphs", t0, items=len(entities), relations=len(relations))

    if config.communities.enabled:
        if llm is None and config.communities.reports:
            llm = _stage_llm(config, out, executor, models)
        _communities(writer, config, entities, relations, stats, llm)

    # -- embeddings of units, entities, relations -------------------------------------------------
    if embedder is not None and g.embed:
        t0 = time.perf_counter()
        hits0, miss0 = cache.hits, cache.misses
        name_of = {e["entity_id"]: e["name"] for e in entities}
        writer.write_vectors(
            "unit_vectors",
            cache.encode(embedder, [u["text"] for u in unit_rows]),
            embedder.model_id,
        )
        writer.write_vectors(
            "entity_vectors",
            cache.encode(
                embedder,
                [
                    f"{e['name']}: {e['description']}" if e["description"] else e["name"]
                    for e in entities
                ],
            ),
            embedder.model_id,
        )
        rel_texts = [
            f"{name_of[r['src']]} - {name_of[r['dst']]}"
            + (f": {r['description']}" if r["description"] else "")
            for r in relations
        ]
        writer.write_vectors(
            "relation_vectors", cache.encode(embedder, rel_texts), embedder.model_id
        )
        _stage(
            stats,
            "embed",
            t0,
            items=len(unit_rows) + len(entities) + len(relations),
            cached=cache.hits - hits0,
            embedded=cache.misses - miss0,
        )
    return None


def _add_extraction_estimate(
    estimate: dict[str, int], config: IndexConfig, chunks, out: Path
) -> dict[str, int]:
    """Add the first extraction round (one prompt per chunk) to a dry-run estimate."""
    if not config.extraction.enabled:
        return estimate
    from engine.index.extract import CD, EXTRACT_PROMPT, RD, TD
    from engine.models import GenParams

    x = config.extraction
    llm = make_llm(config.models.llm, default_cache=out / LLM_CACHE, dry_run=True)
    prompts = [
        EXTRACT_PROMPT.format(types=", ".join(x.entity_types), text=t, td=TD, rd=RD, cd=CD)
        for t in chunks.texts
    ]
    more = llm.estimate(prompts, GenParams(max_tokens=x.max_tokens))
    return {k: estimate[k] + more[k] for k in estimate}


def _stage_llm(
    config: IndexConfig, out: Path, executor, models: dict[str, str], dry_run: bool = False
):
    """The LLM of the index stages: response cache beside the index, engines in the executor's
    workers where it has them (Ray), recorded in the manifest's models."""
    llm = make_llm(
        config.models.llm,
        default_cache=out / LLM_CACHE,
        dry_run=dry_run,
        backend=executor.llm_backend(config.models.llm),
    )
    models["llm"] = llm.model_id
    return llm


def _communities(writer, config, entities, relations, stats, llm) -> None:
    """Communities stage, and their reports when asked (`llm` is set then)."""
    from engine.index.communities import community_reports, detect_communities

    c = config.communities
    t0 = time.perf_counter()
    rows = detect_communities(relations, c.max_cluster_size, c.seed)
    writer.write_table("communities", rows)
    values: dict[str, Any] = {"items": len(rows), "levels": len({r["level"] for r in rows})}
    if c.reports:
        before = llm.ledger.total()
        reports, failures = community_reports(
            llm, rows, entities, relations, c.report_max_tokens, config.models.llm.parse_retries
        )
        writer.write_table("reports", reports)
        after = llm.ledger.total()
        values.update(
            reports=len(reports),
            parse_failures=failures,
            model_calls=after.calls - before.calls,
            cached_calls=after.cached_calls - before.cached_calls,
        )
    _stage(stats, "communities", t0, **values)
