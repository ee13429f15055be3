"""OpenAI-compatible servers (vllm serve, llama.cpp's server, hosted APIs): chat completions
and embeddings with bounded concurrency, timeouts, and retries.

Retries: 429, 5xx, dropped connections, timeouts, malformed bodies and chat answers without
content (`choices: []`, `content: null`) are retried with exponential backoff and full jitter,
honouring a Retry-After in seconds or as a date (any other value falls back to the backoff).
The API key is read from the environment variable named in the config and sent only in the
Authorization header: it is redacted from every message built from a server's answer, and never
reaches logs or the response cache.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import httpx

from graphrag_engine.errors import ConfigError
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.models.base import Completion, Done, GenParams, LLMError, Prompt, as_messages
from graphrag_engine.models.tokenizer import load_tokenizer

log = logging.getLogger(__name__)

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
DECODING_LADDER = ("json_schema", "json_object_schema", "json_object", "free")
"""How a prompt's JSON schema is sent, strongest first: OpenAI's `json_schema` response format
(vLLM, llama.cpp's C++ server), `json_object` carrying a `schema` (llama-cpp-python's server),
plain JSON mode, nothing. A server that refuses a step (HTTP 400/422, or any error naming
response_format: llama-cpp-python answers 500) moves the backend one step down for the run."""


class HTTPStatusError(LLMError):
    """A non-retryable HTTP error answer (4xx); `status` holds its code."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class HTTPSettings:
    """Connection and retry settings of one server."""

    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str | None = None
    concurrency: int = 8
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 120.0
    max_retries: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0


