"""Writing an index: tables and vectors staged, hashed as they are written, committed at once
(the layout and the commit protocol: index_store.py)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_engine.errors import IndexFormatError
from graphrag_engine.store.index_store import Index
from graphrag_engine.store.locks import try_lock
from graphrag_engine.store.manifest import FORMAT, MANIFEST, read_manifest
from graphrag_engine.store.schemas import SCHEMA_VERSION, schema_for
from graphrag_engine.store.staging import mark_owned, owned

KEEP_GENERATIONS = 2


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


@dataclass
class HashingFile:
    """A binary file being written that hashes every byte passing through, so the commit
    records each file's sha256 without reading it again."""

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "wb")
        self.sha256 = hashlib.sha256()
        self.closed = False

    def write(self, data: bytes) -> int:
        """Hash and write `data`."""
        self.sha256.update(data)
        return self._fh.write(data)

    def tell(self) -> int:
        """Bytes written so far."""
        return self._fh.tell()

    def flush(self) -> None:
        """Flush the underlying file."""
        self._fh.flush()

    def close(self) -> None:
        """Close the file (once)."""
        if not self.closed:
            self._fh.close()
            self.closed = True


class VectorSink:
    """An (rows, d) float32 .npy file written block by block in row order: the header when
    the first block gives the width, every block checked (2-D, same width, finite)."""

    def __init__(self, name: str, file: HashingFile, rows: int) -> None:
        self.name, self.file, self.rows = name, file, rows
        self.written = 0
        self.width: int | None = None

    def append(self, block: np.ndarray) -> None:
        """Write the next rows."""
        arr = np.ascontiguousarray(block, dtype=np.float32)
        if arr.ndim != 2:
            raise ValueError(f"vectors '{self.name}' must be 2-D, got shape {arr.shape}")
        if arr.size and not np.isfinite(arr).all():
            raise ValueError(f"vectors '{self.name}' hold NaN or infinite values; not stored")
        if self.width is None:
            self._header(arr.shape[1])
        elif arr.shape[1] != self.width:
            raise ValueError(
                f"vectors '{self.name}': a block of width {arr.shape[1]} after width {self.width}"
            )
        if self.written + len(arr) > self.rows:
            raise ValueError(f"vectors '{self.name}': more than the {self.rows} rows announced")
        self.file.write(arr.tobytes())
        self.written += len(arr)

    def finish(self) -> tuple[int, int]:
        """The shape written; an error when rows are missing."""
        if self.width is None:
            self._header(0)
        if self.written != self.rows:
            raise ValueError(
                f"vectors '{self.name}': {self.written} rows written of {self.rows} announced"
            )
        return self.rows, self.width

    def _header(self, width: int) -> None:
        self.width = width
        header = {"descr": "<f4", "fortran_order": False, "shape": (self.rows, width)}
        np.lib.format.write_array_header_1_0(self.file, header)


@dataclass
class TableWriter:
    """Streams record batches of one table into a Parquet file of the staging folder."""

    name: str
    path: Path
    schema: pa.Schema
    rows: int = 0
    _writer: pq.ParquetWriter | None = None
    _sink: HashingFile | None = None

    def write(self, rows: list[dict[str, Any]] | pa.RecordBatch | pa.Table) -> None:
        """Append rows (dicts in schema order, a RecordBatch or a Table)."""
        if isinstance(rows, list):
            if not rows:
                return
            rows = pa.Table.from_pylist(rows, schema=self.schema)
        elif isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        if not rows.schema.equals(self.schema):
            rows = rows.select(self.schema.names).cast(self.schema)
        if self._writer is None:
            self._open()
        if self._sink.closed:
            raise ValueError(f"table '{self.name}' was finished; it takes no more rows")
        self._writer.write_table(rows, row_group_size=64 * 1024)
        self.rows += rows.num_rows

    def _open(self) -> None:
        self._sink = HashingFile(self.path)
        # min/max statistics for ids and numbers only: of a free-text column they are useless
        # to readers, and for one huge document's text they cost seven times its size
        with_stats = [
            f.name for f in self.schema if not pa.types.is_string(f.type) or f.name.endswith("_id")
        ]
        self._writer = pq.ParquetWriter(
            self._sink, self.schema, compression="zstd", write_statistics=with_stats
        )

    def close(self) -> str:
        """Finish the file (an empty table still gets a valid Parquet file); its sha256. A
        second call only returns the sha256; a write after it is refused."""
        if self._writer is None:
            self._open()
        if not self._sink.closed:
            self._writer.close()
            self._sink.close()
        return self._sink.sha256.hexdigest()


