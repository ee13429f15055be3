"""A result's stamp names every code file that differs from its commit: changed tracked
files and new untracked ones alike, but not the pages and results a bench writes."""

from __future__ import annotations

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
