"""Answer and retrieval metrics against hand-worked cases and scipy references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from graphrag_engine.eval.metrics import (
    accuracy,
    bootstrap_ci,
    entity_prf,
    exact_match,
    hit_at_1,
    hit_at_k,
    normalize_answer,
    paired_test,
    recall_at_k,
    token_f1,
)


def test_normalisation_follows_squad() -> None:
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a pear") == "apple pear"


def test_exact_match_f1_accuracy() -> None:
    assert exact_match("the Stanley", ["Stanley"]) == 1.0
    assert exact_match("Stanley, ND", ["Stanley"]) == 0.0
    # 1 shared token of 2 predicted and 1 gold: P = 0.5, R = 1, F1 = 2/3
    assert token_f1("Stanley city", ["Stanley"]) == pytest.approx(2 / 3)
    assert token_f1("Paris", ["London", "paris"]) == 1.0
    assert token_f1("", ["x"]) == 0.0
    assert accuracy("It is Stanley, North Dakota.", ["Stanley"]) == 1.0
    assert accuracy("Stanleyville", ["Stanley"]) == 0.0  # whole tokens only
    assert hit_at_1(["jamaican english", "x"], ["Jamaican English"]) == 1.0
    assert hit_at_1([], ["a"]) == 0.0


def test_recall_and_hit_at_k() -> None:
    ranked = ["a", "x", "a", "b", "y", "c"]
    gold = ["a", "b", "c"]
    assert recall_at_k(ranked, gold, 1) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, gold, 3) == pytest.approx(2 / 3)  # duplicates do not take a slot
    assert recall_at_k(ranked, gold, 5) == 1.0
    assert hit_at_k(ranked, gold, 1) == 1.0 and hit_at_k(["x"], gold, 1) == 0.0
    assert math.isnan(recall_at_k(ranked, [], 2))


def test_entity_prf() -> None:
    m = entity_prf(
        ["Jamaica", "Jamaican English", "Kingston", "English"], ["Jamaican English", "Patois"]
    )
    assert m["precision"] == 0.25 and m["recall"] == 0.5 and m["hit"] == 1.0
    assert m["f1"] == pytest.approx(2 * 0.25 * 0.5 / 0.75)


def test_bootstrap_ci_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    x = rng.binomial(1, 0.4, size=300).astype(float)
    mean, lo, hi = bootstrap_ci(x, n_boot=4000)
    ref = stats.bootstrap((x,), np.mean, n_resamples=4000, method="percentile", random_state=1)
    assert mean == pytest.approx(x.mean())
    assert lo == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert hi == pytest.approx(ref.confidence_interval.high, abs=0.01)
    # NaN rows (questions without gold) are left out, not counted as zero
    assert bootstrap_ci([1.0, float("nan"), 0.0])[0] == 0.5


def test_paired_test_matches_scipy_permutation() -> None:
    rng = np.random.default_rng(7)
    a = rng.binomial(1, 0.5, size=200).astype(float)
    b = np.where(rng.random(200) < 0.15, 1.0, a)  # b improves on a for some questions
    ours = paired_test(a, b)
    ref = stats.permutation_test(
        (a, b),
        lambda x, y: np.mean(y - x),
        permutation_type="samples",
        n_resamples=10000,
        random_state=0,
    )
    assert ours["mean_diff"] == pytest.approx(np.mean(b - a))
    assert ours["p_value"] == pytest.approx(ref.pvalue, abs=0.01)
    assert ours["ci_low"] > 0
    same = paired_test(a, a)
    assert same["mean_diff"] == 0 and same["p_value"] == 1.0


def test_kbqa_and_entity_metrics_in_reports() -> None:
    from graphrag_engine.eval.report import score_rows, split_answers
    from graphrag_engine.results import decode_row

    assert split_answers("Jamaican English, Jamaican Creole\n") == [
        "Jamaican English",
        "Jamaican Creole",
    ]
    row = {
        "answer": "jamaican english; patois",
        "gold_answers": ["Jamaican English"],
        "kind": "kbqa",
        "supporting_ids": None,
        "retrieved_ids": [],
        "tokens": "{}",
        "seconds": '{"ppr": 0.5}',
        "extras": '{"retrieved_entities": ["Jamaica", "Jamaican English"]}',
    }
    s = score_rows([decode_row(row)], [1])  # a row as files before typed columns held it
    assert s["hr@1"] == [1.0]
    assert (
        s["entity_precision"] == [0.5] and s["entity_recall"] == [1.0] and s["entity_hit"] == [1.0]
    )
    assert s["seconds"] == [0.5] and "recall@1" not in s


def test_context_fits_the_token_budget() -> None:
    from graphrag_engine.retrieve.answer import answer_prompts, clean_answer, fit_sections
    from graphrag_engine.retrieve.types import Section

    def fit(items: list[list[str]], counts: list[list[int]], budget: int, whole=()) -> list:
        sections = [Section(it, whole=i in whole) for i, it in enumerate(items)]
        return [s.items for s in fit_sections(sections, counts, budget)]

    assert fit([["a", "b", "c"]], [[100, 100, 100]], 250) == [["a", "b"]]
    assert fit([["long"]], [[5000]], 100) == [["long"]]  # the best passage always goes in
    # sections: items are cut from the end; a whole section is kept entire or dropped, and
    # nothing after a cut comes back
    two = [["a", "b"], ["c", "d"]]
    assert fit(two, [[10, 10], [10, 10]], 35) == [["a", "b"], ["c"]]
    assert fit(two, [[10, 10], [10, 10]], 35, whole={1}) == [["a", "b"]]
    assert fit(two, [[10, 30], [1, 1]], 35) == [["a"]]
    assert fit(two, [[10, 10], [5, 5]], 35, whole={1}) == [["a", "b"], ["c", "d"]]
    (p,) = answer_prompts(["Q?"], [["T1\nx", "T2\ny"]])
    assert "[1] T1" in p[1]["content"] and "[2] T2" in p[1]["content"]
    (p,) = answer_prompts(["Q?"], [None])
    assert "Passages" not in p[1]["content"]
    assert clean_answer("Answer: Stanley\nbecause ...") == "Stanley"
