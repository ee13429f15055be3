"""The tiers' time budgets are reported at the end of every run, as CI's output shows them."""

from __future__ import annotations

from tests import budget, conftest


def test_each_tier_reports_its_seconds_and_slowest_files_against_its_budget() -> None:
    phases = [
        ("tests/unit/test_a.py::t1", 1.0),
        ("tests/unit/test_a.py::t1", 0.5),
        ("tests/unit/test_b.py::t", 2.0),
        ("tests/integration/test_x.py::t", 900.0),
        ("tests/gpu/test_g.py::t", 400.0),
    ]
    by_file = budget.seconds_by_file(phases)
    assert by_file["tests/unit/test_a.py"] == 1.5 and by_file["tests/gpu/test_g.py"] == 400.0
    lines = budget.report_lines(by_file, wall_s=2000.0)  # two tiers: each judged on its tests
    assert lines[0] == "unit tier: 4 s of tests against its budget of 180 s"
    assert lines[1].split() == ["2.0", "s", "tests/unit/test_b.py"]  # slowest first
    over = lines.index(
        "OVER BUDGET: integration tier: 1,300 s of tests against its budget of 1,200 s"
    )
    assert lines[over + 1].endswith("tests/integration/test_x.py")


def test_a_tier_run_alone_is_judged_on_the_wall_clock() -> None:
    """On two workers the tests' seconds add up to more than the run took: the wall counts."""
    by_file = {"tests/integration/test_x.py": 1500.0, "tests/integration/test_y.py": 700.0}
    (head, *_) = budget.report_lines(by_file, wall_s=1150.0)
    assert head == "integration tier: 1,150 s wall (2,200 s of tests) against its budget of 1,200 s"
    (head, *_) = budget.report_lines(by_file, wall_s=1250.0)
    assert head.startswith("OVER BUDGET: integration tier: 1,250 s wall")


def test_only_tiers_that_ran_are_reported_and_the_list_is_cut() -> None:
    many = {f"tests/integration/test_{i}.py": float(i) for i in range(40)}
    lines = budget.report_lines(many)
    assert lines[0].startswith("integration tier") and len(lines) == 1 + budget.SLOWEST
    assert budget.report_lines({}) == []


def test_the_budgets_are_the_projects_and_the_report_is_wired_into_pytest() -> None:
    assert budget.BUDGET_S == {"unit": 180.0, "integration": 1200.0}
    assert callable(conftest.pytest_terminal_summary) and callable(
        conftest.pytest_runtest_logreport
    )
