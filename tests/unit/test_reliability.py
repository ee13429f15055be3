"""Settings and names a careful user can get wrong are refused up front: every numeric setting
outside its documented range (file:line, exit 2), and run labels that are not safe file names."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphrag_engine.api import _check_label
from graphrag_engine.cli import main
from graphrag_engine.config import IndexConfig, load_config
from graphrag_engine.config.ranges import BOUND, INTERVAL, range_of, within
from graphrag_engine.errors import BadInputError, ConfigError
from graphrag_engine.methods import METHODS, load_query_config, query_config


def numeric_keys(obj, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, range) of every numeric field of config dataclass `obj`, nested; a
    method's own section under the method's name."""
    keys = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            name = obj.method if f.metadata.get("section") else f.name
            keys += numeric_keys(value, f"{prefix}{name}.")
        elif (spec := range_of(type(obj), f.name)) and spec != "any":
            keys.append((prefix + f.name, spec))
    return keys


def outside(spec: str) -> float:
    """A number just outside range `spec`."""
    if m := INTERVAL.fullmatch(spec):
        return float(m[2]) if m[1] == "(" else float(m[2]) - 1
    m = BOUND.fullmatch(spec)
    return float(m[2]) if m[1] == ">" else float(m[2]) - 1


def as_yaml(dotted: str, value: float, head: str = "") -> tuple[str, int]:
    """A YAML text setting `dotted` to `value`, and the line the value is on."""
    parts = dotted.split(".")
    lines = head.splitlines() + [f"{'  ' * i}{p}:" for i, p in enumerate(parts[:-1])]
    number = int(value) if value == int(value) else value
    lines.append(f"{'  ' * (len(parts) - 1)}{parts[-1]}: {number}")
    return "\n".join(lines) + "\n", len(lines)


INDEX_KEYS = numeric_keys(IndexConfig())
QUERY_KEYS = sorted(
    {(name, key, spec) for name in METHODS for key, spec in numeric_keys(query_config(name))}
)


def test_every_numeric_setting_has_a_range_that_its_default_meets() -> None:
    for key, spec in INDEX_KEYS:
        value = IndexConfig()
        for part in key.split("."):
            value = getattr(value, part)
        assert value is None or within(value, spec), (key, spec, value)
    assert len(INDEX_KEYS) > 30 and len(QUERY_KEYS) > 100


@pytest.mark.parametrize(("key", "spec"), INDEX_KEYS, ids=[k for k, _ in INDEX_KEYS])
def test_an_index_setting_out_of_range_is_refused_at_its_line(tmp_path: Path, key, spec) -> None:
    text, line = as_yaml(key, outside(spec))
    path = tmp_path / "index.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path, IndexConfig)
    assert f"{path}:{line}: key '{key}' must be {spec}" in str(err.value)


@pytest.mark.parametrize(
    ("method", "key", "spec"), QUERY_KEYS, ids=[f"{m}:{k}" for m, k, _ in QUERY_KEYS]
)
def test_a_query_setting_out_of_range_is_refused_at_its_line(tmp_path: Path, method, key, spec):
    text, line = as_yaml(key, outside(spec), head=f"method: {method}")
    path = tmp_path / "q.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_query_config(path)
    assert f"{path}:{line}: key '{key}' must be {spec}" in str(err.value)


