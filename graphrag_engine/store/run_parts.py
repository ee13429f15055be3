"""A query run's batch parts: where each lives in the run folder, committing one with the
LLM usage and seconds it took, reading it back on resume, and merging them into the run's
results (the folder's layout: `store/run_folder.py`)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa

from graphrag_engine.results import read_rows, write_results
from graphrag_engine.store.run_folder import damaged_run_file, read_json
from graphrag_engine.store.staging import replace_with, write_atomic

PART = ".jsonl"
"""A finished batch's rows: JSON lines, the text `results.jsonl` is made of."""
OLDER_PART = ".parquet"
"""A finished batch's rows as runs of earlier engines kept them (read on resume)."""


def part_path(out: Path, b: int, suffix: str = PART) -> Path:
    """Where batch `b` of the run in `out` keeps its part (or, by suffix, its checkpoint)."""
    return out / "parts" / f"{b:05d}{suffix}"


def committed_part(out: Path, b: int) -> Path | None:
    """Batch `b`'s part file (JSON lines, or an older run's Parquet); None when not written."""
    for suffix in (PART, OLDER_PART):
        path = part_path(out, b, suffix)
        if path.exists():
            return path
    return None


def batch_done(out: Path, b: int) -> bool:
    """Whether batch `b` of the run in `out` is finished (its part written, nothing failed)."""
    return committed_part(out, b) is not None and not part_path(out, b, ".failed").exists()


