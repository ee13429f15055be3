"""The Ray executor on a real local Ray cluster (2 CPUs) builds the same index as local."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.cli import main
from graphrag_engine.store import open_index
from tests.index_compare import RAY_TABLES as TABLES
from tests.paths import REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def kill_once_started(title: str, after_s: float = 1.0) -> list[int]:
    """Kill the first Ray actor process whose title holds `title` (a class, or `Class.method`
    while it runs that method) `after_s` after it appears (it has begun loading its model),
    from a background thread; the killed pid lands in the list."""
    import threading

    import psutil

    killed: list[int] = []

    def kill() -> None:
        deadline = time.time() + 120
        while time.time() < deadline:
            for proc in psutil.process_iter(["cmdline"]):
                if any(title in part for part in proc.info["cmdline"] or []):
                    time.sleep(after_s)
                    proc.kill()
                    killed.append(proc.pid)
                    return
            time.sleep(0.05)

    threading.Thread(target=kill, daemon=True).start()
    return killed


def test_ray_index_with_a_worker_killed_equals_local(
    tmp_path: Path, demo_index_copy: Path, ray_cluster
) -> None:
    """The demo indexed on Ray (`--address local` joins the open cluster) while one actor of
    the model pool is killed as it begins tagging (loading spaCy): the pool sends its block to
    another actor, the build finishes and equals the local build table for table (vectors to
    float32 rounding), and the driver's cache tagged each distinct unit text once."""
    distributed = tmp_path / "ray"
    killed = kill_once_started("ModelActor.tag", after_s=0.3)
    args = ["index", "--demo", "--out", str(distributed), "--executor", "ray"]
    assert main([*args, "--address", "local"]) == 0
    assert killed
    a, b = open_index(demo_index_copy), open_index(distributed)
    assert b.manifest["stats"]["executor"] == "ray" and a.manifest["stats"]["executor"] == "local"
    for t in TABLES:
        assert a.table(t).equals(b.table(t)), t
    # what the README says may differ, and by how much: float32 rounding of the vectors
    for v in ("chunk_vectors", "unit_vectors", "entity_vectors", "relation_vectors"):
        np.testing.assert_allclose(a.vectors(v), b.vectors(v), rtol=0, atol=1e-6)
    sources = b.table("documents", ["source"]).column("source").to_pylist()
    assert all(Path(s.rsplit(":", 1)[0]).is_absolute() for s in sources)
    units = set(b.table("units")["text"].to_pylist())
    assert b.manifest["stats"]["stages"]["ner"]["tagged"] == len(units)


def test_llm_engines_in_ray_actors_match_local(tmp_path: Path, ray_cluster) -> None:
    """With the transformers backend, extraction's prompts are a Ray Data pipeline over actors
    holding SmolLM2 each, and the extraction equals the in-process one."""
    from graphrag_engine.demo import corpus_path

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(corpus_path().read_text().splitlines()[:4]) + "\n")
    cfg = tmp_path / "x.yaml"
    cfg.write_text(
        "graph:\n  embed: false\nextraction:\n  enabled: true\n  gleaning: 0\n  max_tokens: 32\n"
        "  retries: 0\n"
        "models:\n  llm:\n    backend: transformers\n    batch_size: 4\n"
        "    max_failed_share: 1.0\n"  # 32-token answers are often cut short: recorded
    )
    local, distributed = tmp_path / "local", tmp_path / "ray"
    assert main(["index", str(corpus), "--out", str(local), "--config", str(cfg)]) == 0
    assert (
        main(
            [
                "index",
                str(corpus),
                "--out",
                str(distributed),
                "--config",
                str(cfg),
                "--executor",
                "ray",
            ]
        )
        == 0
    )
    a, b = open_index(local), open_index(distributed)
    sa, sb = a.manifest["stats"]["stages"]["extract"], b.manifest["stats"]["stages"]["extract"]
    assert sb["model_calls"] == sa["model_calls"] == 4
    for t in ("entities", "relations"):
        assert a.table(t).equals(b.table(t)), t


