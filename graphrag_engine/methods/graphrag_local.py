"""Microsoft GraphRAG-style local search (Edge et al., 2024) over the shared entity graph: the
method's registration; the search itself is `retrieve/local_search.py`, shared with PankRAG."""

from __future__ import annotations

from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods.base import register
from graphrag_engine.methods.needs import Part
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import entity_graph
from graphrag_engine.retrieve.local_search import (
    GraphRAGLocalConfig,
    local_context,
    pick_entities,
    text_units,
    text_vectors,
)
from graphrag_engine.retrieve.ranking import from_orders
from graphrag_engine.retrieve.types import Retrieved, StageClock

ANSWER_SYSTEM = """You answer a question from data tables about a corpus: entities,
relationships, community reports and source texts, each row numbered. Write a response of
several paragraphs in Markdown that draws together what the tables say about the question, at
a length that suits it. After a statement, name the rows it rests on by number in brackets,
such as [4] or [2, 7]. Where the tables do not answer the question, say so; add nothing they
do not hold. Answer in the language of the question."""
"""GraphRAG local search's response prompt (multiple paragraphs grounded in its data tables,
with references to the rows), in our words."""


def answer_prompt(question: str, texts: list[str] | None, cfg=None) -> list[dict]:
    """Local search's long-form response prompt over its numbered context rows."""
    data = "\n".join(f"[{i + 1}] {t}" for i, t in enumerate(texts or [])) or "(no data)"
    user = f"Data tables:\n{data}\n\nQuestion: {question}\nResponse:"
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": user}]


@register(
    "graphrag_local",
    config=GraphRAGLocalConfig,
    answer_prompt=answer_prompt,
    prompt_style="long",
    paper="Microsoft GraphRAG (Edge et al., 2024): local search",
    needs={Part.CHUNKS, Part.CHUNK_VECTORS, Part.ENTITY_GRAPH, Part.ENTITY_VECTORS},
    uses={Part.COMMUNITY_REPORTS},
)
def graphrag_local(ctx: QueryContext, questions: list[Question], clock: StageClock) -> Retrieved:
    """Local search for every question of the batch."""
    cfg: GraphRAGLocalConfig = ctx.cfg.options
    texts = [q.question for q in questions]
    g = entity_graph(ctx)
    with clock.stage("question_vectors"):
        vectors = text_vectors(ctx, cfg, texts)
    with clock.stage("entity_search"):
        picked = pick_entities(ctx, cfg, texts, vectors)
    contexts, extras, orders = [], [], []
    with clock.stage("build_context"):
        for q, ents in enumerate(picked):
            chunks = text_units(ctx, cfg, g, ents, None if vectors is None else vectors[q])
            context, extra = local_context(ctx, cfg, ents, chunks)
            contexts.append(context)
            orders.append(chunks)
            extras.append(extra)
    ranking = from_orders(orders, 2 * ctx.cfg.retrieval.candidates)
    return Retrieved(ranking, extras, [{} for _ in texts], clock.seconds, contexts)
