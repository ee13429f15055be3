"""The openai backend against a real llama.cpp server on loopback, and `graphrag-engine generate`
sending its prompts there."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from graphrag_engine.models import LLM, GenParams, ResponseCache
from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

PROMPTS = ["Say hello.", "Name a colour.", "What is 2 + 2?", "Name an animal."]


def test_each_server_answer_is_cached_as_it_returns(llama_server, tmp_path: Path) -> None:
    """Requests run 2 at a time; each answer is reported, cached and counted on its own."""
    from tests.integration.test_models_local import Watched

    backend = OpenAICompatLLM(
        llama_server.alias, HTTPSettings(base_url=llama_server.url, concurrency=2)
    )
    cache = ResponseCache(tmp_path / "c.sqlite")
    watched = Watched(backend, cache)
    out = LLM(watched, cache=cache).generate(PROMPTS, GenParams(max_tokens=8), stage="answer")
    assert len(out) == 4 and watched.reports == [(1, 1), (1, 2), (1, 3), (1, 4)]


def test_embeddings_from_a_real_server(tmp_path: Path) -> None:
    from graphrag_engine.models.llama_server import LlamaServer
    from graphrag_engine.models.openai_llm import OpenAIEmbedder

    with LlamaServer(embedding=True, log=tmp_path / "emb.log") as server:
        emb = OpenAIEmbedder(
            server.alias, HTTPSettings(base_url=server.url, concurrency=2), batch_size=2
        )
        texts = [
            "Hana Lirrow designed the opera house.",
            "The opera house was designed by Hana Lirrow.",
            "Smoked eel.",
        ]
        vecs = emb.encode(texts)
        assert vecs.dtype == np.float32 and vecs.shape[0] == 3 and vecs.shape[1] == emb.dim > 100
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
        # SmolLM2 is no embedding model, and llama-cpp-python's token states for it depend on
        # what the server processed before (measured), so only the plumbing is checked here:
        # one unit vector per text, of the server's width; meaning is tested with MiniLM
        assert not np.allclose(vecs[0], vecs[2])


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
