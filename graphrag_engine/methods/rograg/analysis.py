"""ROGRAG's question analysis (Figure 2): before retrieval, one batched structured LLM call
reads every question's intent and domain. The intent is the paper's intent slot: a message
that asks nothing the knowledge base could answer (a greeting, a request to chat) is refused
at once, with no retrieval and no verifier call; every other intent runs the stage chain. An
answer that never validates is recorded and the question runs the chain as a question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import Schema, generate_structured, json_object

INTENTS = ("fact", "comparison", "aggregation", "explanation", "not_a_question")
"""What a question asks for; the last is refused without retrieval."""

ANALYSIS = Schema(
    json_object(
        {
            "intent": {"enum": list(INTENTS)},
            "domain": {"type": "string", "minLength": 1, "maxLength": 40},
        }
    )
)

ANALYSIS_PROMPT = """Read the user's message and say what it asks for. intent: "fact" (one fact
about named things), "comparison" (two or more things set against each other), "aggregation"
(a count, total or list), "explanation" (why or how), or "not_a_question" (a greeting, thanks or
chat that asks nothing a knowledge base could answer). domain: the subject area in a few words.
Reply with one JSON object of this form and nothing else: {format}

Message: {question}
JSON:"""


def analysis_prompt(question: str) -> str:
    """The analysis prompt of one question."""
    return ANALYSIS_PROMPT.format(format=ANALYSIS.describe(), question=question)


ANALYSIS_STAGE = structured_stage(
    "rograg_analysis",
    about="ROGRAG's question analysis: a question's intent (the intent slot) and domain",
    prompt=analysis_prompt,
    schema=ANALYSIS,
    max_tokens=32,
)


@dataclass
class Analysed:
    """Per question: its intent and domain (None where the answer never validated), tokens."""

    intents: list[str | None]
    domains: list[str | None]
    tokens: list[int]


def analyse(llm: Any, questions: list[str], retries: int) -> Analysed:
    """Every question's intent and domain from one batched, schema-constrained call."""
    run = generate_structured(
        llm, [ANALYSIS_STAGE.prompt(q) for q in questions], ANALYSIS,
        GenParams(max_tokens=ANALYSIS_STAGE.max_tokens()), stage="rograg_analysis",
        retries=retries,
    )  # fmt: skip
    out = Analysed([], [], [])
    for res in run.results:
        ok = res.ok and res.value is not None
        out.intents.append(res.value["intent"] if ok else None)
        out.domains.append(res.value["domain"].strip() if ok else None)
        out.tokens.append(res.tokens)
    return out
