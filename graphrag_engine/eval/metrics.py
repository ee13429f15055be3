"""Answer, retrieval and subgraph metrics, bootstrap confidence intervals and paired tests.

Answer normalisation follows the SQuAD / HotpotQA evaluation script: lower case, punctuation
and the articles a/an/the removed, whitespace collapsed.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation or articles, single spaces."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer or alias."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in golds))


def _f1(prediction: str, gold: str) -> float:
    p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """Best token-level F1 of the prediction against any gold answer or alias."""
    return max((_f1(prediction, g) for g in golds), default=0.0)


def accuracy(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when a normalised gold answer or alias occurs in the normalised prediction
    (the "accuracy" of Clue-RAG and HippoRAG's follow-ups)."""
    p = f" {normalize_answer(prediction)} "
    return float(any(f" {normalize_answer(g)} " in p for g in golds if normalize_answer(g)))


def hit_at_1(predictions: Sequence[str], golds: Sequence[str]) -> float:
    """KBQA HR@1: the first predicted answer matches a gold answer (after normalisation)."""
    if not predictions:
        return 0.0
    first = normalize_answer(predictions[0])
    return float(any(first == normalize_answer(g) for g in golds))


def recall_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of the gold passages found in the top k (duplicates in `ranked` ignored)."""
    if not gold:
        return float("nan")
    top = set(_dedup(ranked)[:k])
    return len(top & set(gold)) / len(set(gold))


def hit_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """1.0 when at least one gold passage is in the top k."""
    if not gold:
        return float("nan")
    return float(bool(set(_dedup(ranked)[:k]) & set(gold)))


def _dedup(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]


def entity_prf(retrieved: Sequence[str], answers: Sequence[str]) -> dict[str, float]:
    """LEGO-GraphRAG's subgraph metrics: precision, recall, F1 and hit ratio of the answer
    entities among the retrieved entities (names compared after normalisation)."""
    got = {normalize_answer(x) for x in retrieved}
    gold = {normalize_answer(a) for a in answers}
    if not gold:
        return {"precision": float("nan"), "recall": float("nan"), "f1": float("nan"), "hit": 0.0}
    found = len(got & gold)
    precision = found / len(got) if got else 0.0
    recall = found / len(gold)
    f1 = 2 * precision * recall / (precision + recall) if found else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "hit": float(found > 0)}


RESAMPLE_CELLS = 1 << 22
"""Values a resampling step draws at a time (32 MiB of them): the draws of 2,000 resamples
of a million questions come in steps, the same draws in the same order as one step."""


def _draws(n_draws: int, size: int) -> list[int]:
    """How many resamples of `size` values each step draws, so a step holds about
    `RESAMPLE_CELLS` values."""
    step = max(1, RESAMPLE_CELLS // size)
    return [min(step, n_draws - i) for i in range(0, n_draws, step)]


def bootstrap_ci(
    values: Sequence[float], n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Mean and percentile bootstrap confidence interval over questions (NaNs dropped)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [x[rng.integers(0, x.size, size=(k, x.size))].mean(axis=1) for k in _draws(n_boot, x.size)]
    )
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(x.mean()), float(lo), float(hi)


def paired_test(
    a: Sequence[float], b: Sequence[float], n_boot: int = 10000, seed: int = 0
) -> dict[str, float]:
    """Paired difference b - a over the same questions: mean, 95% bootstrap CI and a two-sided
    p-value from a paired sign-flip permutation test (exact enough at 10,000 draws)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    keep = ~(np.isnan(x) | np.isnan(y))
    d = y[keep] - x[keep]
    if d.size == 0:
        nan = float("nan")
        return {"n": 0, "mean_diff": nan, "ci_low": nan, "ci_high": nan, "p_value": nan}
    mean, lo, hi = bootstrap_ci(d, n_boot=n_boot, seed=seed)
    rng = np.random.default_rng(seed + 1)
    null = np.abs(
        np.concatenate(
            [
                (rng.choice([-1.0, 1.0], size=(k, d.size)) * d).mean(axis=1)
                for k in _draws(n_boot, d.size)
            ]
        )
    )
    p = (1 + np.count_nonzero(null >= abs(d.mean()) - 1e-12)) / (n_boot + 1)
    return {"n": int(d.size), "mean_diff": mean, "ci_low": lo, "ci_high": hi, "p_value": float(p)}
