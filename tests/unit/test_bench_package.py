"""bench/ is a package: each bench runs as `python -m bench.<name>`, keeps its figures in
bench/results/ through write_result, and docs/benchmarks/ is generated from those files."""

from __future__ import annotations

import ast
import json
import re

import pytest

from bench import common, headline, tables
from tests.paths import REPO

HELPERS = ("__init__", "common", "method_runs", "tables", "headline", "llm_free", "gpu_carry")
"""bench modules that measure nothing themselves: shared pieces and the GPU machine's packer."""
TOOLS = {"lego_finetune": "trains LEGO's fine-tuned scorers; retrieve/scoring.py sends users here"}
"""Benches kept for what they make, not for a page: each with why."""
BENCHES = sorted(p for p in (REPO / "bench").glob("*.py") if p.stem not in HELPERS)
MAX_MODULES, MAX_LINES = 25, 300
"""The bench folder's budget: about 20 modules a newcomer can read, none longer than this."""


def test_the_bench_folder_stays_within_its_budget() -> None:
    """At most MAX_MODULES modules of at most MAX_LINES lines; answered experiments are retired
    (their results kept, their answers in docs/measurements.md), not left beside the benches."""
    modules = sorted((REPO / "bench").glob("*.py"))
    assert len(modules) <= MAX_MODULES, [m.stem for m in modules]
    long = {m.name: n for m in modules if (n := len(m.read_text().splitlines())) > MAX_LINES}
    assert not long, f"bench modules over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("path", BENCHES, ids=lambda p: p.stem)
def test_each_bench_backs_a_page(path) -> None:
    """A bench's results are in bench/results/ (so a page of docs/benchmarks/ shows them), or
    it is a tool kept for what it makes."""
    written = {json.loads(r.read_text())["bench"] for r in common.RESULTS.glob("*.json")}
    assert path.stem in written or path.stem in TOOLS, f"{path.name}: no result, no page"


def test_retired_benches_are_listed_with_their_answers() -> None:
    """Every result whose bench module is gone names that bench in the retired list."""
    retired_list = (REPO / "docs" / "measurements.md").read_text().split("## Retired benches")[1]
    retired_list = retired_list.split("\n## ")[0]
    for r in common.RESULTS.glob("*.json"):
        bench = json.loads(r.read_text())["bench"]
        if not (REPO / "bench" / f"{bench}.py").exists():
            assert f"| `{bench}` |" in retired_list, f"{bench} is retired without its answer"


@pytest.mark.parametrize("path", BENCHES, ids=lambda p: p.stem)
def test_each_bench_has_a_main_and_writes_its_result(path) -> None:
    tree = ast.parse(path.read_text())
    mains = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "write_result"
    ]
    assert mains, f"{path.name}: no main()"
    assert calls, f"{path.name}: never calls write_result, so its figures reach no results file"
    assert all(
        isinstance(c.args[0], ast.Constant) and c.args[0].value == path.stem for c in calls
    ), f"{path.name}: write_result's bench name must be the module's name"


def test_benches_share_one_definition_of_data_questions_and_work() -> None:
    """No bench spells out the data folder, a table of the dev question files or a work
    folder of its own: bench.common holds them."""
    own_table = re.compile(r"^(QUESTIONS|SETS) = \{\s*\"", re.M)
    for path in BENCHES:
        text = path.read_text()
        assert not own_table.search(text), f"{path.name} lists the dev question files itself"
        for own in ('"shared" / "data"', '"/tmp/graphrag-'):
            assert own not in text, f"{path.name} spells out {own} itself; use bench.common"


