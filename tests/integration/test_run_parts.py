"""What a query run keeps per batch: JSON lines parts that `results.jsonl` is made of, no
retrieval checkpoint where nothing costly would be lost, and parts of older engines read on
resume."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_engine.cli import main
from graphrag_engine.results import read_rows, results_table

ARGS = ["demo", "--method", "hipporag", "--retrieval-only", "--limit", "6", "--batch-size", "4"]


def _run(index: Path, out: Path) -> None:
    assert main(["query", str(index), *ARGS, "--out", str(out)]) == 0


def test_parts_are_the_lines_of_results_jsonl(demo_index: Path, tmp_path: Path) -> None:
    """Each batch's part holds its rows as JSON lines, the results are those lines in batch
    order, and the typed table holds the same rows; an LLM-free retrieval-only run writes no
    retrieval checkpoint (its part commits the batch right after retrieval)."""
    out = tmp_path / "run"
    _run(demo_index, out)
    parts = sorted((out / "parts").glob("*.jsonl"))
    assert [p.name for p in parts] == ["00000.jsonl", "00001.jsonl"]
    joined = b"".join(p.read_bytes() for p in parts)
    assert (out / "results.jsonl").read_bytes() == joined
    lines = [json.loads(line) for line in joined.splitlines()]
    assert [len(p.read_bytes().splitlines()) for p in parts] == [4, 2]
    typed = read_rows(out / "results.parquet")
    assert [r["qid"] for r in typed] == [r["qid"] for r in lines]
    for mine, theirs in zip(typed, lines, strict=True):
        assert mine["retrieved_chunk_ids"] == theirs["retrieved_chunk_ids"]
        assert mine["retrieved_scores"] == theirs["retrieved_scores"]  # float32 both ways
        assert mine["extras"]["query_entities"] == theirs["extras"]["query_entities"]
    assert not list((out / "parts").glob("*.retrieved.json"))


def test_an_older_engines_parquet_part_is_read_on_resume(demo_index: Path, tmp_path: Path) -> None:
    """A run folder whose first batch an older engine committed as Parquet (extras as JSON
    text) and whose second is not done is resumed: the first is not run again, the second is,
    and the results equal a fresh run's."""
    fresh, resumed = tmp_path / "fresh", tmp_path / "resumed"
    _run(demo_index, fresh)
    _run(demo_index, resumed)
    first = resumed / "parts" / "00000.jsonl"
    rows = [json.loads(line) for line in first.read_bytes().splitlines()]
    older = [{**r, "extras": json.dumps(r["extras"])} for r in rows]  # extras as JSON text
    typed = results_table(rows).schema
    schema = pa.schema(
        [pa.field("extras", pa.string()) if f.name == "extras" else f for f in typed]
    )
    pq.write_table(pa.Table.from_pylist(older, schema=schema), resumed / "parts" / "00000.parquet")
    first.unlink()
    (resumed / "parts" / "00001.jsonl").unlink()  # the second batch runs again, as JSON lines
    for name in ("results.parquet", "results.jsonl", "summary.json"):
        (resumed / name).unlink()
    _run(demo_index, resumed)
    summary = json.loads((resumed / "summary.json").read_text())
    assert summary["resumed_questions"] == 4
    assert (resumed / "parts" / "00000.parquet").exists()
    want = [json.loads(line) for line in (fresh / "results.jsonl").read_bytes().splitlines()]
    got = [json.loads(line) for line in (resumed / "results.jsonl").read_bytes().splitlines()]
    keep = ("qid", "retrieved_chunk_ids", "extras")
    assert [{k: r[k] for k in keep} for r in got] == [{k: r[k] for k in keep} for r in want]
    assert [r["qid"] for r in read_rows(resumed / "results.parquet")] == [r["qid"] for r in want]
