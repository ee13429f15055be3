"""Knowledge units (Clue-RAG): LLM-extracted units for core chunks, sentence units for the rest.

Core chunks are chosen by a 0-1 knapsack: each chunk's value is its cosine similarity to the
rest of the corpus (its embedding against the corpus mean without it), its weight its token
count, the capacity alpha x all tokens. alpha = 0 selects nothing and uses no LLM at all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from graphrag_engine.index.build import Build, Stage
from graphrag_engine.index.chunking import sentence_starts
from graphrag_engine.kernels.knapsack import knapsack
from graphrag_engine.models import LLM, GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import ParseError, Schema, generate_structured
from graphrag_engine.store.schemas import schema_for

UNIT_PROMPT = """You turn a passage into knowledge units: short, self-contained statements that each
state one fact from the passage, with pronouns replaced by the names they refer to.
Use only what the passage says. Reply with a JSON list of this form and nothing else:
{format}

Passage:
{text}

JSON:"""


UNIT_BATCH = 8192
"""Units per record batch of the units table while it is built."""


@dataclass(frozen=True)
class Unit:
    """A knowledge unit of a chunk."""

    unit_id: str
    chunk_id: str
    text: str
    origin: str  # "llm" | "sentence"

    def to_row(self) -> dict:
        """Row of the `units` table."""
        return self.__dict__.copy()


def unit_batches(
    chunks: Iterable[tuple[str, str]], by_llm: dict[str, list[Unit]]
) -> Iterator[pa.RecordBatch]:
    """The rows of the `units` table from (chunk id, text) pairs, in chunk order, UNIT_BATCH
    at a time: the LLM's units of a chunk where `by_llm` has them, else its sentences (a
    build writes each batch as it comes, holding no unit)."""
    schema = schema_for("units")
    pending: list[dict] = []
    for cid, text in chunks:
        pending.extend(u.to_row() for u in by_llm.get(cid) or sentence_units(cid, text))
        if len(pending) >= UNIT_BATCH:
            yield pa.RecordBatch.from_pylist(pending, schema=schema)
            pending = []
    if pending:
        yield pa.RecordBatch.from_pylist(pending, schema=schema)


def unit_id(chunk_id: str, text: str, origin: str) -> str:
    """Content-hash id of a unit."""
    return hashlib.sha1(f"{chunk_id}\x00{origin}\x00{text}".encode()).hexdigest()[:16]


def sentence_units(chunk_id: str, text: str) -> list[Unit]:
    """One unit per sentence of the chunk (empty pieces dropped, duplicates kept once)."""
    starts = sentence_starts(text) + [len(text)]
    seen: set[str] = set()
    units = []
    for a, b in zip(starts, starts[1:], strict=False):
        piece = text[a:b].strip()
        if piece and piece not in seen:
            seen.add(piece)
            units.append(Unit(unit_id(chunk_id, piece, "sentence"), chunk_id, piece, "sentence"))
    return units


def select_core_chunks(vectors: np.ndarray, n_tokens: np.ndarray, alpha: float) -> np.ndarray:
    """Indices of the core chunks: knapsack over similarity-to-corpus under alpha x total tokens."""
    if alpha <= 0 or len(n_tokens) == 0:
        return np.empty(0, dtype=np.int64)
    total = vectors.sum(axis=0)
    rest = (total[None, :] - vectors) / max(len(vectors) - 1, 1)
    norms = np.linalg.norm(rest, axis=1)
    values = np.where(norms > 0, (vectors * rest).sum(axis=1) / np.maximum(norms, 1e-12), 0.0)
    values = np.clip(values, 0.0, None)
    capacity = int(alpha * int(n_tokens.sum()))
    return knapsack(values, n_tokens.astype(np.int64), capacity).items


def _units(value: list[str]) -> list[str]:
    units = [v.strip() for v in value if v.strip()]
    if not units:
        raise ParseError("empty list of units")
    return units


UNITS = Schema(
    {
        "type": "array",
        "items": {"type": "string", "minLength": 8, "maxLength": 200},
        "minItems": 1,
        "maxItems": 10,  # bounded: a constrained answer ends within unit_max_tokens (512)
    },
    _units,
)
"""The knowledge-unit answer: 1-10 self-contained statements."""


def unit_prompt(text: str) -> str:
    """The knowledge-unit prompt of one chunk."""
    return UNIT_PROMPT.format(format=UNITS.describe(), text=text)


UNITS_STAGE = structured_stage(
    "units",
    about="knowledge units of a core chunk (Clue-RAG's semantic units; graph.alpha > 0)",
    prompt=unit_prompt,
    schema=UNITS,
    max_tokens=lambda budget: budget,
    budget=512,
)


def llm_units(
    llm: LLM, chunks: list[tuple[str, str]], retries: int, max_tokens: int = 512
) -> tuple[dict[str, list[Unit]], int]:
    """LLM units of the given (chunk_id, text) pairs in one batched call per attempt.

    Returns the units per chunk that parsed and the number of chunks whose answer never parsed
    (those keep their sentence units; nothing is guessed).
    """
    if not chunks:
        return {}, 0
    prompts = [unit_prompt(text) for _, text in chunks]
    run = generate_structured(
        llm,
        prompts,
        UNITS_STAGE.schema(),
        GenParams(max_tokens=UNITS_STAGE.max_tokens(budget=max_tokens)),
        stage="units",
        retries=retries,
    )
    out: dict[str, list[Unit]] = {}
    for (cid, _), res in zip(chunks, run.results, strict=True):
        if res.ok and res.value:
            seen: set[str] = set()
            out[cid] = []
            for t in res.value:
                if t not in seen:
                    seen.add(t)
                    out[cid].append(Unit(unit_id(cid, t, "llm"), cid, t, "llm"))
    return out, run.failures


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


BUILD_UNITS = Stage("units", ("chunks", "chunk_vectors"), ("units",), _units, uses_llm=True)
