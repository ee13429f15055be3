"""RAGAS-style scores from the LLM: faithfulness and context recall (an answer or reference
rewritten as statements, each checked against a context) and context precision (whether each
passage helps reach the reference answer)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from graphrag_engine.eval.judge import SHORT_VERDICT_TOKENS
from graphrag_engine.models.base import GenParams
from graphrag_engine.models.stages import structured_stage
from graphrag_engine.models.structured import (
    ParseError,
    Schema,
    generate_structured,
    json_object,
)

# -- RAGAS-style metrics ------------------------------------------------------------------------
STATEMENTS_PROMPT = """Question: {question}
Answer: {answer}

Rewrite the answer as a list of short, self-contained statements (use the question to make
each one understandable on its own). Reply with one JSON object of this form and nothing else:
{format}"""


SUPPORT_PROMPT = """Context:
{context}

For each statement, say whether the context supports it (1) or not (0).
Statements:
{statements}

Reply with one JSON object of this form, one verdict per statement in order, and nothing else:
{format}"""


USEFUL_PROMPT = """Question: {question}
Reference answer: {reference}

Passage:
{passage}

Was this passage useful to reach the reference answer (1) or not (0)? Reply with one JSON
object of this form and nothing else:
{format}"""


def _statements(value: dict) -> list[str]:
    kept = [s.strip() for s in value["statements"] if s.strip()]
    if not kept:
        raise ParseError("every statement is blank")
    return kept


STATEMENTS = Schema(
    json_object(
        {
            "statements": {
                "type": "array",
                "items": {"type": "string", "minLength": 3, "maxLength": 300},
                "minItems": 1,
                "maxItems": 12,
            }
        }
    ),
    _statements,
)
"""The answer rewritten as 1..12 statements (RAGAS faithfulness, step 1)."""


USEFUL = Schema(json_object({"verdict": {"enum": [0, 1]}}), lambda v: int(v["verdict"]))
"""One passage's usefulness verdict (RAGAS context precision)."""


@lru_cache(maxsize=64)
def support_schema(n: int) -> Schema[list[int]]:
    """Exactly n 0/1 support verdicts, one per statement in order."""
    verdicts = {"type": "array", "items": {"enum": [0, 1]}, "minItems": n, "maxItems": n}
    return Schema(json_object({"verdicts": verdicts}), lambda v: [int(x) for x in v["verdicts"]])


STATEMENTS_STAGE = structured_stage(
    "ragas_statements",
    about="RAGAS faithfulness, step 1: an answer rewritten as short statements",
    prompt=lambda question, answer: STATEMENTS_PROMPT.format(
        question=question, answer=answer, format=STATEMENTS.describe()
    ),
    schema=STATEMENTS,
    max_tokens=lambda budget: budget,
    budget=256,
)


SUPPORT_STAGE = structured_stage(
    "ragas_support",
    about="RAGAS faithfulness and context recall: a 0/1 verdict per statement against a context",
    prompt=lambda context, statements: SUPPORT_PROMPT.format(
        context=context,
        statements="\n".join(f"{k + 1}. {s}" for k, s in enumerate(statements)),
        format=support_schema(len(statements)).describe(),
    ),
    schema=lambda statements, **_: support_schema(statements),
    max_tokens=lambda budget, **_: budget,
    statements=1,
    budget=256,
)


USEFUL_STAGE = structured_stage(
    "ragas_useful",
    about="RAGAS context precision: whether one passage helps reach the reference answer",
    prompt=lambda question, reference, passage: USEFUL_PROMPT.format(
        question=question, reference=reference, passage=passage, format=USEFUL.describe()
    ),
    schema=USEFUL,
    max_tokens=SHORT_VERDICT_TOKENS,
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


def _support(
    llm,
    contexts: list[str],
    statements: list[list[str]],
    stage: str,
    params: GenParams,
    retries: int,
) -> list[float]:
    """Share of each statement list supported by its context (NaN when the verdict never parsed)."""
    if not contexts:
        return []
    out = [float("nan")] * len(contexts)
    for n in sorted({len(s) for s in statements} - {0}):  # one schema, one batched call, per n
        idx = [i for i, s in enumerate(statements) if len(s) == n]
        prompts = [SUPPORT_STAGE.prompt(contexts[i], statements[i]) for i in idx]
        schema = SUPPORT_STAGE.schema(statements=n)
        res = generate_structured(llm, prompts, schema, params, stage, retries)
        for i, r in zip(idx, res.results, strict=True):
            if r.ok:
                out[i] = sum(r.value) / n
    return out


def ragas_scores(
    llm, rows: list[dict[str, Any]], max_tokens: int = 256, retries: int = 2
) -> dict[str, list[float]]:
    """faithfulness, context_recall and context_precision per row (NaN when not computable or
    when the judge's answer never parsed)."""
    nan = float("nan")
    params = GenParams(max_tokens=max_tokens)
    n = len(rows)
    ctx_text = ["\n\n".join(r["context_text"] or []) for r in rows]
    faith, recall, precision = [nan] * n, [nan] * n, [nan] * n

    # faithfulness: statements of the answer, then their support by the context
    idx = [i for i, r in enumerate(rows) if r["answer"] and ctx_text[i]]
    st = generate_structured(
        llm,
        [STATEMENTS_STAGE.prompt(rows[i]["question"], rows[i]["answer"]) for i in idx],
        STATEMENTS_STAGE.schema(),
        params,
        "ragas_statements",
        retries,
    )
    have = [(i, s.value) for i, s in zip(idx, st.results, strict=True) if s.ok]
    res = _support(
        llm,
        [ctx_text[i] for i, _ in have],
        [sts for _, sts in have],
        "ragas_faithfulness",
        params,
        retries,
    )
    for (i, _), v in zip(have, res, strict=True):
        faith[i] = v

    # context recall: reference sentences attributable to the context
    idx = [i for i, r in enumerate(rows) if r["gold_answers"] and ctx_text[i]]
    refs = [_sentences(rows[i]["gold_answers"][0]) for i in idx]
    res = _support(llm, [ctx_text[i] for i in idx], refs, "ragas_context_recall", params, retries)
    for i, v in zip(idx, res, strict=True):
        recall[i] = v

    # context precision: average precision of the passages judged useful
    pairs = [
        (i, k)
        for i, r in enumerate(rows)
        if r["gold_answers"]
        for k in range(len(r["context_text"] or []))
    ]
    if pairs:
        res = generate_structured(
            llm,
            [
                USEFUL_STAGE.prompt(
                    rows[i]["question"], rows[i]["gold_answers"][0], rows[i]["context_text"][k]
                )
                for i, k in pairs
            ],
            USEFUL_STAGE.schema(),
            GenParams(max_tokens=USEFUL_STAGE.max_tokens()),
            "ragas_context_precision",
            retries,
        )
        verdicts: dict[int, list[int | None]] = {}
        for (i, _), s in zip(pairs, res.results, strict=True):
            verdicts.setdefault(i, []).append(s.value if s.ok else None)
        for i, vs in verdicts.items():
            if any(v is None for v in vs):
                continue
            hits, ap = 0, 0.0
            for k, v in enumerate(vs, 1):
                if v:
                    hits += 1
                    ap += hits / k
            precision[i] = ap / hits if hits else 0.0
    return {"faithfulness": faith, "context_recall": recall, "context_precision": precision}
