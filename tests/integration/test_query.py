"""`graphrag-engine query` on real data: the baselines agree with reference implementations, (the part that needs models, servers or real data)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphrag_engine.cli import main
from graphrag_engine.eval.metrics import recall_at_k
from graphrag_engine.results import read_rows
from tests.bars import watch_bar_positions
from tests.paths import REPO


def _run(index: Path, questions: Path, method: str, out: Path, *extra: str) -> list[dict]:
    args = ["query", str(index), str(questions), "--method", method, "--out", str(out)]
    assert main([*args, "--retrieval-only", *extra]) == 0
    return read_rows(out / "results.parquet")


def _mean_recall(ranked: list[list[str]], gold: list[list[str]], k: int) -> float:
    return float(np.mean([recall_at_k(r, g, k) for r, g in zip(ranked, gold, strict=True)]))


def test_bm25_matches_direct_bm25s(musique_subset: dict, tmp_path: Path) -> None:
    import bm25s

    rows = _run(musique_subset["index"], musique_subset["questions"], "bm25", tmp_path / "bm25")
    corpus = musique_subset["corpus"]
    ref = bm25s.BM25()
    ref.index(
        bm25s.tokenize(
            [f"{p['title']}\n{p['text']}" for p in corpus], stopwords="en", show_progress=False
        ),
        show_progress=False,
    )
    gold = [q["supporting_passage_ids"] for q in musique_subset["gold"]]
    ids, _ = ref.retrieve(
        bm25s.tokenize(
            [q["question"] for q in musique_subset["gold"]],
            stopwords="en",
            return_ids=False,
            show_progress=False,
        ),
        k=10,
        show_progress=False,
    )
    ref_ranked = [[corpus[i]["id"] for i in row] for row in ids]
    ours = [r["retrieved_ids"] for r in rows]
    for k in (2, 5):
        # passages longer than one chunk are ranked by their best chunk: allow a small gap
        assert _mean_recall(ours, gold, k) == pytest.approx(
            _mean_recall(ref_ranked, gold, k), abs=0.03
        )
    assert _mean_recall(ours, gold, 5) > 0.4


def test_dense_matches_direct_minilm(musique_subset: dict, tmp_path: Path, minilm) -> None:
    rows = _run(musique_subset["index"], musique_subset["questions"], "naive", tmp_path / "naive")
    corpus = musique_subset["corpus"]
    p = minilm.encode([f"{c['title']}\n{c['text']}" for c in corpus])
    q = minilm.encode([x["question"] for x in musique_subset["gold"]])
    order = np.argsort(-(q @ p.T), axis=1)[:, :10]
    ref_ranked = [[corpus[i]["id"] for i in row] for row in order]
    gold = [x["supporting_passage_ids"] for x in musique_subset["gold"]]
    ours = [r["retrieved_ids"] for r in rows]
    for k in (2, 5):
        assert _mean_recall(ours, gold, k) == pytest.approx(
            _mean_recall(ref_ranked, gold, k), abs=0.03
        )
    assert ours[0][0] == ref_ranked[0][0]


def test_hipporag_ranks_from_linked_entities(musique_subset: dict, tmp_path: Path) -> None:
    rows = _run(musique_subset["index"], musique_subset["questions"], "hipporag", tmp_path / "h")
    extras = [r["extras"] for r in rows]
    linked = [e for e in extras if e["linked_entities"]]
    assert len(linked) > 0.8 * len(rows)
    # typed columns: extras a struct inferred over the run, tokens / seconds maps
    schema = pq.read_schema(tmp_path / "h" / "results.parquet")
    assert pa.types.is_struct(schema.field("extras").type)
    assert schema.field("extras").type.field("linked_entities").type == pa.list_(pa.string())
    assert schema.field("seconds").type == pa.map_(pa.string(), pa.float64())
    assert schema.field("tokens").type == pa.map_(pa.string(), pa.int64())
    flat = pq.read_table(tmp_path / "h" / "results.parquet").flatten()
    assert flat["extras.linked_entities"].to_pylist() == [e["linked_entities"] for e in extras]
    # every mention of a question links to some entity (top-1 linking)
    assert all(len(e["linked_entities"]) <= len(e["query_entities"]) for e in extras)
    gold = [x["supporting_passage_ids"] for x in musique_subset["gold"]]
    assert _mean_recall([r["retrieved_ids"] for r in rows], gold, 5) > 0.4
    assert all(len(r["retrieved_ids"]) == len(set(r["retrieved_ids"])) for r in rows)


def test_hipporag_forward_push_ranks_as_the_exact_solver(
    musique_subset: dict, tmp_path: Path
) -> None:
    """On the CPU HippoRAG's PPR is a forward push that touches only what the seeds reach; its
    passage rankings equal the exact solver's (ppr: exact) up to near-ties deep in the list."""
    rows = {}
    for ppr in ("exact", "local"):
        config = tmp_path / f"{ppr}.yaml"
        config.write_text(f"method: hipporag\nhipporag:\n  ppr: {ppr}\n")
        rows[ppr] = _run(
            musique_subset["index"], musique_subset["questions"], str(config), tmp_path / ppr
        )
    exact = [r["retrieved_ids"] for r in rows["exact"]]
    local = [r["retrieved_ids"] for r in rows["local"]]
    assert len(exact) == len(local) == 30
    assert sum(a[:5] == b[:5] for a, b in zip(exact, local, strict=True)) >= 29
    overlap = [
        len(set(a[:20]) & set(b[:20])) / max(1, len(a[:20]))
        for a, b in zip(exact, local, strict=True)
    ]
    assert float(np.mean(overlap)) >= 0.98


