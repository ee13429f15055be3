"""The range of every numeric setting: checked when a config is read (file:line, exit 2) and
written beside each key in the config references.

A config dataclass lists its narrower ranges in a `RANGES` class attribute (field name ->
range); every other int or float field may not be negative. A range reads as written in the
references: ">= 1", "> 0", "[0, 1]", "(0, 1]", "[-1, 1]" or "any". Beyond its range, no
whole-number setting may pass INT_MAX and no setting may be infinite or NaN, so a value too
large for the code that uses it is refused when the config is read, before any work.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from functools import cache
from typing import Any

from graphrag_engine.errors import ConfigError

DEFAULT = ">= 0"
INT_MAX = 2**31 - 1
"""The largest whole-number setting (seeds, sizes and counts all fit a 32-bit integer)."""
INTERVAL = re.compile(r"([\[(])\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*([\])])")
BOUND = re.compile(r"(>=|>)\s*(-?[\d.]+)")


@cache
def numeric_fields(cls: type) -> frozenset[str]:
    """Names of the fields of dataclass `cls` that hold an int or a float (optional or not)."""
    hints = typing.get_type_hints(cls)
    names = set()
    for f in dataclasses.fields(cls):
        args = typing.get_args(hints[f.name]) or (hints[f.name],)
        if any(a in (int, float) for a in args):
            names.add(f.name)
    return frozenset(names)


def range_of(cls: type, name: str) -> str | None:
    """The range of field `name` of config dataclass `cls`; None when it is not numeric."""
    if name not in numeric_fields(cls):
        return None
    return getattr(cls, "RANGES", {}).get(name, DEFAULT)


def within(value: float, spec: str) -> bool:
    """Whether `value` lies in the range `spec` (NaN never does)."""
    if isinstance(value, float) and math.isnan(value):
        return False
    if spec == "any":
        return True
    if m := INTERVAL.fullmatch(spec):
        lo, hi = float(m[2]), float(m[3])
        above = value > lo if m[1] == "(" else value >= lo
        below = value < hi if m[4] == ")" else value <= hi
        return above and below
    if m := BOUND.fullmatch(spec):
        return value > float(m[2]) if m[1] == ">" else value >= float(m[2])
    raise ValueError(f"range {spec!r}: write >= N, > N, [lo, hi], (lo, hi] or any")


def out_of_range(cls: type, name: str, value: Any) -> str | None:
    """The range `value` of field `name` breaks, or None when it is in range (or not a number)."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    spec = range_of(cls, name)
    if spec is None:
        return None
    if not within(value, spec):
        return spec
    if not math.isfinite(value):
        return f"{spec} and finite"
    if isinstance(value, int) and abs(value) > INT_MAX:
        return f"{spec} and <= {INT_MAX}"
    return None


def check_ranges(obj: Any, where: str, prefix: str = "") -> None:
    """Raise a ConfigError for the first numeric field of dataclass `obj` (nested) out of its
    range: for configs built in code, where no YAML line can be named."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            name = getattr(obj, "method", f.name) if f.metadata.get("section") else f.name
            check_ranges(value, where, f"{prefix}{name}.")
        elif spec := out_of_range(type(obj), f.name, value):
            raise ConfigError(f"{where}: {prefix}{f.name} must be {spec}, got {value}")