def test_settings_from_the_issue_exit_2_with_file_and_line(tmp_path: Path, capsys) -> None:
    """concurrency 0, a negative answer length, timeout, gleaning, budget or re-ask count."""
    cases = {
        "models:\n  llm:\n    concurrency: 0\n": "models.llm.concurrency' must be >= 1",
        "generation:\n  max_tokens: -5\n": "generation.max_tokens' must be >= 1",
        "models:\n  llm:\n    read_timeout_s: -1.0\n": "read_timeout_s' must be > 0",
        "models:\n  llm:\n    max_retries: -2\n": "max_retries' must be >= 0",
        "generation:\n  max_context_tokens: 0\n": "max_context_tokens' must be >= 1",
        "lightrag:\n  entity_tokens: -100\n": "lightrag.entity_tokens' must be >= 1",
    }
    for body, message in cases.items():
        cfg = tmp_path / "m.yaml"
        cfg.write_text("method: lightrag\n" + body)
        args = [
            "query",
            "none",
            "demo",
            "--method",
            str(cfg),
            "--out",
            str(tmp_path / "r"),
        ]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"{cfg}:" in err and message in err, err
    for body in ("extraction:\n  gleaning: -1\n", "graph:\n  unit_max_tokens: 0\n"):
        cfg = tmp_path / "i.yaml"
        cfg.write_text(body)
        assert main(["index", "--demo", "--out", str(tmp_path / "idx"), "--config", str(cfg)]) == 2
        assert f"{cfg}:" in capsys.readouterr().err
        assert not (tmp_path / "idx").exists()


def test_a_config_built_in_code_is_checked_too() -> None:
    cfg = query_config("bm25")
    cfg.batch_size = 0
    with pytest.raises(ConfigError, match="batch_size must be >= 1, got 0"):
        cfg.validate("bm25")
    cfg = query_config("rograg")
    cfg.options.floor = 2.0
    with pytest.raises(ConfigError, match=r"rograg.floor must be \[-1, 1\], got 2.0"):
        cfg.validate("rograg")


@pytest.mark.parametrize("label", ["bm25", "bm25 full", "rograg-28k", "a.b_c+d", "x" * 64])
def test_safe_labels_are_kept(label: str) -> None:
    assert _check_label(label) == label


@pytest.mark.parametrize(
    "label", ["..", ".", "", " a", "a ", "x/y", "a|b", "a\nb", "a\tb", "x" * 65, "../up", "-rf"]
)
def test_labels_that_are_no_safe_file_name_are_refused(label: str) -> None:
    with pytest.raises(BadInputError, match="--label"):
        _check_label(label)


def write_run(folder: Path, qids: list[str], summary: dict | None = None) -> Path:
    """A run folder as `query` writes it: results.parquet (the typed table) and summary.json."""
    from graphrag_engine.results import results_table

    folder.mkdir(parents=True)
    rows = [
        {
            "qid": q, "question": f"question {q}?", "method": "bm25", "answer": "Paris",
            "retrieved_ids": ["c1"], "retrieved_chunk_ids": ["c1"], "retrieved_scores": [1.0],
            "context_ids": ["c1"], "context_text": ["Paris is in France."],
            "gold_answers": ["Paris"], "supporting_ids": ["c1"], "qtype": None, "kind": None,
            "tokens": {}, "seconds": {"retrieve": 0.1}, "answer_failed": None, "extras": {},
        }
        for q in qids
    ]  # fmt: skip
    pq.write_table(results_table(rows), folder / "results.parquet")
    body = summary if summary is not None else {"label": folder.name, "seconds": 1.0}
    (folder / "summary.json").write_text(json.dumps(body))
    return folder


