"""Measured LLM rates: observations recorded per model, the two-rate fit, the blended fallback,
and the time column of a forecast."""

from __future__ import annotations

import pytest

from graphrag_engine.models import rates
from graphrag_engine.models.forecast import forecast_lines


@pytest.fixture
def rates_file(tmp_path, monkeypatch):
    path = tmp_path / "rates.json"
    monkeypatch.setenv("GRAPHRAG_RATES_FILE", str(path))
    return path


def test_two_shapes_of_calls_give_both_rates(rates_file) -> None:
    # 2 ms per prompt token, 50 ms per completion token
    for p, c in ((1000, 10), (200, 100), (500, 40)):
        rates.record("m", p, c, p * 0.002 + c * 0.05)
    fit = rates.measured("m")
    assert fit.per_prompt_token == pytest.approx(
        0.002
    ) and fit.per_completion_token == pytest.approx(0.05)
    assert (
        "3 measured calls of m" in fit.basis
        and "500 prompt and 20 completion tokens/s" in fit.basis
    )
    assert fit.seconds(1000, 100) == pytest.approx(7.0)
    assert rates.measured("other") is None


def test_one_shape_of_call_gives_one_blended_rate(rates_file) -> None:
    rates.record("m", 100, 10, 1.1)
    rates.record("m", 200, 20, 2.2)  # the same ratio: the two rates cannot be told apart
    fit = rates.measured("m")
    assert fit.per_prompt_token == fit.per_completion_token == pytest.approx(0.01)
    assert "one blended rate of 100 tokens/s" in fit.basis
    rates.record("m", 0, 0, 1.0)  # nothing sent: not an observation
    assert len(__import__("json").loads(rates_file.read_text())["m"]) == 2


def test_only_the_newest_calls_are_kept_and_a_bad_file_is_no_rate(rates_file) -> None:
    for i in range(rates.KEEP + 5):
        rates.record("m", 100 + i, 10, 1.0)
    assert len(__import__("json").loads(rates_file.read_text())["m"]) == rates.KEEP
    rates_file.write_text("{not json")
    assert rates.measured("m") is None
    rates.record("m", 10, 1, 0.5)  # a damaged cache is replaced, not an error
    assert rates.measured("m") is not None


def test_forecast_lines_give_time_where_rates_were_measured(rates_file) -> None:
    for p, c in ((1000, 10), (200, 100)):
        rates.record("fast", p, c, p * 0.001 + c * 0.01)
    rows = [
        {"stage": "a", "prompts": 10, "prompt_tokens": 60_000, "completion_tokens": 1000,
         "cost": None, "basis": "x", "model": "fast"},
        {"stage": "b", "prompts": 2, "prompt_tokens": 100, "completion_tokens": 10,
         "cost": None, "basis": "y", "model": "slow"},
    ]  # fmt: skip
    text = "\n".join(forecast_lines(rows, "the index", "nothing was sent"))
    assert "a: 10 prompts, 60000 prompt tokens, ~1000 completion tokens, ~70 s (x)" in text
    assert "time from 2 measured calls of fast" in text
    assert "no measured calls of slow yet" in text
    assert "~70 s for the stages with measured rates; nothing was sent" in text


def test_a_stage_that_cannot_be_counted_is_never_reported_as_zero_prompts() -> None:
    rows = [
        {"stage": "community_reports", "prompts": None, "prompt_tokens": None,
         "completion_tokens": None, "cost": None, "basis": "not forecast: why", "model": "m"},
    ]  # fmt: skip
    text = "\n".join(forecast_lines(rows, "the index", "nothing was sent"))
    assert "community_reports: not forecast: why" in text
    assert "the prompts of 1 stage(s) not forecast above" in text


def test_a_dry_run_calibrates_only_a_model_without_measured_calls(rates_file) -> None:
    """The measure callback runs for the unmeasured model only, its basis says so, and the
    total says calls were sent; which backends a dry run may calibrate follows --calibrate."""
    from graphrag_engine.config import LLMConfig
    from graphrag_engine.models.forecast import calibrator

    rates.record("known", 1000, 10, 1.0)
    asked = []

    def measure(model_id: str) -> rates.Rates:
        asked.append(model_id)
        return rates.Rates(0.001, 0.01, f"calibrated now; 2 calls of {model_id}")

    rows = [
        {"stage": s, "prompts": 1, "prompt_tokens": 1000, "completion_tokens": 100,
         "cost": None, "basis": "x", "model": m}
        for s, m in (("a", "known"), ("b", "new"))
    ]  # fmt: skip
    text = "\n".join(forecast_lines(rows, "the index", "nothing was sent", measure))
    assert asked == ["new"]
    assert "b: 1 prompts, 1000 prompt tokens, ~100 completion tokens, ~2 s" in text
    assert "nothing was sent (apart from the calibration calls)" in text
    server = LLMConfig(backend="openai", model="m", base_url="http://127.0.0.1:1/v1")
    assert calibrator(server, "auto") is None and calibrator(server, "yes") is not None
    assert calibrator(LLMConfig(backend="transformers"), "no") is None
    assert calibrator(LLMConfig(backend="none"), "yes") is None
    assert calibrator(LLMConfig(backend="transformers"), "auto") is not None
