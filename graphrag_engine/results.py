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
from collections.abc import Callable, Iterable
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
    extras = _storable(extras_type([r["extras"] for r in rows]))
    try:
        return _typed(rows, _warned(extras))
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a value the inferred type does not take
        return _typed(rows, _warned(None))


def write_results(path: Path, batches: Callable[[], Iterable[list[dict[str, Any]]]]) -> None:
    """The typed results table of every batch `batches()` yields, written to `path` a row group
    at a time: a first walk over the batches finds the extras' type of the whole run, a second
    writes them, so memory holds one row group whatever the run's length."""
    extras: pa.DataType | None = pa.null()
    for rows in batches():
        extras = _wider(extras, extras_type([r["extras"] for r in rows]))
    extras = _storable(extras)
    try:
        _write_batches(path, batches(), _warned(extras))
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a value the common type does not take
        _write_batches(path, batches(), _warned(None))


ROW_GROUP_ROWS, ROW_GROUP_BYTES = 65536, 64 * 2**20
"""A row group of results.parquet is written once the batches held reach either bound: groups
this large compress as well as one table would, and memory holds one group."""


def _write_batches(
    path: Path, batches: Iterable[list[dict[str, Any]]], extras: pa.DataType | None
) -> None:
    """The batches as row groups of `path` (see ROW_GROUP_ROWS), extras of type `extras`
    (None: JSON)."""
    writer, held = None, []
    try:
        for rows in batches:
            held.append(_typed(rows, extras))
            if writer is None:
                writer = pq.ParquetWriter(path, held[0].schema)
            if sum(t.num_rows for t in held) >= ROW_GROUP_ROWS or (
                sum(t.nbytes for t in held) >= ROW_GROUP_BYTES
            ):
                writer.write_table(pa.concat_tables(held), row_group_size=ROW_GROUP_ROWS * 2)
                held = []
        if held:
            writer.write_table(pa.concat_tables(held), row_group_size=ROW_GROUP_ROWS * 2)
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        pq.write_table(_typed([], extras), path)


def _warned(extras: pa.DataType | None) -> pa.DataType | None:
    """`extras`, with a warning when there is none and the run keeps its extras as JSON."""
    if extras is None:
        log.warning("warning: extras kept as JSON (their type changes between questions)")
    return extras


def extras_type(extras: list[Any]) -> pa.DataType | None:
    """The Arrow type Arrow infers for these extras (None: they change type between
    questions)."""
    try:
        return pa.array(extras).type
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _storable(t: pa.DataType | None) -> pa.DataType | None:
    """The extras' column type Parquet can store: null for a struct without fields, None
    (kept as JSON) when such a struct sits deeper."""
    if t is not None and pa.types.is_struct(t) and t.num_fields == 0:
        return pa.null()
    return None if t is None or _empty_struct_inside(t) else t


def _wider(a: pa.DataType | None, b: pa.DataType | None) -> pa.DataType | None:
    """One type that holds values of both (None: there is none)."""
    if a is None or b is None:
        return None
    try:
        both = [pa.schema([("extras", t)]) for t in (a, b)]
        return pa.unify_schemas(both, promote_options="permissive").field("extras").type
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _typed(rows: list[dict[str, Any]], extras: pa.DataType | None) -> pa.Table:
    """Rows as the typed table, their extras of type `extras` (None: as JSON text); a value
    that type does not take raises ArrowInvalid or ArrowTypeError."""
    values = [r["extras"] for r in rows]
    if extras is None:
        column = pa.array([json.dumps(e) for e in values], type=pa.json_())
    elif pa.types.is_null(extras):
        column = pa.nulls(len(rows))
    else:
        column = pa.array(values, extras)
    schema = pa.schema(_BASE)  # one array per column: far faster than from_pylist over dicts
    base = pa.Table.from_arrays(
        [pa.array([r[f.name] for r in rows], type=f.type) for f in schema], schema=schema
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