class RetryingClient:
    """POST JSON with retries; thread-safe, so a pool of workers shares one connection pool."""

    def __init__(self, settings: HTTPSettings) -> None:
        self.settings = settings
        headers = {"Content-Type": "application/json"}
        self._secret: str | None = None
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env)
            if not key:
                raise ConfigError(
                    f"llm.api_key_env: environment variable {settings.api_key_env} is not set; export the API key in it"
                )
            headers["Authorization"] = f"Bearer {key}"
            self._secret = key
        timeout = httpx.Timeout(settings.read_timeout_s, connect=settings.connect_timeout_s)
        limits = httpx.Limits(
            max_connections=settings.concurrency, max_keepalive_connections=settings.concurrency
        )
        self._client = httpx.Client(
            base_url=settings.base_url.rstrip("/"), headers=headers, timeout=timeout, limits=limits
        )
        self.retries = 0
        self._lock = threading.Lock()

    def _sleep_for(self, attempt: int, response: httpx.Response | None) -> float:
        s = self.settings
        if response is not None and "retry-after" in response.headers:
            value = response.headers["retry-after"]
            try:
                wait = float(value)
            except ValueError:
                try:
                    wait = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
                except (TypeError, ValueError, OverflowError):  # neither seconds nor a date
                    wait = random.uniform(0, min(s.backoff_max_s, s.backoff_base_s * 2**attempt))
            if wait == wait:  # not NaN
                return min(max(wait, 0.0), s.backoff_max_s)
        return random.uniform(0, min(s.backoff_max_s, s.backoff_base_s * 2**attempt))

    def redact(self, text: str) -> str:
        """`text` without the API key (a server may echo the Authorization header)."""
        return text.replace(self._secret, "[redacted]") if self._secret else text

    def post(
        self,
        path: str,
        body: dict[str, Any],
        required: str,
        refusal: str | None = None,
        accept: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """POST and return the JSON body, which must contain key `required` (and pass `accept`);
        retry what is transient. An error answer whose text names `refusal` (a request field
        the server rejects, even as a 5xx) is raised at once as HTTPStatusError."""
        last = "no attempt made"
        for attempt in range(self.settings.max_retries + 1):
            response = None
            try:
                response = self._client.post(path, json=body)
                refused = refusal is not None and refusal in response.text
                if response.status_code in RETRY_STATUS and not (
                    refused and response.status_code >= 400
                ):
                    last = f"HTTP {response.status_code}"
                elif response.status_code >= 400:
                    raise HTTPStatusError(
                        f"{self.settings.base_url}{path}: HTTP {response.status_code}: "
                        + self.redact(response.text)[:300],
                        response.status_code,
                    )
                else:
                    try:
                        data = response.json()
                    except ValueError:
                        data = None
                    if isinstance(data, dict) and required in data:
                        if accept is None or accept(data):
                            return data
                        last = f"answer without content: {self.redact(response.text)[:120]!r}"
                    else:
                        last = f"malformed body: {self.redact(response.text)[:120]!r}"
            except (
                httpx.TransportError,
                httpx.TimeoutException,
            ) as exc:  # dropped, refused, timed out
                last = type(exc).__name__
            if attempt < self.settings.max_retries:
                with self._lock:
                    self.retries += 1
                time.sleep(self._sleep_for(attempt, response))
        raise LLMError(
            f"{self.settings.base_url}{path}: failed after {self.settings.max_retries + 1} attempts (last: {last}); "
            "check that the server is up, or raise llm.max_retries / llm.read_timeout_s"
        )

    def map(self, fn, items: list, on_done: Done | None = None) -> list:
        """Apply fn to every item with at most `concurrency` requests in flight, keeping order;
        each result goes to `on_done` (in this thread) as it arrives."""
        out: list = [None] * len(items)
        with ThreadPoolExecutor(max_workers=max(1, self.settings.concurrency)) as pool:
            futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
            try:
                for fut in as_completed(futures):
                    i = futures[fut]
                    out[i] = fut.result()
                    if on_done is not None:
                        on_done([i], [out[i]])
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        return out

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


class OpenAICompatLLM:
    """Chat completions from an OpenAI-compatible server, `concurrency` requests at a time.

    A prompt with a JSON schema is sent in the strongest `response_format` the server accepts
    (DECODING_LADDER); every answer is still validated by its stage and re-asked.
    Each completion says which was used, and the ledger counts them."""

    def __init__(self, model: str, settings: HTTPSettings, tokenizer=None) -> None:
        self.model = model
        self.http = RetryingClient(settings)
        self.model_id = f"openai:{model}"
        self.cache_id = server_cache_id(self.model_id, settings.base_url)
        """The response-cache identity: the model and, unless on loopback, the server's URL."""
        self._tokenizer = tokenizer
        self.decoding = DECODING_LADDER[0]
        """The strongest schema mode this server has not refused."""
        self.refusals: list[str] = []
        """Why each step down the ladder was taken (the server's error)."""
        self._ladder_lock = threading.Lock()

    def count_tokens(self, prompts: list[Prompt]) -> list[int]:
        """Approximate prompt tokens with a local tokenizer (the server's own may differ slightly)."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer()
        texts = ["\n".join(m["content"] for m in as_messages(p)) for p in prompts]
        return [len(e.ids) for e in self._tokenizer.encode_batch(texts)]

    def _one(self, prompt: Prompt, params: GenParams) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": as_messages(prompt),
            **params.sampling(),
        }
        t0 = time.perf_counter()
        decoding = None
        while True:
            if params.json_schema is not None:
                decoding = self.decoding
                body.pop("response_format", None)
                if decoding == "json_schema":
                    body["response_format"] = {
                        "type": "json_schema",
                        "json_schema": {"name": "output", "schema": params.json_schema},
                    }
                elif decoding == "json_object_schema":
                    body["response_format"] = {"type": "json_object", "schema": params.json_schema}
                elif decoding == "json_object":
                    body["response_format"] = {"type": "json_object"}
            try:
                refusal = "response_format" if "response_format" in body else None
                data = self.http.post("/chat/completions", body, "choices", refusal, _has_content)
                break
            except HTTPStatusError as exc:
                if decoding in (None, "free") or not _refuses_format(exc):
                    raise
                self._step_down(decoding, str(exc))
        latency = time.perf_counter() - t0
        choice = data["choices"][0]
        text = choice["message"]["content"]
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        pt = _count(usage.get("prompt_tokens"))
        ct = _count(usage.get("completion_tokens"))
        if pt is None:
            pt = self.count_tokens([prompt])[0]
        if ct is None:
            ct = self.count_tokens([text])[0]
        return Completion(
            text,
            int(pt),
            int(ct),
            latency_s=latency,
            finish_reason=choice.get("finish_reason") or "stop",
            decoding={"json_schema": "schema", "json_object_schema": "schema"}.get(
                decoding, decoding
            ),
        )

    def _step_down(self, refused: str, why: str) -> None:
        """Move one step down the decoding ladder after the server refused `refused`."""
        with self._ladder_lock:
            if self.decoding != refused:  # another request already stepped down
                return
            self.decoding = DECODING_LADDER[DECODING_LADDER.index(refused) + 1]
            self.refusals.append(f"{refused}: {why[:300]}")
            log.warning(
                f"{self.model_id}: the server refused response_format {refused} ({why[:200]}); "
                f"prompts with a schema now go as {self.decoding}"
            )

    def generate(
        self, prompts: list[Prompt], params: GenParams, on_done: Done | None = None
    ) -> list[Completion]:
        """Send every prompt, `concurrency` at a time, each reported to `on_done` as it returns;
        a prompt that fails after its retries comes back with `error` set (the others are kept,
        so their cost is not paid twice)."""

        def one(prompt: Prompt) -> Completion:
            try:
                return self._one(prompt, params)
            except LLMError as exc:
                return Completion("", 0, 0, finish_reason="error", error=str(exc))

        return self.http.map(one, prompts, on_done)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def server_cache_id(model_id: str, base_url: str) -> str:
    """Cache identity of a model behind a server: two servers that call different models by
    one name must not share answers, so the server's URL is part of it. A loopback server is
    identified by the model name alone: it is this machine's, and its port changes with every
    start (a llama.cpp server started by the engine picks a free one)."""
    url = httpx.URL(base_url)
    if url.host in LOOPBACK:
        return model_id
    return f"{model_id}@{url.netloc.decode()}{url.path.rstrip('/')}"


def _refuses_format(exc: HTTPStatusError) -> bool:
    """An error answer that rejects the request's response_format: one naming it (any
    status), or a 400 / 422 about a schema or JSON mode. Other 400s (a prompt over the
    context window, a bad parameter) are not a reason to weaken decoding."""
    text = str(exc).lower()
    if "response_format" in text:
        return True
    return exc.status in (400, 422) and any(w in text for w in ("schema", "json", "grammar"))


def _has_content(data: dict[str, Any]) -> bool:
    """A chat answer with text in choices[0].message.content (else it is retried)."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    message = choices[0].get("message")
    return isinstance(message, dict) and isinstance(message.get("content"), str)


