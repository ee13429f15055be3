"""Structured output: tolerant JSON parsing, LightRAG-style delimited records, and batched
retry of unparsable answers.

A completion that does not parse is retried (whole batch of failures at once, sampled with
another seed at temperature >= 0.7) up to `retries` times, then recorded as a failure with its raw text. Nothing is guessed:
repair only closes what truncation left open or strips wrappers (code fences, prose around
the JSON, trailing commas); it never invents values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from engine.models.base import GenParams, Prompt

T = TypeVar("T")


class ParseError(ValueError):
    """An answer that cannot be turned into the structure a stage asked for."""


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)(?:```|$)", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _strip_fences(text: str) -> str:
    m = _FENCE.search(text)
    return m.group(1) if m else text


def _close_truncated(s: str) -> str:
    """Close strings and brackets left open by a truncated answer; drop a dangling key or comma."""
    stack: list[str] = []
    in_str = escaped = False
    for ch in s:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    body = s
    if in_str:
        body = s + '"'
    body = body.rstrip()
    # a key without a value ("k": or "k") or a trailing comma cannot be completed honestly
    body = re.sub(r',?\s*"[^"\\]*"\s*:\s*$', "", body)
    body = re.sub(r",\s*$", "", body)
    if stack and stack[-1] == "}" and re.search(r'[{,]\s*"[^"\\]*"$', body):
        body = re.sub(r',?\s*"[^"\\]*"$', "", body)
    return body + "".join(reversed(stack))


def parse_json(text: str) -> Any:
    """Parse JSON from a model answer: fenced, wrapped in prose, with trailing commas, or truncated."""
    raw = _strip_fences(text).strip()
    starts = [i for i in (raw.find("{"), raw.find("[")) if i >= 0]
    if not starts:
        raise ParseError("no JSON object or array in the answer")
    raw = raw[min(starts) :]
    decoder = json.JSONDecoder()
    for candidate in (raw, _TRAILING_COMMA.sub(r"\1", raw)):
        try:
            value, _ = decoder.raw_decode(candidate)
            return value
        except json.JSONDecodeError:
            pass
    repaired = _TRAILING_COMMA.sub(r"\1", _close_truncated(raw))
    try:
        value, _ = decoder.raw_decode(repaired)
        return value
    except json.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON even after repair: {exc.msg} at char {exc.pos}") from None


@dataclass
class DelimitedRecords:
    """Records of a LightRAG-style answer; `complete` tells whether the end marker was seen."""

    records: list[list[str]]
    complete: bool
    dropped_partial: int = 0


def parse_delimited(
    text: str,
    tuple_delim: str = "<|>",
    record_delim: str = "##",
    completion_delim: str = "<|COMPLETE|>",
    require_complete: bool = False,
) -> DelimitedRecords:
    """Parse `("entity"<|>"A"<|>...)##("relationship"<|>...)<|COMPLETE|>` into field lists.

    A record without its closing parenthesis (cut off by max_tokens) is dropped and counted,
    never half-kept.
    """
    complete = completion_delim in text
    body = text.split(completion_delim, 1)[0]
    if require_complete and not complete:
        raise ParseError(f"answer ended before {completion_delim}")
    records: list[list[str]] = []
    dropped = 0
    for part in re.split(re.escape(record_delim) + r"|\n", body):
        part = part.strip()
        if not part:
            continue
        m = re.search(r"\((.*)\)", part, re.S)
        if not m:
            if part.startswith("("):
                dropped += 1
            continue
        fields = [f.strip().strip('"').strip("'").strip() for f in m.group(1).split(tuple_delim)]
        if len(fields) >= 2 and fields[0]:
            records.append(fields)
    if not records:
        raise ParseError("no delimited records in the answer")
    return DelimitedRecords(records, complete, dropped)


@dataclass
class Structured(Generic[T]):
    """The parsed value of one prompt, or its failure with the raw text of the last attempt."""

    value: T | None
    raw: str
    attempts: int
    error: str | None = None
    tokens: int = 0
    """Prompt + completion tokens over every attempt."""

    @property
    def ok(self) -> bool:
        """Whether the answer parsed."""
        return self.error is None


@dataclass
class StructuredRun(Generic[T]):
    """Results of a batch, in prompt order, with failure counts for run summaries."""

    results: list[Structured[T]] = field(default_factory=list)

    @property
    def failures(self) -> int:
        """Prompts whose answer never parsed."""
        return sum(not r.ok for r in self.results)


def generate_structured(
    llm: Any,
    prompts: list[Prompt],
    parse: Callable[[str], T] | list[Callable[[str], T]],
    params: GenParams,
    stage: str,
    retries: int = 2,
) -> StructuredRun[T]:
    """Generate for every prompt and parse; re-ask all failures together with a new seed.

    `parse` is one parser for every prompt, or a list with one parser per prompt.

    `llm` is an `engine.models.llm.LLM` (anything with `generate(prompts, params, stage)` and
    a `note_parse_failures(stage, n, retried)` hook).
    """
    results: list[Structured[T] | None] = [None] * len(prompts)
    spent = [0] * len(prompts)
    pending = list(range(len(prompts)))
    for attempt in range(retries + 1):
        if not pending:
            break
        # a re-ask samples (greedy decoding would repeat the same answer) with a new seed
        p = params if attempt == 0 else params.with_seed(params.seed + 7919 * attempt).sampled()
        completions = llm.generate([prompts[i] for i in pending], p, stage=stage)
        still = []
        for i, c in zip(pending, completions, strict=True):
            spent[i] += c.prompt_tokens + c.completion_tokens
            if c.dry_run:
                results[i] = Structured(None, "", attempt + 1, error="dry run", tokens=spent[i])
                continue
            try:
                parser = parse[i] if isinstance(parse, list) else parse
                results[i] = Structured(parser(c.text), c.text, attempt + 1, tokens=spent[i])
            except ParseError as exc:
                results[i] = Structured(None, c.text, attempt + 1, str(exc), spent[i])
                still.append(i)
        if attempt < retries and still:
            llm.note_parse_failures(stage, 0, retried=len(still))
        pending = still
    if pending:
        llm.note_parse_failures(stage, len(pending), retried=0)
    return StructuredRun([r for r in results if r is not None])
