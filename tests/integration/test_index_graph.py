"""Graph stages of `index` on the demo corpus and real data: units, entities, relations, (the part that needs models, servers or real data)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import corpus_path
from graphrag_engine.index.resolve import normalize_name
from graphrag_engine.store import open_index
from tests.index_compare import TABLES, assert_same_index, table_rows


@pytest.fixture(scope="module")
def demo_index(demo_index: Path, tmp_path_factory) -> Path:
    """This module's own copy of the session's demo index (a test here re-indexes into it)."""
    out = tmp_path_factory.mktemp("demo") / "idx"
    shutil.copytree(demo_index, out)
    return out


LLM_CONFIG = """
graph:
  alpha: 0.25
  unit_max_tokens: 48
models:
  llm:
    backend: transformers
    batch_size: 4
    flush_every: 2
    parse_retries: 1
"""


def cached_answers(out: Path) -> int:
    path = out / "llm_cache.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def test_tables_are_consistent(demo_index: Path) -> None:
    idx = open_index(demo_index)
    chunks = set(idx.table("chunks")["chunk_id"].to_pylist())
    units = idx.table("units").to_pylist()
    assert units and {u["chunk_id"] for u in units} == chunks
    assert {u["origin"] for u in units} == {"sentence"}, "alpha = 0 uses no LLM"
    entities = {e["entity_id"]: e for e in idx.table("entities").to_pylist()}
    names = {normalize_name(e["name"]) for e in entities.values()}
    for expected in ("hana lirrow", "port calloway", "vesk", "teodor asch", "ashgrove lines"):
        assert expected in names
    for e in entities.values():
        assert e["chunk_ids"] and set(e["chunk_ids"]) <= chunks
    unit_ids = {u["unit_id"] for u in units}
    links = idx.table("unit_entity").to_pylist()
    assert all(r["unit_id"] in unit_ids and r["entity_id"] in entities for r in links)
    for r in idx.table("relations").to_pylist():
        assert (
            r["src"] in entities
            and r["dst"] in entities
            and r["src"] < r["dst"]
            and r["weight"] >= 1
        )
        assert set(r["chunk_ids"]) <= chunks
    assert idx.manifest["stats"]["stages"]["ner"]["backend"] == "spacy"
    assert idx.manifest["models"]["ner"].startswith("spacy:")


def test_graphs_and_vectors(demo_index: Path) -> None:
    idx = open_index(demo_index)
    n_c, n_u, n_e, n_r = (idx.rows(t) for t in ("chunks", "units", "entities", "relations"))
    layout = idx.manifest["stats"]["graphs"]
    assert layout["graph_cue"]["parts"] == {
        "chunk": [0, n_c],
        "unit": [n_c, n_c + n_u],
        "entity": [n_c + n_u, n_c + n_u + n_e],
    }
    cue = idx.table("graph_cue")
    assert cue.num_rows == n_u + idx.rows("unit_entity")
    assert max(cue["dst"].to_pylist()) < n_c + n_u + n_e
    assert idx.table("graph_entity").num_rows == n_r
    pe = idx.table("graph_passage_entity").to_pylist()
    assert all(r["src"] < n_c <= r["dst"] < n_c + n_e and r["weight"] >= 1 for r in pe)
    for vec, rows in (
        ("chunk_vectors", n_c),
        ("unit_vectors", n_u),
        ("entity_vectors", n_e),
        ("relation_vectors", n_r),
    ):
        m = idx.vectors(vec)
        assert m.shape == (rows, 384) and m.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-4)
    # the chunk about Hana Lirrow is the nearest chunk to a question about her
    from graphrag_engine.models.embed import SentenceTransformerEmbedder

    q = SentenceTransformerEmbedder().encode(["Who designed the Quillon Opera House?"])[0]
    best = int(np.argmax(idx.vectors("chunk_vectors") @ q))
    doc_of = dict(
        zip(
            idx.table("documents")["doc_id"].to_pylist(),
            idx.table("documents")["external_id"].to_pylist(),
            strict=True,
        )
    )
    assert doc_of[idx.table("chunks")["doc_id"].to_pylist()[best]] in {
        "quillon-opera-house",
        "hana-lirrow",
    }


def test_rerun_embeds_nothing_and_changes_nothing(demo_index: Path, tmp_path: Path) -> None:
    before = open_index(demo_index)
    snapshot = {t: table_rows(before, t, before.table(t).schema.names[0]) for t in TABLES}
    assert main(["index", "--demo", "--out", str(demo_index)]) == 0
    after = open_index(demo_index)
    assert after.manifest["stats"]["stages"]["embed"]["embedded"] == 0
    assert after.manifest["stats"]["stages"]["embed_chunks"]["cached"] == after.rows("chunks")
    for t in TABLES:
        assert table_rows(after, t, after.table(t).schema.names[0]) == snapshot[t]


def test_add_equals_full_rebuild(tmp_path: Path, demo_index_copy: Path) -> None:
    lines = corpus_path().read_text().splitlines()
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("\n".join(lines[:20]) + "\n")
    second.write_text("\n".join(lines[20:]) + "\n")
    inc = tmp_path / "inc"
    assert main(["index", str(first), "--out", str(inc)]) == 0
    n_first = open_index(inc).rows("units")
    assert main(["index", str(second), "--out", str(inc), "--add"]) == 0
    a, b = open_index(inc), open_index(demo_index_copy)  # the whole demo corpus at once
    assert a.rows("documents") == 36
    assert_same_index(a, b)
    # only what the new documents added was embedded in the --add run
    emb = a.manifest["stats"]["stages"]["embed"]
    assert 0 < emb["embedded"] < a.rows("units") + a.rows("entities") + a.rows("relations")
    assert a.manifest["stats"]["stages"]["embed_chunks"]["cached"] >= 20
    assert n_first < a.rows("units")


@pytest.mark.slow
def test_llm_units_dry_run_then_resume_after_kill(tmp_path: Path, run_cli) -> None:
    from graphrag_engine.demo import corpus_path

    cfg = tmp_path / "llm.yaml"
    cfg.write_text(LLM_CONFIG)
    corpus = tmp_path / "c.jsonl"  # 16 demo documents: 4 unit prompts at alpha 0.25
    corpus.write_text("\n".join(corpus_path().read_text().splitlines()[:16]) + "\n")
    out = tmp_path / "idx"
    dry = run_cli("index", str(corpus), "--out", str(out), "--config", str(cfg), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would send" in dry.stdout and not out.exists()  # no lock, cache or staging
    assert "units: " in dry.stdout and "max_tokens 48 (an upper bound)" in dry.stdout
    prompts = int(dry.stdout.split("would send ")[1].split()[0])
    assert prompts >= 4
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRAPHRAG_PROGRESS": "0"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "graphrag_engine.cli",
            "index",
            str(corpus),
            "--out",
            str(out),
            "--config",
            str(cfg),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 900  # a bound on hangs, not a speed claim: a loaded machine is slow
    while cached_answers(out) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    paid = cached_answers(out)
    assert paid >= 2 and not (out / "manifest.json").exists()
    done = run_cli("index", str(corpus), "--out", str(out), "--config", str(cfg))
    assert done.returncode == 0, done.stderr
    idx = open_index(out)
    units = idx.manifest["stats"]["stages"]["units"]
    core = units["core_chunks"]  # the forecast is a bound: the smallest chunks first
    assert core <= prompts
    if units["retries"] == 0:  # first attempts only: bounded by the forecast
        assert units["prompt_tokens"] <= int(dry.stdout.split("prompts, ")[1].split()[0])
    # nothing already paid for is asked again (first attempts; re-asks of unparsable answers aside)
    assert units["cached_calls"] >= paid
    assert units["model_calls"] + units["cached_calls"] >= core
    again = run_cli("index", str(corpus), "--out", str(out), "--config", str(cfg))
    assert again.returncode == 0
    idx2 = open_index(out)
    assert idx2.manifest["stats"]["stages"]["units"]["model_calls"] == 0
    assert table_rows(idx2, "units", "unit_id") == table_rows(idx, "units", "unit_id")
    origins = {u["origin"] for u in idx2.table("units").to_pylist()}
    assert "sentence" in origins
    assert units["llm_units"] > 0 or units["parse_failures"] == core
    # a dry run over a built index expects the completions that build measured
    dry = run_cli("index", str(corpus), "--out", str(out), "--config", str(cfg), "--dry-run")
    assert "completions: last build's mean" in dry.stdout
    assert open_index(out).generation == idx2.generation  # and wrote nothing


@pytest.mark.slow
def test_killed_index_runs_resume_to_the_same_index(tmp_path: Path, demo_index_copy: Path) -> None:
    """SIGKILL `index` at several points (ingest, embedding, NER, commit); re-running the same
    command completes with the content of an uninterrupted run and re-embeds nothing paid for."""
    clean = demo_index_copy  # an uninterrupted run
    out = tmp_path / "killed"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRAPHRAG_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "graphrag_engine.cli", "index", "--demo", "--out", str(out)]
    for delay in (0.5, 2.0, 4.0, 6.0):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if (out / "manifest.json").exists():
            open_index(out)  # whatever was committed is whole
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    a, b = open_index(clean), open_index(out)
    for t in TABLES:
        key = a.table(t).schema.names[0]
        assert table_rows(a, t, key) == table_rows(b, t, key), t
    for v in ("chunk_vectors", "unit_vectors", "entity_vectors", "relation_vectors"):
        np.testing.assert_allclose(a.vectors(v), b.vectors(v), atol=1e-5)
