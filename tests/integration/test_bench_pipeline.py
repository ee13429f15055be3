"""bench.gpu_pipeline's CPU path on a small slice of MuSiQue (the GPU path runs on a lent GPU
machine): one result file with index tokens/s per stage and every LLM-free method's q/s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.llm_free import METHODS
from tests.paths import REPO, SHARED_DATA


def test_pipeline_bench_on_cpu_writes_every_figure(tmp_path: Path) -> None:
    corpus = tmp_path / "slice.jsonl"
    with open(SHARED_DATA / "musique_corpus.jsonl", encoding="utf-8") as f:
        corpus.write_text("".join(line for _, line in zip(range(80), f, strict=False)))
    env = {**os.environ, "GRAPHRAG_BENCH_RESULTS": str(tmp_path / "results"), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "bench.gpu_pipeline", "--device", "cpu", "--corpus", str(corpus)]
    cmd += ["--questions", "8", "--work", str(tmp_path / "work"), "--tag", "t"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rec = json.loads((tmp_path / "results" / "gpu_pipeline-t.json").read_text())
    fig = rec["figures"]
    index = fig["index"]
    assert index["documents"] == 80 and index["tokens"] > 5000
    assert set(index["stage_seconds"]) >= {"ingest_chunk", "embed_chunks", "ner", "embed"}
    assert index["tokens_per_s"] > 0 and index["gpu_peak_mib"] is None
    assert fig["questions"] == 8 and set(fig["methods"]) == set(METHODS)
    for name, row in fig["methods"].items():
        assert "error" not in row, (name, row)
        assert row["cpu"]["questions"] == 8 and row["cpu"]["questions_per_s"] > 0, name
        assert row["cpu"]["stage_seconds"], name
    table = {r["method"]: r for r in fig["methods_table"]}
    assert list(table) == list(METHODS)
    assert fig["index_stages"][-1]["stage"] == "whole index"
    assert table["naive"]["x dense"] == 1.0
    for name, row in table.items():
        assert row["x dense"] == round(row["cpu q/s"] / table["naive"]["cpu q/s"], 3), name
        assert set(row["ms/question by stage"]) == set(fig["methods"][name]["cpu"]["stage_seconds"])
    # a second run keeps the index the first built, with the figures its build recorded
    again = [*cmd[:-1], "t2", "--reuse-index", "--methods", "bm25"]
    proc = subprocess.run(again, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kept = json.loads((tmp_path / "results" / "gpu_pipeline-t2.json").read_text())["figures"]
    built, reused = dict(index["stage_seconds"]), dict(kept["index"]["stage_seconds"])
    assert built.pop("line_tokens") > 0 and "line_tokens" in reused  # counted, then read again
    reused.pop("line_tokens")
    assert kept["index"]["reused"] and reused == built
    assert "x dense" not in kept["methods_table"][0]  # no dense run to set it against
