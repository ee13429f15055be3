"""`index --dry-run`: what every LLM stage the config turns on would send, forecast from the
chunks alone. Nothing is written (no lock, no staging, no cache), nothing is embedded and no
prompt is sent; prompt tokens are counted with the configured model's tokenizer.

Per stage: prompts, prompt tokens and expected completion tokens, and a price when the LLM
config has one. Expected completions are the mean measured by the last build in the output
folder when it ran that stage, else the stage's `max_tokens` (an upper bound). A stage whose
prompts depend on what earlier LLM stages return (description summaries, community reports)
is estimated from the last build in the output folder when it ran that stage (scaled by
corpus tokens), else from the NER graph of a sample of the chunks (index/forecast_sample.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphrag_engine.config import IndexConfig
from graphrag_engine.errors import GraphRAGError
from graphrag_engine.index.extract import (
    EXTRACT_STAGE,
    GLEANING_STAGE,
    LOOP_CHECK_STAGE,
    SUMMARY_MAX_TOKENS,
)
from graphrag_engine.index.forecast_sample import (
    SampleGraph,
    reports_estimate,
    sample_graph,
    summaries_estimate,
)
from graphrag_engine.index.tree import SUMMARY_STAGE
from graphrag_engine.index.units import UNITS_STAGE
from graphrag_engine.models import make_backend
from graphrag_engine.models.forecast import StageForecast, price
from graphrag_engine.store.manifest import read_manifest

BLOCK = 256
"""Prompts built and counted at a time by a dry run."""


def previous_stages(out: Path) -> dict[str, dict[str, Any]]:
    """Stage stats of the index already in `out` (read only), or {}."""
    try:
        manifest = read_manifest(out)
    except (OSError, GraphRAGError):
        return {}
    stages = manifest.get("stats", {}).get("stages", {}) if manifest else {}
    return dict(stages) if isinstance(stages, dict) else {}


def _calls(before: dict[str, Any]) -> int:
    """Prompts a stage of the last build answered, from the model or its cache."""
    return int(before.get("model_calls", 0)) + int(before.get("cached_calls", 0))


def _mean_completion(before: dict[str, Any], budget: int) -> tuple[float, str]:
    """Expected completion tokens per prompt: the last build's mean, or the budget."""
    calls = _calls(before)
    if calls and before.get("completion_tokens"):
        mean = before["completion_tokens"] / calls
        return mean, f"completions: last build's mean {mean:.0f} tokens"
    return float(budget), f"completions: max_tokens {budget} (an upper bound)"


