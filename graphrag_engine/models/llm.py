"""The LLM front every stage calls: response cache, token accounting per stage, dry runs.

    llm = LLM(backend, cache=ResponseCache(path))
    completions = llm.generate(prompts, GenParams(max_tokens=512), stage="extract")

One call looks up the whole batch in the cache, sends only the misses to the backend in one
call, caches each answer as the backend reports it done (and counts it on the stage's progress
bar), and counts tokens per (stage, backend). With dry_run=True
nothing is sent: prompts and their tokens are counted, to estimate a run's cost before it.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable

from graphrag_engine.models.base import (
    Completion,
    GenParams,
    LLMBackend,
    LLMError,
    LLMRequiredError,
    Prompt,
    UsageLedger,
    prompt_key,
)
from graphrag_engine.models.cache import ResponseCache
from graphrag_engine.models.rates import record as record_rate
from graphrag_engine.progress import move_bar, progress

log = logging.getLogger(__name__)


class NoLLM:
    """The `none` backend: LLM-free pipelines stay explicit; any call names the stage."""

    model_id = "none"

    def generate(
        self, prompts: list[Prompt], params: GenParams, stage: str = "?"
    ) -> list[Completion]:
        """Refuse: the configuration has no LLM."""
        raise LLMRequiredError(
            f"stage '{stage}' needs an LLM but the llm backend is 'none'; set llm.backend to "
            "'transformers', 'openai' or 'vllm' in the config, or choose an LLM-free mode "
            "(e.g. Clue-RAG alpha = 0)"
        )

    def count_tokens(self, prompts: list[Prompt]) -> list[int]:
        """Nothing is ever sent."""
        return [0] * len(prompts)


def _generate_takes(backend: LLMBackend, parameter: str) -> bool:
    """Whether the backend's generate takes the keyword `parameter`."""
    try:
        return parameter in inspect.signature(backend.generate).parameters
    except (TypeError, ValueError):
        return False


def reports_steps(backend: LLMBackend) -> bool:
    """Whether the backend's generate takes `on_step` (decoding steps of a forward pass)."""
    return _generate_takes(backend, "on_step")


def reports_done(backend: LLMBackend) -> bool:
    """Whether the backend's generate takes `on_done` (answers reported as they finish)."""
    return _generate_takes(backend, "on_done")


