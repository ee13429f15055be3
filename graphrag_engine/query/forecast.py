"""`query --dry-run`: what a query run would ask the LLM, stage by stage.

The dry run runs the method's retrieval with an LLM front that counts prompts and sends
nothing; its usage ledger gives each stage's prompts and prompt tokens. Completions are each
stage's budget (an upper bound); price and time follow from the config's prices and the
model's measured rates (graphrag_engine.models.rates). Stages whose prompts are built from
earlier answers cannot be counted that way: a method's config may declare them
(`unseen_stages()`: stage, most prompts per question, budget (None: the answer's, for a
stage that writes the answers), optional note), and they get an upper-bound row.
"""

from __future__ import annotations

from typing import Any

from graphrag_engine.config.query import QueryConfig
from graphrag_engine.models.forecast import (
    StageForecast,
    calibrator,
    forecast_lines,
    price,
    usage_forecast,
)
from graphrag_engine.stages import stage as structured_stage


def query_forecast_lines(
    label: str, summary: dict[str, Any], cfg: QueryConfig, calibrate: str = "auto"
) -> list[str]:
    """`query --dry-run`'s lines for one method: each LLM stage its retrieval would ask, then
    the answers (prompts, tokens, completions at their budget, price, time where measured)."""

    def budget(name: str) -> int | None:
        if name in ("answer", "global_reduce", "drift_reduce"):
            return cfg.generation.max_tokens
        try:
            return structured_stage(name).max_tokens()
        except KeyError:
            return None

    counted = usage_forecast(summary["llm"], budget, cfg.models.llm)
    counted += _unseen_stages(cfg, counted, int(summary.get("questions") or 0))
    rows = [r.as_dict() for r in counted]
    lines = [f"dry run {label}:"]
    measure = calibrator(cfg.models.llm, calibrate)
    lines += forecast_lines(rows, label, "nothing was sent or written", measure)
    if rows:
        lines.append(
            "  not counted: re-asks, and stages whose prompts are built from earlier answers "
            "(a dry run's answers are empty) unless a row above bounds them"
        )
    return lines


def _unseen_stages(
    cfg: QueryConfig, counted: list[StageForecast], questions: int
) -> list[StageForecast]:
    """Upper-bound rows for the stages a dry run cannot count (their prompts come from earlier
    answers): those the method declares, and the answers when its dry run asked none (a
    verifier that saw empty contexts refused every question), sized by the question count."""
    if not questions or not counted:
        return []
    own = getattr(cfg.options, "unseen_stages", list)()
    declared = [
        (stage, n, cfg.generation.max_tokens if cap is None else cap, *note)
        for stage, n, cap, *note in own
    ]  # a budget of None is the answer's: that stage writes the answers
    writes_answers = any(cap is None for _, _, cap, *_ in own)
    if cfg.generation.enabled and not writes_answers:
        declared.append(
            ("answer", 1, cfg.generation.max_tokens, "the dry run's verdicts saw no context")
        )
    answer = next((r for r in counted if r.stage == "answer" and r.prompts), None)
    basis = answer or counted[0]
    if answer is not None:
        mean, of = answer.prompt_tokens / answer.prompts, "the answer prompts'"
    else:
        mean = sum(r.prompt_tokens or 0 for r in counted) / max(
            sum(r.prompts or 0 for r in counted), 1
        )
        of = "the counted prompts'"
    seen = {r.stage for r in counted}
    rows = []
    for stage, per_question, cap, *note in declared:
        if stage in seen:
            continue
        n = per_question * questions
        row = StageForecast(
            stage, n, round(n * mean), n * cap,
            f"upper bound, not counted by a dry run (its prompts come from earlier answers): "
            f"at most {per_question} per question{''.join(f' ({x})' for x in note)}, prompt "
            f"tokens at {of} mean {mean:.0f}; completions: max_tokens {cap}",
            model=basis.model,
        )  # fmt: skip
        row.cost = price(cfg.models.llm, row.prompt_tokens, row.completion_tokens)
        rows.append(row)
    return rows
