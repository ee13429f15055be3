"""One JSONL line to one record, the same way for corpora and question files: UTF-8 checked
per line, a byte-order mark before the first record dropped, JSON escapes of lone surrogates
(text no file can hold) refused. Each failure is a ValueError whose message says what is wrong
at that line; the caller adds the file and line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

BOM = "\ufeff"
HUGE_NUMBER = (
    "holds a number of more than 4300 digits, which no id, count or score needs; write it as "
    "a string (in quotes) or leave it out"
)


MAX_RECORD_MB = 32.0
"""Largest line a JSONL file may hold, in MiB (`ingest.max_record_mb` for corpora): parsing a
line holds it several times over, so a longer one is refused before it is read whole."""
_STEP = 1 << 20


def bounded_lines(fh: IO[bytes], max_mb: float = MAX_RECORD_MB) -> Iterator[bytes | int]:
    """The lines of a binary stream; a line longer than `max_mb` MiB is read past in 1 MiB
    steps, never held, and given as its length in bytes (an int) for `records` to refuse."""
    limit = max(int(max_mb * _STEP), 1)
    while line := fh.readline(limit + 1):
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        size, line = len(line), b""  # let the first step go before reading the next
        while (rest := fh.readline(_STEP)) and not rest.endswith(b"\n"):
            size += len(rest)
        yield size + len(rest)


def too_long(size: int, max_mb: float, setting: str = "") -> str:
    """What is wrong with a line of `size` bytes, over `max_mb` MiB (`setting` raises it)."""
    raise_it = f"raise {setting} or " if setting else ""
    return (
        f"a line of {size / _STEP:.1f} MiB, over the {max_mb:g} MiB a record may take here; "
        f"{raise_it}split the record"
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
    lines: IO[bytes] | Iterable[bytes | int],
    on_error: Callable[[int, str], None] | None = None,
    max_mb: float = MAX_RECORD_MB,
    setting: str = "",
) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a binary JSONL stream: a file (read
    through `bounded_lines`) or lines already bounded at `max_mb` (an int: a line too long to
    read, which `setting` may allow). A bad line raises ValueError with the line number in
    front of what is wrong ("7: not valid JSON"), or, with `on_error`, is passed to it as
    (line number, what is wrong) and skipped."""
    if hasattr(lines, "readline"):
        lines = bounded_lines(lines, max_mb)
    for lineno, raw in enumerate(lines, 1):
        try:
            if isinstance(raw, int):
                raise ValueError(too_long(raw, max_mb, setting))
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
