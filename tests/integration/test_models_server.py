"""The openai backend against a real llama.cpp server on loopback, and `graphrag-engine generate`. (the part that needs models, servers or real data)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from graphrag_engine.models import LLM, GenParams, ResponseCache
from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM
from tests.unit.test_models_server import PROMPTS


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
