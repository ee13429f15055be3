"""The answer stage shared by the baselines: context passages + question -> a short answer,
one batched LLM call for the whole batch."""

from __future__ import annotations

from engine.models.base import GenParams

SYSTEM = (
    "You answer questions. Use the passages when they are given. Reply with the answer only, "
    "in as few words as possible."
)
WITH_CONTEXT = "Passages:\n{context}\n\nQuestion: {question}\nAnswer:"
WITHOUT_CONTEXT = "Question: {question}\nAnswer:"


def fit_context(passages: list[str], budget: list[int], max_tokens: int) -> list[str]:
    """Leading passages whose token counts fit `max_tokens` (at least the first one)."""
    out, used = [], 0
    for text, n in zip(passages, budget, strict=True):
        if out and used + n > max_tokens:
            break
        out.append(text)
        used += n
    return out


def answer_prompts(questions: list[str], contexts: list[list[str] | None]) -> list[list[dict]]:
    """Chat prompts of the answer stage; a None context means no retrieval."""
    prompts = []
    for q, ctx in zip(questions, contexts, strict=True):
        if ctx is None:
            user = WITHOUT_CONTEXT.format(question=q)
        else:
            numbered = "\n\n".join(f"[{i + 1}] {p}" for i, p in enumerate(ctx))
            user = WITH_CONTEXT.format(context=numbered, question=q)
        prompts.append([{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}])
    return prompts


def clean_answer(text: str) -> str:
    """First line of the model's answer, without an echoed "Answer:" label."""
    line = text.strip().split("\n", 1)[0].strip()
    if line.lower().startswith("answer:"):
        line = line[7:].strip()
    return line


def generate_answers(llm, prompts: list[list[dict]], max_tokens: int) -> list:
    """One batched call for every prompt of the batch (cached, resumable)."""
    return llm.generate(prompts, GenParams(max_tokens=max_tokens), stage="answer")
