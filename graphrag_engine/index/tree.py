"""The tree stage: RAPTOR's recursive abstractive tree (Sarthi et al., ICLR 2024) over the
index's chunks, the leaves.

    level 0 <- the chunks and their vectors
    repeat, at most tree.max_levels times, while the level has more than tree.dim + 1 nodes:
        cluster all the level's nodes at once (index/tree_clusters.py: UMAP, Gaussian
            mixtures sized by BIC, global then local, soft membership)
        summarise every cluster: one batched structured LLM call for the level (cached beside
            the index, so a killed build re-run pays for no summary twice), or extractively
        embed the summaries (one embedder call for the level): they are the next level

The `tree` table holds one row per summary node: its level, text, children (node numbers:
chunk rows for leaves, n_chunks + row for summaries) and the chunk rows below it;
`tree_vectors` holds the summaries' vectors in the same order. An extractive summary is the
cluster's own sentences nearest its centroid, in their order, up to tree.summary_tokens; an
LLM summary that fails to parse after its re-asks gets the extractive one (counted), so no
cluster is left without a node and none is guessed.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import numpy as np

from graphrag_engine.index.build import Build, Stage
from graphrag_engine.index.chunking import sentence_starts
from graphrag_engine.index.tree_clusters import ClusterSettings, level_clusters
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.models import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import Schema, generate_structured
from graphrag_engine.models.tokenizer import count_lines, load_tokenizer
from graphrag_engine.progress import progress

log = logging.getLogger(__name__)

SUMMARY_PROMPT = """Summarise the passages below in a few sentences. Keep as many of their key
details as you can: names, dates, places, numbers and what connects them. Use only what the
passages say. Reply with one JSON object of this form and nothing else:
{format}

Passages:
{passages}

JSON:"""

SUMMARY = Schema(
    {
        "type": "object",
        "properties": {"summary": {"type": "string", "minLength": 1, "maxLength": 1200}},
        "required": ["summary"],
        "additionalProperties": False,
    },
    lambda v: v["summary"].strip(),
)
"""A cluster's summary: one string (about 100 tokens at the default budget)."""

SUMMARY_STAGE = structured_stage(
    "tree_summary",
    about="a RAPTOR tree node: the summary of one cluster of chunks or summaries",
    prompt=lambda passages: SUMMARY_PROMPT.format(format=SUMMARY.describe(), passages=passages),
    schema=SUMMARY,
    max_tokens=lambda summary_tokens: summary_tokens + 24,  # the JSON around the text
    summary_tokens=100,
)


def node_id(level: int, text: str) -> str:
    """Content-hash id of a summary node."""
    return hashlib.sha1(f"{level}\x00{text}".encode()).hexdigest()[:16]


def _tree(b: Build) -> dict[str, Any]:
    """Build the levels above the chunks and write `tree` and `tree_vectors`."""
    t = b.config.tree
    tokenizer = load_tokenizer(b.config.chunking.tokenizer)
    titled = [text for window in b.chunks.titled() for text in window]
    plain = [text for _, text in b.chunks.pairs()]
    vectors = np.asarray(b.writer.staged_vectors("chunk_vectors"), dtype=np.float32)
    tokens = count_lines(tokenizer, titled, "leaf")
    n_chunks = len(titled)
    leaves = [np.asarray([i]) for i in range(n_chunks)]
    node_of = np.arange(n_chunks)  # the level's nodes as tree node numbers
    rows: list[dict] = []
    summary_vectors: list[np.ndarray] = []
    failures = 0
    for level in range(1, t.max_levels + 1):
        if len(node_of) <= t.dim + 1:
            break
        bar = progress(f"tree level {level}: mixture fits", unit="fit")
        s = ClusterSettings(
            t.dim, t.threshold, t.max_clusters, t.cluster_tokens, t.seed, bar.update
        )
        clusters = level_clusters(vectors, tokens, s)
        bar.close()
        texts, failed = _summaries(b, clusters, titled, plain, vectors, tokenizer)
        failures += failed
        vectors = l2_normalize(b.cache.encode(b.embedder, texts, f"tree level {level}"))
        tokens = count_lines(tokenizer, texts, f"level {level} summary")
        kids = [node_of[c] for c in clusters]
        leaves = [np.unique(np.concatenate([leaves[i] for i in c])) for c in clusters]
        start = n_chunks + len(rows)
        rows += [
            {
                "node_id": node_id(level, text),
                "level": level,
                "text": text,
                "children": k.tolist(),
                "leaves": lv.tolist(),
            }
            for text, k, lv in zip(texts, kids, leaves, strict=True)
        ]
        summary_vectors.append(vectors)
        log.info("tree level %d: %d clusters of %d nodes", level, len(clusters), len(node_of))
        node_of = np.arange(start, start + len(texts))
        titled = plain = texts
    b.writer.write_table("tree", rows)
    dim = b.writer.staged_vectors("chunk_vectors").shape[1]
    stacked = np.concatenate(summary_vectors) if summary_vectors else np.zeros((0, dim))
    b.writer.write_vectors("tree_vectors", stacked.astype(np.float32), b.embedder.model_id)
    return {
        "items": len(rows),
        "levels": max((r["level"] for r in rows), default=0),
        "summaries_kind": b.config.tree.summaries,
        "parse_failures": failures,
        "extractive_for_failures": failures,
    }


