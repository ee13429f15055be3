"""Query keywords for dual-level retrieval (LightRAG, ROGRAG): low-level keys name entities,
high-level keys name themes and relations.

`llm`: one batched structured call for every question; the stage's JSON schema drives the
backend's constrained decoding where it has one, the same schema validates the answer, an
answer that breaks it is re-asked, and a question whose answer never validates falls back to
its own text as both keys (counted). `ner`: no LLM, the question's named entities are the
low-level keys and the question itself the high-level key.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import ParseError, Schema, generate_structured
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.linking import query_mentions

_KEYS = {  # bounded so that a constrained answer always ends within max_tokens (160)
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 40},
    "minItems": 1,
    "maxItems": 4,
}
KEYWORD_SCHEMA = {
    "type": "object",
    "properties": {"low_level_keywords": _KEYS, "high_level_keywords": _KEYS},
    "required": ["low_level_keywords", "high_level_keywords"],
    "additionalProperties": False,
}
KEYWORD_PROMPT = """List the keywords of a question for searching a knowledge graph.
"low_level_keywords": the specific entities, names and terms the question mentions.
"high_level_keywords": the broader themes, relations or concepts the question is about.
Reply with one JSON object of this form and nothing else:
{format}

Question: {question}
JSON:"""


@dataclass
class Keywords:
    """Per question: low-level (entity) and high-level (theme) keys, and how they were made."""

    low: list[list[str]]
    high: list[list[str]]
    fallback: list[bool]
    """True where the LLM's answer never validated and the question text stands in."""
    tokens: list[int]
    """LLM prompt + completion tokens per question, re-asks included."""


def _names_something(key: str) -> bool:
    """Whether a key has a letter or digit: "..." is the format line's placeholder copied."""
    return any(ch.isalnum() for ch in key)


def _lists(value: dict) -> tuple[list[str], list[str]]:
    low, high = (
        [k.strip() for k in value[key] if _names_something(k)] for key in KEYWORD_SCHEMA["required"]
    )
    if not low and not high:
        raise ParseError('no keyword names anything (empty, or the placeholder "..." copied)')
    return low, high


KEYWORDS = Schema(KEYWORD_SCHEMA, _lists)
"""The keyword stage's answer: low- and high-level keys, each 1-4 short strings."""


KEYWORDS_STAGE = structured_stage(
    "keywords",
    about="low- and high-level keywords of a question (LightRAG, ROGRAG's dual-level keys)",
    prompt=lambda question: KEYWORD_PROMPT.format(question=question, format=KEYWORDS.describe()),
    schema=KEYWORDS,
    max_tokens=160,
)


def llm_keywords(ctx: QueryContext, questions: list[str], retries: int = 2) -> Keywords:
    """Keywords of every question from one batched, schema-constrained LLM call."""
    prompts = [KEYWORDS_STAGE.prompt(q) for q in questions]
    run = generate_structured(
        ctx.llm,
        prompts,
        KEYWORDS_STAGE.schema(),
        GenParams(max_tokens=KEYWORDS_STAGE.max_tokens()),
        stage="keywords",
        retries=retries,
    )
    low, high, fallback = [], [], []
    for q, res in zip(questions, run.results, strict=True):
        ok = res.ok and res.value is not None
        low.append(res.value[0] if ok else [q])
        high.append(res.value[1] if ok else [q])
        fallback.append(not ok)
    return Keywords(low, high, fallback, [r.tokens for r in run.results])


def ner_keywords(ctx: QueryContext, questions: list[str]) -> Keywords:
    """LLM-free keys: the question's named entities (low) and the question itself (high)."""
    mentions = query_mentions(ctx, questions)
    low = [m or [q] for m, q in zip(mentions, questions, strict=True)]
    return Keywords(low, [[q] for q in questions], [False] * len(questions), [0] * len(questions))
