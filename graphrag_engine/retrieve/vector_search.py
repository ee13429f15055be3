"""The one vector-search call of the retrieval operators: the k nearest rows of an index's vector
table (chunks, units, entities, relations) for a batch of query vectors.

Exact blocked cosine top-k by default; an approximate faiss index (HNSW, or IVF on a GPU) for
tables of at least `retrieval.ann.min_vectors` rows, as `retrieval.ann` says. An ANN index is
built once per table content and saved under the index folder's `ann/`, named by the vectors'
sha256 and the build settings, with a meta file; one that does not match its table (rows, dim,
embedder, content) or does not load is rebuilt, with a line saying why.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np

from graphrag_engine.config.query import AnnConfig
from graphrag_engine.kernels.ann import AnnIndex, AnnParams
from graphrag_engine.kernels.similarity import TorchFlatIndex, cosine_topk
from graphrag_engine.progress import progress
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.store.beside import save_beside
from graphrag_engine.store.index_store import file_sha256

log = logging.getLogger(__name__)

ANN_FOLDER = "ann"
HELD_BYTES = 512 * 2**20
"""The largest vector table an exact CPU search normalizes once a run and keeps in memory;
a larger one is read and normalized block by block at every search, as its memory map allows.
A caller whose table is already unit-length (`normalized=True`, Clue-RAG's unit vectors)
searches the memory map directly: there is no normalizing to save, so nothing is held."""


def nearest(
    ctx: QueryContext, table: str, queries: np.ndarray, k: int, normalized: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, ids) of the k rows of vector table `table` nearest each query, best first;
    -inf / -1 where the table has fewer rows."""
    vectors = ctx.vectors(table)
    ann = ctx.memo(("ann", table), lambda: ann_index(ctx, table, vectors))
    if ann is not None:
        return ann.search(queries, k, normalized=normalized)
    if ctx.device != "cpu" or (not normalized and vectors.nbytes <= HELD_BYTES):
        held = ctx.memo(("held", table), lambda: _flat_index(vectors, ctx.device))
        return held.search(queries, k, normalized=normalized)
    return cosine_topk(queries, vectors, k, normalized=normalized)


def _flat_index(vectors: np.ndarray, device: str) -> TorchFlatIndex:
    """An exact index over a vector table, normalized once, that stays on `device` for the
    run."""
    index = TorchFlatIndex(vectors.shape[1], device)
    index.add(np.asarray(vectors, dtype=np.float32))
    return index


def ann_kind(cfg: AnnConfig, rows: int) -> str | None:
    """'hnsw' or 'ivf' when a table of `rows` rows is searched approximately, else None."""
    if cfg.backend == "exact" or rows < cfg.min_vectors:
        return None
    if cfg.backend != "auto":
        return cfg.backend
    return "ivf" if _faiss_gpus() else "hnsw"


def ann_index(ctx: QueryContext, table: str, vectors: np.ndarray) -> AnnIndex | None:
    """The table's ANN index (loaded from ann/, or built and saved there), or None for exact."""
    cfg = ctx.cfg.retrieval.ann
    kind = ann_kind(cfg, len(vectors))
    if kind is None:
        return None
    params = AnnParams(
        kind,
        cfg.hnsw_m,
        cfg.hnsw_ef_construction,
        cfg.hnsw_ef_search,
        cfg.ivf_lists,
        cfg.ivf_probe,
    )
    if not cfg.cache:
        return _build(vectors, params, table).to_gpu()
    entry = ctx.index.manifest["files"].get(table)
    if entry is None:  # vectors embedded by the query (lazy relation vectors): hash the values
        entry = {"model": ctx.built_with.get("embedder", ""), "sha256": array_sha256(vectors)}
    meta = {
        "table": table,
        "rows": int(vectors.shape[0]),
        "dim": int(vectors.shape[1]),
        "model": entry.get("model", ""),
        "sha256": entry.get("sha256") or file_sha256(ctx.index.root / entry["path"]),
        "build": params.build_key(),
    }
    settings = hashlib.sha256(json.dumps(meta["build"], sort_keys=True).encode()).hexdigest()
    path = ctx.index.root / ANN_FOLDER / f"{table}-{meta['sha256'][:16]}-{settings[:8]}.faiss"
    ann = _load(path, meta, params)
    if ann is None:
        ann = _build(vectors, params, table)
        _save(ann, path, meta)
    return ann.to_gpu()


def array_sha256(vectors: np.ndarray) -> str:
    """sha256 of an array's values (row-major float32 bytes)."""
    return hashlib.sha256(np.ascontiguousarray(vectors, dtype=np.float32).tobytes()).hexdigest()


def _load(path: Path, meta: dict, params: AnnParams) -> AnnIndex | None:
    """The saved index at `path` if it matches `meta`, else None (saying why when one exists)."""
    meta_path = path.with_suffix(".json")
    if not path.exists() and not meta_path.exists():
        return None
    try:
        saved = json.loads(meta_path.read_text())
        differs = [key for key in meta if saved.get(key) != meta[key]]
        if differs:
            why = f"its {', '.join(differs)} differ from the table's"
        else:
            ann = AnnIndex.load(path, params)
            if (ann.ntotal, ann.dim) == (meta["rows"], meta["dim"]):
                return ann
            why = f"it holds {ann.ntotal} x {ann.dim} vectors, the table {meta['rows']} x {meta['dim']}"
    except (OSError, ValueError, RuntimeError) as exc:
        why = f"it cannot be read ({str(exc)[:120]})"
    log.warning("ann: %s does not match %s: %s; rebuilding it", path, meta["table"], why)
    return None


def _build(vectors: np.ndarray, params: AnnParams, table: str) -> AnnIndex:
    """Build with a progress bar over the vectors added."""
    bar = progress(f"ann {params.kind} {table}", total=len(vectors), unit="vec")
    ann = AnnIndex.build(vectors, params, on_added=bar.update)
    bar.close()
    return ann


def _save(ann: AnnIndex, path: Path, meta: dict) -> None:
    """Keep the index and its meta (written last) beside the index tables, dropping older
    builds of the same table; a read-only index folder keeps it in memory only."""
    save_beside(
        [
            (path, ann.save),
            (path.with_suffix(".json"), lambda tmp: tmp.write_text(json.dumps(meta, indent=1))),
        ],
        "the ANN index",
    )


def _faiss_gpus() -> int:
    """GPUs faiss sees (0 without faiss-gpu)."""
    import faiss

    return faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
