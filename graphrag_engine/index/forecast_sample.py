"""First-build estimates of the index stages whose prompts follow from the graph: description
summaries and community reports. Without an earlier build to scale, `index --dry-run` builds
the LLM-free entity graph (NER mentions, co-occurrence relations, hierarchical Leiden) of an
evenly spaced sample of the chunks in memory and counts what those stages would ask of it,
scaled by the chunk count. It is an estimate, and says so: an LLM extraction finds other
entities than NER, and linear scaling counts an entity named in many chunks more than once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from graphrag_engine.config import IndexConfig
from graphrag_engine.index.communities import detect_communities, report_prompts
from graphrag_engine.index.extract import DESCRIPTION_MAX_CHARS, SUMMARY_PROMPT
from graphrag_engine.index.resolve import resolve
from graphrag_engine.models.forecast import StageForecast
from graphrag_engine.models.ner import entity_recognizer, skip_labels

SAMPLE_CHUNKS = 200
"""Chunks whose NER graph stands in for the corpus's (evenly spaced over the corpus)."""


@dataclass
class SampleGraph:
    """The NER graph of a sample of the chunks and how many times the corpus it stands for."""

    chunks: int
    scale: float
    entities: list[dict]
    relations: list[dict]
    texts: list[str]

    def about(self, total: int) -> str:
        """The sample, in words, for a forecast's basis."""
        return (
            f"the NER co-occurrence graph of {self.chunks} of {total} chunks, evenly spaced, "
            f"scaled by chunk count (x{self.scale:.2f})"
        )


def sample_graph(texts: list[str], config: IndexConfig) -> SampleGraph:
    """Entities and co-occurrence relations of an evenly spaced sample of the chunks."""
    picks = np.unique(np.linspace(0, len(texts) - 1, min(SAMPLE_CHUNKS, len(texts))).round())
    sample = [texts[int(i)] for i in picks]
    found = entity_recognizer(config.graph.ner).extract(sample)
    found = skip_labels(found, config.graph.ner_skip_labels)
    entities, _, relations = resolve((str(i), str(i), f) for i, f in enumerate(found))
    return SampleGraph(len(sample), len(texts) / len(sample), entities, relations, sample)


def summaries_estimate(
    graph: SampleGraph, total: int, above: int, count_tokens, budget: int
) -> StageForecast:
    """Summaries go to entities whose joined descriptions pass `above` characters; a description
    has at most DESCRIPTION_MAX_CHARS, so only entities named in enough chunks qualify."""
    need = math.ceil((above + 1) / (DESCRIPTION_MAX_CHARS + 1))
    mentions = [len(e["chunk_ids"]) * graph.scale for e in graph.entities]
    long = [(e, m) for e, m in zip(graph.entities, mentions, strict=True) if m >= need]
    filler = " ".join(graph.texts)[: 40 * (DESCRIPTION_MAX_CHARS + 1)]
    prompts = [
        SUMMARY_PROMPT.format(
            name=e["name"], descriptions=filler[: round(min(m, 40)) * (DESCRIPTION_MAX_CHARS + 1)]
        )
        for e, m in long
    ]
    tokens = sum(count_tokens(prompts)) if prompts else 0
    return StageForecast(
        "summaries", len(long), tokens, len(long) * budget,
        f"estimate for a first build: entities named in at least {need} chunks (a summary needs "
        f"descriptions of more than {above} characters, each at most {DESCRIPTION_MAX_CHARS}) "
        f"in {graph.about(total)}, each prompt holding one full-length description per chunk "
        f"(at most 40); completions: max_tokens {budget} (an upper bound)",
    )  # fmt: skip


def reports_estimate(
    graph: SampleGraph, total: int, config: IndexConfig, count_tokens
) -> StageForecast:
    """One report per community of the sample graph's hierarchical Leiden, scaled."""
    c = config.communities
    found = detect_communities(graph.relations, c.max_cluster_size, c.seed)
    prompts = report_prompts(found, graph.entities, graph.relations)
    mean = sum(count_tokens(prompts)) / len(prompts) if prompts else 0.0
    n = round(len(found) * graph.scale)
    extracted = (
        "; an LLM extraction adds descriptions to each entity and relation line, so its "
        "prompts run longer"
        if config.extraction.enabled
        else ""
    )
    return StageForecast(
        "community_reports", n, round(n * mean), n * c.report_max_tokens,
        f"estimate for a first build: {len(found)} communities of {graph.about(total)}, "
        f"{mean:.0f} prompt tokens each{extracted}; completions: max_tokens "
        f"{c.report_max_tokens} (an upper bound)",
    )  # fmt: skip