def _engine_generation(path: Path) -> bool:
    """Whether `path` is a generation folder the engine wrote: `gen-` and six digits, and
    marked as the engine's, or (written before the mark existed) holding nothing but table and
    vector files."""
    if not (path.is_dir() and len(path.name) == 10 and path.name[4:].isdigit()):
        return False
    if owned(path):
        return True
    return all(p.is_file() and p.suffix in (".parquet", ".npy") for p in path.iterdir())


def _generation_taken(path: Path) -> bool:
    """Whether a commit may not use `path`: it exists and is not the engine's."""
    return path.exists() and not _engine_generation(path)


@dataclass
class IndexWriter:
    """Collects the files of one new commit; nothing is visible until `commit()`."""

    root: Path
    base: Index | None = None
    force: bool = False
    """Rebuild over a damaged or unreadable manifest instead of refusing."""
    _staging: Path = field(init=False)
    _tables: dict[str, TableWriter] = field(default_factory=dict, init=False)
    _entries: dict[str, dict[str, Any]] = field(default_factory=dict, init=False)
    _lock_fd: int | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_fd = try_lock(self.root / ".lock")
        if self._lock_fd is None:
            raise IndexFormatError(
                f"{self.root}: another process is writing this index; wait for it to finish"
            )
        if not self.force:  # refuse a target we could not commit to before any work is done
            try:
                read_manifest(self.root)
            except IndexFormatError:
                self._release()
                raise
        for stale in self.root.glob(".staging-*"):
            if owned(stale):  # a killed build's; a folder of the user's stays
                shutil.rmtree(stale, ignore_errors=True)
        self._staging = mark_owned(self.root / f".staging-{uuid.uuid4().hex[:12]}")

    # -- tables ---------------------------------------------------------------------------
    def table(self, name: str) -> TableWriter:
        """The streaming writer of table `name` (created on first use)."""
        if name not in self._tables:
            self._tables[name] = TableWriter(
                name, self._staging / f"{name}.parquet", schema_for(name)
            )
        return self._tables[name]

    def write_table(self, name: str, rows: list[dict[str, Any]] | pa.Table) -> None:
        """Write a whole table at once."""
        self.table(name).write(rows)

    def carry_over(self, name: str) -> None:
        """Reuse table or vectors `name` of the base commit unchanged (hard link, no copy)."""
        if self.base is None or name not in self.base.manifest["files"]:
            raise KeyError(f"base index has no '{name}' to carry over")
        entry = dict(self.base.manifest["files"][name])
        src = self.base.root / entry["path"]
        dst = self._staging / Path(entry["path"]).name
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        self._entries[name] = entry

    def staged(self, name: str) -> bool:
        """Whether this build wrote table `name`."""
        return name in self._tables

    def staged_batches(
        self, name: str, columns: list[str] | None = None, batch_size: int = 8192
    ) -> Iterator[pa.RecordBatch]:
        """Table `name` as this build wrote it, read back from staging `batch_size` rows at a
        time (the table is finished first: it takes no more rows)."""
        if name not in self._tables:
            raise KeyError(f"table '{name}' was not written by this build")
        self._tables[name].close()
        yield from pq.ParquetFile(self._tables[name].path).iter_batches(batch_size, columns=columns)

    # -- vectors --------------------------------------------------------------------------
    def write_vectors(self, name: str, vectors: np.ndarray, model: str) -> None:
        """Store an (n, d) float32 matrix, e.g. L2-normalised embeddings of one kind."""
        arr = np.asarray(vectors)
        with self.vector_sink(name, arr.shape[0] if arr.ndim else 0, model) as sink:
            sink.append(arr)

    @contextmanager
    def vector_sink(self, name: str, rows: int, model: str) -> Iterator[VectorSink]:
        """Stream the `rows` vectors of `name` block by block into the staging folder, so no
        build holds a whole matrix; recorded (shape, model, sha256) when every row came."""
        sink = VectorSink(name, HashingFile(self._staging / f"{name}.npy"), rows)
        try:
            yield sink
            shape = sink.finish()
        finally:
            sink.file.close()
        self._entries[name] = {
            "kind": "vectors",
            "shape": list(shape),
            "dtype": "float32",
            "model": model,
            "sha256": sink.file.sha256.hexdigest(),
        }

    def staged_vectors(self, name: str) -> np.ndarray:
        """Vectors `name` as this build wrote them, memory-mapped read-only from staging."""
        if self._entries.get(name, {}).get("kind") != "vectors":
            raise KeyError(f"vectors '{name}' were not written by this build")
        return np.load(self._staging / f"{name}.npy", mmap_mode="r")

    # -- commit ---------------------------------------------------------------------------
    def commit(
        self,
        config: dict[str, Any],
        config_hash: str,
        models: dict[str, str],
        stats: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Make the staged files the current index atomically; return the new manifest."""
        try:
            for writer in self._tables.values():
                sha = writer.close()
                self._entries[writer.name] = {"kind": "table", "rows": writer.rows, "sha256": sha}
            if self.force:  # past a manifest that cannot be read: a generation not used yet
                used = [int(p.name[4:]) for p in self.root.glob("gen-*") if p.name[4:].isdigit()]
                generation = 1 + max(used, default=0)
            else:
                previous = read_manifest(self.root)
                generation = (previous["generation"] + 1) if previous else 1
            while _generation_taken(self.root / f"gen-{generation:06d}"):
                generation += 1  # a folder of the user's holds that name: the next one
            gen_name = f"gen-{generation:06d}"
            files: dict[str, dict[str, Any]] = {}
            for name, entry in self._entries.items():
                suffix = ".npy" if entry["kind"] == "vectors" else ".parquet"
                staged = self._staging / f"{name}{suffix}"
                _fsync_file(staged)
                files[name] = {
                    **entry,
                    "path": f"{gen_name}/{name}{suffix}",
                    "bytes": staged.stat().st_size,
                }
            _fsync_dir(self._staging)
            target = self.root / gen_name
            if target.exists():  # the engine's, left by a run killed before its manifest
                shutil.rmtree(target)
            os.rename(self._staging, target)
            _fsync_dir(self.root)
            manifest = {
                "format": FORMAT,
                "schema_version": SCHEMA_VERSION,
                "generation": generation,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "config_hash": config_hash,
                "config": config,
                "models": models,
                "files": files,
                "stats": stats or {},
            }
            tmp = self.root / (MANIFEST + ".tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(manifest, fh, indent=2, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.root / MANIFEST)
            _fsync_dir(self.root)
            self._collect_garbage(generation)
            return manifest
        except BaseException:
            shutil.rmtree(self._staging, ignore_errors=True)  # nothing half-written stays
            raise
        finally:
            self._release()

    def abort(self) -> None:
        """Drop everything staged; the current index stays as it was (also when closing a
        staged file fails, as on a full disk)."""
        try:
            for writer in self._tables.values():
                if writer._writer is not None:
                    with contextlib.suppress(OSError):
                        writer._writer.close()
                    with contextlib.suppress(OSError):
                        writer._sink.close()
        finally:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._release()

    def _collect_garbage(self, generation: int) -> None:
        """Remove the engine's generation folders older than the ones kept (never a folder of
        the user's that happens to look like one)."""
        keep = {f"gen-{g:06d}" for g in range(generation - KEEP_GENERATIONS + 1, generation + 1)}
        for path in self.root.glob("gen-*"):
            if path.name not in keep and _engine_generation(path):
                shutil.rmtree(path, ignore_errors=True)

    def _release(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> IndexWriter:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if self._lock_fd is not None:  # not committed: discard
            self.abort()
