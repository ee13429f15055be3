"""DRIFT search's prompts and answer schemas, in our words: the hypothetical answer, the
primer over a fold of community reports, a follow-up's local answer, and the reduce."""

from __future__ import annotations

from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import Schema

HYDE_PROMPT = """Write a hypothetical answer to the question below, laid out like the example
report after it. Name no person, place or thing the question does not name. Reply with one JSON
object of this form and nothing else:
{format}

Question: {question}

Example report:
{template}

JSON:"""

PRIMER_PROMPT = """You explore a knowledge graph to answer a question, starting from summaries
of its most relevant communities. From the summaries below give: an intermediate answer to the
question, as detailed as the summaries are; a score from 0 (the answer misses the question) to
100 (it answers the question fully); and follow-up queries, each a single simple question about
an entity or fact that would help to answer it better. Reply with one JSON object of this form
and nothing else:
{format}

Question: {question}

Community summaries:
{reports}

JSON:"""

LOCAL_PROMPT = """You answer a follow-up query from data tables about a corpus: entities,
relationships, community reports and source texts. Answer the follow-up query from the tables
only; say so where they do not answer it. Then score from 0 to 100 how much your answer helps
with the overall question, and give follow-up queries that would help further. Reply with one
JSON object of this form and nothing else:
{format}

Data tables:
{tables}

Overall question: {question}
Follow-up query: {query}
JSON:"""

REDUCE_SYSTEM = """You answer a question from intermediate answers that earlier searches of a
knowledge graph gave to it and to follow-up queries about it. Write a complete, well-organised
answer of a few paragraphs from what they support, merge what they repeat, say what they leave
open, and add nothing they do not hold. Answer in the language of the question."""


def _followups(n: int, least: int) -> dict:
    return {"type": "array", "items": {"type": "string", "minLength": 3, "maxLength": 200},
            "minItems": min(least, n), "maxItems": n}  # fmt: skip


def _answer_schema(key: str, chars: int, followups: int, least: int = 0) -> Schema:
    schema = {
        "type": "object",
        "properties": {
            key: {"type": "string", "minLength": 1, "maxLength": chars},
            "score": {"type": "integer", "minimum": 0, "maximum": 100},
            "follow_up_queries": _followups(followups, least),
        },
        "required": [key, "score", "follow_up_queries"],
        "additionalProperties": False,
    }
    return Schema(
        schema,
        lambda v: (v[key].strip(), int(v["score"]), [f.strip() for f in v["follow_up_queries"]]),
    )


HYDE = Schema(
    {
        "type": "object",
        "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": 1500}},
        "required": ["answer"],
        "additionalProperties": False,
    },
    lambda v: v["answer"].strip(),
)
"""The hypothetical answer: one string."""

HYDE_STAGE = structured_stage(
    "drift_hyde",
    about="DRIFT's query expansion: a hypothetical answer laid out like a community report",
    prompt=lambda question, template: HYDE_PROMPT.format(
        format=HYDE.describe(), question=question, template=template
    ),
    schema=HYDE,
    max_tokens=lambda budget: budget,
    budget=256,
)
PRIMER_STAGE = structured_stage(
    "drift_primer",
    about="DRIFT's primer: an intermediate answer, its score and follow-up queries from reports",
    prompt=lambda question, reports, followups: PRIMER_PROMPT.format(
        format=_answer_schema("intermediate_answer", 2000, followups, 1).describe(),
        question=question,
        reports=reports,
    ),
    schema=lambda budget, followups: _answer_schema("intermediate_answer", 2000, followups, 1),
    max_tokens=lambda budget, followups: budget,
    budget=512,
    followups=5,
)
LOCAL_STAGE = structured_stage(
    "drift_local",
    about="DRIFT's follow-up step: a local-search answer, its score and further follow-ups",
    prompt=lambda question, query, tables, followups: LOCAL_PROMPT.format(
        format=_answer_schema("response", 1500, followups).describe(),
        question=question,
        query=query,
        tables=tables,
    ),
    schema=lambda budget, followups: _answer_schema("response", 1500, followups),
    max_tokens=lambda budget, followups: budget,
    budget=384,
    followups=5,
)


def reduce_prompt(question: str, answers: list[str] | None, options=None) -> list[dict]:
    """DRIFT's reduce prompt: the intermediate answers, then the question."""
    body = "\n\n".join(answers or []) or "(none)"
    user = f"Intermediate answers:\n{body}\n\nQuestion: {question}\nAnswer:"
    return [{"role": "system", "content": REDUCE_SYSTEM}, {"role": "user", "content": user}]