def test_llm_pipeline_answers_every_block_once_in_input_order(smollm, ray_cluster) -> None:
    """Prompts go to a pool of two SmolLM2 actors in blocks of the model's batch size; one
    actor is killed once it has started: Ray restarts it and retries its block, every position
    reaches `on_done` exactly once, and the answers equal the in-process model's on the same
    blocks, in input order."""
    from dataclasses import asdict

    from graphrag_engine.config import LLMConfig
    from graphrag_engine.exec.ray_llm import RayDataLLM
    from graphrag_engine.models import GenParams

    names = ["Paris", "Rome", "Madrid", "Berlin", "Vienna", "Oslo", "Lisbon", "Athens", "Bern"]
    prompts = [f"In one sentence, what is {n}?" for n in names]
    params = GenParams(max_tokens=12)
    cfg = asdict(LLMConfig(backend="transformers", batch_size=2))
    backend = RayDataLLM(cfg, workers=2, gpus=0.0)
    assert backend.model_id == smollm.model_id
    seen: list[list[int]] = []
    killed = kill_once_started("GenerateBlocks")
    out = backend.generate(prompts, params, lambda positions, _: seen.append(positions))
    assert killed
    assert sorted(p for block in seen for p in block) == list(range(len(prompts)))
    assert all(len(block) <= 2 for block in seen)
    expected = [c for lo in range(0, 9, 2) for c in smollm.generate(prompts[lo : lo + 2], params)]
    assert [c.text for c in out] == [c.text for c in expected]
    assert [c.completion_tokens for c in out] == [c.completion_tokens for c in expected]
    assert backend.count_tokens(prompts) == smollm.count_tokens(prompts)


def test_a_killed_driver_resumes_from_the_caches(shared_data, tmp_path: Path) -> None:
    """The index job's driver (and the private cluster it started) is killed once the chunk
    vectors are committed to the cache; the same command again embeds no chunk twice and
    builds the index a local run builds."""
    pytest.importorskip("ray")
    import json
    import os
    import signal
    import subprocess
    import sys

    with (shared_data / "musique_corpus.jsonl").open() as fh:
        lines = [next(fh) for _ in range(24)]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(lines))
    out = tmp_path / "ray"
    cmd = [sys.executable, "jobs/index_job.py", str(corpus), "--out", str(out), "--executor", "ray"]
    env = {**os.environ, "GRAPHRAG_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
    root = REPO
    proc = subprocess.Popen(cmd, cwd=root, env=env, start_new_session=True)
    deadline = time.time() + 300
    while not (out / "ner_cache.sqlite").exists() and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "manifest.json").exists()
    again = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    stages = json.loads((out / "manifest.json").read_text())["stats"]["stages"]
    n_chunks = stages["ingest_chunk"]["chunks"]
    assert stages["embed_chunks"]["embedded"] == 0 and stages["embed_chunks"]["cached"] == n_chunks
    local = tmp_path / "local"
    assert main(["index", str(corpus), "--out", str(local)]) == 0
    a, b = open_index(local), open_index(out)
    for t in TABLES:
        assert a.table(t).equals(b.table(t)), t


def test_tree_and_skeleton_stages_on_ray_actors_match_local(tmp_path: Path, ray_cluster) -> None:
    """RAPTOR's tree with SmolLM2 summaries (the `tree_summary` prompts a Ray Data pipeline over
    actors holding SmolLM2, the summaries embedded by the actor pool) and KET-RAG's skeleton
    and keyword index build on Ray as they build in-process."""
    from graphrag_engine.demo import corpus_path

    cfg = tmp_path / "x.yaml"
    cfg.write_text(
        "tree:\n  enabled: true\n  summaries: llm\n  max_levels: 1\n  summary_tokens: 24\n"
        "skeleton:\n  enabled: true\n"
        "models:\n  llm:\n    backend: transformers\n    batch_size: 4\n"
        "    max_failed_share: 1.0\n"  # 24-token summaries are often cut short: recorded
    )
    local, distributed = tmp_path / "local", tmp_path / "ray"
    args = ["index", str(corpus_path()), "--config", str(cfg), "--out"]
    assert main([*args, str(local)]) == 0
    assert main([*args, str(distributed), "--executor", "ray"]) == 0
    a, b = open_index(local), open_index(distributed)
    sa = a.manifest["stats"]["stages"]["tree"]
    sb = b.manifest["stats"]["stages"]["tree"]
    assert sb["model_calls"] == sa["model_calls"] > 0
    for t in ("tree", "skeleton", "keywords"):
        assert a.table(t).equals(b.table(t)), t
    for v in ("tree_vectors", "keyword_vectors"):
        np.testing.assert_allclose(a.vectors(v), b.vectors(v), rtol=0, atol=1e-6)
