"""Every method's index parts are checked before the first method of a run starts: a missing
part is one exit-2 line naming the method, the part and what provides it, and no run folder
of the methods before it is written."""

from __future__ import annotations


def test_a_missing_part_stops_a_multi_method_run_before_anything_runs(
    run_cli, demo_index, tmp_path
) -> None:
    out = tmp_path / "runs"
    proc = run_cli(
        "query", str(demo_index), "demo", "--method", "bm25", "--method", "graphrag_global",
        "--retrieval-only", "--llm-backend", "transformers", "--out", str(out), "--limit", "2",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "'graphrag_global'" in line and "community_reports" in line
    assert "communities.enabled" in line and "Nothing was run" in line
    assert not (out / "bm25").exists(), "bm25 ran before the check refused graphrag_global"
