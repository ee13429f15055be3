"""ReGraphRAG's perspective expansion: m distinct perspectives on a question, each with n
search sub-queries, from one batched structured LLM call for the whole batch.

The stage's `Schema` fixes the shape (exactly m perspectives of exactly n sub-queries, short
strings); it drives constrained decoding where the backend has it, validates every answer, and
an answer that breaks it is re-asked. A question whose answer never validates falls back to one
perspective made of itself (counted).

Perspectives that share a name (case-insensitive) are merged, their sub-queries kept once each
in order, rather than rejected: a small model repeats one name in every slot and repeats it
again when re-asked (SmolLM2-135M did so on each of its first 3 MuSiQue questions, 9 calls, all
falling back), while its sub-queries are still its own. The question then has fewer than m
perspectives, which `extras["perspectives"]` shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import ParseError, Schema, generate_structured, json_object
from graphrag_engine.retrieve.context import QueryContext

_TEXT = {"type": "string", "minLength": 3, "maxLength": 120}
FALLBACK_PERSPECTIVE = "Question"


def _merged(value: dict) -> list[tuple[str, list[str]]]:
    views: dict[str, tuple[str, list[str]]] = {}
    for v in value["perspectives"]:
        name, queries = v["perspective"].strip(), [q.strip() for q in v["queries"]]
        if not name or not all(queries):
            raise ParseError("a perspective name or sub-query is blank")
        kept = views.setdefault(name.lower(), (name, []))[1]
        kept.extend(q for q in queries if q not in kept)
    return list(views.values())


@lru_cache(maxsize=32)
def perspectives(m: int, n: int) -> Schema[list[tuple[str, list[str]]]]:
    """The answer of m perspectives, each with exactly n sub-queries (same names merged)."""
    view = json_object(
        {
            "perspective": {"type": "string", "minLength": 3, "maxLength": 40},
            "queries": {"type": "array", "items": _TEXT, "minItems": n, "maxItems": n},
        }
    )
    schema = json_object(
        {"perspectives": {"type": "array", "items": view, "minItems": m, "maxItems": m}}
    )
    return Schema(schema, _merged)


PERSPECTIVES_PROMPT = """Look at the question from {m} clearly different perspectives (for example
the people or parts involved, causes, consequences, history, methods). Name each perspective,
and for it write {n} short search queries, in the order one would ask them, for the knowledge
needed to answer the question from that perspective. Keep the question's language.
Reply with one JSON object of this form and nothing else:
{format}

{examples}
Question: {question}
JSON:"""

EXAMPLES = (
    (
        "How does a long drought change the price of food in a country?",
        (
            (
                "Farm output",
                (
                    "Which crops and livestock suffer most when rain fails for a season?",
                    "How much do harvests fall in a severe drought?",
                    "How long do farms take to recover after the rain returns?",
                ),
            ),
            (
                "Markets and trade",
                (
                    "How do shortages of a staple crop move its wholesale price?",
                    "Do governments import food or restrict exports during droughts?",
                    "How do world prices limit what importing food costs?",
                ),
            ),
            (
                "Households",
                (
                    "What share of their income do poor households spend on food?",
                    "Which foods do families switch to when prices rise?",
                    "How do food prices feed into overall inflation?",
                ),
            ),
            (
                "Past droughts",
                (
                    "Which recorded droughts caused the largest food price rises?",
                    "What policies eased food prices in those droughts?",
                    "How long did prices stay high after each one?",
                ),
            ),
        ),
    ),
    (
        "Why did the city's old tram network close?",
        (
            (
                "Money",
                (
                    "Who owned and paid for the tram network?",
                    "Did the network lose money in its last years?",
                    "What did repairing the tracks and cars cost?",
                ),
            ),
            (
                "Competing transport",
                (
                    "When did buses start serving the same routes?",
                    "How did car ownership in the city change at that time?",
                    "Were the buses cheaper to run than the trams?",
                ),
            ),
            (
                "Politics",
                (
                    "Which council decision ended the tram service?",
                    "Who argued for and against keeping the trams?",
                    "Did national policy favour roads over rail then?",
                ),
            ),
            (
                "Later history",
                (
                    "When did the last tram run?",
                    "What happened to the tracks and depots afterwards?",
                    "Has the city since proposed bringing trams back?",
                ),
            ),
        ),
    ),
)
"""Worked examples in the manner of the paper's appendix A.2 (our own questions and words),
cut to the stage's m perspectives and n sub-queries."""


def examples_text(m: int, n: int) -> str:
    """The worked examples as question and JSON answer pairs of m perspectives x n queries."""
    blocks = []
    for k, (question, views) in enumerate(EXAMPLES, 1):
        answer = {
            "perspectives": [
                {"perspective": name, "queries": list(queries[:n])} for name, queries in views[:m]
            ]
        }
        blocks.append(f"Example {k}. Question: {question}\nJSON: {json.dumps(answer)}\n")
    return "\n".join(blocks)


def perspectives_prompt(question: str, m: int, n: int) -> str:
    """The perspective-expansion prompt of one question, with the worked examples."""
    fmt = perspectives(m, n).describe()
    return PERSPECTIVES_PROMPT.format(
        m=m, n=n, format=fmt, examples=examples_text(m, n), question=question
    )


@dataclass
class Expansion:
    """Per question: its perspectives as (name, sub-queries), and how they were made."""

    views: list[list[tuple[str, list[str]]]]
    fallback: list[bool]
    """True where the LLM's answer never validated and the question stands in."""
    tokens: list[int]
    """LLM prompt + completion tokens per question, re-asks included."""


PERSPECTIVES_STAGE = structured_stage(
    "perspectives",
    about="ReGraphRAG's perspective expansion: m perspectives of a question, n sub-queries each",
    prompt=perspectives_prompt,
    schema=lambda m, n: perspectives(m, n),
    # about 40 tokens per sub-query and 15 per name, with room for the JSON around them
    max_tokens=lambda m, n: 32 + m * (24 + 48 * n),
    m=4,
    n=3,
)


def expand(ctx: QueryContext, questions: list[str], m: int, n: int, retries: int = 2) -> Expansion:
    """m x n sub-queries of every question from one batched, schema-constrained LLM call."""
    prompts = [PERSPECTIVES_STAGE.prompt(q, m, n) for q in questions]
    run = generate_structured(
        ctx.llm,
        prompts,
        PERSPECTIVES_STAGE.schema(m=m, n=n),
        GenParams(max_tokens=PERSPECTIVES_STAGE.max_tokens(m=m, n=n)),
        stage="perspectives",
        retries=retries,
    )
    views, fallback = [], []
    for q, res in zip(questions, run.results, strict=True):
        ok = res.ok and res.value is not None
        views.append(res.value if ok else unexpanded(q))
        fallback.append(not ok)
    return Expansion(views, fallback, [r.tokens for r in run.results])


def unexpanded(question: str) -> list[tuple[str, list[str]]]:
    """The question as its only perspective and sub-query (the fallback, and w/o P-exp)."""
    return [(FALLBACK_PERSPECTIVE, [question])]
