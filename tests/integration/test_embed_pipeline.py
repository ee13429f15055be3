"""The embedder's pipeline (graphrag_engine/models/embed_pipeline.py) on real MuSiQue text:
its vectors are sentence-transformers' own, block by block equals all at once, tokenizing in
threads changes nothing, and each block comes back before the next one runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.models.embed import SentenceTransformerEmbedder
from graphrag_engine.models.embed_pipeline import length_batches


@pytest.fixture(scope="module")
def texts(shared_data: Path) -> list[str]:
    """Passages, titles and sentences of MuSiQue mixed, an empty text and padded spaces."""
    with (shared_data / "musique_corpus.jsonl").open() as f:
        rows = [json.loads(line) for line, _ in zip(f, range(150), strict=False)]
    out = [f"{r['title']}\n{r['text']}" for r in rows] + [r["title"] for r in rows]
    out += [s for r in rows for s in r["text"].split(". ")][:200]
    return [*out, "", "   spaced out   "]


def test_vectors_are_sentence_transformers_own(minilm, texts) -> None:
    ours = minilm.encode(texts)
    theirs = minilm.model.encode(texts, batch_size=32, normalize_embeddings=True)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    assert (ours * theirs).sum(axis=1).min() >= 0.9999


def test_blocks_equal_one_call_each_text_once(minilm, texts, monkeypatch) -> None:
    """On the CPU each batch comes back as it is done: positions in length order, each once."""
    whole = minilm.encode(texts)
    monkeypatch.setattr(minilm.pipeline, "max_tokens", 512)
    blocks = list(minilm.pipeline.blocks(texts, 100))  # blocks of 100 texts, small batches
    positions = np.concatenate([np.asarray(pos) for pos, _ in blocks])
    assert sorted(positions.tolist()) == list(range(len(texts)))
    assert len(blocks) > len(texts) // 100 + 1  # more pieces than blocks: batches
    assert all(max(pos) - min(pos) < 100 for pos, _ in blocks)  # none spans two blocks
    got = np.empty_like(whole)
    for pos, vectors in blocks:
        got[np.asarray(pos)] = vectors
    np.testing.assert_allclose(got, whole, atol=2e-5)


def test_tokenizing_in_threads_changes_nothing(minilm, texts, monkeypatch) -> None:
    """The GPU's way (threads tokenize the next block while this one runs), here on the CPU."""

    def gathered() -> np.ndarray:
        out = np.zeros((len(texts), 384), np.float32)
        for pos, vectors in minilm.pipeline.blocks(texts, 64):
            out[np.asarray(pos)] = vectors
        return out

    inline = gathered()
    monkeypatch.setattr(minilm.pipeline, "threads", 3)
    monkeypatch.setattr("graphrag_engine.models.embed_pipeline.TOKENIZE_SLICE", 7)
    np.testing.assert_array_equal(gathered(), inline)


def test_a_block_comes_back_before_the_next_runs(minilm, texts, monkeypatch) -> None:
    """Results are written as they come: a consumer holds the first batch's vectors while
    the other batches are unrun."""
    ran: list[int] = []
    forward = minilm.pipeline.forward
    monkeypatch.setattr(minilm.pipeline, "forward", lambda t: ran.append(len(t[0])) or forward(t))
    blocks = minilm.encode_blocks(texts)
    first_pos, first = next(blocks)
    assert sum(ran) == len(first_pos) == len(first)
    rest = sum(len(pos) for pos, _ in blocks)
    assert sum(ran) == len(texts) == len(first_pos) + rest


def test_length_batches_hold_the_token_budget() -> None:

    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 300, 2000).tolist() + [5000, 4]
    groups = length_batches(lengths, 2048, max_texts=64)
    seen = np.concatenate(groups)
    assert sorted(seen.tolist()) == list(range(len(lengths)))  # every text once
    longest = [max(lengths[i] for i in g) for g in groups]
    assert longest == sorted(longest, reverse=True)  # longest first, similar lengths together
    for g, top in zip(groups, longest, strict=True):
        assert len(g) <= 64 and (len(g) == 1 or len(g) * top <= 2048)
    assert len(groups[0]) == 1 and lengths[groups[0][0]] == 5000  # alone when over budget
    # greedy: a group stops only where the next text would break a bound
    for g, top in zip(groups[:-1], longest, strict=False):
        assert len(g) == 64 or (len(g) + 1) * top > 2048
    fixed = length_batches(lengths, None, max_texts=64)  # a set batch_size: no token budget
    assert [len(g) for g in fixed] == [64] * 31 + [len(lengths) - 31 * 64]
    assert np.array_equal(np.concatenate(fixed), np.argsort(-np.array(lengths), kind="stable"))


def test_token_budget_batches_equal_fixed_batches(minilm, shared_data: Path) -> None:
    """The CPU default (batches of a token budget) gives the vectors fixed batches give, on
    real MuSiQue passages, sentences and titles mixed."""
    rows = [
        json.loads(line)
        for line, _ in zip((shared_data / "musique_corpus.jsonl").open(), range(60), strict=False)
    ]
    texts = [f"{r['title']}\n{r['text']}" for r in rows] + [r["title"] for r in rows]
    texts += [s for r in rows for s in r["text"].split(". ")][:120]
    assert minilm.batch_size is None
    budget = minilm.encode(texts)
    fixed = SentenceTransformerEmbedder(None, "cpu", 64).encode(texts)
    np.testing.assert_allclose(budget, fixed, atol=2e-5)


def test_rust_ids_are_the_wrapper_ids(minilm, texts) -> None:
    """The pipeline tokenizes through the Rust backend: ids equal to the Python wrapper's."""
    from graphrag_engine.models.embed_pipeline import token_ids

    pipe = minilm.pipeline
    assert pipe.backend is not None
    long = ["word " * 600]  # cut at the model's limit
    assert pipe.ids(texts + long) == token_ids(minilm.tokenizer, texts + long, pipe.limit)
    assert len(pipe.ids(long)[0]) == pipe.limit
