"""PankRAG on real MuSiQue data (the session's 30-question subset index): gold plans execute
level by level with earlier answers substituted, Eq. 5 with alpha = 1 keeps the plain ranking,
-Path is one step, and batched equals one question at a time."""

from __future__ import annotations

import numpy as np
import pytest

from engine.eval.datasets import load_questions
from engine.methods import query_config
from engine.methods.pankrag import combined_order, pankrag
from engine.retrieve.context import QueryContext
from engine.retrieve.ranking import round_robin
from engine.retrieve.types import StageClock
from engine.store import open_index


@pytest.fixture(scope="module")
def subset(musique_subset, tmp_path_factory):
    index = open_index(musique_subset["index"])
    questions = load_questions(musique_subset["questions"])
    return index, questions, tmp_path_factory.mktemp("pankrag")


def _ctx(index, tmp, **options) -> QueryContext:
    cfg = query_config("pankrag")
    cfg.generation.enabled = False
    cfg.options.sub_answers = "gold"
    for k, v in options.items():
        setattr(cfg.options, k, v)
    return QueryContext(index, cfg, tmp)


def test_eq5_with_alpha_one_is_the_plain_ranking_and_beta_reorders() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(12, 6)).astype(np.float32)
    chunks = [7, 3, 11, 0, 5]
    dep = vecs[5] / np.linalg.norm(vecs[5])
    assert combined_order(chunks, vecs, dep, 1.0)[0] == chunks
    by_m, scores = combined_order(chunks, vecs, dep, 0.0)
    assert by_m[0] == 5 and list(scores) == sorted(scores, reverse=True)
    assert round_robin([1, 2, 3], [4, 2], [5]) == [1, 4, 5, 2, 3]


def test_gold_plans_run_level_by_level_with_answers_substituted(subset) -> None:
    index, questions, tmp = subset
    r = pankrag(_ctx(index, tmp), questions[:10], StageClock())
    for q, e, c in zip(questions[:10], r.extras, r.contexts, strict=True):
        assert e["plan_source"] == "gold" and len(e["plan"]) == len(q.decomposition)
        gold = {i + 1: d["answer"] for i, d in enumerate(q.decomposition)}
        for step in e["plan"]:
            assert "#" not in step["question"]  # every reference resolved before it ran
            for d in step["depends_on"]:
                assert gold[d] in step["question"] or d not in _refs(q, step["step"])
        assert c.sections[0].title == "-----Resolved sub-questions-----"
        assert len(c.sections[0].items) == len(q.decomposition) - 1
    direct = pankrag(_ctx(index, tmp, plan="direct"), questions[:3], StageClock())
    assert all(e["levels"] == 1 and len(e["plan"]) == 1 for e in direct.extras)


def _refs(q, step: int) -> set[int]:
    import re

    return {int(k) for k in re.findall(r"#(\d+)", q.decomposition[step - 1]["question"])}


@pytest.mark.parametrize("rerank", [True, False])
def test_batched_equals_one_question_at_a_time(subset, rerank) -> None:
    index, questions, tmp = subset
    ctx = _ctx(index, tmp, rerank=rerank)
    batch = pankrag(ctx, questions[:8], StageClock())
    for i, q in enumerate(questions[:8]):
        one = pankrag(ctx, [q], StageClock())
        assert one.contexts[0] == batch.contexts[i]
        assert one.ranking.row(0)[0] == batch.ranking.row(i)[0]
        assert one.extras[0] == batch.extras[i]
