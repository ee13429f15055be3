"""`graphrag-engine eval`: report tables, CSV, plots, paired comparison, and the LLM judge on
the packaged SmolLM2."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrag_engine.cli import main
from graphrag_engine.eval.judge import VERDICT, win_rate_table, win_rates
from graphrag_engine.eval.ragas import STATEMENTS, USEFUL, support_schema
from graphrag_engine.models.structured import ParseError


def test_eval_of_an_unfinished_run_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["eval", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "no results.parquet" in capsys.readouterr().err


def test_verdict_parsing_and_position_bias_cancels() -> None:
    v = VERDICT.check({"Overall": {"Winner": "Answer 2"}, "Diversity": "Tie"})
    assert v["overall"] == "2" and v["diversity"] == "tie" and v["coherence"] is None
    with pytest.raises(ParseError):
        VERDICT.check({"diversity": {"winner": "Answer 1"}})
    # a judge that always prefers the first answer: each run wins once per order -> 50/50
    rows = [
        {"qid": "q", "run_a": "A", "run_b": "B", "order": o, "criterion": "overall", "verdict": v}
        for o, v in (("ab", "a"), ("ba", "b"))
    ]
    (w,) = win_rates(rows)
    assert w["win_a"] == 0.5 and w["win_b"] == 0.5 and w["tie"] == 0.0
    assert w["first_shown"] == 1.0 and w["consistent"] == 0.0  # ... and the table says why
    # a judge that prefers run A in both orders: no position bias, consistent
    fair = [{**r, "qid": "q2", "verdict": "a"} for r in rows]
    (w,) = win_rates(fair)
    assert w["win_a"] == 1.0 and w["first_shown"] == 0.5 and w["consistent"] == 1.0
    (w,) = win_rates(rows + fair)
    assert w["win_a"] == 0.75 and w["first_shown"] == 0.75 and w["consistent"] == 0.5
    # ... so the comparison is marked uninformative instead of reported as a 50% win rate
    assert not win_rates(rows)[0]["informative"] and win_rates(fair)[0]["informative"]
    table = "\n".join(win_rate_table(rows))
    assert "| uninformative (position bias 100.0%) | – |" in table and "| 50.0% |" not in table
    assert "| 100.0% | 0.0% |" in "\n".join(win_rate_table(fair))
    # a judge that always picks the second slot is as uninformative
    second = [{**r, "verdict": "b" if r["order"] == "ab" else "a"} for r in rows[:2]]
    assert win_rates(second)[0]["position_bias"] == 1.0
    assert not win_rates(second)[0]["informative"]
    (w,) = win_rates(rows + fair)
    assert w["position_bias"] == 0.75 and w["informative"]
    rows.append({**rows[0], "verdict": "unparsable"})
    assert win_rates(rows)[0]["unparsable"] == 1


def test_ragas_steps_declare_their_schemas() -> None:
    assert support_schema(3).validate({"verdicts": [1, 0, 1]}) == [1, 0, 1]
    for wrong in ({"verdicts": [1, 0]}, {"verdicts": [1, 0, 2]}, {"verdict": [1, 0, 1]}):
        with pytest.raises(ParseError):
            support_schema(3).validate(wrong)
    assert STATEMENTS.validate({"statements": [" The sky is blue. "]}) == ["The sky is blue."]
    with pytest.raises(ParseError):
        STATEMENTS.validate({"statements": []})
    assert USEFUL.validate({"verdict": 0}) == 0 and '"verdicts": [0 or 1' in (
        support_schema(2).describe()
    )


def test_plots_leave_out_runs_without_the_groups_metrics(tmp_path: Path) -> None:
    """A retrieval-only run gets no bar among the answer metrics; retrieval bars show both."""
    from graphrag_engine.eval.plots import metric_plots

    nan = float("nan")
    table = {
        "f1": {"ret": (nan, nan, nan, 0), "gen": (0.4, 0.3, 0.5, 10)},
        "recall@2": {"ret": (1.0, 1.0, 1.0, 10), "gen": (0.5, 0.4, 0.6, 10)},
    }
    plotted = metric_plots(tmp_path, ["ret", "gen"], ["f1", "recall@2"], table, [2])
    assert plotted == {"answers": ["gen"], "retrieval": ["ret", "gen"]}
    for png in ("answers.png", "retrieval.png", "recall_at_k.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
