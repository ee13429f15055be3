"""OpenAI-compatible client against the FAULT INJECTOR (tests/fault_server.py): retries,
backoff, Retry-After, timeouts, concurrency limits, key hygiene."""

from __future__ import annotations

import time

import numpy as np
import pytest

from graphrag_engine.errors import ConfigError
from graphrag_engine.models import LLM, GenParams, LLMError, ResponseCache
from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM, OpenAIEmbedder
from tests.fault_server import FaultInjector

SECRET = "sk-test-DO-NOT-LEAK-1234567890"


def client(url: str, **kw) -> OpenAICompatLLM:
    settings = HTTPSettings(base_url=url, backoff_base_s=0.01, backoff_max_s=1.0, **kw)
    return OpenAICompatLLM("test-model", settings)


def test_retries_500_429_malformed_and_dropped_then_succeeds() -> None:
    with FaultInjector(["500", "429:0", "malformed", "drop", "503"]) as srv:
        llm = client(srv.url, concurrency=1, max_retries=6)
        (c,) = llm.generate(["hello"], GenParams())
        assert c.error is None and c.text == "echo: hello"
        assert (c.prompt_tokens, c.completion_tokens) == (7, 3)
        assert len(srv.requests) == 6 and llm.http.retries == 5


def test_retry_after_is_honoured() -> None:
    with FaultInjector(["429:1"]) as srv:
        llm = client(srv.url, concurrency=1)
        llm.generate(["x"], GenParams())
        gap = srv.requests[1]["t"] - srv.requests[0]["t"]
        assert 0.9 <= gap < 2.5


def test_hang_hits_read_timeout_and_is_retried() -> None:
    with FaultInjector(["hang:3"]) as srv:
        llm = client(srv.url, concurrency=1, read_timeout_s=0.5)
        t0 = time.perf_counter()
        (c,) = llm.generate(["slow"], GenParams())
        assert c.error is None and time.perf_counter() - t0 < 2.5
        assert len(srv.requests) == 2


def test_gives_up_after_max_retries_and_names_the_cause() -> None:
    with FaultInjector(["500"] * 10) as srv:
        llm = client(srv.url, concurrency=1, max_retries=2)
        (c,) = llm.generate(["x"], GenParams())
        assert c.error and "failed after 3 attempts" in c.error and "HTTP 500" in c.error
        assert len(srv.requests) == 3


def test_client_error_is_not_retried() -> None:
    with FaultInjector(["400"]) as srv:
        (c,) = client(srv.url, concurrency=1).generate(["x"], GenParams())
        assert "HTTP 400" in c.error and len(srv.requests) == 1


def test_failed_prompts_raise_but_successes_are_cached(tmp_path) -> None:
    with FaultInjector(["ok", "500", "500", "500", "ok"]) as srv:
        llm = LLM(
            client(srv.url, concurrency=1, max_retries=2),
            cache=ResponseCache(tmp_path / "c.sqlite"),
        )
        with pytest.raises(LLMError, match="1 of 3 prompts failed"):
            llm.generate(["a", "b", "c"], GenParams(), stage="extract")
        assert len(llm.cache) == 2
        srv.plan = []
        out = llm.generate(["a", "b", "c"], GenParams(), stage="extract")
        assert [c.text for c in out] == ["echo: a", "echo: b", "echo: c"]
        assert [c.cached for c in out] == [True, False, True]
        assert len(srv.requests) == 6  # only "b" was sent again


def test_concurrency_is_bounded() -> None:
    with FaultInjector(["hang:0.3"] * 12) as srv:
        llm = client(srv.url, concurrency=4)
        t0 = time.perf_counter()
        out = llm.generate([f"p{i}" for i in range(12)], GenParams())
        elapsed = time.perf_counter() - t0
        assert [c.text for c in out] == [f"echo: p{i}" for i in range(12)]
        assert 0.85 <= elapsed < 2.0  # 12 requests of 0.3 s, 4 at a time: 3 waves
        starts = sorted(r["t"] for r in srv.requests)
        in_flight = max(sum(1 for s in starts if t <= s < t + 0.25) for t in starts)
        assert in_flight <= 4


