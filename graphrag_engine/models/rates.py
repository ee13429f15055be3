"""How fast an LLM answers, measured: every real backend call adds one observation (prompt
tokens, completion tokens, seconds) per model to a small JSON file, and dry runs turn token
forecasts into time with the rates fitted on them.

The fit is seconds = prompt_tokens / prompt_rate + completion_tokens / completion_rate by least
squares over the model's recent calls (prompt-heavy and completion-heavy stages tell the two
apart); when they cannot be told apart (one call, or calls of one shape) one blended rate over
all tokens is used, and the basis says so. The file is a cache, not an output: it lives in
the user's cache folder (GRAPHRAG_RATES_FILE overrides it), and a failure to write it is
ignored.

A model with no recorded calls can be measured on the spot (`calibrate`): dry runs do so for
backends that run in this process, and for servers when asked (`--calibrate yes`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphrag_engine.models.base import GenParams
from graphrag_engine.models.calibration import CALIBRATION_TEXTS
from graphrag_engine.store.staging import write_atomic

KEEP = 200
"""Observations kept per model (the newest)."""


def rates_file() -> Path:
    """Where the measured rates are kept."""
    if os.environ.get("GRAPHRAG_RATES_FILE"):
        return Path(os.environ["GRAPHRAG_RATES_FILE"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "graphrag-engine" / "llm_rates.json"


def _load() -> dict[str, list[list[float]]]:
    try:
        data = json.loads(rates_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record(model_id: str, prompt_tokens: int, completion_tokens: int, seconds: float) -> None:
    """Add one real call's tokens and wall seconds to the model's observations."""
    if seconds <= 0 or prompt_tokens + completion_tokens <= 0:
        return
    data = _load()
    rows = [r for r in data.get(model_id, []) if isinstance(r, list) and len(r) == 4]
    rows.append([prompt_tokens, completion_tokens, round(seconds, 4), round(time.time())])
    data[model_id] = rows[-KEEP:]
    path = rates_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data).encode("utf-8"))
    except OSError:
        pass  # a cache: an unwritable home costs only the next forecast's time column


@dataclass
class Rates:
    """A model's measured speed: seconds per prompt and per completion token."""

    per_prompt_token: float
    per_completion_token: float
    basis: str

    def seconds(self, prompt_tokens: float, completion_tokens: float) -> float:
        """Expected wall seconds of that many tokens."""
        return prompt_tokens * self.per_prompt_token + completion_tokens * self.per_completion_token


def measured(model_id: str) -> Rates | None:
    """The model's rates fitted on its recorded calls, or None when it has none."""
    rows = np.asarray(_load().get(model_id, []), dtype=np.float64).reshape(-1, 4)
    if not len(rows):
        return None
    p, c, t = rows[:, 0], rows[:, 1], rows[:, 2]
    when = time.strftime("%Y-%m-%d", time.localtime(rows[:, 3].max()))
    shapes = np.c_[p, c]
    if len(rows) >= 2 and np.linalg.matrix_rank(shapes) == 2:
        (a, b), *_ = np.linalg.lstsq(shapes, t, rcond=None)
        if a >= 0 and b > 0:
            return Rates(
                a, b,
                f"time from {len(rows)} measured calls of {model_id} (newest {when}): "
                f"{_per_s(a)} prompt and {_per_s(b)} completion tokens/s",
            )  # fmt: skip
    blended = t.sum() / (p.sum() + c.sum())
    return Rates(
        blended, blended,
        f"time from {len(rows)} measured calls of {model_id} (newest {when}), one blended rate "
        f"of {_per_s(blended)} tokens/s (its calls do not separate prompt from completion speed)",
    )  # fmt: skip


def _per_s(seconds_per_token: float) -> str:
    return "inf" if seconds_per_token <= 0 else f"{1 / seconds_per_token:,.0f}"


CALIBRATION_BATCH = 4
"""Prompts per calibration call: a small batch, as real stages send batches."""


def calibrate(backend: Any, batch: int = CALIBRATION_BATCH) -> Rates | None:
    """Measure a backend's speed with three short calls and record them: a warm-up (loads
    weights, not recorded), a prompt-heavy batch (long prompt, one completion token) and a
    completion-heavy batch (short prompt, 48 tokens), so the fit separates the two rates."""
    long_prompt = "Summarise in one word:\n\n" + "\n\n".join(CALIBRATION_TEXTS[:6])
    short = "Count from 1 to 60, separated by commas."
    backend.generate([short], GenParams(max_tokens=2))  # warm-up: weights, kernels, server
    for prompts, budget in (([long_prompt] * batch, 1), ([short] * batch, 48)):
        started = time.perf_counter()
        done = backend.generate(prompts, GenParams(max_tokens=budget))
        seconds = time.perf_counter() - started
        ok = [c for c in done if c.error is None]
        if not ok:
            return None  # the backend failed: no rate is better than a wrong one
        record(
            backend.model_id,
            sum(c.prompt_tokens for c in ok),
            sum(c.completion_tokens for c in ok),
            seconds,
        )
    return measured(backend.model_id)