def test_eval_scores_a_well_formed_run(tmp_path: Path) -> None:
    run = write_run(tmp_path / "ok", ["a", "b"])
    assert main(["eval", str(run), "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "report.md").exists()


def test_eval_refuses_files_it_cannot_score(tmp_path: Path, capsys) -> None:
    """A results file of another schema, a summary field of the wrong type and a question
    written twice each exit 2 naming the file and what is wrong; no report is written."""
    other = tmp_path / "other"
    other.mkdir()
    pq.write_table(pa.table({"qid": ["a"], "score": [1.0]}), other / "results.parquet")
    typed = write_run(tmp_path / "typed", ["a"])
    pq.write_table(
        pa.table({**{c: pq.read_table(typed / "results.parquet")[c] for c in ("qid", "answer")},
                  "retrieved_chunk_ids": [7], "gold_answers": [["x"]], "supporting_ids": [["c"]]}),
        typed / "results.parquet",
    )  # fmt: skip
    cases = {
        other: "column 'answer' missing",
        typed: "column 'retrieved_chunk_ids' is int64",
        write_run(tmp_path / "sum", ["a"], {"label": "x", "seconds": "fast"}): "field 'seconds'",
        write_run(tmp_path / "tok", ["a"], {"query_tokens_per_question": {"answer": "many"}}): (
            "query_tokens_per_question.answer"
        ),
        write_run(tmp_path / "twice", ["a", "b", "a"]): "row 3 repeats question 'a'",
    }
    for run, message in cases.items():
        out = tmp_path / f"rep-{run.name}"
        assert main(["eval", str(run), "--out", str(out)]) == 2, run
        err = capsys.readouterr().err
        assert str(run) in err and message in err, err
        assert not out.exists()


def test_a_report_folder_keeps_no_stale_table_of_an_earlier_report(tmp_path: Path) -> None:
    """`eval --compare` then `eval` into one folder: the compare table goes, the new report
    stays, and a file the engine never wrote is kept."""
    a, b = write_run(tmp_path / "a", ["q1", "q2"]), write_run(tmp_path / "b", ["q1", "q2"])
    out = tmp_path / "rep"
    assert main(["eval", "--compare", str(a), str(b), "--out", str(out)]) == 0
    compare_files = {p.name for p in out.iterdir()} - {".graphrag-engine-report.json"}
    assert compare_files
    (out / "notes.txt").write_text("mine")
    assert main(["eval", str(a), str(b), "--out", str(out)]) == 0
    now = {p.name for p in out.iterdir()}
    assert "report.md" in now and "notes.txt" in now
    assert compare_files == {"compare.md", "compare.csv"} and not compare_files & now


@pytest.mark.parametrize("args", [["info", "{index}", "--json"], ["methods"]])
def test_a_reader_that_closes_stdout_ends_the_command_quietly(tmp_path: Path, args) -> None:
    """`info --json | head` (the reader gone before the output is written): exit 141 as a shell
    reports SIGPIPE, no traceback and no 'internal error' on stderr."""
    import os
    import subprocess
    import sys

    from tests.unit.test_needs import chunks_only_index

    chunks_only_index(tmp_path / "idx")
    cmd = [sys.executable, "-m", "graphrag_engine.cli"]
    cmd += [a.replace("{index}", str(tmp_path / "idx")) for a in args]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes a byte
    proc = subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == ""


def test_a_refused_demo_builds_nothing_and_leaves_no_folder(tmp_path: Path, capsys) -> None:
    """`demo --method nosuch` and `--questions 0` are refused before --out is made or the demo
    index is built."""
    out = tmp_path / "demo"
    assert main(["demo", "--method", "nosuch", "--out", str(out)]) == 2
    assert "not a registered method" in capsys.readouterr().err
    assert main(["demo", "--questions", "0", "--out", str(out)]) == 2
    assert "give 1 or more" in capsys.readouterr().err
    assert not out.exists()


def test_a_dry_run_counts_prompts_a_block_at_a_time() -> None:
    """`index --dry-run` builds and counts the extraction / unit prompts BLOCK at a time: the
    same total as counting them all at once, with memory for one block (a 2 kB template over
    8,000 chunks is 16 MB of prompts at once; a block is 0.5 MB)."""
    import tracemalloc

    from graphrag_engine.index.forecast import BLOCK, count_in_blocks

    template = "Extract every entity and relation of the text below. " * 36 + "\n\n{}"
    texts = [f"chunk {i}: Ann met Bo in Paris." for i in range(8_000)]
    sizes: list[int] = []

    def count(prompts: list[str]) -> list[int]:
        sizes.append(len(prompts))
        return [len(p.split()) for p in prompts]

    whole = sum(len(template.format(t).split()) for t in texts)
    tracemalloc.start()
    total = count_in_blocks(count, template.format, texts)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total == whole
    assert max(sizes) == BLOCK and sum(sizes) == len(texts)
    assert peak < 4 * 2**20, peak


@pytest.mark.parametrize("damage", ["garbage", "foreign"])
def test_a_damaged_cache_file_is_named_not_an_internal_error(tmp_path: Path, damage) -> None:
    """Every SQLite cache the engine reads back (embeddings, NER, LLM responses, read-only as a
    dry run reads it): a file that is no database, or another program's database, is one
    BadInputError (exit 2) naming the file and saying to move it aside."""
    import sqlite3

    from graphrag_engine.models.cache import ResponseCache
    from graphrag_engine.models.embed_cache import EmbeddingCache
    from graphrag_engine.models.ner_cache import NERCache

    for opener in (
        EmbeddingCache,
        NERCache,
        ResponseCache,
        lambda p: ResponseCache(p, readonly=True),
    ):
        path = tmp_path / f"{damage}-{id(opener)}.sqlite"
        if damage == "garbage":
            path.write_bytes(b"these bytes are no SQLite database" * 200)
        else:
            with sqlite3.connect(path) as conn:
                for table in ("mentions", "responses", "vectors"):  # same names, other columns
                    conn.execute(f"CREATE TABLE {table} (id INTEGER)")
        with pytest.raises(BadInputError, match="not a cache this engine wrote") as err:
            opener(path)
        assert str(path) in str(err.value) and "move it aside" in str(err.value)


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM])
def test_a_write_without_permission_exits_74(code: int, tmp_path: Path, capsys) -> None:
    """A write the system refuses (no write permission, an immutable file) ends in the storage
    exit with one line naming the place, not an internal error."""
    import argparse

    from graphrag_engine.cli.exits import STORAGE_EXIT, run_command

    target = tmp_path / "export" / "graph.graphml"

    def export(args: argparse.Namespace) -> int:  # the refusal, injected where export writes
        raise PermissionError(code, os.strerror(code), str(target))

    assert run_command(export, argparse.Namespace(out=str(tmp_path / "export"))) == STORAGE_EXIT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(target) in err[0] and "internal error" not in err[0]


