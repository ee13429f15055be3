"""The tree stage: RAPTOR's recursive abstractive tree (Sarthi et al., ICLR 2024) over the
index's chunks, the leaves.

    level 0 <- the chunks and their vectors
    repeat, at most tree.max_levels times, while the level has more than tree.dim + 1 nodes:
        cluster all the level's nodes at once (index/tree_clusters.py: UMAP, Gaussian
            mixtures sized by BIC, global then local, soft membership)
        summarise every cluster: one batched structured LLM call for the level (cached beside
            the index, so a killed build re-run pays for no summary twice), or extractively
        embed the summaries (one embedder call for the level): they are the next level

With `tree.relatedness` (SiReRAG) a second tree grows the same way from proposition
aggregates instead of chunks: per entity, the knowledge units that name it (the LLM's units
where graph.alpha made them, else sentences), and goes to `related_tree` with the aggregates
as its level-0 rows.

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
from dataclasses import dataclass
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


@dataclass
class Level:
    """One level of a tree as the next is built from it: each node's text (as summarised and
    as its sentences are picked from), vector, tokens, chunk rows below and node number."""

    texts: list[str]
    plain: list[str]
    vectors: np.ndarray
    tokens: np.ndarray
    leaves: list[np.ndarray]
    node_of: np.ndarray


def _tree(b: Build) -> dict[str, Any]:
    """Build the levels above the chunks and write `tree` and `tree_vectors`; with
    tree.relatedness also SiReRAG's relatedness tree (`related_tree`, `related_tree_vectors`)."""
    tokenizer = load_tokenizer(b.config.chunking.tokenizer)
    titled = [text for window in b.chunks.titled() for text in window]
    n = len(titled)
    chunks = Level(
        titled,
        [text for _, text in b.chunks.pairs()],
        np.asarray(b.writer.staged_vectors("chunk_vectors"), dtype=np.float32),
        count_lines(tokenizer, titled, "leaf"),
        [np.asarray([i]) for i in range(n)],
        np.arange(n),
    )
    rows, vectors, failures = grow(b, chunks, [], n, tokenizer, "tree")
    _write(b, "tree", rows, vectors)
    stats = {
        "items": len(rows),
        "levels": max((r["level"] for r in rows), default=0),
        "summaries_kind": b.config.tree.summaries,
    }
    if b.config.tree.relatedness:
        rows, aggregates = proposition_aggregates(b, n, tokenizer)
        related, more, failed = grow(b, aggregates, rows, n, tokenizer, "related tree")
        _write(b, "related_tree", related, [aggregates.vectors, *more])
        failures += failed
        stats.update(
            aggregates=len(aggregates.texts), related_summaries=len(related) - len(aggregates.texts)
        )
    return {**stats, "parse_failures": failures, "extractive_for_failures": failures}


def _write(b: Build, name: str, rows: list[dict], vectors: list[np.ndarray]) -> None:
    """Table `name` and its vectors `name`_vectors, row for row."""
    b.writer.write_table(name, rows)
    dim = b.writer.staged_vectors("chunk_vectors").shape[1]
    stacked = np.concatenate(vectors) if vectors else np.zeros((0, dim))
    b.writer.write_vectors(f"{name}_vectors", stacked.astype(np.float32), b.embedder.model_id)


def grow(
    b: Build, level0: Level, rows: list[dict], n_chunks: int, tokenizer: Any, label: str
) -> tuple[list[dict], list[np.ndarray], int]:
    """The levels above `level0`, appended to `rows` (a summary's node number is n_chunks +
    its row); their vectors by level, and how many LLM summaries failed."""
    t = b.config.tree
    at, vectors, failures = level0, [], 0
    for level in range(1, t.max_levels + 1):
        if len(at.node_of) <= t.dim + 1:
            break
        bar = progress(f"{label} level {level}: mixture fits", unit="fit")
        s = ClusterSettings(
            t.dim, t.threshold, t.max_clusters, t.cluster_tokens, t.seed, bar.update
        )
        clusters = level_clusters(at.vectors, at.tokens, s)
        bar.close()
        texts, failed = _summaries(b, clusters, at.texts, at.plain, at.vectors, tokenizer)
        failures += failed
        embedded = l2_normalize(b.cache.encode(b.embedder, texts, f"{label} level {level}"))
        leaves = [np.unique(np.concatenate([at.leaves[i] for i in c])) for c in clusters]
        start = n_chunks + len(rows)
        rows += [
            {
                "node_id": node_id(level, text),
                "level": level,
                "text": text,
                "children": at.node_of[c].tolist(),
                "leaves": lv.tolist(),
            }
            for text, c, lv in zip(texts, clusters, leaves, strict=True)
        ]
        vectors.append(embedded)
        log.info(
            "%s level %d: %d clusters of %d nodes", label, level, len(clusters), len(at.node_of)
        )
        tokens = count_lines(tokenizer, texts, f"level {level} summary")
        at = Level(texts, texts, embedded, tokens, leaves, np.arange(start, start + len(texts)))
    return rows, vectors, failures


def proposition_aggregates(b: Build, n_chunks: int, tokenizer: Any) -> tuple[list[dict], Level]:
    """SiReRAG's relatedness leaves: for every entity, the knowledge units (propositions) that
    name it, one per line, in corpus order. An entity named by one unit that names others too
    is skipped (that unit is in their aggregates), and an aggregate whose text another already
    has is kept once. Rows of level 0 (no children) with the chunk rows of their units."""
    units = b.unit_ids.column("unit_id").to_pylist()
    unit_chunk = b.unit_ids.column("chunk_id").to_pylist()
    chunk_row = {c: i for i, c in enumerate(b.chunks.ids.to_pylist())}
    row_of = {u: i for i, u in enumerate(units)}
    texts = [text for window in b.unit_texts() for text in window]
    named: dict[str, set[int]] = {}
    names_in: dict[int, set[str]] = {}
    if b.unit_entity is not None:
        for u, e in zip(*(c.to_pylist() for c in b.unit_entity.columns), strict=True):
            named.setdefault(e, set()).add(row_of[u])
            names_in.setdefault(row_of[u], set()).add(e)
    rows: list[dict] = []
    kept: set[str] = set()
    for rows_of_entity in named.values():
        ordered = sorted(rows_of_entity)
        if len(ordered) == 1 and len(names_in[ordered[0]]) > 1:
            continue
        text = "\n".join(texts[r] for r in ordered)
        if text in kept:
            continue
        kept.add(text)
        leaves = sorted({chunk_row[unit_chunk[r]] for r in ordered})
        rows.append(
            {
                "node_id": node_id(0, text),
                "level": 0,
                "text": text,
                "children": [],
                "leaves": leaves,
            }
        )
    aggregates = [r["text"] for r in rows]
    vectors = l2_normalize(b.cache.encode(b.embedder, aggregates, "proposition aggregates"))
    level = Level(
        aggregates,
        aggregates,
        vectors.reshape(len(rows), -1),
        count_lines(tokenizer, aggregates, "aggregate"),
        [np.asarray(r["leaves"], dtype=np.int64) for r in rows],
        n_chunks + np.arange(len(rows)),
    )
    return rows, level


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
    ("chunks", "chunk_vectors", "units", "unit_entity"),
    ("tree", "tree_vectors", "related_tree", "related_tree_vectors"),
    _tree,
    enabled=lambda cfg: cfg.tree.enabled,
    uses_llm=True,
)