def test_api_key_from_env_is_sent_and_never_leaks(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", SECRET)
    with FaultInjector(["500"] * 3) as srv:
        llm = LLM(
            client(srv.url, concurrency=1, max_retries=2, api_key_env="TEST_LLM_KEY"),
            cache=ResponseCache(tmp_path / "c.sqlite"),
        )
        with pytest.raises(LLMError) as err:
            llm.generate(["x"], GenParams(), stage="s")
        assert srv.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
        assert SECRET not in str(err.value)
        srv.plan = []
        llm.generate(["y"], GenParams(), stage="s")
        llm.cache.close()
        assert SECRET.encode() not in (tmp_path / "c.sqlite").read_bytes()
        for f in tmp_path.glob("c.sqlite*"):
            assert SECRET.encode() not in f.read_bytes()


def test_missing_key_env_is_a_config_error(monkeypatch) -> None:
    monkeypatch.delenv("NOPE_KEY", raising=False)
    with pytest.raises(ConfigError, match="NOPE_KEY is not set"):
        client("http://127.0.0.1:9/v1", api_key_env="NOPE_KEY")


def test_embeddings_endpoint_normalized_in_order() -> None:
    with FaultInjector(["503"]) as srv:
        emb = OpenAIEmbedder("e", HTTPSettings(base_url=srv.url, backoff_base_s=0.01), batch_size=2)
        vecs = emb.encode(["a", "bbb", "cc"])
        assert vecs.dtype == np.float32 and vecs.shape == (3, 3)
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-6)
        assert vecs[1, 0] > vecs[2, 0] > vecs[0, 0]


def test_guided_json_is_sent_as_response_format() -> None:
    with FaultInjector([]) as srv:
        schema = {"type": "object", "properties": {"a": {"type": "string"}}}
        client(srv.url).generate(["x"], GenParams(json_schema=schema, stop=("END",)))
        body = srv.requests[0]["body"]
        assert body["response_format"]["json_schema"]["schema"] == schema and body["stop"] == [
            "END"
        ]


SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


@pytest.mark.parametrize(
    ("refused", "sent", "decoding"),
    [
        ((), "json_schema", "schema"),
        (("json_schema",), "json_object_schema", "schema"),
        (("json_schema", "json_object_schema"), "json_object", "json_object"),
        (("json_schema", "json_object_schema", "json_object"), None, "free"),
    ],
)
def test_refused_response_format_steps_down_and_the_ledger_says_so(
    refused: tuple[str, ...], sent: str | None, decoding: str
) -> None:
    with FaultInjector([], refuse_formats=refused) as srv:
        backend = client(srv.url, concurrency=1)
        llm = LLM(backend)
        first = llm.generate(["x"], GenParams(json_schema=SCHEMA), stage="s")
        second = llm.generate(["y"], GenParams(json_schema=SCHEMA), stage="s")
        assert [c.decoding for c in first + second] == [decoding, decoding]
        # the refused steps were tried once each, then the server's answer is remembered
        assert len(srv.requests) == 2 + len(refused)
        last = srv.requests[-1]["body"].get("response_format") or {}
        assert (last.get("type", "") + ("_schema" if "schema" in last else "") or None) == sent
        assert len(backend.refusals) == len(refused)
        usage = llm.ledger.get("s", backend.model_id)
        counts = (usage.schema_decoded, usage.json_mode_decoded, usage.free_decoded)
        assert (
            counts == {"schema": (2, 0, 0), "json_object": (0, 2, 0), "free": (0, 0, 2)}[decoding]
        )
        plain = llm.generate(["z"], GenParams(), stage="t")  # no schema: no decoding mode
        assert plain[0].decoding is None and "response_format" not in srv.requests[-1]["body"]


def test_a_400_without_a_schema_is_not_retried_as_a_format_refusal() -> None:
    with FaultInjector(["400"]) as srv:
        (c,) = client(srv.url).generate(["x"], GenParams())
        assert c.error is not None and "HTTP 400" in c.error and len(srv.requests) == 1


def test_a_500_that_names_response_format_is_a_refusal_not_an_outage() -> None:
    """llama-cpp-python answers an unknown response_format type with HTTP 500: not retried."""
    with FaultInjector([], refuse_formats=("json_schema",), refuse_status=500) as srv:
        backend = client(srv.url, concurrency=1, max_retries=5)
        (c,) = backend.generate(["x"], GenParams(json_schema=SCHEMA))
        assert c.error is None and c.decoding == "schema" and len(srv.requests) == 2
        assert backend.decoding == "json_object_schema" and backend.http.retries == 0