def forecast_index(
    texts: list[str], n_tokens: list[int], config: IndexConfig, out: Path
) -> list[StageForecast]:
    """Every LLM stage the config turns on, forecast from the chunk texts and token counts."""
    llm_cfg = config.models.llm
    if llm_cfg.backend == "none":
        return []
    backend = make_backend(llm_cfg)  # its tokenizer counts; no cache is opened
    before = previous_stages(out)
    rows: list[StageForecast] = []
    g, x, c = config.graph, config.extraction, config.communities
    if g.alpha > 0 and texts:
        capacity = int(g.alpha * sum(n_tokens))
        # which chunks the knapsack picks needs their embeddings: bound the count by picking the
        # smallest chunks first, and the prompt tokens by that many templates around a full
        # capacity of chunk text
        fits = np.cumsum(np.sort(np.asarray(n_tokens))) <= capacity
        n = int(fits.sum())
        counted = count_in_blocks(backend.count_tokens, UNITS_STAGE.prompt, texts)
        overhead = backend.count_tokens([UNITS_STAGE.prompt("")])[0]
        per_chunk_token = max(counted - overhead * len(texts), 0) / max(sum(n_tokens), 1)
        tokens = n * overhead + capacity * per_chunk_token
        per, how = _mean_completion(before.get("units", {}), g.unit_max_tokens)
        rows.append(
            StageForecast(
                "units", n, round(tokens), round(n * per),
                f"at most: alpha x corpus tokens = {capacity} tokens of chunks, filled with the "
                f"smallest chunks first (the knapsack's own pick needs embeddings); {how}",
            )
        )  # fmt: skip
    if x.enabled and texts:
        first = count_in_blocks(
            backend.count_tokens, lambda t: EXTRACT_STAGE.prompt(t, x.entity_types), texts
        )
        per, how = _mean_completion(before.get("extract", {}), x.max_tokens)
        # what a round adds to the conversation: its one user message, counted on its own
        extra = backend.count_tokens([GLEANING_STAGE.prompt([])])[0]
        ask = backend.count_tokens([LOOP_CHECK_STAGE.prompt([])])[0]
        rounds = x.gleaning if x.loop == "none" else x.max_rounds
        prompts, tokens, completion = len(texts), first, per * len(texts)
        for k in range(1, rounds + 1):  # round k carries the k answers and requests before it
            history = first + len(texts) * k * (per + extra)
            prompts += len(texts)
            tokens += history
            completion += per * len(texts)
            if x.loop != "none":  # and a yes/no question before or after it
                prompts += len(texts)
                tokens += history + len(texts) * ask
                completion += LOOP_CHECK_STAGE.max_tokens() * len(texts)
        bound = "every chunk runs every round" if x.loop != "none" else "gleaning rounds"
        note = ""
        if config.skeleton.enabled:  # KET-RAG: only the skeleton's chunks are read
            core = int(len(texts) * config.skeleton.budget)
            share = core / len(texts)
            prompts, tokens, completion = (
                prompts // len(texts) * core,
                tokens * share,
                completion * share,
            )
            note = f"; the skeleton's {core} chunks only, scaled by their share (not yet picked)"
        rows.append(
            StageForecast(
                "extract", prompts, round(tokens), round(completion),
                f"first round counted exactly; {rounds} more rounds ({bound}), each carrying "
                f"the conversation before it; {how}{note}",
            )
        )  # fmt: skip
    corpus = sum(n_tokens)
    sample: list[SampleGraph] = []  # built once, when a stage has no earlier build to scale

    def first_build() -> SampleGraph:
        if not sample:
            sample.append(sample_graph(texts, config))
        return sample[0]

    if x.enabled and x.summarize_above > 0:
        row = _from_last(before, "summaries", "resolve_graphs", "one prompt per entity whose "
                         "joined descriptions exceed extraction.summarize_above characters, "
                         "known only after extraction", corpus)  # fmt: skip
        if row.prompts is None and texts:
            row = summaries_estimate(
                first_build(), len(texts), x.summarize_above, backend.count_tokens,
                SUMMARY_MAX_TOKENS,
            )  # fmt: skip
        rows.append(row)
    if c.enabled and c.reports:
        row = _from_last(before, "community_reports", "communities", "one prompt per "
                         "community, known only after the graph is built", corpus)  # fmt: skip
        if row.prompts is None and texts:
            row = reports_estimate(first_build(), len(texts), config, backend.count_tokens)
        rows.append(row)
    t = config.tree
    if t.enabled and t.summaries == "llm":
        row = _from_last(before, "tree_summary", "tree", "one prompt per cluster of each "
                         "level, known only after clustering", corpus)  # fmt: skip
        if row.prompts is None and texts:
            row = tree_estimate(len(texts), corpus, config, backend.count_tokens)
        rows.append(row)
    for row in rows:
        _add_reasks(row, before.get(row.stage, {}))
        row.cost = price(llm_cfg, row.prompt_tokens, row.completion_tokens)
        row.model = backend.model_id  # its measured rates give the time
    return rows


FAN_OUT = 6.7
"""Children per tree node the forecast assumes (RAPTOR reports about 6.7 on its corpora)."""


