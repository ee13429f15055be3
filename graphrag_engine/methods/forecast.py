"""`query --dry-run`: what a query run would ask the LLM, stage by stage.

The dry run runs the method's retrieval with an LLM front that counts prompts and sends
nothing; its usage ledger gives each stage's prompts and prompt tokens. Completions are each
stage's budget (an upper bound); price and time follow from the config's prices and the
model's measured rates (graphrag_engine.models.rates). Stages whose prompts are built from
earlier answers cannot be counted that way: a method's config may declare them
(`unseen_stages()`: stage, most prompts per question, budget), and they get an upper-bound row.
"""

from __future__ import annotations

from typing import Any

from graphrag_engine.config import QueryConfig
from graphrag_engine.models.forecast import StageForecast, forecast_lines, price, usage_forecast
from graphrag_engine.stages import stage as structured_stage


def query_forecast_lines(label: str, summary: dict[str, Any], cfg: QueryConfig) -> list[str]:
    """`query --dry-run`'s lines for one method: each LLM stage its retrieval would ask, then
    the answers (prompts, tokens, completions at their budget, price, time where measured)."""

    def budget(name: str) -> int | None:
        if name == "answer":
            return cfg.generation.max_tokens
        try:
            return structured_stage(name).max_tokens()
        except KeyError:
            return None

    counted = usage_forecast(summary["llm"], budget, cfg.models.llm)
    counted += _unseen_stages(cfg, counted)
    rows = [r.as_dict() for r in counted]
    lines = [f"dry run {label}:"]
    lines += forecast_lines(rows, label, "nothing was sent or written")
    if rows:
        lines.append(
            "  not counted: re-asks, and stages whose prompts are built from earlier answers "
            "(a dry run's answers are empty) unless a row above bounds them (ROGRAG's later "
            "logic-form steps are not)"
        )
    return lines


def _unseen_stages(cfg: QueryConfig, counted: list[StageForecast]) -> list[StageForecast]:
    """Upper-bound rows for the stages the method declares a dry run cannot count (their
    prompts come from earlier answers), sized by the answer stage's prompts."""
    declared = getattr(cfg.options, "unseen_stages", None)
    answer = next((r for r in counted if r.stage == "answer"), None)
    if declared is None or answer is None or not answer.prompts:
        return []
    seen = {r.stage for r in counted}
    rows = []
    for stage, per_question, cap in declared():
        if stage in seen:
            continue
        n = per_question * answer.prompts
        mean = answer.prompt_tokens / answer.prompts
        row = StageForecast(
            stage, n, round(n * mean), n * cap,
            f"upper bound, not counted by a dry run (its prompts come from earlier answers): "
            f"at most {per_question} per question, prompt tokens at the answer prompts' mean "
            f"{mean:.0f}; completions: max_tokens {cap}",
            model=answer.model,
        )  # fmt: skip
        row.cost = price(cfg.models.llm, row.prompt_tokens, row.completion_tokens)
        rows.append(row)
    return rows
