"""`eval --dry-run`: what the judge stages (pairwise verdicts, RAGAS) would send, before any
prompt is sent.

The judge's prompts follow from the runs' questions, answers, contexts and gold alone, so they
are built exactly as `eval` would build them and counted with the judge model's tokenizer,
through the LLM front in dry-run mode. Prompts whose answers the report folder's judge cache
already holds are not sent again and not counted; their measured mean completion stands in
for the rest, else `--judge-max-tokens` (an upper bound). RAGAS faithfulness asks about the
statements the first RAGAS step returns, so it is forecast only where those are cached.
Re-asks of answers that do not parse (up to `retries` more per prompt) are not forecast: the
line gives the bound; where the cache holds them, they are looked up like the first attempts.
Nothing is written: the cache is opened read-only, and no report file is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graphrag_engine.config import LLMConfig
from graphrag_engine.eval.judge import pairwise_judge
from graphrag_engine.eval.ragas import USEFUL_STAGE, ragas_scores
from graphrag_engine.models import make_backend
from graphrag_engine.models.cache import ResponseCache
from graphrag_engine.models.forecast import StageForecast, price
from graphrag_engine.models.llm import LLM


def forecast_judge(
    loaded: list[tuple[str, dict, list[dict[str, Any]]]],
    llm_cfg: LLMConfig,
    cache_path: Path,
    pairwise: bool,
    ragas: bool,
    limit: int | None,
    max_tokens: int,
    backend=None,
    retries: int = 2,
) -> list[StageForecast]:
    """Per judge stage the config turns on: prompts to send, their tokens, expected completions
    (`backend` replaces the one the config names, e.g. a model already loaded)."""
    cache = ResponseCache(cache_path, readonly=True) if cache_path.exists() else None
    backend = backend if backend is not None else make_backend(llm_cfg)
    llm = LLM(backend, cache=cache, dry_run=True)
    if pairwise:
        pairwise_judge(llm, loaded, limit, max_tokens, retries)
    if ragas:
        for _, _, rows in loaded:
            ragas_scores(llm, rows[:limit], max_tokens, retries)
    out = []
    for (stage, _), u in llm.ledger.by_key.items():
        budget = USEFUL_STAGE.max_tokens() if stage == "ragas_context_precision" else max_tokens
        if u.cached_calls:
            per = u.cached_completion_tokens / u.cached_calls
            how = f"completions: mean {per:.0f} tokens of the {u.cached_calls} cached answers"
        else:
            per, how = float(budget), f"completions: max_tokens {budget} (an upper bound)"
        sent = u.dry_run_prompts
        row = StageForecast(
            stage, sent, u.prompt_tokens, round(per * sent),
            f"{u.cached_calls} answers already in the judge cache are not sent; {how}; first "
            f"attempts only: an answer that does not parse is asked up to {retries} more times "
            f"(at most x{retries + 1})",
        )  # fmt: skip
        row.cost = price(llm_cfg, row.prompt_tokens, row.completion_tokens)
        row.model = backend.model_id  # its measured rates give the time
        out.append(row)
    stages = {r.stage for r in out}
    statements = next((r for r in out if r.stage == "ragas_statements"), None)
    if statements is not None and statements.prompts and "ragas_faithfulness" not in stages:
        out.append(
            StageForecast(
                "ragas_faithfulness", None, None, None,
                "not forecast: one prompt per answer whose statements parse, listing them; "
                "known only after ragas_statements returns",
            )
        )  # fmt: skip
    elif statements is not None and statements.prompts:
        row = next(r for r in out if r.stage == "ragas_faithfulness")
        row.basis += (
            f"; only the answers whose statements are cached: {statements.prompts} more "
            "follow the statements not yet asked"
        )
    return out
