"""Several methods in one `query`, the Python API (`from graphrag_engine import Engine`) and the warning
for questions whose gold passages the index does not hold."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq

from graphrag_engine.cli import main
from graphrag_engine.eval.datasets import Question
from tests.paths import REPO

README = REPO / "README.md"


def test_several_methods_in_one_query_equal_their_runs_alone(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    """`--method bm25 --method naive` writes one run folder per method, each holding what the
    method gives alone; a bare retrieval method needs no flag; --batch-size sets the parts."""
    out = tmp_path / "many"
    args = ["query", str(demo_index), "demo", "--method", "bm25", "--method", "naive"]
    assert main([*args, "--out", str(out), "--batch-size", "7"]) == 0
    captured = capsys.readouterr()
    assert "bm25: no LLM backend set, so passages are ranked" in captured.err
    assert "--llm-backend transformers" in captured.err
    assert str(out / "bm25") in captured.out and str(out / "naive") in captured.out
    for method in ("bm25", "naive"):
        alone = tmp_path / method
        one = ["query", str(demo_index), "demo", "--method", method, "--retrieval-only"]
        assert main([*one, "--out", str(alone)]) == 0
        many, single = (pq.read_table(p / "results.parquet") for p in (out / method, alone))
        assert (
            many.column("retrieved_ids").to_pylist() == single.column("retrieved_ids").to_pylist()
        )
        assert many.column("answer").null_count == many.num_rows == 45
        assert len(list((out / method / "parts").glob("*.jsonl"))) == 7  # ceil(45 / 7)
    assert main([*args, "--out", str(out), "--batch-size", "7"]) == 0  # resumes both
    assert capsys.readouterr().out.count("45 resumed") == 2
    assert main([*args, "--out", str(out)]) == 2  # other batches: parts would not line up
    assert "different config" in capsys.readouterr().err


def test_a_method_that_needs_an_llm_names_the_flag(demo_index: Path, tmp_path: Path, capsys):
    """ROGRAG's LLM keywords with no backend: exit 2 naming --llm-backend, nothing written."""
    args = ["query", str(demo_index), "demo", "--method", "rograg", "--out", str(tmp_path / "r")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "needs an LLM" in err and "--llm-backend transformers" in err
    assert not (tmp_path / "r").exists()
    twice = ["query", str(demo_index), "demo", "--method", "bm25", "--method", "bm25"]
    assert main([*twice, "--out", str(tmp_path / "t")]) == 2
    assert "bm25 given twice" in capsys.readouterr().err


def test_llm_backends_are_made_once_per_model_setting(demo_index: Path) -> None:
    """Two methods with the same LLM settings (caches apart) share one backend object."""
    from graphrag_engine import Engine

    engine = Engine(demo_index)
    a = engine.config("naive", llm_backend="openai", llm_model="m", base_url="http://127.0.0.1:9")
    b = engine.config("bm25", llm_backend="openai", llm_model="m", base_url="http://127.0.0.1:9")
    b.models.llm.cache = "elsewhere.sqlite"
    c = engine.config(
        "bm25", llm_backend="openai", llm_model="other", base_url="http://127.0.0.1:9"
    )
    assert engine._shared_backend(a) is engine._shared_backend(b)
    assert engine._shared_backend(c) is not engine._shared_backend(a)


def test_readme_python_api_example_runs(demo_index: Path, tmp_path: Path, monkeypatch) -> None:
    """The README's Python API example, run as written (its index path pointed at the test's)."""
    block = re.search(r"## Python API.*?```python\n(.*?)```", README.read_text(), re.S)
    assert block, "README has no Python API example"
    code = block.group(1).replace("runs/demo-index", str(demo_index))
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # our own README's code, not model output
    runs = scope["runs"]
    assert set(runs) == {"bm25", "naive"}
    table = scope["table"]
    assert table.num_rows == 45 and {"qid", "retrieved_ids", "answer"} <= set(table.column_names)
    assert runs["bm25"].summary["gold_in_index"] == 1.0


def test_questions_for_another_corpus_warn_with_the_share_found(
    demo_index: Path, tmp_path: Path, capsys
) -> None:
    """Gold passages mostly absent from the index: `query` warns with the share found and the
    summary and the eval report carry it."""
    from graphrag_engine import Engine

    qs = [Question("x1", "Who founded Acme?", ["Ann"], supporting_ids=["nope-1", "nope-2"])]
    run = Engine(demo_index).run("bm25", qs, tmp_path / "run")
    assert "only 0% of the questions' gold passages are in the index" in capsys.readouterr().err
    assert run.summary["gold_in_index"] == 0.0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["gold_in_index"] == 0.0
    assert main(["eval", str(tmp_path / "run"), "--out", str(tmp_path / "rep")]) == 0
    assert "| gold passages in index |" in (tmp_path / "rep" / "report.md").read_text()
    assert "| 0% |" in (tmp_path / "rep" / "report.md").read_text()


def test_engine_run_results_read_back(demo_index: Path, tmp_path: Path) -> None:
    """Engine.run returns the run; Run.open reads the same folder back as Arrow."""
    from graphrag_engine import Engine, Run

    run = Engine(demo_index).run("naive", "demo", tmp_path / "n", limit=5)
    again = Run.open(tmp_path / "n")
    assert again.summary == run.summary and again.summary["gold_in_index"] == 1.0
    assert again.table().num_rows == 5


def test_answers_together_hold_what_each_run_gives_alone(demo_index: Path, tmp_path: Path) -> None:
    """`run_many(..., answers_together=True)`: every method retrieves first and one batched
    call answers them all; each run holds the rankings, contexts and answers it gives alone,
    its answers read back from its own cache, its usage and seconds with its share of the
    call."""
    import pytest

    from graphrag_engine import Engine

    engine = Engine(demo_index)
    methods = ["bm25", "naive", "hipporag"]
    configs = [engine.config(m, llm_backend="transformers", batch_size=1) for m in methods]
    for cfg in configs:  # short prompts and answers: the test checks the plumbing
        cfg.generation.max_context_tokens, cfg.generation.max_tokens = 192, 8
    kw = {"limit": 2, "labels": methods}
    together = engine.run_many(configs, "demo", tmp_path / "t", answers_together=True, **kw)
    [call] = engine.answer_calls
    assert (call.prompts, call.runs) == (6, 3)
    assert sum(call.seconds_by_run.values()) == pytest.approx(call.seconds)
    apart = engine.run_many(configs, "demo", tmp_path / "a", **kw)
    assert engine.answer_calls == []
    # the three share one answer prompt: runs that built the same context ask the same prompt,
    # which the batched call sends once (the first run's) and gives the others as a cache hit
    prompts = [(r["qid"], r["context_text"]) for m in methods for r in together[m].rows()]
    first_asked = [prompts.index(p) == i for i, p in enumerate(prompts)]
    for k, m in enumerate(methods):
        mine, alone = together[m].rows(), apart[m].rows()
        for field in ("qid", "retrieved_ids", "context_ids", "context_text", "answer"):
            assert [r[field] for r in mine] == [r[field] for r in alone], (m, field)
        assert all(r["answer"] for r in mine)
        summary = together[m].summary
        [answer] = [u for key, u in summary["llm"].items() if key.startswith("answer/")]
        # sent in the batched call, then read back from the cache when the run went on
        asked = sum(first_asked[2 * k : 2 * k + 2])  # its prompts that no run before it asked
        assert (answer["calls"], answer["cached_calls"]) == (asked, 4 - asked)
        share = call.seconds_by_run[str(tmp_path / "t" / m)]
        assert answer["seconds"] >= share > 0
        assert summary["stage_seconds"]["answer"] >= share
        assert summary["seconds"] >= share