def _summaries(
    b: Build,
    clusters: list[np.ndarray],
    titled: list[str],
    plain: list[str],
    vectors: np.ndarray,
    tokenizer: Any,
) -> tuple[list[str], int]:
    """One summary per cluster (LLM or extractive) and how many LLM summaries failed."""
    t = b.config.tree
    texts: list[str | None] = [None] * len(clusters)
    failed = 0
    if t.summaries == "llm":
        prompts = [SUMMARY_STAGE.prompt("\n\n".join(titled[i] for i in c)) for c in clusters]
        params = GenParams(max_tokens=SUMMARY_STAGE.max_tokens(summary_tokens=t.summary_tokens))
        run = generate_structured(
            b.stage_llm(),
            prompts,
            SUMMARY,
            params,
            stage="tree_summary",
            retries=b.config.models.llm.parse_retries,
        )
        texts = [r.value if r.ok else None for r in run.results]
        failed = run.failures
    todo = [i for i, text in enumerate(texts) if text is None]
    if todo:
        picked = extractive_summaries(
            b, [clusters[i] for i in todo], plain, vectors, tokenizer, t.summary_tokens
        )
        for i, text in zip(todo, picked, strict=True):
            texts[i] = text
    return [str(text) for text in texts], failed


def extractive_summaries(
    b: Build,
    clusters: list[np.ndarray],
    texts: list[str],
    vectors: np.ndarray,
    tokenizer: Any,
    budget: int,
) -> list[str]:
    """Per cluster: its members' sentences most similar to its centroid (the mean of its
    members' vectors), taken best first while they fit `budget` tokens (the best one always),
    then written in the members' order. Every sentence of the level is embedded in one call."""
    split = [_sentences(texts[i]) for c in clusters for i in c.tolist()]
    distinct = list(dict.fromkeys(s for pieces in split for s in pieces))
    if not distinct:
        return ["" for _ in clusters]
    sentence_vectors = l2_normalize(b.cache.encode(b.embedder, distinct, "tree sentences"))
    at = {s: i for i, s in enumerate(distinct)}
    counts = count_lines(tokenizer, distinct, "tree sentence")
    out = []
    for c in clusters:
        own = list(dict.fromkeys(s for i in c.tolist() for s in _sentences(texts[i])))
        rows = np.asarray([at[s] for s in own], dtype=np.int64)
        centroid = l2_normalize(vectors[c].mean(axis=0, keepdims=True))[0]
        order = np.argsort(-(sentence_vectors[rows] @ centroid), kind="stable")
        kept, used = [], 0
        for j in order.tolist():
            n = int(counts[rows[j]])
            if kept and used + n > budget:
                continue
            kept.append(j)
            used += n
        out.append(" ".join(own[j] for j in sorted(kept)))
    return out


def _sentences(text: str) -> list[str]:
    """The sentences of a text, line by line, stripped, empty ones dropped."""
    out = []
    for line in text.split("\n"):
        starts = sentence_starts(line) + [len(line)]
        out += [line[a:z].strip() for a, z in zip(starts, starts[1:], strict=False)]
    return [s for s in out if s]


BUILD_TREE = Stage(
    "tree",
    ("chunks", "chunk_vectors"),
    ("tree", "tree_vectors"),
    _tree,
    enabled=lambda cfg: cfg.tree.enabled,
    uses_llm=True,
)
