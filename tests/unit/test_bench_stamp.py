"""A result's stamp names every code file that differs from its commit: changed tracked
files and new untracked ones alike, but not the pages and results a bench writes."""

from __future__ import annotations

import json
import subprocess

from bench import common


def _git(repo, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_untracked_and_changed_code_is_named(tmp_path, monkeypatch) -> None:
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    (repo / "bench" / "a.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("out/\n")
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.setattr(common, "REPO", repo)
    monkeypatch.delenv("GRAPHRAG_BENCH_COMMIT", raising=False)
    assert common.code_state()["uncommitted"] == []
    (repo / "bench" / "new.py").write_text("y = 2\n")  # a module not yet added
    (repo / "bench" / "a.py").write_text("x = 2\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "page.md").write_text("a page\n")
    (repo / "out").mkdir()
    (repo / "out" / "scratch.py").write_text("ignored\n")
    assert common.code_state()["uncommitted"] == ["bench/a.py", "bench/new.py"]


def test_seal_catches_a_hand_edit_and_a_provenance_note(tmp_path, monkeypatch) -> None:
    from bench import tables

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "code_state", lambda: {"commit": "a" * 40, "uncommitted": []})
    monkeypatch.setattr(common, "machine", lambda: {"cpu": "test"})
    monkeypatch.setattr("sys.argv", ["bench.x", "--n", "3"])
    path = common.write_result("x", {"recall": 0.5, "rows": [{"k": (1, 2)}], 3: "int key"})
    written = json.loads(path.read_text())
    assert written["seal"] == common.seal(written)
    assert tables.edited(tmp_path) == []

    hand = dict(written, figures=dict(written["figures"], recall=0.51))
    path.write_text(json.dumps(hand))
    assert tables.edited(tmp_path) == ["x.json"]

    noted = dict(written, provenance="re-stamped, not re-run")
    path.write_text(json.dumps(noted))
    assert tables.edited(tmp_path) == ["x.json"]

    legacy = {k: v for k, v in written.items() if k != "seal"}  # before seals: read as written
    path.write_text(json.dumps(legacy))
    assert tables.edited(tmp_path) == []
