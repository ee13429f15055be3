"""Chunking: token budget, overlap, sentence boundaries, coverage, streaming equivalence."""

from __future__ import annotations

from graphrag_engine.config import ChunkingConfig
from graphrag_engine.index.chunking import chunk_documents, sentence_starts, split_windows
from graphrag_engine.models.tokenizer import load_tokenizer


def test_tokenizer_is_local_and_untruncated() -> None:
    tok = load_tokenizer()
    long_text = "word " * 1000
    assert len(tok.encode(long_text, add_special_tokens=False).ids) == 1000


def test_split_windows_reference_cases() -> None:
    starts = list(range(100))
    assert split_windows(starts, [], 40, 10) == [(0, 40), (30, 70), (60, 100)]
    assert split_windows(starts, [], 40, 0) == [(0, 40), (40, 80), (80, 100)]
    # boundary at 35 is used (>= half full), boundary at 10 is not
    assert split_windows(starts, [10, 35, 70], 40, 0) == [(0, 35), (35, 70), (70, 100)]
    # overlap start moves forward to a sentence start within the overlap
    assert split_windows(starts, [28, 36], 40, 10) == [(0, 36), (28, 68), (58, 98), (88, 100)]


def test_sentence_starts() -> None:
    text = 'He left. "Why?" she asked! Then\nnew line'
    assert [text[i : i + 3] for i in sentence_starts(text)] == ["He ", '"Wh', "she", "The", "new"]


def test_text_without_boundaries_is_cut_at_the_token_limit() -> None:
    """300 kB without whitespace is one [UNK] to WordPiece; it still becomes chunks of at most
    chunk_tokens (8 characters per token) that cover it, in a single pass and by segments."""
    from graphrag_engine.index.chunking import MAX_TOKEN_CHARS
    from graphrag_engine.index.ingest import Document, content_id

    text = "x7" * 150_000 + " tail words here."
    doc = Document(content_id("t", text), "t", text, "test:1")
    cfg = ChunkingConfig(chunk_tokens=64, overlap_tokens=8)
    chunks = [c for _, cs in chunk_documents([doc], cfg) for c in cs]
    assert all(0 < c.n_tokens <= 64 and len(c.text) <= 64 * MAX_TOKEN_CHARS for c in chunks)
    assert chunks[0].start_char == 0 and chunks[-1].end_char == len(text)
    assert all(b.start_char < a.end_char for a, b in zip(chunks, chunks[1:], strict=False))