def test_a_retry_after_that_is_neither_seconds_nor_a_date_backs_off_and_retries() -> None:
    with FaultInjector(["429:soon", "429:"]) as srv:
        llm = client(srv.url, concurrency=1)
        (c,) = llm.generate(["x"], GenParams())
        assert c.error is None and c.text == "echo: x" and llm.http.retries == 2


def test_answers_without_text_are_retried_then_recorded_as_failures(tmp_path) -> None:
    """`choices: []` and `content: null` are not answers: retried, and after the last attempt
    the prompt fails (nothing cached) instead of becoming an empty answer."""
    empty = 'raw:200:{"choices": []}'
    null = 'raw:200:{"choices": [{"message": {"role": "assistant", "content": null}}]}'
    with FaultInjector([empty, null]) as srv:
        llm = LLM(client(srv.url, concurrency=1), cache=ResponseCache(tmp_path / "c.sqlite"))
        (c,) = llm.generate(["x"], GenParams(), stage="s")
        assert c.text == "echo: x" and len(srv.requests) == 3
        assert llm.ledger.get("s", "openai:test-model").http_retries == 2
    with FaultInjector([null] * 3) as srv:
        llm = LLM(client(srv.url, concurrency=1, max_retries=2))
        with pytest.raises(LLMError, match="answer without content"):
            llm.generate(["y"], GenParams(), stage="s")


def test_usage_that_is_not_a_whole_number_is_counted_locally() -> None:
    body = '{"choices": [{"message": {"content": "two words"}}], "usage": '
    plan = [
        f'raw:200:{body}{{"prompt_tokens": "many", "completion_tokens": 2.5}}}}',
        f'raw:200:{body}{{"prompt_tokens": 11.0, "completion_tokens": true}}}}',
    ]
    with FaultInjector(plan) as srv:
        llm = client(srv.url, concurrency=1)
        a, b = llm.generate(["hello there", "hello there"], GenParams())
        local = llm.count_tokens(["hello there", "two words"])
        assert (a.text, a.prompt_tokens, a.completion_tokens) == ("two words", *local)
        assert (b.prompt_tokens, b.completion_tokens) == (11, local[1])


def test_an_error_body_that_echoes_the_key_is_redacted(monkeypatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", SECRET)
    with FaultInjector(
        ['raw:401:{"error": "invalid key {auth}"}', "raw:502:{auth}"] + ["raw:200:{auth}"] * 3
    ) as srv:
        llm = client(srv.url, concurrency=1, max_retries=2, api_key_env="TEST_LLM_KEY")
        (c,) = llm.generate(["x"], GenParams())
        assert "HTTP 401" in c.error and "[redacted]" in c.error and SECRET not in c.error
        (c,) = llm.generate(["y"], GenParams())
        assert c.error and "malformed body" in c.error and SECRET not in c.error


def test_the_cache_keeps_answers_of_different_servers_apart(tmp_path, monkeypatch) -> None:
    """Two servers that serve different models under one name: with their URLs in the cache
    identity the second is asked too; on loopback (ports change with every start) the model
    name alone identifies the answers, so a restarted local server reuses them."""
    import graphrag_engine.models.openai_llm as openai_llm

    cache = ResponseCache(tmp_path / "c.sqlite")

    def ask(url: str) -> str:
        (c,) = LLM(client(url, concurrency=1), cache=cache).generate(["hi"], GenParams(), "s")
        return c.text

    with FaultInjector(["say:from A"]) as a, FaultInjector(["say:from B"]) as b:
        assert ask(a.url) == "from A" and ask(b.url) == "from A"  # loopback: one model
        assert len(b.requests) == 0
        monkeypatch.setattr(openai_llm, "LOOPBACK", ())  # as if both were remote hosts
        assert ask(b.url) == "from B" and ask(a.url) == "echo: hi"  # each its own entries
    assert openai_llm.server_cache_id("openai:m", "https://api.example.com/v1/") == (
        "openai:m@api.example.com/v1"
    )


def test_a_400_about_the_context_window_does_not_weaken_decoding() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    too_long = 'raw:400:{"error": "maximum context length is 2048 tokens, you requested 2110"}'
    with FaultInjector([too_long]) as srv:
        llm = client(srv.url, concurrency=1)
        (c,) = llm.generate(["x"], GenParams(json_schema=schema))
        assert c.error and "maximum context length" in c.error
        assert llm.decoding == "json_schema" and not llm.refusals