@pytest.mark.parametrize("width", ["0", "-5", "x"])
def test_ask_refuses_a_width_that_shows_nothing(width: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["ask", str(tmp_path), "a question", "--method", "bm25", "--width", width])
    assert exit_info.value.code == 2 and "--width" in capsys.readouterr().err


@pytest.mark.parametrize("dry_run", [True, False])
def test_generate_refuses_a_prompt_id_given_twice(dry_run: bool, tmp_path: Path, capsys) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "hi"}\n{"id": "a", "prompt": "yo"}\n')
    args = ["generate", str(prompts), "--dry-run"] if dry_run else ["generate", str(prompts)]
    assert main([*args, "--out", str(tmp_path / "answers.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{prompts}:2: prompt id 'a' was given before, on line 1" in err
    assert not (tmp_path / "answers.jsonl").exists()


@pytest.mark.parametrize(
    ("yaml_text", "says"),
    [
        (
            "communities:\n  seed: 100000000000\n",
            "communities.seed' must be >= 0 and <= 2147483647",
        ),
        (
            "communities:\n  max_cluster_size: 1000000000000\n",
            "communities.max_cluster_size' must be >= 1 and <= 2147483647",
        ),
        (
            "graph:\n  synonym_threshold: .inf\n",
            "graph.synonym_threshold' must be >= -1 and finite",
        ),
        ("models:\n  llm:\n    read_timeout_s: .nan\n", "read_timeout_s' must be > 0"),
    ],
)
def test_index_settings_too_large_for_the_code_are_refused_when_read(
    yaml_text: str, says: str, tmp_path: Path
) -> None:
    """A number no stage could use (an overflowing seed or size, infinity, NaN) is refused with
    its file, line and key when the config is read, not after the build."""
    path = tmp_path / "index.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=re.escape(says)):
        load_config(path)


@pytest.mark.parametrize("key", ["top_k", "candidates"])
def test_query_sizes_that_would_exhaust_memory_are_refused(key: str, tmp_path: Path) -> None:
    from graphrag_engine.methods import load_query_config

    path = tmp_path / "q.yaml"
    path.write_text(f"method: bm25\nretrieval:\n  {key}: 1000000000\n")
    with pytest.raises(ConfigError, match=re.escape(f"retrieval.{key}' must be [1, 100000]")):
        load_query_config(path)