def test_results_hold_gold_context_and_timings(demo_index: Path, tmp_path: Path) -> None:
    rows = _run(demo_index, Path("demo"), "bm25", tmp_path / "r", "--limit", "7")
    assert len(rows) == 7
    r = rows[0]
    assert r["answer"] is None and r["gold_answers"] == ["Hollowmere"]
    assert r["supporting_ids"] == ["port-calloway", "ilsa-varnholt"]
    assert len(r["context_ids"]) == 5 and len(r["retrieved_ids"]) <= 20
    assert set(r["seconds"]) == {"bm25_index", "bm25_search"}
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["questions"] == 7 and summary["questions_per_s"] > 0
    jsonl = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").open()]
    assert jsonl == rows  # the JSON lines hold the decoded rows: dicts, not pairs or strings
    schema = pq.read_schema(tmp_path / "r" / "results.parquet")
    assert schema.field("extras").type == pa.null()  # BM25 records no extras
    assert schema.field("answer_failed").type == pa.string()
    assert all(x["answer_failed"] is None and x["tokens"] == {} for x in rows)


def test_rerun_into_a_folder_of_another_run_is_refused(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    _run(demo_index, Path("demo"), "bm25", tmp_path / "r", "--limit", "3")
    code = main(
        [
            "query",
            str(demo_index),
            "demo",
            "--method",
            "naive",
            "--retrieval-only",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2 and "different method" in capsys.readouterr().err


def test_a_run_resumes_across_transport_settings_not_across_options(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    """Another server port, timeout or cache path is the same run; another top_k is not."""

    def config(port: int, timeout: int, top_k: int) -> str:
        path = tmp_path / f"bm25-{port}-{timeout}-{top_k}.yaml"
        path.write_text(
            f"method: bm25\nretrieval:\n  top_k: {top_k}\nmodels:\n  llm:\n    backend: openai\n"
            f"    base_url: http://127.0.0.1:{port}/v1\n    read_timeout_s: {timeout}\n"
            f"    cache: {tmp_path / str(port)}.sqlite\n"
        )
        return str(path)

    out = tmp_path / "r"
    _run(demo_index, Path("demo"), config(8001, 60, 5), out, "--limit", "3")
    _run(demo_index, Path("demo"), config(8002, 600, 5), out, "--limit", "3")
    assert "3 resumed" in capsys.readouterr().out
    args = ["query", str(demo_index), "demo", "--method", config(8002, 600, 7)]
    assert main([*args, "--retrieval-only", "--limit", "3", "--out", str(out)]) == 2
    assert "different config" in capsys.readouterr().err


def test_a_run_is_identified_by_content_not_by_paths(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    """A moved question file or index resumes; an edited question file (same count) or an
    index rebuilt from another corpus at the same path is refused with exit 2."""
    import shutil

    from graphrag_engine.demo import questions_path

    lines = questions_path().read_text().splitlines()[:3]
    q1 = tmp_path / "q1.jsonl"
    q1.write_text("\n".join(lines) + "\n")
    out = tmp_path / "r"
    _run(demo_index, q1, "bm25", out)
    q2, idx2 = tmp_path / "moved" / "q.jsonl", tmp_path / "moved" / "idx"
    q2.parent.mkdir()
    shutil.copy(q1, q2)
    shutil.copytree(demo_index, idx2)
    _run(idx2, q2, "bm25", out)
    assert "3 resumed" in capsys.readouterr().out

    def again(index: Path, questions: Path) -> int:
        args = ["query", str(index), str(questions), "--method", "bm25", "--retrieval-only"]
        return main([*args, "--out", str(out)])

    edited = json.loads(lines[1]) | {"question": "Who keeps the lighthouse on Vell?"}
    q2.write_text("\n".join([lines[0], json.dumps(edited), lines[2]]) + "\n")
    assert again(idx2, q2) == 2
    assert "different questions" in capsys.readouterr().err
    shutil.rmtree(idx2)
    corpus = tmp_path / "other.jsonl"
    corpus.write_text(json.dumps({"id": "o1", "title": "Other", "text": "Tam Ries sails."}) + "\n")
    assert main(["index", str(corpus), "--out", str(idx2)]) == 0
    assert again(idx2, q1) == 2
    assert "different index content" in capsys.readouterr().err


def test_a_second_query_into_a_busy_run_folder_is_refused(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    """While one process holds a run folder, another `query` into it exits 2 and writes
    nothing there."""
    from graphrag_engine.store.run_folder import lock_run_dir

    out = tmp_path / "r"
    held = lock_run_dir(out)
    try:
        args = ["query", str(demo_index), "demo", "--method", "bm25", "--retrieval-only"]
        assert main([*args, "--out", str(out)]) == 2
        assert "another query process" in capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]
    finally:
        os.close(held)
    _run(demo_index, Path("demo"), "bm25", out, "--limit", "2")  # free again


def test_generation_needs_an_llm(demo_index: Path, tmp_path: Path, capsys) -> None:
    """A config file asking for answers with no LLM backend is refused naming the flag (a bare
    method name runs retrieval only instead: tests/test_api.py)."""
    cfg = tmp_path / "bm25.yaml"
    cfg.write_text("method: bm25\n")
    assert (
        main(["query", str(demo_index), "demo", "--method", str(cfg), "--out", str(tmp_path / "r")])
        == 2
    )
    err = capsys.readouterr().err
    assert "needs an LLM" in err and "--llm-backend transformers" in err
    assert (
        main(["query", str(demo_index), "demo", "--method", "nope", "--out", str(tmp_path / "r")])
        == 2
    )


@pytest.mark.slow
def test_killed_run_resumes_without_repeating_work(demo_index: Path, tmp_path: Path) -> None:
    """A real `query` process with the packaged SmolLM2 is SIGKILLed after its first batch;
    the same command then finishes, re-using the checkpoint and the cached answers."""
    cfg = tmp_path / "m.yaml"
    cfg.write_text(
        "method: bm25\nbatch_size: 4\nretrieval:\n  top_k: 2\ngeneration:\n  max_tokens: 8\n"
        "models:\n  llm:\n    backend: transformers\n    batch_size: 4\n    flush_every: 2\n"
    )
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "graphrag_engine.cli",
        "query",
        str(demo_index),
        "demo",
        "--method",
        str(cfg),
        "--out",
        str(out),
        "--limit",
        "12",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRAPHRAG_PROGRESS": "0"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 900  # a bound on hangs, not a speed claim: a loaded machine is slow
    while not (out / "parts" / "00000.jsonl").exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "results.parquet").exists()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "GGUF tensors" not in done.stderr  # transformers' own loading bar stays off
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_questions"] >= 4
    # the seconds cover both processes: the killed one's committed batches count too
    spent = [
        json.loads(p.read_text())["batch"]["seconds"]
        for p in sorted((out / "parts").glob("*.seconds.json"))
    ]
    assert len(spent) == 3 and min(spent) > 0
    assert summary["seconds"] == pytest.approx(sum(spent), abs=2e-3)
    assert summary["seconds"] > summary["seconds_this_process"] > 0
    assert summary["questions_per_s"] == pytest.approx(12 / summary["seconds"], rel=1e-2)
    answer = [u for k, u in summary["llm"].items() if k.startswith("answer/")]
    fresh = sum(u["calls"] for u in answer)
    # every question's answer is counted once over both processes: the killed one's committed
    # batches as it asked them, the rest fresh or from the response cache it flushed
    assert fresh + sum(u["cached_calls"] for u in answer) == 12
    assert fresh >= summary["resumed_questions"] and sum(u["prompt_tokens"] for u in answer) > 0
    rows = read_rows(out / "results.parquet")
    assert [r["qid"] for r in rows] == [f"demo-q{i:02d}" for i in range(1, 13)]
    assert all(isinstance(r["answer"], str) for r in rows)
    # a third run finds everything done and calls no model
    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "12 resumed" in again.stdout
    # ... and its summary still counts the calls that answered the earlier batches
    assert json.loads((out / "summary.json").read_text())["llm"] == summary["llm"]


@pytest.mark.slow
def test_hyde_and_no_retrieval_with_smollm(demo_index: Path, tmp_path: Path, smollm) -> None:
    """HyDE writes one hypothetical passage per question in one batched call and retrieves
    with it; no-retrieval answers without context."""
    from graphrag_engine.demo import questions_path
    from graphrag_engine.eval.datasets import load_questions
    from graphrag_engine.methods import query_config
    from graphrag_engine.query.run import run_query
    from graphrag_engine.store import open_index

    questions = load_questions(questions_path(), limit=4)
    cfg = query_config("hyde")
    cfg.models.llm.backend = "transformers"
    cfg.options.max_tokens = 24
    cfg.generation.enabled = False
    summary = run_query(
        open_index(demo_index), questions, cfg, tmp_path / "hyde", "demo", llm_backend=smollm
    )
    rows = read_rows(tmp_path / "hyde" / "results.parquet")
    passages = [r["extras"]["hyde_passage"] for r in rows]
    assert all(isinstance(p, str) for p in passages) and any(passages)
    assert all(len(r["retrieved_ids"]) > 0 for r in rows)
    assert summary["query_tokens_per_question"]["hyde_completion"] > 0
    (hyde_usage,) = [u for k, u in summary["llm"].items() if k.startswith("hyde/")]
    assert hyde_usage["calls"] + hyde_usage["cached_calls"] == 4
    cfg = query_config("none")
    cfg.models.llm.backend = "transformers"
    cfg.generation.max_tokens = 8
    run_query(open_index(demo_index), questions, cfg, tmp_path / "none", "demo", llm_backend=smollm)
    rows = read_rows(tmp_path / "none" / "results.parquet")
    assert all(r["retrieved_ids"] == [] and r["context_text"] == [] for r in rows)
    assert all(isinstance(r["answer"], str) for r in rows)


@pytest.mark.slow
def test_dry_run_counts_prompts_and_writes_nothing(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "never"
    args = ["query", str(demo_index), "demo", "--method", "bm25", "--limit", "5"]
    assert main([*args, "--llm-backend", "transformers", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "answer: 5 prompts" in text and "nothing was sent or written" in text
    assert "~240 completion tokens" in text  # 5 answers at generation.max_tokens 48, a bound
    assert not out.exists()
    # PankRAG's sub-questions come from its plans, which a dry run cannot make: an upper bound
    args[4] = "pankrag"
    assert main([*args, "--llm-backend", "transformers", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "pankrag_plan: 5 prompts" in text and "answer: 5 prompts" in text
    assert "pankrag_sub: 20 prompts" in text and "upper bound, not counted" in text
    assert not out.exists()
    # ROGRAG's step lookups and logic-form verdicts follow its logic forms: bounded the same way
    args[4] = "rograg"
    assert main([*args, "--llm-backend", "transformers", "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "logic_form: 5 prompts" in text and "verify: 5 prompts" in text
    assert "logic_step: 25 prompts" in text and "one lookup per retrieve step" in text
    assert "verify_logic_form: 5 prompts" in text
    # its dry-run verdicts saw no context, so it asked no answers: they get a bound too
    assert "answer: 5 prompts" in text and "the dry run's verdicts saw no context" in text
    assert not out.exists()


@pytest.mark.slow
def test_dry_run_forecasts_time_from_the_models_measured_calls(
    demo_index: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    """No measured call of the model and no calibration: the forecast says so and gives no
    time; with calibration (the default for a model in this process) three short calls time
    it. After a real run (which records its calls' tokens and seconds) the same dry run prints
    minutes and the fitted prompt and completion rates it used."""
    monkeypatch.setenv("GRAPHRAG_RATES_FILE", str(tmp_path / "cal.json"))
    args = ["query", str(demo_index), "demo", "--method", "bm25", "--llm-backend", "transformers"]
    dry = [*args, "--limit", "4", "--out", str(tmp_path / "d1"), "--dry-run"]
    assert main([*dry, "--calibrate", "no"]) == 0
    text = capsys.readouterr().out
    assert "no measured calls of" in text and "no time is forecast" in text
    assert main(dry) == 0
    text = capsys.readouterr().out
    assert "calibrated now; time from 2 measured calls" in text and "tokens/s" in text
    assert re.search(r"answer: 4 prompts, .*, ~[\d.]+ (s|min) ", text)
    assert "nothing was sent or written (apart from the calibration calls)" in text
    calibration = json.loads((tmp_path / "cal.json").read_text())
    assert [len(rows) for rows in calibration.values()] == [2]
    monkeypatch.setenv("GRAPHRAG_RATES_FILE", str(tmp_path / "rates.json"))
    cfg = tmp_path / "m.yaml"  # two stages of other shapes: long prompts, then long answers
    cfg.write_text("method: bm25\ngeneration:\n  max_tokens: 24\nretrieval:\n  top_k: 1\n")
    run = ["query", str(demo_index), "demo", "--llm-backend", "transformers", "--limit", "2"]
    assert main([*run, "--method", "bm25", "--out", str(tmp_path / "r1")]) == 0
    assert main([*run, "--method", str(cfg), "--out", str(tmp_path / "r2")]) == 0
    rates = json.loads((tmp_path / "rates.json").read_text())
    (model,) = rates
    assert len(rates[model]) >= 2 and all(r[2] > 0 for r in rates[model])
    capsys.readouterr()
    assert main([*args, "--limit", "4", "--out", str(tmp_path / "d2"), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert f"measured calls of {model}" in text and "tokens/s" in text
    assert re.search(
        r"answer: 4 prompts, \d+ prompt tokens, ~192 completion tokens, ~[\d.]+ (s|min)", text
    )


def test_a_failed_answer_is_recorded_the_run_finishes_and_a_rerun_asks_again(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    """Against the FAULT INJECTOR: the second question's prompt fails every attempt; the run
    finishes with exit 3, that question holds no answer and says why, eval scores it wrong;
    the same command again sends only that prompt; --fail-fast stops at it instead."""
    from graphrag_engine.eval.report import score_rows
    from tests.fault_server import FaultInjector

    with FaultInjector(["say:first", "500", "500", "say:third"]) as fault:
        spec = tmp_path / "bm25.yaml"
        spec.write_text(
            "method: bm25\nmodels:\n  llm:\n    backend: openai\n    model: fault\n"
            f"    base_url: {fault.url}\n    max_retries: 1\n    concurrency: 1\n"
        )
        args = ["query", str(demo_index), "demo", "--method", str(spec), "--limit", "3"]
        out = tmp_path / "run"
        assert main([*args, "--out", str(out)]) == 3
        assert "1 questions have no answer" in capsys.readouterr().err
        rows = read_rows(out / "results.parquet")
        assert [r["answer"] for r in rows] == ["first", None, "third"]
        assert "HTTP 500" in rows[1]["answer_failed"]
        assert (out / "parts" / "00000.failed").exists()
        scores = score_rows(rows, [5])
        assert scores["answer_failed"] == [0.0, 1.0, 0.0] and scores["accuracy"][1] == 0.0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["failed_questions"] == 1
        sent = len(fault.requests)
        fault.plan = ["say:second"]
        assert main([*args, "--out", str(out)]) == 0
        assert len(fault.requests) == sent + 1  # only the failed prompt went out again
        rows = read_rows(out / "results.parquet")
        assert [r["answer"] for r in rows] == ["first", "second", "third"]
        assert not (out / "parts" / "00000.failed").exists()
        fault.plan = ["500", "500"]
        assert main([*args, "--out", str(tmp_path / "ff"), "--limit", "1", "--fail-fast"]) == 69


def test_a_run_folder_from_before_content_identities_resumes_when_it_matches(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    """run.json as older versions wrote it (index path, generation, config hash; question file
    and count): resumed and upgraded when those match, refused when they do not."""
    from graphrag_engine.demo import questions_path
    from graphrag_engine.store import open_index

    out = tmp_path / "r"
    _run(demo_index, Path("demo"), "bm25", out, "--limit", "3")
    marker = out / "run.json"
    new = json.loads(marker.read_text())
    index = open_index(demo_index)
    old = new | {
        "index": {
            "path": str(demo_index.resolve()),
            "generation": index.generation,
            "config_hash": index.manifest["config_hash"],
        },
        "questions": {"source": str(questions_path()), "count": 3},
    }
    marker.write_text(json.dumps(old))
    _run(demo_index, Path("demo"), "bm25", out, "--limit", "3")
    assert "3 resumed" in capsys.readouterr().out
    assert json.loads(marker.read_text())["index"] == new["index"]  # upgraded
    marker.write_text(json.dumps(old | {"index": old["index"] | {"generation": 99}}))
    args = ["query", str(demo_index), "demo", "--method", "bm25", "--retrieval-only"]
    assert main([*args, "--limit", "3", "--out", str(out)]) == 2
    assert "made by an older graphrag-engine" in capsys.readouterr().err


def test_query_bar_moves_with_each_answer_within_a_batch(
    demo_index: Path, tmp_path: Path, monkeypatch
) -> None:
    """A batch's answers come in forward passes of 4 prompts: the run's question bar moves
    with them (and with their decoding steps), not once when the 8-question batch ends."""
    from graphrag_engine.query import run as run_module

    positions = watch_bar_positions(run_module, monkeypatch)
    cfg = tmp_path / "m.yaml"
    cfg.write_text(
        "method: bm25\nbatch_size: 8\ngeneration:\n  max_tokens: 6\n"
        "models:\n  llm:\n    backend: transformers\n    batch_size: 4\n"
    )
    args = ["query", str(demo_index), "demo", "--method", str(cfg), "--limit", "8"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    assert positions[-1] == 8 and positions == sorted(positions)
    assert any(0 < p < 4 for p in positions) and any(4 <= p < 8 for p in positions)


def test_the_papers_budgets_shrink_to_the_answer_window_and_the_run_says_so(
    demo_index: Path, tmp_path: Path, capsys, smollm
) -> None:
    """LightRAG-style hybrid (NER keys) with SmolLM2 answering in a 1,024-token window: its
    published 12,000-token budgets shrink x0.09, once on stderr and in summary.json, and every
    answer prompt's context stays within the window; the demo questions take the shared short
    answer prompt. Without a window set, SmolLM2's own (8,192) less the answer bounds it."""
    spec = tmp_path / "lr.yaml"
    spec.write_text(
        "method: lightrag\nlightrag:\n  keywords: ner\ngeneration:\n  max_context_tokens: 1024\n"
        "models:\n  llm:\n    backend: transformers\n"
    )
    out = tmp_path / "run"
    args = ["query", str(demo_index), "demo", "--method", str(spec), "--limit", "2"]
    assert main([*args, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("lightrag: context budgets of 12,000 tokens (the paper's) shrink x0.09") == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answer_style"] == "short"
    budget = summary["context_budget"]
    assert budget["declared"] == 12_000 and budget["window"] == 1024
    assert budget["scale"] == pytest.approx(1024 / 12_000, abs=1e-4)
    from graphrag_engine.models.tokenizer import load_tokenizer

    tok = load_tokenizer()
    for row in read_rows(out / "results.parquet"):
        shown = "\n".join(row["context_text"] or [])
        assert len(tok.encode(shown).ids) <= 1024 + 64  # titles and separators aside
    # no window set: SmolLM2's own (8,192 positions) less the answer and the prompt's words
    from graphrag_engine.methods import query_config
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.store import open_index

    cfg = query_config("lightrag")
    cfg.models.llm.backend = "transformers"
    ctx = QueryContext(open_index(demo_index), cfg, tmp_path / "ctx", llm_backend=smollm)
    assert (
        ctx.budget.window == 8192 - 48 - 256 and "the model's window of 8,192" in ctx.budget.basis
    )


NO_TOKEN_QUESTIONS = ["?", "the of and", "\U0001f600", "\x00"]
"""Questions in which a method's tokenizer, NER or keyword step finds nothing."""


def test_questions_without_tokens_get_empty_rankings_in_every_method(
    demo_reports_index: Path, tmp_path: Path, llama_server
) -> None:
    """Every registered method over questions with no word in them: the run finishes and a
    no-token question gets a ranking (empty or not, never an error); beside them a real
    question is ranked as it is alone. Methods with LLM stages get one such question, their
    stages answered by the session's llama.cpp server (SmolLM2), failures recorded."""
    from graphrag_engine.api import Engine
    from graphrag_engine.cli.demo import SETTINGS
    from graphrag_engine.eval.datasets import Question
    from graphrag_engine.methods import METHODS, query_config

    real = Question(qid="real", question="Which harbour town did Ilsa Varnholt sail from?")
    asked = [Question(qid=f"q{i}", question=t) for i, t in enumerate(NO_TOKEN_QUESTIONS)]
    engine = Engine(demo_reports_index)  # the demo with communities and reports: every method
    for name in METHODS:
        cfg = query_config(name)
        if cfg.method_llm_use():  # its own LLM stages: the loopback server, failures recorded
            cfg.models.llm.backend, cfg.models.llm.model = "openai", llama_server.alias
            cfg.models.llm.base_url, cfg.models.llm.max_failed_share = llama_server.url, 1.0
            cfg.models.llm.context_window = 2048  # a slot's window; contexts shrink to fit
            cfg.generation.max_context_tokens = 512  # as the demo runs SmolLM2
            qs = [asked[0]]  # its LLM stages read the question; one is enough
        else:
            qs = [*asked, real]
        cfg.generation.enabled = False  # rankings are what a no-token question could break
        for key, value in SETTINGS.get(name, {}).items():  # the demo's, printed by the demo
            setattr(cfg.options, key, value)
        # what a no-token question could break is a stage's handling of it, not a re-ask of a
        # SmolLM2 answer that did not parse (re-asks: test_models_local.py)
        cfg.models.llm.parse_retries = 0
        if name == "graphrag_global":  # it maps every report whatever the question asks:
            cfg.generation.max_context_tokens = 1024  # short points, fewer larger batches
            cfg.options.map_max_tokens = 32
            cfg.options.community_level = 0  # the 10 root reports, not the 23 leaf-most
        if name == "regraphrag":  # 2 x 1 perspectives, not 4 x 3: 176 tokens to decode, not 704
            cfg.options.perspectives, cfg.options.sub_queries = 2, 1
        run = engine.run(cfg, qs, tmp_path / name)
        rows = {r["qid"]: r for r in run.rows()}
        assert set(rows) == {q.qid for q in qs}, name
        for q in qs:
            assert isinstance(rows[q.qid]["retrieved_chunk_ids"], list), (name, q.qid)
        if not cfg.method_llm_use():
            alone = engine.run(cfg, [real], tmp_path / f"{name}-alone").rows()[0]
            assert rows["real"]["retrieved_chunk_ids"] == alone["retrieved_chunk_ids"], name


def test_damaged_run_folder_files_are_named_on_resume(demo_index: Path, tmp_path: Path, capsys):
    """A run folder's bookkeeping read back on resume (run.json, a batch's rows, its seconds
    and usage files, the retrieval checkpoint): damaged, each is exit 2 naming the file and
    what to do (was: internal errors); deleting a batch file and re-running recovers."""
    import shutil

    args = ["query", str(demo_index), "demo", "--method", "bm25", "--retrieval-only"]
    args += ["--limit", "4", "--batch-size", "2"]
    clean = tmp_path / "clean"
    assert main([*args, "--out", str(clean)]) == 0
    capsys.readouterr()
    damages = {
        "run.json": (b'{"index": ', "move the run folder aside"),
        "parts/00000.jsonl": (b"not json", "delete it and run the same command again"),
        "parts/00000.seconds.json": (b"[1, 2]", "a list, not a dict"),
        "parts/00001.usage.json": (b"\xff\xfe", "not JSON"),
    }
    for name, (data, message) in damages.items():
        run = tmp_path / name.replace("/", "-")
        shutil.copytree(clean, run)
        (run / "results.parquet").unlink()  # unfinished: the resume reads the parts back
        (run / name).write_bytes(data)
        assert main([*args, "--out", str(run)]) == 2, name
        err = capsys.readouterr().err
        assert f"{run / name}: damaged" in err and message in err, err
        if name.startswith("parts/"):
            (run / name).unlink()
            assert main([*args, "--out", str(run)]) == 0, name
            assert [r["qid"] for r in read_rows(run / "results.parquet")] == [
                r["qid"] for r in read_rows(clean / "results.parquet")
            ]
