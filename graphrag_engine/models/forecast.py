"""What an LLM stage would cost before it runs: the forecast row `--dry-run` prints, and its
price from the config's per-million-token prices."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from graphrag_engine.config import LLMConfig
from graphrag_engine.models.rates import Rates, calibrate, measured

log = logging.getLogger(__name__)


@dataclass
class StageForecast:
    """One LLM stage's forecast (None where it cannot be made; `basis` says how or why)."""

    stage: str
    prompts: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    basis: str
    cost: float | None = None
    model: str | None = None
    """The model id whose measured rates turn the tokens into time (None: no LLM)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (manifest-style JSON)."""
        return asdict(self)


def price(cfg: LLMConfig, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    """Cost in the config's currency, when it has a price per million input/output tokens."""
    if prompt_tokens is None or cfg.price_input_per_million is None:
        return None
    out = cfg.price_output_per_million or 0.0
    return (prompt_tokens * cfg.price_input_per_million + (completion_tokens or 0) * out) / 1e6


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def calibrator(cfg: LLMConfig, mode: str = "auto") -> Callable[[str], Rates | None] | None:
    """What a dry run calls to measure a model that has no recorded calls (None: it may not).
    `mode` is `--calibrate`: auto for models in this process (transformers, vllm), yes for
    servers too, no for never."""
    if mode == "no" or cfg.backend == "none" or (mode == "auto" and cfg.backend == "openai"):
        return None

    def measure(model_id: str) -> Rates | None:
        from graphrag_engine.models import make_backend  # a backend's libraries load late

        backend = make_backend(cfg)
        if backend.model_id != model_id:
            return None
        log.info(f"calibrating {model_id}: three short calls to measure its speed")
        rates = calibrate(backend, max(1, min(cfg.batch_size, 4)))
        if rates is not None:
            rates.basis = f"calibrated now; {rates.basis}"
        return rates

    return measure


def _rates(model_id: str, measure: Callable[[str], Rates | None] | None) -> Rates | None:
    """The model's recorded rates, else a calibration's when the dry run may run one."""
    rates = measured(model_id)
    return rates if rates is not None or measure is None else measure(model_id)


def _no_rates(model_id: str, may_measure: bool) -> str:
    how = (
        "its calibration failed"
        if may_measure
        else "`--calibrate yes` measures it with three short calls (servers are not called "
        "unless asked)"
    )
    return (
        f"time: no measured calls of {model_id} yet, so no time is forecast ({how}); any real "
        "run of an LLM stage with it records its speed"
    )


def forecast_lines(
    rows: list[dict[str, Any]],
    what: str,
    nothing: str,
    measure: Callable[[str], Rates | None] | None = None,
) -> list[str]:
    """The lines a dry run prints: one per stage (with its time from the model's measured
    rates, calibrated now by `measure` where none are recorded), the basis of the times, then
    the total of the stages forecast."""
    lines = []
    models = dict.fromkeys(r["model"] for r in rows if r.get("model") and r["prompts"] is not None)
    rates_of = {m: _rates(m, measure) for m in models}  # the rates file is read once per model
    bases = {
        m: rates.basis if rates is not None else _no_rates(m, measure is not None)
        for m, rates in rates_of.items()
    }
    seconds: list[float] = []
    for r in rows:
        if r["prompts"] is None:
            lines.append(f"  {r['stage']}: {r['basis']}")
            continue
        cost = "" if r["cost"] is None else f", cost {r['cost']:.4f}"
        rates = rates_of.get(r.get("model"))
        took = ""
        if rates is not None:
            s = rates.seconds(r["prompt_tokens"], r["completion_tokens"])
            seconds.append(s)
            took = f", ~{_minutes(s)}"
        lines.append(
            f"  {r['stage']}: {r['prompts']} prompts, {r['prompt_tokens']} prompt tokens, "
            f"~{r['completion_tokens']} completion tokens{cost}{took} ({r['basis']})"
        )
    lines += [f"  {basis}" for basis in bases.values()]
    known = [r for r in rows if r["prompts"] is not None]
    total = (
        f"{sum(r['prompts'] for r in known)} LLM prompts, "
        f"{sum(r['prompt_tokens'] for r in known)} prompt tokens, "
        f"~{sum(r['completion_tokens'] for r in known)} completion tokens"
    )
    costs = [r["cost"] for r in known if r["cost"] is not None]
    priced = f", cost {sum(costs):.4f}" if costs else ""
    if seconds:
        partial = "" if len(seconds) == len(known) else " for the stages with measured rates"
        priced += f", ~{_minutes(sum(seconds))}{partial}"
    unknown = len(rows) - len(known)
    if unknown:  # never "0 prompts" for a config whose stages could not be counted
        total = f"{total} and the prompts of {unknown} stage(s) not forecast above"
    if any(r is not None and r.basis.startswith("calibrated now") for r in rates_of.values()):
        nothing += " (apart from the calibration calls)"
    lines.append(
        f"dry run: {what} would send {total if rows else 'no LLM prompts'}{priced}; {nothing}"
    )
    return lines


def usage_forecast(
    llm: dict[str, dict[str, Any]], budget: Callable[[str], int | None], cfg: LLMConfig
) -> list[StageForecast]:
    """A dry run's stages from its usage ledger ({"stage/model": usage}): prompts and prompt
    tokens as counted, completions at each stage's `budget` (an upper bound), price and model."""
    rows = []
    for key, usage in llm.items():
        stage, model = key.split("/", 1)
        prompts = int(usage.get("dry_run_prompts", 0))
        cap = budget(stage)
        how = (
            f"completions: max_tokens {cap} (an upper bound)"
            if cap
            else "completions: no budget known, counted as 0"
        )
        row = StageForecast(
            stage, prompts, int(usage.get("prompt_tokens", 0)), prompts * (cap or 0),
            f"prompts counted by a dry run of the retrieval; {how}", model=model,
        )  # fmt: skip
        row.cost = price(cfg, row.prompt_tokens, row.completion_tokens)
        rows.append(row)
    return rows
