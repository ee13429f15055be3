"""The openai backend against a real llama.cpp server on loopback, and `graphrag-engine generate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.models import LLM, GenParams, ResponseCache
from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

pytestmark = pytest.mark.slow


PROMPTS = ["Say hello.", "Name a colour.", "What is 2 + 2?", "Name an animal."]


def test_real_server_batch(llama_server, tmp_path: Path) -> None:
    backend = OpenAICompatLLM(
        llama_server.alias, HTTPSettings(base_url=llama_server.url, concurrency=4)
    )
    llm = LLM(backend, cache=ResponseCache(tmp_path / "c.sqlite"))
    out = llm.generate(PROMPTS, GenParams(max_tokens=16), stage="answer")
    assert len(out) == 4 and all(c.text.strip() for c in out)
    assert all(c.prompt_tokens > 5 and 0 < c.completion_tokens <= 16 for c in out)
    again = llm.generate(PROMPTS, GenParams(max_tokens=16), stage="answer")
    assert [c.text for c in again] == [c.text for c in out] and all(c.cached for c in again)
    usage = llm.ledger.get("answer", backend.model_id)
    assert usage.calls == 4 and usage.cached_calls == 4


def test_generate_cli_with_dry_run_and_cache(llama_server, tmp_path: Path, run_cli) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(json.dumps({"id": f"q{i}", "prompt": p}) + "\n" for i, p in enumerate(PROMPTS))
    )
    out = tmp_path / "answers.jsonl"
    common = [
        "generate",
        str(prompts),
        "--backend",
        "openai",
        "--model",
        llama_server.alias,
        "--base-url",
        llama_server.url,
        "--max-tokens",
        "12",
    ]
    dry = run_cli(*common, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would send 4 LLM prompts" in dry.stdout and "nothing was sent" in dry.stdout
    assert not out.exists()
    first = run_cli(*common, "--out", str(out))
    assert first.returncode == 0, first.stderr
    assert "4 model calls, 0 cached" in first.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["q0", "q1", "q2", "q3"] and all(r["answer"] for r in rows)
    second = run_cli(*common, "--out", str(out))
    assert "0 model calls, 4 cached" in second.stdout
    assert [json.loads(line)["answer"] for line in out.read_text().splitlines()] == [
        r["answer"] for r in rows
    ]


def test_generate_cli_bad_prompt_file(tmp_path: Path, run_cli) -> None:
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"id": 1, "prompt": "ok"}\n{"id": 2}\n')
    proc = run_cli("generate", str(bad), "--backend", "none", "--out", str(tmp_path / "a.jsonl"))
    assert proc.returncode == 2
    assert f"{bad}:2: needs a non-empty 'prompt'" in proc.stderr
    bad.write_bytes(b'\xef\xbb\xbf{"id": 1, "prompt": "ok"}\n{"id": 2, "prompt": "a\\ud800"}\n')
    proc = run_cli("generate", str(bad), "--backend", "none", "--out", str(tmp_path / "a.jsonl"))
    assert proc.returncode == 2 and f"{bad}:2: holds a lone surrogate" in proc.stderr  # BOM ok


def test_generate_cli_none_backend_names_stage(tmp_path: Path, run_cli) -> None:
    p = tmp_path / "p.jsonl"
    p.write_text('{"prompt": "hi"}\n')
    proc = run_cli(
        "generate",
        str(p),
        "--backend",
        "none",
        "--out",
        str(tmp_path / "a.jsonl"),
        "--stage",
        "extract",
    )
    assert proc.returncode == 2 and "stage 'extract' needs an LLM" in proc.stderr
