"""LazyGraphRAG's prompts and answer schemas, in our words: the refinement of a question, the
sentence-level relevance test of a chunk, and the claims of a community's relevant text."""

from __future__ import annotations

from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import ParseError, Schema

REFINE_PROMPT = """Split the question below into at most {n} simple subqueries that together
cover it, and write one expanded query that joins them into a single, fuller question. Reply
with one JSON object of this form and nothing else:
{format}

Question: {question}
JSON:"""

RELEVANCE_PROMPT = """Which of the numbered sentences below help to answer the query? Reply with
one JSON object of this form and nothing else, listing their numbers (an empty list when none
helps):
{format}

Query: {query}

Sentences:
{sentences}

JSON:"""

CLAIMS_PROMPT = """From the text below, state the claims that bear on the query: short,
self-contained statements of fact that the text supports. Reply with one JSON object of this
form and nothing else:
{format}

Query: {query}

Text:
{text}

JSON:"""


def _worded(value: dict) -> tuple[list[str], str]:
    """A refinement's subqueries and expanded query, each holding a word (a small model copies
    the format line's "..." placeholder: a ParseError, so the stage re-asks, then records it)."""
    texts = [*value["subqueries"], value["expanded"]]
    if not all(any(c.isalnum() for c in t) for t in texts):
        raise ParseError("a subquery or the expanded query holds no word")
    return [s.strip() for s in value["subqueries"] if s.strip()], value["expanded"].strip()


def _refined(n: int) -> Schema:
    return Schema(
        {
            "type": "object",
            "properties": {
                "subqueries": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 3, "maxLength": 200},
                    "minItems": 1,
                    "maxItems": n,
                },
                "expanded": {"type": "string", "minLength": 3, "maxLength": 400},
            },
            "required": ["subqueries", "expanded"],
            "additionalProperties": False,
        },
        _worded,
    )


MAX_SENTENCES = 64
"""Sentences of a chunk a relevance test numbers at most (a chunk's later ones are left out)."""

RELEVANT = Schema(
    {
        "type": "object",
        "properties": {
            "relevant": {
                "type": "array",
                "items": {"type": "integer", "minimum": 1, "maximum": MAX_SENTENCES},
                "maxItems": 16,
            }
        },
        "required": ["relevant"],
        "additionalProperties": False,
    },
    lambda v: sorted({int(i) - 1 for i in v["relevant"]}),
)
"""A relevance test's answer: the (0-based) numbers of the relevant sentences; the method
records a number past the chunk's sentences as a failed test."""


CLAIMS = Schema(
    {
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "items": {"type": "string", "minLength": 3, "maxLength": 300},
                "maxItems": 8,
            }
        },
        "required": ["claims"],
        "additionalProperties": False,
    },
    lambda v: [c.strip() for c in v["claims"] if c.strip()],
)
"""A community's claims: up to 8 statements."""

REFINE_STAGE = structured_stage(
    "lazy_refine",
    about="LazyGraphRAG's refinement: a question's subqueries and one expanded query",
    prompt=lambda question, n: REFINE_PROMPT.format(
        n=n, format=_refined(n).describe(), question=question
    ),
    schema=lambda budget, n: _refined(n),
    max_tokens=lambda budget, n: budget,
    budget=160,
    n=3,
)
RELEVANCE_STAGE = structured_stage(
    "lazy_relevance",
    about="LazyGraphRAG's relevance test: which sentences of a chunk help a subquery",
    prompt=lambda query, sentences: RELEVANCE_PROMPT.format(
        format=RELEVANT.describe(),
        query=query,
        sentences="\n".join(f"{i + 1}. {s}" for i, s in enumerate(sentences)),
    ),
    schema=RELEVANT,
    max_tokens=48,
)
CLAIMS_STAGE = structured_stage(
    "lazy_claims",
    about="LazyGraphRAG's map step: the claims of a community's relevant text for a subquery",
    prompt=lambda query, text: CLAIMS_PROMPT.format(
        format=CLAIMS.describe(), query=query, text=text
    ),
    schema=CLAIMS,
    max_tokens=lambda budget: budget,
    budget=256,
)
