"""SIGTERM during `index` unwinds as Ctrl-C does: exit 143 with one line saying so, the
staging folder removed, the caches closed (no SQLite WAL left), the index as it was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.paths import REPO


def test_sigterm_during_index_cleans_staging_and_closes_the_caches(shared_data, tmp_path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    with (shared_data / "musique_corpus.jsonl").open() as src, corpus.open("w") as out:
        for i, line in enumerate(src):
            if i == 3000:
                break
            out.write(line)
    index = tmp_path / "index"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRAPHRAG_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "graphrag_engine.cli", "index", str(corpus), "--out", str(index)]
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list(index.glob(".staging-*")) or not list(index.glob("*.sqlite")):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "no staging folder appeared"
        time.sleep(0.2)
    time.sleep(2.0)  # well inside the build: chunks staged, embedding under way
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err.strip().splitlines()[-1]
    assert not list(index.glob(".staging-*")), "the staging folder was left"
    assert not list(index.glob("*-wal")), "an SQLite WAL was left: a cache was not closed"
    assert not (index / "manifest.json").exists() or json.loads(
        (index / "manifest.json").read_text()
    )
