"""Ingest: stream documents out of JSONL, Parquet, .txt/.md files (gzip too) and folders of them.

Every bad record is reported as `file:line: what is wrong` (IngestError, exit code 2), or,
with `skip_bad`, skipped and counted (an unreadable file too). Exact duplicates (same title and
text) are dropped and counted; one corpus id on two different texts is counted and reported
(an error with `strict_ids`). Folders are walked following symbolic links, each real folder
once. Documents come out one at a time, so a corpus larger than memory streams through.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow.parquet as pq

from graphrag_engine.config import IngestConfig
from graphrag_engine.errors import IngestError
from graphrag_engine.jsonl import BOM, bounded_lines, records

TEXT_SUFFIXES = {".txt", ".md"}
SUFFIXES = {".jsonl", ".parquet", *TEXT_SUFFIXES}


@dataclass
class Document:
    """One ingested document; `doc_id` is a content hash of title and text."""

    doc_id: str
    title: str
    text: str
    source: str
    external_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        """Row of the `documents` table."""
        return {
            "doc_id": self.doc_id,
            "external_id": self.external_id,
            "title": self.title,
            "text": self.text,
            # absolute, as the process that read it saw it: a job's working folder or a
            # relative argument must not change what the index records
            "source": os.path.abspath(self.source),
            "meta": json.dumps(self.meta, ensure_ascii=False, sort_keys=True)
            if self.meta
            else None,
        }


@dataclass
class IngestStats:
    """Counts of what ingest read, kept, dropped and skipped."""

    files: int = 0
    records: int = 0
    documents: int = 0
    duplicates: int = 0
    skipped_bad: int = 0
    id_conflicts: int = 0
    """Records whose corpus id an earlier record with another text already had."""
    bytes_read: int = 0
    bad_examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Counts for the manifest and the CLI summary."""
        return {
            "files": self.files,
            "records": self.records,
            "documents": self.documents,
            "duplicates": self.duplicates,
            "skipped_bad": self.skipped_bad,
            "id_conflicts": self.id_conflicts,
            "bad_examples": self.bad_examples[:5],
        }


class _UnreadableFile(Exception):
    """A corpus file that cannot be read at all (skipped and counted under skip_bad)."""


def content_id(title: str, text: str | memoryview) -> str:
    """Content-hash id of a document: the same title and text (or its UTF-8 bytes) always give
    the same id."""
    h = hashlib.sha1(f"{title}\n".encode())
    h.update(text.encode() if isinstance(text, str) else text)
    return h.hexdigest()[:16]


def list_corpus_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and folders into the sorted list of readable corpus files."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in _walk(path) if _format_of(p) is not None)
            if not files:
                raise IngestError(
                    f"{path}: folder holds no .jsonl, .parquet, .txt or .md files (gzip allowed)"
                )
            found.extend(files)
        elif path.is_file():
            if _format_of(path) is None:
                raise IngestError(
                    f"{path}: unknown corpus format; use .jsonl, .parquet, .txt or .md (optionally .gz)"
                )
            found.append(path)
        else:
            raise IngestError(f"{path}: no such file or folder")
    return found


def _walk(root: Path) -> Iterator[Path]:
    """Every file under `root`, following symbolic links to folders, and every link to nothing;
    a folder reached twice (a link loop, or two links to one folder) is walked once."""
    seen: set[tuple[int, int]] = set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        st = os.stat(folder)
        if (st.st_dev, st.st_ino) in seen:
            dirs.clear()
            continue
        seen.add((st.st_dev, st.st_ino))
        for name in files:
            path = Path(folder) / name
            if path.is_file() or (path.is_symlink() and not path.exists()):
                yield path  # a link to nothing is read, and reported, as a bad file


def _format_of(path: Path) -> str | None:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    if not suffixes or suffixes[-1] not in SUFFIXES:
        return None
    return suffixes[-1]


def _open_binary(path: Path) -> IO[bytes]:
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


