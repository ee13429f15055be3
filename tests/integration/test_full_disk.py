"""A full device is a clear, documented exit (74), never an internal error: every writing
command on a real 20 MB tmpfs filled to the brim says what it was writing, leaves nothing
half-written, and what was committed before stays readable."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from graphrag_engine.store import open_index


@pytest.fixture
def small_disk(tmp_path: Path):
    """A real 20 MB tmpfs (mounting needs root, as CI and this machine have)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mnt)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt: Path, leave: int = 0) -> None:
    """Write a filler file until at most `leave` bytes are free."""
    with (mnt / "filler").open("ab") as fh:
        while True:
            st = os.statvfs(mnt)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                return
            try:
                fh.write(b"\0" * min(1 << 20, max(free - leave, 4096)))
                fh.flush()
            except OSError:
                return


def assert_storage_exit(proc, mnt: Path) -> None:
    assert proc.returncode == 74, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert "no space left on the device while writing" in lines[-1] and str(mnt) in lines[-1]
    assert "nothing committed was lost" in lines[-1] and "internal error" not in lines[-1]


def test_every_writing_command_exits_74_on_a_full_disk(
    run_cli, demo_index, small_disk, tmp_path
) -> None:
    idx = small_disk / "idx"
    assert run_cli("index", "--demo", "--out", str(idx)).returncode == 0
    before = open_index(idx).manifest
    run = tmp_path / "run"
    assert run_cli("query", str(demo_index), "demo", "--method", "bm25", "--out", str(run),
                   "--limit", "5").returncode == 0  # fmt: skip
    fill(small_disk)

    proc = run_cli("index", str(demo_index.parent / "missing"), "--demo", "--out", str(idx))
    assert proc.returncode in (2, 74)  # a corpus path that does not exist is bad input first
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"title": "T", "text": "Ada Lovelace wrote the first program."}\n')
    assert_storage_exit(run_cli("index", str(corpus), "--out", str(idx)), small_disk)
    assert_storage_exit(run_cli("reindex", str(corpus), "--out", str(idx)), small_disk)
    assert open_index(idx).manifest == before, "the committed index changed"
    assert not list(idx.glob(".staging-*"))

    assert_storage_exit(
        run_cli(
            "query",
            str(demo_index),
            "demo",
            "--method",
            "bm25",
            "--limit",
            "5",
            "--out",
            str(small_disk / "run"),
        ),  # fmt: skip
        small_disk,
    )
    report = small_disk / "report"
    assert_storage_exit(run_cli("eval", str(run), "--out", str(report)), small_disk)
    assert not report.exists() or not any(report.iterdir()), "eval left a partial report"
    assert not list(small_disk.glob(".report.staging-*"))
    exported = small_disk / "graphml"
    assert_storage_exit(
        run_cli("export", str(demo_index), "--format", "graphml", "--out", str(exported)),
        small_disk,
    )
    assert not exported.exists()
