"""A finished query run as a report reads it: its summary and question ids checked when it
is opened, its rows streamed a batch at a time, so a report over a million questions holds
one batch of rows per run (and a float per question and metric) rather than every row."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from graphrag_engine.errors import BadInputError
from graphrag_engine.results import check_results_schema, decode_row

READ_ROWS = 4096
"""Rows decoded at a time when a run is streamed."""

SUMMARY_FIELDS: dict[str, tuple[type, ...]] = {
    "label": (str,),
    "seconds": (int, float),
    "questions_per_s": (int, float, type(None)),
    "index_tokens": (int, float),
    "gold_in_index": (int, float, type(None)),
    "query_tokens_per_question": (dict,),
}
"""The summary.json fields a report reads, with the JSON types each may hold."""


@dataclasses.dataclass
class ResultRun:
    """One run folder's results: `keep` (None: all) names the questions a report scores when
    the runs it compares hold different question sets."""

    folder: Path
    label: str
    summary: dict[str, Any]
    qids: pa.Array
    keep: frozenset[str] | None = None

    @property
    def path(self) -> Path:
        return self.folder / "results.parquet"

    @property
    def n(self) -> int:
        """How many of its questions are scored."""
        return len(self.qids) if self.keep is None else len(self.keep)

    def batches(self, columns: Sequence[str] | None = None) -> Iterator[list[dict[str, Any]]]:
        """Its scored rows in order, decoded, a batch at a time (`columns`: only these)."""
        try:
            for batch in pq.ParquetFile(self.path, pre_buffer=False).iter_batches(
                READ_ROWS, columns=columns
            ):
                rows = [decode_row(r) for r in batch.to_pylist()]
                yield rows if self.keep is None else [r for r in rows if r["qid"] in self.keep]
        except (OSError, pa.ArrowException) as exc:
            raise _unreadable(self.path, exc) from None

    def rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Its first `limit` scored rows (None: all of them)."""
        out: list[dict[str, Any]] = []
        for rows in self.batches():
            out += rows
            if limit is not None and len(out) >= limit:
                return out[:limit]
        return out

    def positions(self, qids: set[str]) -> dict[str, tuple[int, dict[str, Any]]]:
        """Question id -> (its place among the scored rows, its row), for these questions."""
        found, j = {}, 0
        for rows in self.batches():
            for r in rows:
                if r["qid"] in qids:
                    found[r["qid"]] = (j, r)
                j += 1
        return found


def open_run(run: str | Path) -> ResultRun:
    """A finished query run, its summary checked and its question ids read (exit 2 when the
    run is unfinished, damaged or holds a question twice)."""
    run = Path(run)
    path = run / "results.parquet"
    if not path.exists():
        raise BadInputError(
            f"{run}: no results.parquet; finish the run with `graphrag-engine query ... --out {run}`"
        )
    summary = _summary(run)
    try:
        check_results_schema(pq.read_schema(path), path)
        qids = pq.read_table(path, columns=["qid"]).column("qid").combine_chunks()
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(path, exc) from None
    if len(pc.unique(qids)) < len(qids):
        seen: set[str] = set()
        for i, qid in enumerate(qids.to_pylist()):
            if qid in seen:
                raise BadInputError(
                    f"{path}: row {i + 1} repeats question {qid!r}, which would be scored "
                    "twice; a run holds each question once (run the query again into a new "
                    "folder)"
                )
            seen.add(qid)
    label = summary.get("label")
    return ResultRun(run, label if isinstance(label, str) and label else run.name, summary, qids)


def _unreadable(path: Path, exc: Exception) -> BadInputError:
    return BadInputError(
        f"{path}: not a readable results file ({str(exc)[:160]}); resume the run with the "
        "same `graphrag-engine query` command to write it again"
    )


def _summary(run: Path) -> dict[str, Any]:
    """The run's summary.json, its fields a report reads checked ({} when there is none)."""
    if not (run / "summary.json").exists():
        return {}
    try:
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInputError(
            f"{run}/summary.json: not a readable summary ({exc}); resume the run with the "
            "same `graphrag-engine query` command to write it again"
        ) from None
    if not isinstance(summary, dict):
        raise BadInputError(f"{run}/summary.json: not a JSON object; resume the run to rewrite it")
    check_summary(summary, run / "summary.json")
    return summary


def check_summary(summary: dict[str, Any], path: Path) -> None:
    """Refuse a summary.json field a report reads that holds another type (exit 2)."""
    for name, types_ in SUMMARY_FIELDS.items():
        if name not in summary:
            continue  # an older summary: the report shows what it lacks as unknown
        value = summary[name]
        if not isinstance(value, types_) or isinstance(value, bool):
            kinds = " or ".join("null" if t is type(None) else t.__name__ for t in types_)
            raise BadInputError(
                f"{path}: field '{name}' is {type(value).__name__}, expected {kinds}; resume "
                "the run with the same `graphrag-engine query` command to rewrite the summary"
            )
        if isinstance(value, dict):
            bad = [k for k, v in value.items() if not isinstance(v, int | float)]
            if bad:
                raise BadInputError(
                    f"{path}: field '{name}.{bad[0]}' is not a number; resume the run to "
                    "rewrite the summary"
                )


def common_runs(runs: list[ResultRun]) -> tuple[list[ResultRun], str | None]:
    """The runs cut to the questions (by id) that every run answered, and a note saying so
    when the question sets differ (None when they are the same); runs with no question in
    common are refused."""
    first = runs[0].qids
    same = all(
        len(r.qids) == len(first) and pc.all(pc.is_in(r.qids, value_set=first)).as_py()
        for r in runs[1:]
    )
    if same:
        return runs, None
    shared = first
    for r in runs[1:]:
        shared = shared.filter(pc.is_in(shared, value_set=r.qids))
    sizes = ", ".join(f"{r.label}: {len(r.qids)}" for r in runs)
    if not len(shared):
        raise BadInputError(
            f"eval: the runs share no question ({sizes} questions); evaluate runs over the same "
            "question file"
        )
    note = (
        f"The runs hold different question sets ({sizes} questions): every figure is over "
        f"the {len(shared)} questions common to all of them."
    )
    keep = frozenset(shared.to_pylist())
    return [dataclasses.replace(r, keep=keep) for r in runs], note


def run_flags(run: ResultRun) -> tuple[bool, bool]:
    """(whether any scored row has an answer, whether any names gold passages and any ranks
    passages): what `score_rows` decides per run, read from three columns."""
    answers = support = ranked = False
    for rows in run.batches(["qid", "answer", "supporting_ids", "retrieved_ids"]):
        answers = answers or any(r["answer"] is not None for r in rows)
        support = support or any(r["supporting_ids"] for r in rows)
        ranked = ranked or any(r["retrieved_ids"] for r in rows)
    return answers, support and ranked
