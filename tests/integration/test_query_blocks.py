"""A batch retrieved a block of questions at a time (so that the run's bar moves while a slow
method works) equals the batch retrieved in one call, on the real demo index."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods import method_spec, query_config
from graphrag_engine.query.run import retrieve_blocks
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index

OPTIONS = {"lightrag": {"keywords": "ner"}, "lego": {"graph": "index"}}


def untimed(extras: list[dict]) -> list[dict]:
    """Extras without their timings (LEGO's module seconds), which no two runs share."""
    return [{k: v for k, v in e.items() if "seconds" not in k} for e in extras]


@pytest.mark.parametrize("method", ["naive", "hipporag", "lightrag", "graphrag_local", "lego"])
def test_blocks_of_a_batch_equal_one_call(demo_index: Path, tmp_path: Path, method: str) -> None:
    index = open_index(demo_index)
    demo = load_questions(questions_path())
    batch = [  # 40 distinct texts: more than one block
        dataclasses.replace(q, qid=f"{q.qid}-{i}", question=f"{q.question} ({i})")
        for i in range(40 // len(demo) + 1)
        for q in demo
    ][:40]
    cfg = query_config(method)
    cfg.generation.enabled = False
    for k, v in OPTIONS.get(method, {}).items():
        setattr(cfg.options, k, v)
    fn = method_spec(method).retrieve
    whole = retrieve_blocks(QueryContext(index, cfg, tmp_path / "a"), fn, batch, StageClock())
    heard: list[int] = []
    clock = StageClock()
    ctx = QueryContext(index, cfg, tmp_path / "b")
    blocks = retrieve_blocks(ctx, fn, batch, clock, heard.append)
    assert len(heard) > 1 and heard == sorted(heard) and heard[-1] == len(batch)
    assert set(clock.seconds) == set(whole.seconds)  # the run's clock holds every block's stages
    for q in range(len(batch)):
        assert blocks.ranking.row(q)[0] == whole.ranking.row(q)[0]
    assert untimed(blocks.extras) == untimed(whole.extras) and blocks.tokens == whole.tokens
    assert blocks.contexts == whole.contexts