def usage_since(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The LLM usage between two ledger summaries (stages with nothing spent left out)."""
    out = {}
    for key, fields in after.items():
        prev = before.get(key, {})
        spent = {
            name: round(value - prev.get(name, 0), 6)
            if isinstance(value, int | float) and not isinstance(value, bool)
            else value
            for name, value in fields.items()
        }
        if any(
            isinstance(v, int | float) and not isinstance(v, bool) and v for v in spent.values()
        ):
            out[key] = spent
    return out


def write_part(
    out: Path,
    b: int,
    rows: list[dict[str, Any]],
    usage: dict[str, dict[str, Any]],
    seconds: float | None = None,
) -> None:
    """Commit batch `b`: the LLM usage and wall seconds that produced it (added to what earlier
    processes spent on it), its part file atomically, and a `.failed` marker naming the
    questions whose answer prompt failed (removed once none did)."""
    add_usage(part_path(out, b, ".usage.json"), usage)
    if seconds is not None:
        add_batch_seconds(out, b, seconds)
    done_path = part_path(out, b)
    failed_marker = done_path.with_suffix(".failed")
    typed = [
        {
            **r,
            "tokens": {k: int(v) for k, v in r["tokens"].items()},
            "seconds": {k: float(v) for k, v in r["seconds"].items()},
        }
        for r in rows
    ]
    replace_with(done_path, lambda tmp: write_jsonl(tmp, typed))
    part_path(out, b, OLDER_PART).unlink(missing_ok=True)  # an older engine's try at it
    failed = [row["qid"] for row in rows if row["answer_failed"] is not None]
    if failed:
        write_atomic(failed_marker, "\n".join(failed).encode())
    elif failed_marker.exists():
        failed_marker.unlink()


def add_usage(path: Path, usage: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What `path` holds plus `usage` (numbers summed per stage/model), written back: a
    batch's usage over every process that worked on it."""
    total = sum_usage(read_json(path) if path.exists() else {}, usage)
    write_atomic(path, json.dumps(total, indent=2).encode())
    return total


def sum_usage(
    total: dict[str, dict[str, Any]], usage: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """LLM usage summaries added up per stage/model (numbers summed, other fields the latest)."""
    total = {key: dict(fields) for key, fields in total.items()}
    for key, fields in usage.items():
        into = total.setdefault(key, {})
        for name, value in fields.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                into[name] = round(into.get(name, 0) + value, 6)
            else:
                into[name] = value
    return total


def run_usage(out: Path, n_batches: int) -> dict[str, dict[str, Any]]:
    """The LLM usage of the whole run: every committed batch's, summed."""
    total: dict[str, dict[str, Any]] = {}
    for b in range(n_batches):
        path = part_path(out, b, ".usage.json")
        if path.exists():
            total = sum_usage(total, read_json(path))
    return total


def add_batch_seconds(out: Path, b: int, seconds: float) -> None:
    """Add wall seconds spent on batch `b` to its seconds file (summed over processes)."""
    add_usage(part_path(out, b, ".seconds.json"), {"batch": {"seconds": seconds}})


def read_seconds(path: Path) -> float | None:
    """The wall seconds a batch's seconds file holds (None when there is none)."""
    if not path.exists():
        return None
    seconds = read_json(path).get("batch", {})
    value = seconds.get("seconds", 0.0) if isinstance(seconds, dict) else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise damaged_run_file(path, "no number at batch.seconds")
    return float(value)


def read_part(out: Path, b: int) -> list[dict[str, Any]]:
    """The rows batch `b` committed, refused (exit 2, naming the file) when it is damaged."""
    path = committed_part(out, b) or part_path(out, b)
    try:
        if path.suffix == OLDER_PART:
            return read_rows(path)
        with path.open("rb") as fh:
            rows = [json.loads(line) for line in fh]
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise damaged_run_file(path, str(exc)[:160]) from None
    if not all(isinstance(r, dict) and PART_KEYS <= r.keys() for r in rows):
        raise damaged_run_file(path, "a line is not a result row")
    return rows


PART_KEYS = {"qid", "question", "method", "answer", "tokens", "seconds", "extras"}
"""Keys every row of a part holds (what the summary and the results table read)."""


@dataclasses.dataclass
class RunTotals:
    """What a run's summary adds up over its rows: questions, failed answers, seconds and
    LLM tokens per stage."""

    questions: int = 0
    failed: int = 0
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    tokens: dict[str, float] = dataclasses.field(default_factory=dict)

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Count a batch's rows in."""
        self.questions += len(rows)
        for r in rows:
            self.failed += r["answer_failed"] is not None
            for k, v in r["seconds"].items():
                self.seconds[k] = self.seconds.get(k, 0.0) + v
            for k, v in r["tokens"].items():
                self.tokens[k] = self.tokens.get(k, 0) + v


HELD_PART_BYTES = 64 * 2**20
"""Parts up to this size in all are decoded once and held for the merge's later walks; larger
runs are read again, one part at a time."""


def merge_parts(out: Path, n_batches: int) -> RunTotals:
    """Write results.parquet and results.jsonl from every batch's part, in order, holding one
    part at a time (all of them when they are small; the JSON lines parts are copied as they
    are); returns the rows' totals."""
    totals, walks = RunTotals(), 0
    paths = [committed_part(out, b) for b in range(n_batches)]
    small = sum(p.stat().st_size for p in paths if p is not None) <= HELD_PART_BYTES
    held: list[list[dict[str, Any]]] = []

    def parts() -> Iterator[list[dict[str, Any]]]:
        nonlocal walks
        walks += 1
        if walks > 1 and small:
            yield from held
            return
        for b in range(n_batches):
            rows = read_part(out, b)
            if walks == 1:
                totals.add(rows)
                if small:
                    held.append(rows)
            yield rows

    replace_with(out / "results.parquet", lambda tmp: write_results(tmp, parts))
    replace_with(out / "results.jsonl", lambda tmp: _join_parts(out, n_batches, tmp))
    return totals


def _join_parts(out: Path, n_batches: int, path: Path) -> None:
    """The batches' parts one after another as JSON lines into `path`."""
    with path.open("wb") as fh:
        for b in range(n_batches):
            part = committed_part(out, b) or part_path(out, b)
            if part.suffix == OLDER_PART:
                write_lines(fh, read_part(out, b))
            else:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, fh)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as a JSON lines file."""
    with path.open("wb") as fh:
        write_lines(fh, rows)


def write_lines(fh: BinaryIO, rows: list[dict[str, Any]]) -> None:
    """`rows` as JSON lines, each encoded and written as it comes (a batch's text is never one
    string: a single non-ASCII character would widen all of it to four bytes a character)."""
    for row in rows:
        fh.write(json.dumps(row, ensure_ascii=False).encode())
        fh.write(b"\n")


def spent_seconds(out: Path, n_batches: int, this_process: float) -> float:
    """Wall seconds every process spent on the run: each batch's, summed over its tries (a
    batch of an older run folder without its seconds file counts this process's share)."""
    spent = [read_seconds(part_path(out, b, ".seconds.json")) for b in range(n_batches)]
    total = sum(x for x in spent if x is not None)
    return max(total, this_process) if any(x is None for x in spent) else total
