"""Values read from text for ROGRAG's logic-form operators: numbers (thousands separators,
decimals, scale words, units converted to one base unit per dimension, currency and percent)
and dates (day, month or year precision, in the common English and ISO forms).

Model output is data: these functions only match text against fixed patterns and never
evaluate it, so an answer such as "__import__('os')" is a string with no value in it.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Literal

MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )  # fmt: skip
    for m in names
}
SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
UNITS = {  # name -> (base unit, factor)
    **dict.fromkeys(("mm", "millimetre", "millimetres", "millimeter", "millimeters"), ("m", 1e-3)),
    **dict.fromkeys(("cm", "centimetre", "centimetres", "centimeter", "centimeters"), ("m", 1e-2)),
    **dict.fromkeys(("m", "metre", "metres", "meter", "meters"), ("m", 1.0)),
    **dict.fromkeys(("km", "kilometre", "kilometres", "kilometer", "kilometers"), ("m", 1e3)),
    **dict.fromkeys(("ft", "foot", "feet"), ("m", 0.3048)),
    **dict.fromkeys(("in", "inch", "inches"), ("m", 0.0254)),
    **dict.fromkeys(("mi", "mile", "miles"), ("m", 1609.344)),
    **dict.fromkeys(("g", "gram", "grams"), ("kg", 1e-3)),
    **dict.fromkeys(("kg", "kilogram", "kilograms"), ("kg", 1.0)),
    **dict.fromkeys(("t", "tonne", "tonnes"), ("kg", 1e3)),
    **dict.fromkeys(("lb", "lbs", "pound", "pounds"), ("kg", 0.45359237)),
    **dict.fromkeys(("s", "sec", "second", "seconds"), ("s", 1.0)),
    **dict.fromkeys(("min", "minute", "minutes"), ("s", 60.0)),
    **dict.fromkeys(("h", "hr", "hour", "hours"), ("s", 3600.0)),
    **dict.fromkeys(("day", "days"), ("s", 86400.0)),
    **dict.fromkeys(("year", "years"), ("year", 1.0)),
    **dict.fromkeys(("km2", "km²", "square kilometres", "square kilometers"), ("m2", 1e6)),
    **dict.fromkeys(("%", "percent", "per cent"), ("%", 1.0)),
}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(\d{3,4})"
_DATE_FORMS = [  # (pattern, group order): day / month / year
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), "ymd"),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH})\.?,?\s+{_YEAR}\b", re.I), "dmy"),
    (re.compile(rf"\b({_MONTH})\.?\s+{_DAY},?\s+{_YEAR}\b", re.I), "mdy"),
    (re.compile(rf"\b({_MONTH})\.?,?\s+{_YEAR}\b", re.I), "my"),
    (re.compile(r"\b(1\d{3}|20\d{2})\b"), "y"),
]
_UNIT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
_NUMBER = re.compile(
    r"(?P<cur>[$€£])?\s*(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+)"
    rf"(?:\s*(?P<scale>{'|'.join(SCALE)}))?(?:\s*(?P<unit>{_UNIT})(?![\w]))?",
    re.I,
)

Precision = Literal["day", "month", "year"]


@dataclass(frozen=True)
class Date:
    """A calendar date known to `precision` (month and day are 1 where unknown)."""

    year: int
    month: int = 1
    day: int = 1
    precision: Precision = "day"

    def key(self, precision: Precision) -> tuple[int, ...]:
        """The date cut to `precision` (year; year, month; or year, month, day)."""
        return (self.year, self.month, self.day)[: ("year", "month", "day").index(precision) + 1]


@dataclass(frozen=True)
class Quantity:
    """A number in its dimension's base unit ("" when it has none), e.g. 3.5 km -> 3500 m."""

    amount: float
    unit: str = ""


def parse_dates(text: str) -> list[Date]:
    """Every date in `text` in reading order; where forms overlap, the longest match (so
    "12 March 1990" is one day-precision date, not also the year 1990)."""
    found: list[tuple[int, int, Date]] = []
    for pattern, order in _DATE_FORMS:
        for m in pattern.finditer(text):
            parts = dict(zip(order, m.groups(), strict=True))
            year, month = int(parts["y"]), _month(parts.get("m"))
            day = int(parts["d"]) if "d" in parts else 1
            try:
                dt.date(year, month or 1, day)
            except ValueError:
                continue
            precision: Precision = "day" if "d" in parts else "month" if month else "year"
            found.append((m.start(), m.end(), Date(year, month or 1, day, precision)))
    found.sort(key=lambda f: (f[0], -f[1]))
    out, end = [], -1
    for start, stop, date in found:
        if start >= end:
            out.append(date)
            end = stop
    return out


def parse_date(text: str) -> Date | None:
    """The first date in `text` (see `parse_dates`); None when there is none."""
    dates = parse_dates(text)
    return dates[0] if dates else None


def _month(text: str | None) -> int | None:
    if text is None:
        return None
    return int(text) if text.isdigit() else MONTHS.get(text.lower().rstrip("."))


def parse_quantity(text: str) -> Quantity | None:
    """The first number in `text` with its scale word and unit, in the unit's base; None
    when there is none."""
    m = _NUMBER.search(text)
    if m is None:
        return None
    amount = float(m["num"].replace(",", ""))
    if m["scale"]:
        amount *= SCALE[m["scale"].lower()]
    unit = ""
    if m["unit"]:
        unit, factor = UNITS[m["unit"].lower()]
        amount *= factor
    if m["cur"]:
        unit = m["cur"]
    return Quantity(amount, unit)


def compare_dates(a: Date, b: Date) -> int | None:
    """-1, 0 or 1 as a is before, on or after b, at the precision both have; None when they
    agree as far as the coarser one goes (1990 vs March 1990: undecided)."""
    order: list[Precision] = ["year", "month", "day"]
    common = order[min(order.index(a.precision), order.index(b.precision))]
    ka, kb = a.key(common), b.key(common)
    if ka != kb:
        return -1 if ka < kb else 1
    return 0 if a.precision == b.precision else None


def compare_quantities(a: Quantity, b: Quantity) -> int | None:
    """-1, 0 or 1 as a is less than, equal to or greater than b; None across units."""
    if a.unit and b.unit and a.unit != b.unit:
        return None
    return (a.amount > b.amount) - (a.amount < b.amount)
