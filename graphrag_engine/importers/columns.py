"""What a source table's columns must hold, checked before any row is read: each column a kind
(text, whole number, weight, list of texts), optional or not. A value of another kind is one
BadInputError naming the file, the row and the column, never an internal error later on."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from graphrag_engine.errors import BadInputError


class Kind(NamedTuple):
    """What a column holds: its name in a message, and the test of one value."""

    what: str
    holds: Callable[[Any], bool]


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


TEXT = Kind("text", lambda v: isinstance(v, str))
WHOLE = Kind("a whole number", _whole)
WEIGHT = Kind("a finite number >= 0", lambda v: _number(v) and v >= 0)
NUMBER = Kind("a finite number", _number)
TEXTS = Kind(
    "a list of texts",
    lambda v: isinstance(v, list | tuple) and all(isinstance(x, str) for x in v),
)
FIELD_CHARS = 10_000
"""The longest name or triple part an import takes (HippoRAG's own OpenIE of MuSiQue peaks at
a few hundred characters; a longer one is a broken extraction, refused before it is matched
against every chunk)."""
NAMES = Kind(
    f"a list of texts of at most {FIELD_CHARS} characters",
    lambda v: (
        isinstance(v, list | tuple) and all(isinstance(x, str) and len(x) <= FIELD_CHARS for x in v)
    ),
)
TRIPLES = Kind(
    f"a list of lists whose texts have at most {FIELD_CHARS} characters",
    lambda v: (
        isinstance(v, list)
        and all(
            isinstance(t, list) and all(not isinstance(x, str) or len(x) <= FIELD_CHARS for x in t)
            for t in v
        )
    ),
)
KEYS = Kind(
    "a list of texts or whole numbers",
    lambda v: isinstance(v, list) and all(isinstance(x, str) or _whole(x) for x in v),
)
KEY = Kind("a text or a whole number", lambda v: isinstance(v, str) or _whole(v))
RECORD = Kind("an object", lambda v: isinstance(v, Mapping))


def optional(kind: Kind) -> Kind:
    """`kind`, or no value (null)."""
    return Kind(f"{kind.what} or null", lambda v: v is None or kind.holds(v))


def check_columns(
    rows: Sequence[Any] | Mapping[str, Any],
    where: str,
    kinds: Mapping[str, Kind],
    fix: str,
    row_word: str = "row",
) -> None:
    """Every row (of a list, or the values of a keyed store) an object whose columns named in
    `kinds` hold their kind (a column a row lacks is left to the reader); else a BadInputError
    naming `where`, the row (its number or key) and the column, ending with `fix`."""
    pairs = (
        ((repr(k), v) for k, v in rows.items()) if isinstance(rows, Mapping) else enumerate(rows)
    )
    for i, row in pairs:
        if not isinstance(row, Mapping):
            raise BadInputError(f"{where}: {row_word} {i} is {_shown(row)}, not an object; {fix}")
        for column, kind in kinds.items():
            if column in row and not kind.holds(row[column]):
                raise BadInputError(
                    f"{where}: {row_word} {i}, column {column!r}: {kind.what} expected, got "
                    f"{_shown(row[column])}; {fix}"
                )


def number_text(text: str | None, where: str, fix: str, default: float = 1.0) -> float:
    """A weight written as text (GraphML keeps every attribute as text): a finite number >= 0,
    `default` where there is none, else a BadInputError naming `where`."""
    if text is None or str(text).strip() == "":
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise BadInputError(f"{where}: a finite number >= 0 expected, got {_shown(text)}; {fix}")
    return value


def _shown(value: Any) -> str:
    """A value as a message shows it: its type and at most 40 characters of it."""
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"
