"""ROGRAG's logic-form operators over the answers of earlier steps, in plain Python.

A retrieval step's answer is text; these operators read values from it (graphrag_engine/retrieve/
values.py) and compute: compare two values, the difference or sum of numbers and dates,
count and union of item lists, and filter items by a value threshold. Every operator returns
an `Outcome` whose text goes into the history; one that cannot compute (a value that does not
parse, units that do not match) says so instead of guessing. Model text is never evaluated.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Literal

from graphrag_engine.methods.rograg.values import (
    compare_dates,
    compare_quantities,
    parse_date,
    parse_quantity,
)

Relation = Literal["greater", "less", "earlier", "later", "equal"]
RELATIONS: tuple[Relation, ...] = ("greater", "less", "earlier", "later", "equal")
_SPLIT = re.compile(r"\s*(?:,|;|\band\b|\bor\b|\n)\s*", re.I)


@dataclass(frozen=True)
class Outcome:
    """One step's result: the text the history shows, the items of a list result, and whether
    the operator could compute at all."""

    text: str
    items: tuple[str, ...] = ()
    ok: bool = True


def failed(why: str) -> Outcome:
    """An operator that could not compute, and why (the history says so)."""
    return Outcome(f"cannot compute: {why}", ok=False)


def split_items(text: str) -> list[str]:
    """A list answer ("A, B and C") as its items, in order, each once."""
    items = [x.strip(" .") for x in _SPLIT.split(text)]
    return list(dict.fromkeys(x for x in items if x))


def _order(a: str, b: str, relation: Relation) -> int | None:
    """-1 / 0 / 1 for a against b, read as dates for earlier/later (and for equal when both
    are dates), as quantities otherwise; None when they cannot be compared."""
    da, db = parse_date(a), parse_date(b)
    if relation in ("earlier", "later") or (relation == "equal" and da and db):
        return compare_dates(da, db) if da and db else None
    qa, qb = parse_quantity(a), parse_quantity(b)
    return compare_quantities(qa, qb) if qa and qb else None


def compare(labels: tuple[str, str], values: tuple[str, str], relation: Relation) -> Outcome:
    """Which of two labelled values satisfies `relation`: the winner's label for greater /
    less / earlier / later, "yes" or "no" for equal (values that parse as neither dates nor
    numbers are equal when their texts are, case aside)."""
    if relation not in RELATIONS:
        return failed(f"unknown relation {relation!r}")
    order = _order(*values, relation)
    if relation == "equal":
        if order is None and not (parse_date(values[0]) or parse_quantity(values[0])):
            same = values[0].strip().lower() == values[1].strip().lower()
            return Outcome("yes" if same else "no")
        return (
            Outcome("yes" if order == 0 else "no")
            if order is not None
            else failed(f"{values[0]!r} and {values[1]!r} are not comparable")
        )
    if order is None:
        return failed(f"{values[0]!r} and {values[1]!r} are not comparable as {relation}")
    if order == 0:
        return Outcome(f"neither: {labels[0]} and {labels[1]} are equal")
    first = order < 0 if relation in ("less", "earlier") else order > 0
    return Outcome(labels[0] if first else labels[1])


def difference(a: str, b: str) -> Outcome:
    """|a - b|: of two quantities in one unit, or of two dates in years (or days when both
    are known to the day)."""
    da, db = parse_date(a), parse_date(b)
    if da and db:
        if da.precision == db.precision == "day":
            days = abs(
                (dt.date(da.year, da.month, da.day) - dt.date(db.year, db.month, db.day)).days
            )
            return Outcome(f"{days} days")
        return Outcome(f"{abs(da.year - db.year)} years")
    qa, qb = parse_quantity(a), parse_quantity(b)
    if not (qa and qb):
        return failed(f"{a!r} or {b!r} holds no number")
    if qa.unit != qb.unit:
        return failed(f"units differ ({qa.unit or 'none'} vs {qb.unit or 'none'})")
    return Outcome(_number(abs(qa.amount - qb.amount), qa.unit))


def total(values: list[str]) -> Outcome:
    """The sum of quantities in one unit."""
    qs = [parse_quantity(v) for v in values]
    if not qs or any(q is None for q in qs):
        return failed("a value holds no number")
    units = {q.unit for q in qs}
    if len(units) > 1:
        return failed(f"units differ ({', '.join(sorted(u or 'none' for u in units))})")
    return Outcome(_number(sum(q.amount for q in qs), units.pop()))


def count(answer: str) -> Outcome:
    """How many items a list answer names."""
    items = split_items(answer)
    return Outcome(str(len(items)), tuple(items))


def union(answers: list[str]) -> Outcome:
    """The items of several list answers, each once, in order."""
    items = list(dict.fromkeys(x for a in answers for x in split_items(a)))
    return Outcome(", ".join(items), tuple(items))


def keep(items: list[str], values: list[str], relation: Relation, bound: str) -> Outcome:
    """The items whose value stands in `relation` to `bound` (e.g. released later than
    1990); items whose value does not parse are dropped and named."""
    kept, unknown = [], []
    for item, value in zip(items, values, strict=True):
        order = _order(value, bound, relation)
        if order is None:
            unknown.append(item)
        elif (
            (relation in ("greater", "later") and order > 0)
            or (relation in ("less", "earlier") and order < 0)
            or (relation == "equal" and order == 0)
        ):
            kept.append(item)
    text = ", ".join(kept) if kept else "none"
    if unknown:
        text += f" (no comparable value for {', '.join(unknown)})"
    return Outcome(text, tuple(kept))


def _number(amount: float, unit: str) -> str:
    text = f"{amount:,.6g}" if abs(amount) < 1e15 else f"{amount:.6g}"
    return f"{unit}{text}" if unit in ("$", "€", "£") else f"{text} {unit}".strip()
