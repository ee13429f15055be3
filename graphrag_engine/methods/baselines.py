"""The baselines every method is measured against: no retrieval, NaiveRAG (dense chunks),
BM25 and HyDE. Each is one batch step over all questions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from graphrag_engine.eval.datasets import Question
from graphrag_engine.kernels.similarity import l2_normalize
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.models.base import GenParams
from graphrag_engine.retrieve.answer import llm_tokens
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.dense import dense_search
from graphrag_engine.retrieve.lexical import BM25Retriever
from graphrag_engine.retrieve.types import Retrieved, StageClock

HYDE_PROMPT = """Please write a short passage to answer the question.
Question: {question}
Passage:"""


def _depth(ctx: QueryContext) -> int:
    """Chunks ranked per question: enough for `candidates` distinct passages in most corpora."""
    return 2 * ctx.cfg.retrieval.candidates


@register("none", paper="no retrieval (the LLM alone)", needs_note="INDEX may be 'none'")
def no_retrieval(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """The LLM answers from its own knowledge: no context at all."""
    return Retrieved.empty(len(questions), clock.seconds)


@register(
    "naive", paper="NaiveRAG (dense chunk retrieval)", needs={Part.CHUNKS, Part.CHUNK_VECTORS}
)
def naive_rag(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """NaiveRAG: embed the questions, take the nearest chunks."""
    with clock.stage("embed_queries"):
        vectors = ctx.encode_queries([q.question for q in questions])
    with clock.stage("dense_search"):
        ranking = dense_search(ctx, vectors, _depth(ctx))
    return Retrieved.ranked(ranking, clock.seconds)


@register("bm25", paper="BM25 (Robertson & Zaragoza 2009; bm25s)", needs={Part.CHUNKS})
def bm25(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """BM25 (bm25s, English stopwords) over "title\\ntext" of every chunk."""
    with clock.stage("bm25_index"):
        index = ctx.memo("bm25_chunks", lambda: BM25Retriever(ctx.chunks["titled"]))
    with clock.stage("bm25_search"):
        ranking = index.search([q.question for q in questions], _depth(ctx))
    return Retrieved.ranked(ranking, clock.seconds)


@dataclass
class HyDEConfig:
    """HyDE: embed an LLM-written hypothetical passage instead of (or with) the question."""

    RANGES: ClassVar[dict[str, str]] = {  # other numbers: >= 0 (config/ranges.py)
        "max_tokens": ">= 1",
    }

    max_tokens: int = 128
    """Completion tokens of the hypothetical passage."""
    include_question: bool = True
    """Average the question's embedding with the hypothetical passage's (as the HyDE paper does)."""

    def llm_use(self) -> str:
        """HyDE writes its passages with the LLM, even when answers are not generated."""
        return "method 'hyde'"


@register(
    "hyde",
    config=HyDEConfig,
    paper="HyDE (Gao et al., ACL 2023)",
    needs={Part.CHUNKS, Part.CHUNK_VECTORS},
    needs_note="an LLM even with --retrieval-only",
)
def hyde(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """HyDE: the LLM writes a passage that would answer each question (one batched call); the
    passage's embedding (averaged with the question's) retrieves the chunks."""
    cfg: HyDEConfig = ctx.cfg.options
    with clock.stage("hyde_generate"):
        prompts = [HYDE_PROMPT.format(question=q.question) for q in questions]
        answers = ctx.llm.generate(prompts, GenParams(max_tokens=cfg.max_tokens), stage="hyde")
    passages = [c.text.strip() for c in answers]
    with clock.stage("embed_queries"):
        texts = [p or q.question for p, q in zip(passages, questions, strict=True)]
        if cfg.include_question:
            vectors = ctx.encode_queries(texts + [q.question for q in questions])
            vectors = l2_normalize(vectors[: len(texts)]) + l2_normalize(vectors[len(texts) :])
        else:
            vectors = ctx.encode_queries(texts)
    with clock.stage("dense_search"):
        ranking = dense_search(ctx, vectors, _depth(ctx))
    return Retrieved(
        ranking, [{"hyde_passage": p} for p in passages], llm_tokens(answers, "hyde"), clock.seconds
    )
