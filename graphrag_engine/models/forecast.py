"""What an LLM stage would cost before it runs: the forecast row `--dry-run` prints, and its
price from the config's per-million-token prices."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from graphrag_engine.config import LLMConfig


@dataclass
class StageForecast:
    """One LLM stage's forecast (None where it cannot be made; `basis` says how or why)."""

    stage: str
    prompts: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    basis: str
    cost: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (manifest-style JSON)."""
        return asdict(self)


def price(cfg: LLMConfig, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    """Cost in the config's currency, when it has a price per million input/output tokens."""
    if prompt_tokens is None or cfg.price_input_per_million is None:
        return None
    out = cfg.price_output_per_million or 0.0
    return (prompt_tokens * cfg.price_input_per_million + (completion_tokens or 0) * out) / 1e6


def forecast_lines(rows: list[dict[str, Any]], what: str, nothing: str) -> list[str]:
    """The lines a dry run prints: one per stage, then the total of the stages forecast."""
    lines = []
    for r in rows:
        if r["prompts"] is None:
            lines.append(f"  {r['stage']}: {r['basis']}")
            continue
        cost = "" if r["cost"] is None else f", cost {r['cost']:.4f}"
        lines.append(
            f"  {r['stage']}: {r['prompts']} prompts, {r['prompt_tokens']} prompt tokens, "
            f"~{r['completion_tokens']} completion tokens{cost} ({r['basis']})"
        )
    known = [r for r in rows if r["prompts"] is not None]
    total = (
        f"{sum(r['prompts'] for r in known)} LLM prompts, "
        f"{sum(r['prompt_tokens'] for r in known)} prompt tokens, "
        f"~{sum(r['completion_tokens'] for r in known)} completion tokens"
    )
    costs = [r["cost"] for r in known if r["cost"] is not None]
    priced = f", cost {sum(costs):.4f}" if costs else ""
    lines.append(
        f"dry run: {what} would send {total if rows else 'no LLM prompts'}{priced}; {nothing}"
    )
    return lines
