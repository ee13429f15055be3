"""HippoRAG's seeds on real MuSiQue data: HippoRAG 2's fact links are the ends of the relations
nearest each question (numpy reference), the same batched as one question at a time, and
`link: both` seeds every entity either kind of link finds; entity links equal a reference that
embeds every mention, while the encoder reads only the mentions that name no entity exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import query_config
from graphrag_engine.methods.hipporag import hipporag
from graphrag_engine.names import normalize_name
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.entity_graph import entity_graph
from graphrag_engine.retrieve.linking import (
    entities_by_name,
    link_entities,
    link_facts,
    query_mentions,
)
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.retrieve.vector_search import nearest
from graphrag_engine.store import open_index


def _ctx(subset: dict, tmp: Path, **options) -> QueryContext:
    cfg = query_config("hipporag")
    cfg.generation.enabled = False
    for k, v in options.items():
        setattr(cfg.options, k, v)
    return QueryContext(open_index(subset["index"]), cfg, tmp)


def test_fact_links_are_the_ends_of_the_nearest_relations(musique_subset, tmp_path) -> None:
    ctx = _ctx(musique_subset, tmp_path)
    texts = [q.question for q in load_questions(musique_subset["questions"])][:12]
    vectors = ctx.encode_queries(texts)
    links = link_facts(ctx, texts, vectors, 3)
    g = entity_graph(ctx)
    rel = np.asarray(ctx.vectors("relation_vectors"), dtype=np.float64)
    rel /= np.linalg.norm(rel, axis=1, keepdims=True)
    for q, v in enumerate(np.asarray(vectors, dtype=np.float64)):
        sims = np.round(rel @ (v / np.linalg.norm(v)), 5)
        top = np.lexsort((np.arange(sims.size), -sims))[:3]
        want: dict[int, list[float]] = {}
        for r in top:
            for e in {int(g.src[r]), int(g.dst[r])}:
                want.setdefault(e, []).append(float(sims[r]))
        assert set(links[q]) == set(want)
        for e, s in want.items():
            assert links[q][e] == pytest.approx(np.mean(s), abs=2e-5)
        one = link_facts(ctx, texts[q : q + 1], vectors[q : q + 1], 3)[0]
        assert one.keys() == links[q].keys()
        assert all(one[e] == pytest.approx(links[q][e], abs=1e-6) for e in one)


def test_both_links_seed_what_either_finds(musique_subset, tmp_path) -> None:
    questions = load_questions(musique_subset["questions"])[:10]
    runs = {
        link: hipporag(_ctx(musique_subset, tmp_path, link=link), questions, StageClock())
        for link in ("entities", "facts", "both")
    }
    for q in range(len(questions)):
        named = runs["entities"].extras[q]["linked_entities"]
        facts = runs["facts"].extras[q]["fact_entities"]
        both = runs["both"].extras[q]
        assert both["linked_entities"] == named and both["fact_entities"] == facts
        assert runs["entities"].extras[q]["fact_entities"] == []
        assert runs["facts"].extras[q]["linked_entities"] == []
        assert 1 <= len(facts) <= 6  # three relations, two ends each
    # the seeds differ, so the rankings do
    rows = [tuple(r.ranking.row(q)[0][:5]) for r in runs.values() for q in range(10)]
    assert len(set(rows)) > 10
    batch = runs["both"]
    ctx = _ctx(musique_subset, tmp_path, link="both")
    for q in range(3):
        one = hipporag(ctx, questions[q : q + 1], StageClock())
        assert one.ranking.row(0)[0][:10] == batch.ranking.row(q)[0][:10]


def test_entity_links_embed_only_mentions_without_an_exact_name(musique_subset, tmp_path) -> None:
    ctx = _ctx(musique_subset, tmp_path)
    texts = [q.question for q in load_questions(musique_subset["questions"])][:20]
    mentions = query_mentions(ctx, texts)
    named = entities_by_name(ctx)
    flat = [m for ms in mentions for m in ms]
    inexact = [m for m in flat if normalize_name(m) not in named]
    assert inexact and len(inexact) < len(flat)  # the data has both kinds

    sent: list[list[str]] = []
    encode = ctx.encode_queries

    def spy(batch: list[str]) -> np.ndarray:
        sent.append(list(batch))
        return encode(batch)

    ctx.encode_queries = spy
    for top_k in (1, 3):
        sent.clear()
        links, _ = link_entities(ctx, texts, top_k=top_k)
        assert sent == [inexact if top_k == 1 else flat]
        # reference: each mention embedded, its exact name first, then its nearest entities
        for q, ms in enumerate(mentions):
            want: dict[int, float] = {}
            for m in ms:
                scores, ids = nearest(ctx, "entity_vectors", encode([m]), top_k)
                pairs = [(int(e), float(s)) for e, s in zip(ids[0], scores[0], strict=True)]
                if normalize_name(m) in named:
                    exact = named[normalize_name(m)][0]
                    pairs = [(exact, 1.0), *[p for p in pairs if p[0] != exact]][:top_k]
                for e, s in pairs:
                    want[e] = max(want.get(e, -1.0), s)
            assert links[q].keys() == want.keys()
            assert all(abs(links[q][e] - s) < 1e-5 for e, s in want.items())
