"""What a query run's `results.parquet` holds, and reading it back as plain rows.

One row per question. Typed columns, no JSON strings:

* `tokens`: map<string, int64>, LLM tokens this question spent per stage;
* `seconds`: map<string, float64>, wall seconds per stage (the batch's, split evenly);
* `answer_failed`: string, why the answer prompt failed after every retry (null when it did not);
* `extras`: struct, what the method shows of its work per question (plan, keywords, entities),
  its fields inferred over the whole run; null-typed for a method that records none.

`read_rows` also reads results written before these columns were typed (JSON strings).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_engine.errors import BadInputError

log = logging.getLogger(__name__)

_BASE = [
    ("qid", pa.string()),
    ("question", pa.string()),
    ("method", pa.string()),
    ("answer", pa.string()),
    ("retrieved_ids", pa.list_(pa.string())),
    ("retrieved_chunk_ids", pa.list_(pa.string())),
    ("retrieved_scores", pa.list_(pa.float32())),
    ("context_ids", pa.list_(pa.string())),
    ("context_text", pa.list_(pa.string())),
    ("gold_answers", pa.list_(pa.string())),
    ("supporting_ids", pa.list_(pa.string())),
    ("qtype", pa.string()),
    ("kind", pa.string()),
    ("tokens", pa.map_(pa.string(), pa.int64())),
    ("seconds", pa.map_(pa.string(), pa.float64())),
    ("answer_failed", pa.string()),
]


def results_table(rows: list[dict[str, Any]]) -> pa.Table:
    """A whole run's decoded rows as the typed results table."""
    extras = [r["extras"] for r in rows]
    try:
        column = pa.array(extras)
        if pa.types.is_struct(column.type) and column.type.num_fields == 0:
            column = pa.nulls(len(rows))  # Parquet cannot store a struct without fields
        elif _empty_struct_inside(column.type):
            raise pa.ArrowTypeError("a field that is always {} has no type Parquet can store")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        # a method whose extras change type between questions: kept whole, typed as JSON
        log.warning(f"warning: extras kept as JSON ({str(exc)[:120]})")
        column = pa.array([json.dumps(e) for e in extras], type=pa.json_())
    base = pa.Table.from_pylist(
        [{k: r[k] for k, _ in _BASE} for r in rows], schema=pa.schema(_BASE)
    )
    return base.append_column("extras", column)


def _empty_struct_inside(t: pa.DataType) -> bool:
    """Whether a struct without fields sits anywhere inside `t`."""
    if pa.types.is_struct(t):
        return t.num_fields == 0 or any(_empty_struct_inside(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _empty_struct_inside(t.value_type)
    return False


def decode_row(row: dict[str, Any]) -> dict[str, Any]:
    """A results row with tokens / seconds / extras as dicts, whatever file wrote it.

    Map columns arrive as (key, value) pairs, older files' as JSON strings. In the typed file
    every question's extras carry every field the run's extras have (null where a question's
    method did not set it): read them with `.get`."""
    out = dict(row)
    for name in ("tokens", "seconds", "extras"):
        value = out.get(name)
        if isinstance(value, str):
            value = json.loads(value)
        elif isinstance(value, list):
            value = dict(value)
        out[name] = dict(value or {})
    if out.get("answer_failed") is None:  # older files kept it in extras
        out["answer_failed"] = out["extras"].pop("answer_failed", None)
    return out


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a results (or checkpoint) Parquet file, decoded."""
    return [decode_row(r) for r in pq.read_table(path).to_pylist()]


SCORED = {
    "qid": "string",
    "answer": "string",
    "retrieved_chunk_ids": "list<string>",
    "gold_answers": "list<string>",
    "supporting_ids": "list<string>",
}
"""The columns evaluation scores, with their types (a column of nulls passes as any type)."""


def _is(t: pa.DataType, want: str) -> bool:
    if pa.types.is_null(t):
        return True
    if want == "string":
        return pa.types.is_string(t) or pa.types.is_large_string(t)
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and _is(t.value_type, "string")


def check_results_schema(schema: pa.Schema, path: str | Path) -> None:
    """Refuse a Parquet file that is not a run's results: a scored column missing or of
    another type (BadInputError naming the file and the column)."""
    for name, want in SCORED.items():
        if name not in schema.names:
            raise BadInputError(
                f"{path}: column '{name}' missing; this is not a query run's results.parquet "
                "(give the folder `graphrag-engine query --out` wrote)"
            )
        if not _is(schema.field(name).type, want):
            raise BadInputError(
                f"{path}: column '{name}' is {schema.field(name).type}, a results file holds "
                f"{want}; give the folder `graphrag-engine query --out` wrote"
            )
