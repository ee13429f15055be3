"""One JSONL line to one record, the same way for corpora and question files: UTF-8 checked
per line, a byte-order mark before the first record dropped, JSON escapes of lone surrogates
(text no file can hold) refused. Each failure is a ValueError whose message says what is wrong
at that line; the caller adds the file and line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

BOM = "\ufeff"
HUGE_NUMBER = (
    "holds a number of more than 4300 digits, which no id, count or score needs; write it as "
    "a string (in quotes) or leave it out"
)


def decode_line(raw: bytes) -> str:
    """A line's text; ValueError naming the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
            "save the file as UTF-8"
        ) from None


def parse_line(line: str, first: bool) -> Any:
    """The JSON value of one line (a leading BOM dropped on the first line)."""
    if first:
        line = line.removeprefix(BOM)
    try:
        value = json.loads(line)
        lone = "\\ud" in line.lower() and _has_lone_surrogate(value)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"not valid JSON ({exc.msg} at column {exc.colno}); each line must be one JSON object"
        ) from None
    except RecursionError:
        raise ValueError(
            "nested too deeply to read (lists or objects inside each other past Python's "
            "recursion limit); flatten the record"
        ) from None
    except ValueError as exc:  # Python refuses integers of more than 4300 digits
        raise ValueError(
            HUGE_NUMBER if "integer string conversion" in str(exc) else str(exc)
        ) from None
    if lone:
        raise ValueError(
            "holds a lone surrogate escape such as \\ud800, which is not text; "
            "fix the encoding where the file was written"
        )
    return value


def records(
    lines: Iterable[bytes], on_error: Callable[[int, str], None] | None = None
) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a binary JSONL stream. A bad line raises
    ValueError with the line number in front of what is wrong ("7: not valid JSON"), or, with
    `on_error`, is passed to it as (line number, what is wrong) and skipped."""
    for lineno, raw in enumerate(lines, 1):
        try:
            line = decode_line(raw)
            if not line.strip(BOM + " \t\r\n"):
                continue
            value = parse_line(line, first=lineno == 1)
        except ValueError as exc:
            if on_error is None:
                raise ValueError(f"{lineno}: {exc}") from None
            on_error(lineno, str(exc))
            continue
        yield lineno, value


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False