class SeenHashes:
    """Set of 64-bit content hashes in about 8 bytes each: a sorted numpy array plus a small
    Python set that is merged into it every `buffer` insertions, so deduplication of a corpus
    larger than memory stays small (a plain set of ints costs ~100 bytes per document)."""

    def __init__(self, buffer: int = 65536) -> None:
        self._sorted = np.empty(0, dtype=np.uint64)
        self._recent: set[int] = set()
        self._buffer = buffer

    def add(self, key: int) -> bool:
        """Insert key; False if it was already there."""
        if key in self._recent:
            return False
        i = int(np.searchsorted(self._sorted, np.uint64(key)))
        if i < self._sorted.size and int(self._sorted[i]) == key:
            return False
        self._recent.add(key)
        if len(self._recent) >= self._buffer:
            merged = np.concatenate(
                [self._sorted, np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))]
            )
            merged.sort(kind="stable")
            self._sorted = merged
            self._recent.clear()
        return True

    def __len__(self) -> int:
        return self._sorted.size + len(self._recent)


class DocumentReader:
    """Streams deduplicated Documents from corpus files, counting what it reads and drops."""

    def __init__(
        self,
        paths: Iterable[str | Path],
        config: IngestConfig | None = None,
        before: Iterable[Document] = (),
    ) -> None:
        self.config = config or IngestConfig()
        self.files = list_corpus_files(paths)
        self.before = before  # documents already indexed (incremental add), read first
        self.stats = IngestStats(files=len(self.files))
        self.total_bytes = sum(p.stat().st_size for p in self.files if p.exists())
        self._seen = SeenHashes()
        self._ids = SeenHashes()  # corpus ids seen, and (id, content) pairs seen
        self._id_texts = SeenHashes()

    def __iter__(self) -> Iterator[Document]:
        for doc in self.before:
            if self._seen.add(int(doc.doc_id, 16)):
                self.stats.documents += 1
                yield doc
        for path in self.files:
            for doc in self._read_file(path):
                if doc.external_id is not None and self._id_conflict(doc):
                    self.stats.id_conflicts += 1
                    if self.config.strict_ids:
                        raise IngestError(
                            f"{doc.source}: id {doc.external_id!r} was given to another text "
                            "earlier; give every document its own id (or drop --strict-ids)"
                        )
                if not self._seen.add(int(doc.doc_id, 16)):
                    self.stats.duplicates += 1
                    continue
                self.stats.documents += 1
                yield doc

    def _id_conflict(self, doc: Document) -> bool:
        """True when this corpus id came earlier with another text."""
        key = int(hashlib.sha1(doc.external_id.encode()).hexdigest()[:16], 16)
        pair = int(hashlib.sha1(f"{doc.external_id}\n{doc.doc_id}".encode()).hexdigest()[:16], 16)
        new_id, new_pair = self._ids.add(key), self._id_texts.add(pair)
        return not new_id and new_pair

    # -- per format -----------------------------------------------------------------------
    def _read_file(self, path: Path) -> Iterator[Document]:
        fmt = _format_of(path)
        if path.is_symlink() and not path.exists():
            self._bad(
                str(path),
                f"a symbolic link to {os.readlink(path)}, which does not exist",
                fix="remove the link or restore what it points to",
            )
            return
        try:
            if fmt == ".jsonl":
                yield from self._read_jsonl(path)
            elif fmt == ".parquet":
                yield from self._read_parquet(path)
            else:
                yield from self._read_text(path)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            if isinstance(exc, FileNotFoundError):
                raise IngestError(f"{path}: file disappeared while reading") from None
            self._bad(str(path), f"cannot read ({exc})", fix="check the file is complete")
        except _UnreadableFile as exc:
            self._bad(str(path), str(exc), fix="replace the file")

    def _bad(self, where: str, message: str, fix: str = "fix the record") -> None:
        """Count and note a bad record or file with --skip-bad; without it, stop saying so."""
        if not self.config.skip_bad:
            raise IngestError(f"{where}: {message} ({fix}, or pass --skip-bad to skip it)")
        self.stats.skipped_bad += 1
        if len(self.stats.bad_examples) < 5:
            self.stats.bad_examples.append(f"{where}: {message}")

    def _read_jsonl(self, path: Path) -> Iterator[Document]:
        def bad(lineno: int, message: str) -> None:
            self.stats.records += 1
            self._bad(f"{path}:{lineno}", message)

        with _open_binary(path) as fh:
            limit = self.config.max_record_mb
            lines = self._counted(bounded_lines(fh, limit))
            for lineno, record in records(lines, bad, limit, "ingest.max_record_mb"):
                self.stats.records += 1
                where = f"{path}:{lineno}"
                if not isinstance(record, dict):
                    self._bad(where, f"expected a JSON object, got {type(record).__name__}")
                    continue
                doc = self._from_record(record, where, title_default="")
                if doc is not None:
                    yield doc

    def _counted(self, lines: Iterable[bytes | int]) -> Iterator[bytes | int]:
        """The lines of a file, adding their bytes to the bytes read (progress; an int is the
        length of a line too long to read)."""
        for raw in lines:
            self.stats.bytes_read += raw if isinstance(raw, int) else len(raw)
            yield raw

    def _read_parquet(self, path: Path) -> Iterator[Document]:
        with _open_binary(path) as fh:
            data = fh.read() if path.suffix.lower() == ".gz" else None
        source = io.BytesIO(data) if data is not None else path
        try:
            pfile = pq.ParquetFile(source)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise _UnreadableFile(f"not a readable Parquet file ({exc})") from None
        if self.config.text_field not in pfile.schema_arrow.names:
            raise IngestError(
                f"{path}: no column '{self.config.text_field}' (columns: "
                f"{', '.join(pfile.schema_arrow.names)}); set ingest.text_field or --text-field"
            )
        row = 0
        for batch in pfile.iter_batches(batch_size=4096):
            self.stats.bytes_read += batch.nbytes
            for record in batch.to_pylist():
                row += 1
                self.stats.records += 1
                doc = self._from_record(record, f"{path}:{row}", title_default="")
                if doc is not None:
                    yield doc

    def _read_text(self, path: Path) -> Iterator[Document]:
        """One document per file: its first line as the title when that is a "# " heading.
        A huge file is held as its bytes and one decoded text at most (the id is hashed from
        the bytes; the title looked for in the first 64k characters)."""
        with _open_binary(path) as fh:
            raw = fh.read()
        self.stats.bytes_read += len(raw)
        self.stats.records += 1
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            self._bad(f"{path}:{line}", f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})")
            return
        bom = text.startswith(BOM)
        text = text.removeprefix(BOM)
        stem = path.name.split(".")[0]
        title = stem
        for line in text[: 1 << 16].splitlines():
            if line.startswith("# "):
                title = line[2:].strip()
                break
            if line.strip():
                break
        with memoryview(raw) as body:
            doc_id = content_id(title, body[len(BOM.encode()) if bom else 0 :])
        del raw
        text = text.strip()
        if not text:
            self._bad(f"{path}:1", "empty document")
            return
        yield Document(doc_id, title, text, str(path), external_id=stem)

    def _from_record(
        self, record: dict[str, Any], where: str, title_default: str
    ) -> Document | None:
        cfg = self.config
        if cfg.text_field not in record:
            self._bad(
                where,
                f"missing text field '{cfg.text_field}' (set ingest.text_field or --text-field)",
            )
            return None
        text = record[cfg.text_field]
        if not isinstance(text, str):
            self._bad(
                where, f"text field '{cfg.text_field}' must be a string, got {type(text).__name__}"
            )
            return None
        text = text.strip()
        if not text:
            self._bad(where, "empty document")
            return None
        title = record.get(cfg.title_field) or title_default
        if not isinstance(title, str):
            title = str(title)
        ext = record.get(cfg.id_field)
        if isinstance(ext, float) and not math.isfinite(ext):
            self._bad(
                where,
                f"id field '{cfg.id_field}' is {ext!r}, which names no document; give each "
                "record a string or whole-number id, or leave the field out",
            )
            return None
        meta = {
            k: v
            for k, v in record.items()
            if k not in (cfg.text_field, cfg.title_field, cfg.id_field)
        }
        return Document(
            content_id(title, text),
            title.strip(),
            text,
            where,
            external_id=None if ext is None else str(ext),
            meta=meta,
        )
