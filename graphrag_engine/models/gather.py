"""Several threads' LLM calls gathered into shared forward passes.

On a CPU a model decodes a pass of 8 prompts in about the time of a pass of 1 (SmolLM2 in
bfloat16: 61 against 56 ms a step), so methods that each send a few prompts of their own
stage (keywords, plans, logic forms, perspectives, hypothetical passages) lose most of the
time they wait. `GatheredBackend` stands in front of one backend for a known number of
threads (parties): a call waits until every party still running has called too (or finished),
then one `generate_rows` call, on the thread that started them, answers all of them, each prompt under its own parameters; in
float32 every answer is the one it gets alone. Only greedy calls, or calls that sample alike,
are mixed; the others go on their own.

The seconds a thread spends waiting on other threads' prompts are not its own: each call is
charged its rows' shares of the forward passes they shared (a pass's seconds split equally
among its rows), and the rest is added to the thread's `idle_seconds()`, which stage clocks
and the LLM front take off what they count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from graphrag_engine.models.base import Completion, Done, GenParams, Prompt

T = TypeVar("T")

_local = threading.local()


def idle_seconds() -> float:
    """Seconds this thread has waited in gathered calls on other threads' prompts."""
    return getattr(_local, "idle", 0.0)


def _add_idle(seconds: float) -> None:
    _local.idle = idle_seconds() + max(0.0, seconds)


def rows_mix(params: list[GenParams]) -> bool:
    """Whether prompts with these parameters can share forward passes: all greedy, or all
    sampling alike (temperature, top_p and seed)."""
    kinds = {(p.temperature, p.top_p, p.seed) if p.temperature > 0 else "greedy" for p in params}
    return len(kinds) <= 1


def gathers(backend: Any) -> bool:
    """Whether the backend can answer prompts of different parameters in one call."""
    return callable(getattr(backend, "generate_rows", None))


@dataclass
class _Call:
    prompts: list[Prompt]
    params: GenParams
    result: list[Completion] | None = None
    error: BaseException | None = None
    share: float = 0.0
    """This call's part of the gathered call's seconds."""


@dataclass
class GatheredBackend:
    """One backend shared by `parties` threads whose calls are answered together (see the
    module's docstring); every other attribute is the backend's."""

    backend: Any
    parties: int
    calls: list[tuple[int, int, float]] = field(default_factory=list)
    """Each gathered call: (calls it answered, prompts, seconds), in order."""
    _waiting: list[_Call] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def generate(
        self, prompts: list[Prompt], params: GenParams, on_done: Done | None = None
    ) -> list[Completion]:
        """Answer `prompts` in the next gathered call (every running party's prompts), which
        the thread that runs `serve` makes."""
        call = _Call(prompts, params)
        entered = time.perf_counter()
        with self._cond:
            self._waiting.append(call)
            self._cond.notify_all()
            while call.result is None and call.error is None:
                self._cond.wait()
        _add_idle(time.perf_counter() - entered - call.share)
        if call.error is not None:
            raise call.error
        if on_done is not None:  # in this thread: the caller's cache belongs to it
            on_done(list(range(len(prompts))), call.result)
        return call.result

    def leave(self) -> None:
        """One party is done: the others no longer wait for it."""
        with self._cond:
            self.parties -= 1
            self._cond.notify_all()

    def serve(self) -> None:
        """Answer gathered calls until every party has left: each time every running party
        waits on an answer, all their prompts in one call. Run on the thread that runs the
        model elsewhere too: torch's CPU thread pool belongs to the thread that calls it, and
        pools left idle on other threads keep spinning on the cores."""
        while True:
            with self._cond:
                while self.parties and len(self._waiting) < self.parties:
                    self._cond.wait()
                if not self._waiting:
                    return
                batch, self._waiting = self._waiting, []
            self._answer(batch)
            with self._cond:
                self._cond.notify_all()

    def _answer(self, batch: list[_Call]) -> None:
        """Answer a gathered batch: one `generate_rows` call per kind of sampling."""
        groups: list[list[_Call]] = []
        for call in batch:
            group = next((g for g in groups if rows_mix([g[0].params, call.params])), None)
            if group is None:
                groups.append([call])
            else:
                group.append(call)
        for group in groups:
            self._answer_group(group)

    def _answer_group(self, group: list[_Call]) -> None:
        """One `generate_rows` call for calls that sample alike; a failure reaches them all."""
        prompts = [p for c in group for p in c.prompts]
        rows = [c.params for c in group for _ in c.prompts]
        owner = [c for c in group for _ in c.prompts]
        started = last = time.perf_counter()

        def charge(indices: list[int], _answers: list[Completion]) -> None:
            """A forward pass is done: its rows share its seconds equally."""
            nonlocal last
            now = time.perf_counter()
            for i in indices:
                owner[i].share += (now - last) / len(indices)
            last = now

        try:
            done = self.backend.generate_rows(prompts, rows, on_done=charge)
        except Exception as exc:  # every caller hears it
            for c in group:
                c.error = exc
            return
        self.calls.append((len(group), len(prompts), time.perf_counter() - started))
        start = 0
        for c in group:
            c.result = done[start : start + len(c.prompts)]
            start += len(c.prompts)


def run_gathered(
    jobs: list[Callable[[Any], T]],
    backend: Any,
    calls: list[tuple[int, int, float]] | None = None,
) -> list[T]:
    """Run `jobs` on threads of their own, their LLM calls gathered in front of `backend` (each
    job gets the gathered backend; with one job, or a backend that cannot mix parameters, they
    run one after the other with `backend` itself); results in the jobs' order, the first
    error raised once every job has ended. The gathered calls are added to `calls`."""
    if len(jobs) < 2 or not gathers(backend):
        return [job(backend) for job in jobs]
    gathered = GatheredBackend(backend, len(jobs), calls if calls is not None else [])
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException | None] = [None] * len(jobs)

    def work(k: int) -> None:
        try:
            results[k] = jobs[k](gathered)
        except BaseException as exc:  # raised in the caller's thread below
            errors[k] = exc
        finally:
            gathered.leave()

    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(len(jobs))]
    for t in threads:
        t.start()
    gathered.serve()
    for t in threads:
        t.join()
    for exc in errors:
        if exc is not None:
            raise exc
    return results
