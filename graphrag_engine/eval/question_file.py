"""A question file read a batch at a time: every record is checked once when the file is
opened, then a batch is parsed again from its own lines when a run reaches it, so a run holds
two integers per question instead of the questions (a million questions fit any machine).

The file is identified by its content: its hash is taken while it is checked, and a file that
changes on disk afterwards is refused (exit 2) rather than read half old, half new."""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, overload

import numpy as np

from graphrag_engine.eval.datasets import Question, QuestionFileError, parse_question
from graphrag_engine.jsonl import bounded_lines, decode_line, parse_line, records

READ_BLOCK = 1024
"""Questions parsed at a time when the whole file is walked (`for q in questions`)."""


class _Starts:
    """The lines of a binary stream, remembering where the line last handed out starts."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh, self.start = fh, 0

    def __iter__(self) -> Iterator[bytes | int]:
        at = 0
        for raw in bounded_lines(self.fh):
            self.start = at
            at += raw if isinstance(raw, int) else len(raw)
            yield raw


class QuestionFile(Sequence[Question]):
    """The questions of a JSONL file (see the module): `len`, indexing and slices read the
    file; `content_id` is the hash `run.json` records, `kinds` the question kinds it holds."""

    def __init__(self, path: str | Path, limit: int | None = None) -> None:
        self.path = Path(path)
        if limit is not None and limit < 1:
            raise QuestionFileError(
                f"{self.path}: a limit of {limit} questions reads none; give 1 or more"
            )
        if not self.path.is_file():
            raise QuestionFileError(
                f"{self.path}: no such question file; give a JSONL file of questions"
            )
        self._stamp = _stamp(self.path)
        self._starts, self._lines = array("q"), array("q")
        ids, digest, kinds = array("q"), hashlib.sha256(), set()
        with open(self.path, "rb") as fh:
            lines = _Starts(fh)
            try:
                for lineno, record in records(lines):
                    q = parse_question(record, f"{self.path}:{lineno}", default_id=f"q{lineno}")
                    self._starts.append(lines.start)
                    self._lines.append(lineno)
                    ids.append(hash(q.qid))
                    digest.update(q.content())
                    kinds.add(q.kind)
                    if limit is not None and len(self._starts) >= limit:
                        break
            except ValueError as exc:  # a line that is not one JSON record
                raise QuestionFileError(f"{self.path}:{exc}") from None
        if not self._starts:
            raise QuestionFileError(f"{self.path}: no questions in the file")
        self.content_id = digest.hexdigest()[:24]
        self.kinds = frozenset(kinds)
        self._check_unique(np.frombuffer(ids, dtype=np.int64))

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, i: int) -> Question: ...

    @overload
    def __getitem__(self, i: slice) -> list[Question]: ...

    def __getitem__(self, i: int | slice) -> Question | list[Question]:
        if isinstance(i, slice):
            return self._read(range(*i.indices(len(self))))
        if not -len(self) <= i < len(self):
            raise IndexError(f"question {i} of {len(self)}")
        return self._read([i % len(self)])[0]

    def __iter__(self) -> Iterator[Question]:
        for at in range(0, len(self), READ_BLOCK):
            yield from self[at : at + READ_BLOCK]

    def _read(self, positions: Sequence[int]) -> list[Question]:
        """The questions at these positions, parsed from their lines."""
        if _stamp(self.path) != self._stamp:
            raise QuestionFileError(
                f"{self.path}: the file changed after the run checked it; a run reads the "
                "questions it started with, so restore the file or start a new run"
            )
        out = []
        with open(self.path, "rb") as fh:
            for k in positions:
                start, lineno = self._starts[k], self._lines[k]
                fh.seek(start)
                record = parse_line(decode_line(fh.readline()), first=start == 0)
                out.append(parse_question(record, f"{self.path}:{lineno}", f"q{lineno}"))
        return out

    def _check_unique(self, ids: np.ndarray) -> None:
        """Refuse the file (naming both lines) when a question id repeats."""
        order = np.sort(ids)
        clashing = set(order[1:][order[1:] == order[:-1]].tolist())
        if not clashing:
            return
        seen: dict[str, int] = {}
        for k in np.flatnonzero(np.isin(ids, list(clashing))).tolist():
            q = self[k]
            if q.qid in seen:
                raise QuestionFileError(
                    f"{self.path}:{self._lines[k]}: question id {q.qid!r} repeats line "
                    f"{seen[q.qid]}; ids must be unique"
                )
            seen[q.qid] = self._lines[k]


def _stamp(path: Path) -> tuple[int, int, int]:
    """What changes when a file is written: inode, size and modification time."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns
