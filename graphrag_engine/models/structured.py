"""Structured output: a stage's answer schema, tolerant JSON parsing, and batched retry of
answers that do not parse or validate.

A structured stage declares one `Schema`: its JSON schema constrains decoding where the
backend can (llguidance in-process, vLLM structured outputs, a server's `response_format`),
validates every answer (constrained or not), and renders the format line of the prompt; the
schema's `check` adds the stage's own rules (a DAG is acyclic, an operator is known).

A completion that does not parse is retried (whole batch of failures at once, sampled with
another seed at temperature >= 0.7) up to `retries` times, then recorded as a failure with its raw text. Nothing is guessed:
repair only closes what truncation left open or strips wrappers (code fences, prose around
the JSON, trailing commas); it never invents values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Generic, TypeVar

from graphrag_engine.errors import StageFailedError
from graphrag_engine.models.base import GenParams, Prompt

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
    decoder = json.JSONDecoder(strict=False)  # a raw newline inside a string is kept as one
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


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    import jsonschema

    schema = json.loads(schema_json)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _keep(value: Any) -> Any:
    return value


def json_object(properties: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema object that requires exactly these properties (in this order)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Schema(Generic[T]):
    """A structured stage's answer format, declared once: `json_schema` drives constrained
    decoding, validation and the prompt's format line; `check` applies the stage's own rules
    to the validated JSON (raising ParseError) and returns the stage's value."""

    json_schema: dict[str, Any]
    check: Callable[[Any], T] = _keep

    def validate(self, value: Any) -> T:
        """The stage's value of an already-decoded JSON value; ParseError when it breaks a rule."""
        validator = _validator(json.dumps(self.json_schema, sort_keys=True))
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            where = "/".join(map(str, errors[0].absolute_path)) or "the top level"
            raise ParseError(f"breaks the schema at {where}: {errors[0].message[:160]}")
        return self.check(value)

    def parse(self, text: str) -> T:
        """Parse an answer (tolerant JSON), validate it against the schema, apply `check`."""
        if not text.strip():
            raise ParseError("empty answer")
        return self.validate(parse_json(text))

    def describe(self) -> str:
        """One-line JSON skeleton of the schema, for the prompt's format instruction."""
        return _skeleton(self.json_schema)


def _merged(shapes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One object schema whose every key allows what any of `shapes` allows at that key, or
    None when they are not objects with the same keys."""
    keys = [list(x.get("properties", {})) for x in shapes]
    if any(x.get("type") != "object" for x in shapes) or any(k != keys[0] for k in keys):
        return None
    props: dict[str, Any] = {}
    for key in keys[0]:
        options = [x["properties"][key] for x in shapes]
        if all("enum" in o for o in options):
            props[key] = {"enum": list(dict.fromkeys(v for o in options for v in o["enum"]))}
        else:
            props[key] = {"anyOf": options}
    return {"type": "object", "properties": props}


def _skeleton(s: dict[str, Any]) -> str:
    """A JSON-like template of a schema: keys in order, placeholders for values."""
    if "anyOf" in s:  # objects of one key set read as one object; else the shapes' union
        merged = _merged(s["anyOf"])
        if merged is not None:
            return _skeleton(merged)
        return " or ".join(dict.fromkeys(_skeleton(x) for x in s["anyOf"]))
    if "enum" in s:
        return " or ".join(json.dumps(v) for v in s["enum"])
    kind = s.get("type")
    if kind == "object":
        props = s.get("properties", {})
        return "{" + ", ".join(f"{json.dumps(k)}: {_skeleton(v)}" for k, v in props.items()) + "}"
    if kind == "array" and s.get("maxItems") == 0:
        return "[]"
    if kind == "array" and "prefixItems" in s:  # positions of their own: show the first two
        first = ", ".join(_skeleton(x) for x in s["prefixItems"][:2])
        return f"[{first}, ... (at most {s.get('maxItems', len(s['prefixItems']))})]"
    if kind == "array":
        most = f" (at most {s['maxItems']})" if "maxItems" in s else ""
        if "maxItems" in s and s.get("minItems") == s["maxItems"]:
            if s["maxItems"] == 1:
                return f"[{_skeleton(s.get('items', {}))}]"
            most = f" (exactly {s['maxItems']})"
        return f"[{_skeleton(s.get('items', {}))}, ...{most}]"
    if kind == "integer" and "minimum" in s and "maximum" in s:
        return f"<integer {s['minimum']}-{s['maximum']}>"
    if kind == "string":
        return f'"<{s["description"]}>"' if "description" in s else '"..."'
    return f"<{kind or 'value'}>"


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
    parse: Schema[T] | Callable[[str], T] | list[Callable[[str], T]],
    params: GenParams,
    stage: str,
    retries: int = 2,
) -> StructuredRun[T]:
    """Generate for every prompt and parse; re-ask all failures together with a new seed.

    `parse` is the stage's Schema (its JSON schema then constrains decoding where the backend
    can, and validates every answer), one parser for every prompt, or one parser per prompt.

    `llm` is an `graphrag_engine.models.llm.LLM` (anything with `generate(prompts, params, stage)` and
    a `note_parse_failures(stage, n, retried)` hook).
    """
    if isinstance(parse, Schema):
        params = replace(params, json_schema=parse.json_schema)
        parse = parse.parse
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
        _check_failed_share(llm, stage, [results[i] for i in pending], len(prompts))
    return StructuredRun([r for r in results if r is not None])


def _check_failed_share(llm: Any, stage: str, failed: list[Structured], asked: int) -> None:
    """StageFailedError when more than the LLM's `max_failed_share` of a call's answers still
    failed after the re-asks: a stage whose model answers nothing usable must not pass as if it
    had worked (an index without its extraction, a run without its plans)."""
    bound = getattr(llm, "max_failed_share", 0.5)
    if len(failed) / asked <= bound:
        return
    first = failed[0]
    raise StageFailedError(
        f"LLM stage {stage!r}: {len(failed)} of {asked} answers "
        f"({100 * len(failed) / asked:.0f}%, above models.llm.max_failed_share {bound:g}) did "
        f"not parse or validate after every re-ask, e.g. {first.raw[:160]!r} ({first.error}); "
        "nothing was committed. Use a model that can answer this stage, or raise "
        "models.llm.max_failed_share to go on with the failures recorded"
    )
