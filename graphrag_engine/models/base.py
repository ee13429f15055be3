"""The batch-first model interface: generation parameters, completions and the backend protocol.

Every LLM call in the engine is `backend.generate(prompts, params)` over a whole batch; no
stage calls a model inside a per-item loop.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from graphrag_engine.errors import GraphRAGError

Message = dict[str, str]
Prompt = str | list[Message]
"""A prompt is plain text (sent as one user message) or a list of chat messages."""


Done = Callable[[list[int], list["Completion"]], None]
"""Called with (indices into the batch, their completions) as a backend finishes them."""


class LLMError(GraphRAGError):
    """A model call that failed after its retries (server down, timeouts, HTTP 5xx, bad
    responses); the CLI exits with 69 (EX_UNAVAILABLE): the same command resumes once the
    model answers again."""

    exit_code = 69


class LLMRequiredError(GraphRAGError):
    """A stage needed an LLM but the configured backend is `none`."""

    exit_code = 2


@dataclass(frozen=True)
class GenParams:
    """Generation parameters; part of the cache key, so equal params reuse cached answers."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    stop: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = None
    """Guided JSON: backends that support it (vLLM, some servers) constrain output to it."""

    def key(self) -> str:
        """Canonical JSON of the parameters, for cache keys."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    def sampling(self) -> dict[str, Any]:
        """The sampling fields as OpenAI-style servers and vLLM name them (stop only when set)."""
        fields = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }
        return {**fields, "stop": list(self.stop)} if self.stop else fields

    def with_seed(self, seed: int) -> GenParams:
        """Same parameters with another seed."""
        return replace(self, seed=seed)

    def sampled(self, min_temperature: float = 0.7) -> GenParams:
        """Same parameters, sampling at min_temperature at least (for re-asks)."""
        return replace(self, temperature=max(self.temperature, min_temperature))


@dataclass
class Completion:
    """One answer: text, token counts, whether it came from the cache, and latency."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool = False
    latency_s: float = 0.0
    finish_reason: str = "stop"
    dry_run: bool = False
    error: str | None = None
    """Set when the call failed after its retries; such completions are never cached."""
    decoding: str | None = None
    """For a prompt that carried a JSON schema: how the backend honoured it, "schema" (decoded
    under it), "json_object" (a server's plain JSON mode) or "free" (unconstrained; the stage
    parses and re-asks). None for prompts without a schema and for cached answers."""


@dataclass
class Usage:
    """Token and call accounting of one (stage, backend) pair."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    parse_failures: int = 0
    retries: int = 0
    seconds: float = 0.0
    dry_run_prompts: int = 0
    schema_decoded: int = 0
    """Fresh calls decoded under the stage's JSON schema."""
    json_mode_decoded: int = 0
    """Fresh calls with a schema that the server only honoured as plain JSON mode."""
    free_decoded: int = 0
    """Fresh calls with a schema that were decoded without any constraint."""
    http_retries: int = 0
    """HTTP requests a server backend sent again (429, 5xx, timeouts, answers without text)."""
    failed_prompts: int = 0
    """Prompts that failed after every retry and were recorded as failures (not raised)."""

    def add(self, c: Completion) -> None:
        """Count one completion."""
        if c.dry_run:
            self.dry_run_prompts += 1
            self.prompt_tokens += c.prompt_tokens
            return
        if c.cached:
            self.cached_calls += 1
            self.cached_prompt_tokens += c.prompt_tokens
            self.cached_completion_tokens += c.completion_tokens
        else:
            self.calls += 1
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
            if c.decoding is not None:
                name = {"schema": "schema_decoded", "json_object": "json_mode_decoded"}
                field_name = name.get(c.decoding, "free_decoded")
                setattr(self, field_name, getattr(self, field_name) + 1)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for manifests and run summaries."""
        return asdict(self)


def outcome_line(stage: str, usage: dict[str, Any]) -> str:
    """One line of how an LLM stage went: prompts, answered (how many re-asks it took),
    failed; a `warning:` in front when some answers failed."""
    asked = usage.get("calls", 0) + usage.get("cached_calls", 0) - usage.get("retries", 0)
    failed = usage.get("parse_failures", 0) + usage.get("failed_prompts", 0)
    if usage.get("dry_run_prompts"):
        return f"LLM {stage}: {usage['dry_run_prompts']} prompts forecast (dry run)"
    text = (
        f"LLM {stage}: {asked} prompts, {asked - failed} answered "
        f"({usage.get('retries', 0)} re-asks), {failed} failed"
    )
    return f"warning: {text} (recorded as failures)" if failed else text


def outcome_lines(summary: dict[str, dict[str, Any]]) -> list[str]:
    """`outcome_line` of every stage of a usage summary ({"stage/backend": usage})."""
    return [outcome_line(key.split("/")[0], usage) for key, usage in summary.items()]


@dataclass
class UsageLedger:
    """Usage per stage and backend, for run summaries and the manifest."""

    by_key: dict[tuple[str, str], Usage] = field(default_factory=dict)

    def get(self, stage: str, backend: str) -> Usage:
        """The Usage of (stage, backend), created on first use."""
        return self.by_key.setdefault((stage, backend), Usage())

    def summary(self) -> dict[str, dict[str, Any]]:
        """{"stage/backend": usage dict}."""
        return {f"{s}/{b}": u.as_dict() for (s, b), u in sorted(self.by_key.items())}

    def total(self) -> Usage:
        """Sum over every stage and backend."""
        out = Usage()
        for u in self.by_key.values():
            for k, v in asdict(u).items():
                setattr(out, k, getattr(out, k) + v)
        return out


class LLMBackend(Protocol):
    """A model that answers a batch of prompts in one call."""

    model_id: str

    def generate(
        self, prompts: list[Prompt], params: GenParams, on_done: Done | None = None
    ) -> list[Completion]:
        """Answer every prompt; the i-th completion belongs to the i-th prompt. `on_done`, when
        given, is called in the caller's thread with (indices, completions) as answers finish,
        so the front can cache and count them before the whole batch is back."""

    def count_tokens(self, prompts: list[Prompt]) -> list[int]:
        """Prompt tokens each prompt would cost (for dry runs and budgets)."""


def as_messages(prompt: Prompt) -> list[Message]:
    """Chat messages of a prompt (plain text becomes one user message)."""
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def prompt_key(model_id: str, prompt: Prompt, params: GenParams) -> str:
    """Cache key: hash of model id, prompt and generation parameters."""
    payload = json.dumps([model_id, as_messages(prompt), params.key()], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()
