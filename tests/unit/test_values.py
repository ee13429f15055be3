"""Values for ROGRAG's operators on real data: dates against dateutil's parser, numbers with
units, and 2WikiMultiHopQA comparison questions decided from their gold evidence values."""

from __future__ import annotations

import pytest

from graphrag_engine.methods.rograg.values import (
    compare_dates,
    compare_quantities,
    parse_date,
    parse_dates,
    parse_quantity,
)


def test_dates_in_every_form_and_code_like_text_is_only_text() -> None:
    assert [(d.year, d.month, d.day, d.precision) for d in parse_dates(
        "born 12 March 1990 in Paris; died May 3rd, 2001; moved 2004-07-09; retired June 2010"
    )] == [(1990, 3, 12, "day"), (2001, 5, 3, "day"), (2004, 7, 9, "day"), (2010, 6, 1, "month")]  # fmt: skip
    assert parse_date("a 1988 film").precision == "year"
    assert parse_date("__import__('os').system('echo 1999')").year == 1999  # a year in a string
    assert parse_date("__import__('os')") is None and parse_quantity("__import__('os')") is None
    assert compare_dates(parse_date("1990"), parse_date("March 1990")) is None  # undecided
    assert compare_dates(parse_date("1989"), parse_date("March 1990")) == -1
    assert compare_dates(parse_date("2 November 1932"), parse_date("July 23, 1968")) == -1


def test_numbers_with_scale_words_and_units() -> None:
    assert (
        parse_quantity("3.5 km").amount == pytest.approx(3500)
        and parse_quantity("3.5 km").unit == "m"
    )
    assert parse_quantity("1,234,567 people").amount == 1234567
    assert parse_quantity("$1.2 million budget") == parse_quantity("$1,200,000")
    assert parse_quantity("about 150 pounds").amount == pytest.approx(68.04, abs=0.01)
    assert compare_quantities(parse_quantity("6 ft"), parse_quantity("1.9 m")) == -1
    assert compare_quantities(parse_quantity("6 ft"), parse_quantity("80 kg")) is None