class LLM:
    """Cache + accounting + dry-run wrapper around one backend."""

    def __init__(
        self,
        backend: LLMBackend,
        cache: ResponseCache | None = None,
        ledger: UsageLedger | None = None,
        dry_run: bool = False,
        flush_every: int = 64,
        max_failed_share: float = 0.5,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.ledger = ledger or UsageLedger()
        self.dry_run = dry_run
        self.flush_every = max(1, flush_every)
        self.max_failed_share = max_failed_share
        """Above this share of failed answers a structured call stops the command."""
        self._told: set[tuple[str, str]] = set()

    @property
    def model_id(self) -> str:
        """Id of the backend's model (part of every cache key)."""
        return self.backend.model_id

    @property
    def cache_id(self) -> str:
        """The model's name in cache keys: a server backend's says which server answered."""
        return getattr(self.backend, "cache_id", self.model_id)

    def generate(
        self,
        prompts: list[Prompt],
        params: GenParams,
        stage: str,
        keep_failures: bool = False,
        on_progress: Callable[[float], None] | None = None,
    ) -> list[Completion]:
        """Answer a batch: cached answers first, one backend call for the rest. A prompt that
        fails after the backend's retries raises LLMError, or with `keep_failures` comes back
        with `error` set (counted in the ledger's failed_prompts), the others kept.
        `on_progress` hears how many of `prompts` are answered so far (fractions while a
        forward pass decodes), for a caller's own bar."""
        if isinstance(self.backend, NoLLM):
            self.backend.generate(prompts, params, stage=stage)
        usage = self.ledger.get(stage, self.backend.model_id)
        started = time.perf_counter()
        keys = [prompt_key(self.cache_id, p, params) for p in prompts]
        hits = self.cache.get_many(sorted(set(keys))) if self.cache is not None else {}
        out: list[Completion | None] = [hits.get(k) for k in keys]
        # identical prompts in one batch are sent once
        todo: dict[str, int] = {}
        for i, k in enumerate(keys):
            if out[i] is None and k not in todo:
                todo[k] = i
        waiting = sum(c is None for c in out)  # prompts whose answer is not cached

        def answered(sent: float) -> None:  # `sent` of the todo prompts done
            if on_progress is not None:
                on_progress(len(prompts) - waiting + sent * waiting / max(1, len(todo)))

        answered(0)
        if todo:
            batch = [prompts[i] for i in todo.values()]
            if self.dry_run:
                counts = self.backend.count_tokens(batch)
                fresh = [Completion("", n, 0, dry_run=True) for n in counts]
            else:
                sent_at = time.perf_counter()
                fresh = self._send(batch, list(todo.keys()), params, stage, usage, answered)
                record_rate(
                    self.model_id,
                    sum(c.prompt_tokens for c in fresh if c.error is None),
                    sum(c.completion_tokens for c in fresh if c.error is None),
                    time.perf_counter() - sent_at,
                )
                self._tell_weaker_decoding(stage, fresh)
                failed = [c for c in fresh if c.error is not None]
                usage.failed_prompts += len(failed) if keep_failures else 0
                if failed and not keep_failures:
                    usage.seconds += time.perf_counter() - started
                    raise LLMError(
                        f"stage '{stage}': {len(failed)} of {len(fresh)} prompts failed "
                        f"({failed[0].error}); the {len(fresh) - len(failed)} answers that came back "
                        "are cached, so a re-run sends only the failed prompts"
                    )
            by_key = dict(zip(todo.keys(), fresh, strict=True))
            for i, k in enumerate(keys):
                if out[i] is None:
                    c = by_key[k]
                    # a repeated prompt in the same batch is a cache hit for its copies
                    out[i] = (
                        c
                        if todo[k] == i
                        else Completion(
                            c.text,
                            c.prompt_tokens,
                            c.completion_tokens,
                            cached=True,
                            finish_reason=c.finish_reason,
                            dry_run=c.dry_run,
                        )
                    )
        result = [c for c in out if c is not None]
        for c in result:
            usage.add(c)
        usage.seconds += time.perf_counter() - started
        return result

    def _send(
        self,
        batch: list[Prompt],
        keys: list[str],
        params: GenParams,
        stage: str,
        usage,
        answered: Callable[[float], None] = lambda _: None,
    ) -> list[Completion]:
        """The whole batch to the backend in one call; each answer is cached and counted on the
        stage's progress bar as the backend reports it done (per request for servers, per
        forward batch in process), so a run killed mid-stage keeps every answer already paid
        for. A backend that cannot report (no `on_done`) gets slices of `flush_every`."""
        bar = progress(f"llm {stage}", total=len(batch), unit="prompt")
        http = getattr(self.backend, "http", None)  # a server backend's retry counter
        before = http.retries if http is not None else 0

        finished = 0  # prompts answered so far

        def move_to(position: float) -> None:
            move_bar(bar, position)
            answered(position)

        def done(indices: list[int], answers: list[Completion]) -> None:
            nonlocal finished
            if self.cache is not None:
                ok = [
                    (keys[i], c) for i, c in zip(indices, answers, strict=True) if c.error is None
                ]
                self.cache.put_many(self.model_id, ok)
            finished += len(indices)
            move_to(finished)

        def step(share_of_pass: float) -> None:  # a forward pass's prompts finish together
            move_to(finished + share_of_pass)

        try:
            if reports_steps(self.backend):
                fresh = self.backend.generate(batch, params, on_done=done, on_step=step)
            elif reports_done(self.backend):
                fresh = self.backend.generate(batch, params, on_done=done)
            else:
                fresh = []
                for lo in range(0, len(batch), self.flush_every):
                    part = self.backend.generate(batch[lo : lo + self.flush_every], params)
                    done(list(range(lo, lo + len(part))), part)
                    fresh.extend(part)
        finally:
            bar.close()
            if http is not None:
                usage.http_retries += http.retries - before
        return fresh

    def _tell_weaker_decoding(self, stage: str, fresh: list[Completion]) -> None:
        """Say once per stage when the backend did not decode a schema'd prompt under its schema
        (the ledger counts every such call)."""
        for how in ("json_object", "free"):
            n = sum(c.decoding == how for c in fresh)
            if n and (stage, how) not in self._told:
                self._told.add((stage, how))
                what = "in plain JSON mode" if how == "json_object" else "without constraint"
                log.warning(
                    f"{self.model_id}: stage '{stage}': {n} answers with a JSON schema were "
                    f"decoded {what} (the backend did not honour the schema); they are validated "
                    "and re-asked, and the run summary counts them",
                )

    def note_parse_failures(self, stage: str, failed: int, retried: int) -> None:
        """Count answers that did not parse (final failures) and re-asks."""
        usage = self.ledger.get(stage, self.backend.model_id)
        usage.parse_failures += failed
        usage.retries += retried

    def estimate(self, prompts: list[Prompt], params: GenParams) -> dict[str, int]:
        """Cost of a batch before sending it: prompts, prompt tokens, completion tokens at most."""
        counts = self.backend.count_tokens(prompts)
        return {
            "prompts": len(prompts),
            "prompt_tokens": int(sum(counts)),
            "max_completion_tokens": params.max_tokens * len(prompts),
        }
