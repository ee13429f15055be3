"""Ray Data pipelines for in-process LLM generation on Ray and for the questions of a query
job sharded over Ray (their embeddings); the block models (`EmbedBlocks`, `TagBlocks`) are
also what the index build's pool of model actors holds (graphrag_engine/exec/ray_pool.py).

The texts a stage still needs (the caches answer the rest) go through `map_batches` over an
actor pool: one model per actor, `workers` actors (Ray Data's `concurrency`), the configured
GPUs per actor. Blocks of texts (growing from FIRST_BLOCK to BLOCK, or to an LLM's batch of
prompts, and at most BLOCK_CHARS characters) go to whichever actor is free; results stream
back to the driver block by block as they finish, tagged with their positions, so the cache
stores each block as it returns (a killed build keeps it) and the stage gets its results in
input order. An actor that dies is restarted by Ray and its block retried.

With a `parts` folder (an index build: `.staging-ray-parts` in the index folder) an actor
writes each block's results as a Parquet part there itself (a temporary name, then a rename, so
a part is whole or absent) and only the part's path travels back; the driver reads the part,
hands it to the cache to commit, and deletes it once the cache asks for the next block. The
folder must be on storage every node shares, as the index folder is on a cluster.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_engine.errors import ConfigError
from graphrag_engine.progress import progress
from graphrag_engine.store.staging import mark_owned, replace_with

BLOCK = 512
"""Most texts of one Ray Data block (one actor call)."""
FIRST_BLOCK = 16
"""Texts of a pipeline's first block; each next one takes twice as many, up to BLOCK, so the
first results (and the stage's bar) come back early on any machine."""
BLOCK_CHARS = 1 << 18
"""Most characters of one block (about 64k tokens): long texts make smaller blocks, so a
block's work, and so how long its bar stands still, is bounded by tokens, not by count."""
PART_VISIBLE_S = 10.0
"""Seconds the driver waits for a part an actor announced to appear (shared storage may lag)."""


def actor_device(device: str) -> str:
    """The device a model uses inside an actor: Ray shows an actor only the GPUs it was given,
    numbered from 0, so any `cuda:N` of the config is that actor's `cuda`."""
    return "cuda" if device.startswith("cuda") else device


def quiet_actor() -> None:
    """What every Ray process holding a model sets first: no downloads, no progress bars."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("GRAPHRAG_PROGRESS", "0")


def actor_embedder(embedder: dict):
    """The EmbedderConfig an actor builds from the driver's (its device as the actor sees it)."""
    from graphrag_engine.config import EmbedderConfig  # in the actor process

    return EmbedderConfig(**{**embedder, "device": actor_device(embedder["device"])})


class EmbedBlocks:
    """Ray Data actor: holds one embedder; the vectors of a block of texts (query-side
    texts as `query_encoder` embeds them)."""

    def __init__(self, embedder: dict, queries: bool = False) -> None:
        quiet_actor()
        from graphrag_engine.models import make_embedder  # in the actor process
        from graphrag_engine.models.embed import query_encoder  # in the actor process

        self.embedder = make_embedder(actor_embedder(embedder))
        self.encode = query_encoder(self.embedder) if queries else self.embedder.encode

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self.encode(batch["text"].tolist())
        model = np.full(len(vectors), self.embedder.model_id, dtype=object)
        return {"pos": batch["pos"], "out": vectors, "model": model}


class TagBlocks:
    """Ray Data actor: holds one entity recognizer; the mentions of a block of texts (JSON)."""

    def __init__(self, ner_backend: str) -> None:
        quiet_actor()
        from graphrag_engine.models.ner import entity_recognizer  # in the actor process

        self.recognizer = entity_recognizer(ner_backend)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        found = self.recognizer.extract(batch["text"].tolist())
        return {"pos": batch["pos"], "out": np.array([json.dumps(f) for f in found], dtype=object)}


class GenerateBlocks:
    """Ray Data actor: holds one in-process LLM engine (transformers, vLLM) and a stage's
    generation parameters; the answers to a block of prompts (JSON prompts in, JSON
    Completions out)."""

    def __init__(self, llm_cfg: dict, params) -> None:
        quiet_actor()
        from graphrag_engine.config import LLMConfig  # in the actor process
        from graphrag_engine.models import make_backend  # in the actor process

        cfg = {**llm_cfg, "device": actor_device(llm_cfg["device"])}
        self.backend, self.params = make_backend(LLMConfig(**cfg)), params

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        prompts = [json.loads(p) for p in batch["text"]]
        answers = self.backend.generate(prompts, self.params)
        out = np.array([json.dumps(asdict(c)) for c in answers], dtype=object)
        return {"pos": batch["pos"], "out": out}


def writing_parts(udf: type) -> type:
    """`udf` as a pool actor that writes what it returns for a block as one Parquet part in a
    folder (its last constructor argument) and returns only the part's path; named after
    `udf`, so Ray shows which model a pool holds."""

    def __init__(self, *args) -> None:
        *own, folder = args
        udf.__init__(self, *own)
        self.parts_folder = Path(folder)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return written_as_part(udf.__call__(self, batch), self.parts_folder)

    return type(f"{udf.__name__}ToParts", (udf,), {"__init__": __init__, "__call__": __call__})


def written_as_part(results: dict[str, np.ndarray], folder: Path) -> dict[str, np.ndarray]:
    """A block's results written as one Parquet part in `folder`; the part's path, as a pool
    actor returns it."""
    table = pa.table({name: column_of(v) for name, v in results.items()})
    return {"part": np.array([write_part(table, folder)], dtype=object)}


def write_part(table: pa.Table, folder: Path) -> str:
    """Write a block's results as one Parquet part in `folder` (a temporary name, then a
    rename, so a part is whole or absent); the part's path."""
    mark_owned(folder)
    path = folder / f"{uuid.uuid4().hex}.parquet"
    replace_with(path, lambda tmp: pq.write_table(table, tmp))
    return str(path)


def rows_to_part(batch: pa.Table, folder: str, columns: tuple[str, ...]) -> pa.Table:
    """Ray Data map function: the `columns` (those present) of a block of rows written as one
    part in `folder`; its path."""
    kept = batch.select([c for c in columns if c in batch.column_names])
    return pa.table({"part": [write_part(kept, Path(folder))]})


def parts_read(announced: Iterator[dict[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
    """The blocks a pipeline announced as part paths, read one at a time; each part is deleted
    once the next block is asked for (the caller has committed it by then)."""
    for out in announced:
        for path in out["part"]:
            yield read_part(path)
            os.remove(path)


def by_position(n: int, blocks: Iterable[tuple[list[int], list]], on_done=None) -> list:
    """The values of `n` inputs in input order, from blocks of (positions, values) arriving in
    any order; each block goes to `on_done(positions, values)` as it arrives."""
    out: list = [None] * n
    for positions, values in blocks:
        for pos, value in zip(positions, values, strict=True):
            out[pos] = value
        if on_done is not None:
            on_done(positions, values)
    return out


def column_of(values: np.ndarray) -> pa.Array:
    """A result column as Arrow: rows of a 2-D array (vectors) as fixed-size lists."""
    if values.ndim == 2:
        return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])
    return pa.array(values.tolist() if values.dtype == object else values)


def read_part(path: str) -> dict[str, np.ndarray]:
    """The columns a pool actor wrote to the part at `path`, as numpy (vectors 2-D again)."""
    deadline = time.monotonic() + PART_VISIBLE_S
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.2)  # a network filesystem may show another node's rename late
    if not os.path.exists(path):
        raise ConfigError(
            f"{path}: a Ray worker wrote a block's results there and this driver cannot see "
            "them; on a cluster the index folder (--out) must be on storage every node shares"
        )
    table = pq.read_table(path)
    out = {}
    for name in table.column_names:
        column = table[name].combine_chunks()
        if pa.types.is_fixed_size_list(column.type):
            width = column.type.list_size
            out[name] = column.flatten().to_numpy().reshape(len(column), width)
        else:
            out[name] = column.to_numpy(zero_copy_only=False)
    return out


def block_bounds(
    lengths: list[int], most: int, first: int = FIRST_BLOCK, chars: int = BLOCK_CHARS
) -> list[tuple[int, int]]:
    """(start, end) of each block of texts of these lengths: `first` texts, then twice as many
    each block up to `most`, and never over `chars` characters (a longer text alone)."""
    bounds, lo, size = [], 0, max(1, min(first, most))
    while lo < len(lengths):
        hi, held = lo, 0
        while hi < min(lo + size, len(lengths)) and (hi == lo or held + lengths[hi] <= chars):
            held += lengths[hi]
            hi += 1
        bounds.append((lo, hi))
        lo, size = hi, min(2 * size, most)
    return bounds


def stream_blocks(
    udf: type,
    args: tuple,
    texts: list[str],
    workers: int,
    gpus: float,
    block: int = BLOCK,
    parts: Path | None = None,
) -> Iterator[dict[str, np.ndarray]]:
    """What `udf` returns for the texts ("pos": their positions, "out": the results, ...), block
    by block as the pool finishes them (blocks of at most `block` texts: `block_bounds`);
    through Parquet parts the actors write in `parts` when given (each deleted once the next
    block is asked for)."""
    import ray.data  # ray is an optional extra

    if not texts:
        return
    if parts is not None:
        udf, args = writing_parts(udf), (*args, str(parts))
    ray.data.DataContext.get_current().enable_progress_bars = False  # the caches show progress
    blocks = [
        pa.table({"pos": np.arange(lo, hi), "text": texts[lo:hi]})
        for lo, hi in block_bounds([len(t) for t in texts], block)
    ]
    ds = ray.data.from_arrow(blocks).map_batches(
        udf,
        fn_constructor_args=args,
        batch_size=None,  # each block as it was cut
        batch_format="numpy",
        concurrency=min(workers, len(blocks)),
        num_cpus=1,
        num_gpus=gpus or None,
    )  # Ray Data restarts a dead pool actor and retries its block (max_restarts -1 by default)
    blocks = ds.iter_batches(batch_size=None, batch_format="numpy")
    yield from blocks if parts is None else parts_read(blocks)


def embed_texts(
    embedder: dict,
    texts: list[str],
    workers: int,
    gpus: float,
    label: str = "texts",
    queries: bool = False,
) -> tuple[np.ndarray, str]:
    """Vectors of the texts in input order (a pipeline over a pool of embedders; query-side
    texts when `queries`) and the id of the model that made them, counted on an `embed LABEL`
    progress bar."""
    vectors, model_id = None, ""
    bar = progress(f"embed {label}", total=len(texts), unit="text")
    for out in stream_blocks(EmbedBlocks, (embedder, queries), texts, workers, gpus):
        if vectors is None:
            vectors = np.zeros((len(texts), out["out"].shape[1]), np.float32)
        vectors[out["pos"]] = out["out"]
        model_id = str(out["model"][0])
        bar.update(len(out["pos"]))
    bar.close()
    return (vectors if vectors is not None else np.zeros((0, 0), np.float32)), model_id