def tree_estimate(
    n_chunks: int, corpus_tokens: int, config: IndexConfig, count: Callable[[list[str]], list[int]]
) -> StageForecast:
    """RAPTOR's summaries without an earlier build: each level about 1/FAN_OUT of the one
    below, until it has at most dim + 1 nodes; a level's prompts hold the text of the nodes
    below once (the chunks, then summaries of summary_tokens) plus the prompt around them."""
    t = config.tree
    overhead = count([SUMMARY_STAGE.prompt("")])[0]
    budget = SUMMARY_STAGE.max_tokens(summary_tokens=t.summary_tokens)
    nodes, below_tokens = n_chunks, corpus_tokens
    prompts = tokens = 0
    for _ in range(t.max_levels):
        if nodes <= t.dim + 1:
            break
        level = max(1, round(nodes / FAN_OUT))
        prompts += level
        tokens += below_tokens + level * overhead
        nodes, below_tokens = level, level * t.summary_tokens
    return StageForecast(
        "tree_summary", prompts, round(tokens), prompts * budget,
        f"estimate: each level about 1/{FAN_OUT} of the one below (RAPTOR's mean fan-out) "
        f"until at most tree.dim + 1 = {t.dim + 1} nodes; completions: max_tokens {budget} "
        "(an upper bound)",
    )  # fmt: skip


def count_in_blocks(
    count: Callable[[list[str]], list[int]],
    prompt: Callable[[str], str],
    texts: Sequence[str],
    block: int = BLOCK,
) -> int:
    """The tokens of `prompt(text)` over every text, built and counted `block` prompts at a
    time: a dry run over a large corpus holds one block of prompts, never all of them."""
    total = 0
    for lo in range(0, len(texts), block):
        total += sum(count([prompt(t) for t in texts[lo : lo + block]]))
    return total


def _add_reasks(row: StageForecast, before: dict[str, Any]) -> None:
    """Scale a forecast by the re-asks the last build needed for that stage (answers that did
    not parse are asked again), or say that they come on top."""
    calls = _calls(before)
    retries = int(before.get("retries", 0))
    if row.prompts is None:
        return
    if not calls or retries >= calls:
        row.basis += "; re-asks of answers that do not parse come on top"
        return
    factor = calls / (calls - retries)
    row.prompts = round(row.prompts * factor)
    row.prompt_tokens = round((row.prompt_tokens or 0) * factor)
    row.completion_tokens = round((row.completion_tokens or 0) * factor)
    row.basis += f"; x{factor:.2f} for re-asks, the last build's rate ({retries} of {calls} calls)"


def _from_last(
    before: dict[str, Any], stage: str, source: str, why: str, corpus_tokens: int
) -> StageForecast:
    """A stage whose prompts follow what earlier stages find: the last build's figures for it,
    scaled by the corpus tokens (a build of the same corpus asks about as much again), or,
    without such a build, a row saying why it is not forecast."""
    last = before.get(source, {})
    then = int(before.get("ingest_chunk", {}).get("tokens", 0))
    calls = _calls(last)
    if not calls or not then or not last.get("prompt_tokens"):
        return _unknown(before, stage, source, why)
    factor = corpus_tokens / then
    return StageForecast(
        stage, round(calls * factor), round(last["prompt_tokens"] * factor),
        round(last.get("completion_tokens", 0) * factor),
        f"estimate: {why}; the last build in the output folder asked {calls} prompts for "
        f"{then} corpus tokens, scaled by corpus tokens (x{factor:.2f})",
    )  # fmt: skip


def _unknown(before: dict[str, Any], stage: str, source: str, why: str) -> StageForecast:
    """A stage that cannot be forecast: why, and the last build's figures where it has them."""
    last = before.get(source, {})
    seen = (
        f"; the last build's {source} stage sent {last['model_calls']} prompts "
        f"({last.get('prompt_tokens', 0)} prompt, {last.get('completion_tokens', 0)} completion "
        "tokens)"
        if last.get("model_calls")
        else ""
    )
    return StageForecast(stage, None, None, None, f"not forecast: {why}{seen}")