def _count(value: Any) -> int | None:
    """A usage count the server reported, or None when it is missing or not a whole number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible `/embeddings` endpoint, L2-normalized float32."""

    def __init__(self, model: str, settings: HTTPSettings, batch_size: int = 64) -> None:
        self.model = model
        self.http = RetryingClient(settings)
        self.batch_size = batch_size
        self.model_id = f"openai:{model}"
        self.cache_id = server_cache_id(self.model_id, settings.base_url)
        """The response-cache identity: the model and, unless on loopback, the server's URL."""
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """Embedding width (asks the server once)."""
        if self._dim is None:
            self._dim = int(self.encode(["dimension probe"]).shape[1])
        return self._dim

    def encode(self, texts: list[str]):
        """(n, d) float32, L2-normalized; batches sent concurrently."""
        import numpy as np

        batches = [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]

        def call(batch: list[str]):
            data = self.http.post(
                "/embeddings", {"model": self.model, "input": batch}, required="data"
            )
            rows = sorted(data["data"], key=lambda d: d.get("index", 0))
            if len(rows) != len(batch):
                raise LLMError(
                    f"{self.http.settings.base_url}/embeddings: {len(rows)} vectors for {len(batch)} texts"
                )
            # a server without a pooling layer (llama.cpp serving a causal LM) returns one vector
            # per token: mean-pool those into one vector per text
            return np.stack(
                [
                    np.asarray(r["embedding"], dtype=np.float32)
                    .reshape(-1, np.shape(r["embedding"])[-1])
                    .mean(0)
                    for r in rows
                ]
            )

        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        out = l2_normalize(np.concatenate(self.http.map(call, batches)))
        self._dim = out.shape[1]
        return out