def test_write_result_keeps_command_commit_date_machine(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    path = common.write_result("demo_bench", {"rows": [{"a": 1, "b": 0.5}], "n": 3}, tag="t")
    rec = json.loads(path.read_text())
    assert path.name == "demo_bench-t.json"
    assert rec["bench"] == "demo_bench" and rec["tag"] == "t"
    assert rec["command"].startswith("python -m bench.demo_bench")
    assert re.fullmatch(r"[0-9a-f]{40}", rec["commit"]), "the exact commit, not a short name"
    assert rec["date"] and rec["machine"]["cores"] >= 1
    assert rec["figures"] == {"rows": [{"a": 1, "b": 0.5}], "n": 3}
    page = tables.render_all(tmp_path)["demo_bench.md"]
    assert "python -m bench.demo_bench" in page and "| a | b |" in page and "| 1 | 0.5 |" in page


def test_generated_benchmark_pages_are_current() -> None:
    """`python -m bench.tables --check`: every page matches the results it is written from."""
    assert tables.stale() == [], "run `python -m bench.tables`"


def test_a_stale_page_is_reported(tmp_path) -> None:
    results, docs = tmp_path / "results", tmp_path / "docs"
    results.mkdir()
    (results / "x.json").write_text(
        json.dumps(
            {"bench": "x", "tag": "", "command": "c", "commit": "k", "date": "d",
             "machine": {"cpu": "cpu", "cores": 2}, "figures": {"n": 1}}
        )
    )  # fmt: skip
    assert set(tables.stale(docs, results)) == {"x.md", "README.md"}
    docs.mkdir()
    for name, text in tables.render_all(results).items():
        (docs / name).write_text(text)
    assert tables.stale(docs, results) == []
    (docs / "x.md").write_text("edited by hand\n")
    assert tables.stale(docs, results) == ["x.md"]


def test_readme_headline_is_current() -> None:
    """The README's headline tables are what bench/results/ gives (`python -m bench.tables`)."""
    text = headline.README.read_text()
    assert headline.START in text and headline.END in text
    assert headline.readme_with_headline(text) == text, "run `python -m bench.tables`"


def test_a_result_from_uncommitted_code_says_so_and_fails_the_check(tmp_path, monkeypatch) -> None:
    """write_result names the files that differ from the commit; edits to results and docs do
    not count; bench.tables' check lists the result until it is re-run from a commit."""
    status = " M graphrag_engine/query/run.py\n M bench/results/x.json\n M docs/a.md\n"
    head = "a" * 40 + "\n"
    monkeypatch.setattr(common, "_git", lambda *a: head if a[0] == "rev-parse" else status)
    monkeypatch.delenv("GRAPHRAG_BENCH_COMMIT", raising=False)
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    rec = json.loads(common.write_result("demo_bench", {"n": 1}).read_text())
    assert rec["commit"] == "a" * 40 and rec["uncommitted"] == ["graphrag_engine/query/run.py"]
    assert tables.unstamped(tmp_path) == ["demo_bench.json"]
    assert "uncommitted code changes" in tables.render_all(tmp_path)["demo_bench.md"]
    monkeypatch.setattr(
        common, "_git", lambda *a: head if a[0] == "rev-parse" else " M docs/a.md\n"
    )
    common.write_result("demo_bench", {"n": 1})
    assert tables.unstamped(tmp_path) == []


def test_every_committed_result_names_the_code_that_wrote_it() -> None:
    """No result in bench/results/ was written from uncommitted code (or says `-dirty`), and
    each is as its bench wrote it (no key added by hand, its seal intact)."""
    assert tables.unstamped() == []
    assert tables.edited() == []


def test_text_graph_changes_pair_rows_of_the_same_set_and_method(tmp_path, monkeypatch) -> None:
    """`--against TAG`: each default-index row beside the earlier result's row of its set and
    method; rows of the other index, or with no earlier row, are left out."""
    from bench import text_graph

    def row(index: str, method: str, r2: float, r5: float) -> dict:
        return {"set": "musique", "index": index, "method": method, "R@2": r2, "R@5": r5}

    then = [row("sentences", "naive", 0.4, 0.5), row("sentences", "hipporag", 0.41, 0.62)]
    earlier = {"commit": "2759370a5431f01f", "figures": {"recall": then}}
    (tmp_path / "text_graph-defaults.json").write_text(json.dumps(earlier))
    monkeypatch.setattr(text_graph, "RESULTS", tmp_path)
    now = [
        row("before", "naive", 0.1, 0.2),
        row("sentences", "naive", 0.4, 0.5),
        row("sentences", "hipporag", 0.43, 0.615),
        row("sentences", "linearrag", 0.5, 0.6),
    ]
    got = text_graph.changes(now, "defaults")
    assert [(r["method"], r["R@2 change"], r["R@5 change"]) for r in got] == [
        ("naive", 0.0, 0.0),
        ("hipporag", 0.02, -0.005),
    ]
    assert got[1]["R@5 then"] == 0.62 and got[1]["R@5 now"] == 0.615
    assert got[0]["commit_then"] == "2759370a5431"
