"""Chunking: token budget, overlap, sentence boundaries, coverage, streaming equivalence. (the part that needs models, servers or real data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrag_engine.config import ChunkingConfig
from graphrag_engine.index.chunking import chunk_documents
from graphrag_engine.index.ingest import DocumentReader
from graphrag_engine.models.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def musique_docs(shared_data: Path) -> list:
    return list(DocumentReader([shared_data / "musique_corpus.jsonl"]))[:300]


def count_tokens(text: str) -> int:
    return len(load_tokenizer().encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize(("size", "overlap"), [(32, 0), (64, 16), (200, 32)])
def test_chunks_respect_budget_and_cover_every_token(musique_docs, size: int, overlap: int) -> None:
    cfg = ChunkingConfig(chunk_tokens=size, overlap_tokens=overlap)
    tok = load_tokenizer()
    n_multi = 0
    for doc, doc_chunks in chunk_documents(musique_docs, cfg):
        chunks = list(doc_chunks)
        offsets = [o for o in tok.encode(doc.text, add_special_tokens=False).offsets if o[1] > o[0]]
        covered = set()
        for i, c in enumerate(chunks):
            assert c.idx == i and c.doc_id == doc.doc_id
            assert 0 < c.n_tokens <= size
            assert c.text == doc.text[c.start_char : c.end_char]
            assert count_tokens(c.text) == c.n_tokens
            covered.update(o for o in offsets if c.start_char <= o[0] and o[1] <= c.end_char)
        assert covered == set(offsets), "every token lies in some chunk"
        for a, b in zip(chunks, chunks[1:], strict=False):
            assert a.start_char < b.start_char, "chunks move forward"
            if overlap:
                assert b.start_char < a.end_char, "consecutive chunks overlap"
            else:
                assert b.start_char >= a.end_char
        n_multi += len(chunks) > 1
    assert n_multi >= (50 if size <= 64 else 1)


def test_sentence_aware_cuts_end_at_sentence_ends(musique_docs) -> None:
    cfg = ChunkingConfig(chunk_tokens=64, overlap_tokens=0)
    ends = total = 0
    for _doc, chunks in chunk_documents(musique_docs, cfg):
        for c in list(chunks)[:-1]:
            total += 1
            ends += c.text.rstrip().endswith((".", "!", "?", '"', ")"))
    assert total > 50 and ends / total > 0.75, (ends, total)
    plain = ChunkingConfig(chunk_tokens=64, overlap_tokens=0, sentence_aware=False)
    ends_plain = total_plain = 0
    for _doc, chunks in chunk_documents(musique_docs, plain):
        for c in list(chunks)[:-1]:
            total_plain += 1
            ends_plain += c.text.rstrip().endswith((".", "!", "?"))
            assert 56 <= c.n_tokens <= 64  # cut at a word start, never inside a word
    assert ends_plain / total_plain < 0.25, (ends_plain, total_plain)


def test_batch_size_does_not_change_chunks(musique_docs) -> None:
    a = [
        c
        for _, cs in chunk_documents(musique_docs, ChunkingConfig(chunk_tokens=48, batch_docs=1))
        for c in cs
    ]
    b = [
        c
        for _, cs in chunk_documents(musique_docs, ChunkingConfig(chunk_tokens=48, batch_docs=128))
        for c in cs
    ]
    assert a == b and len({c.chunk_id for c in a}) == len(a)


def test_a_long_document_chunked_by_segments_equals_the_whole_text_pass(
    shared_data: Path, monkeypatch
) -> None:
    """The longest real book of UltraDomain CS chunked SEGMENT_CHARS at a time gives the
    same chunks as one pass over the whole text, with segments cut small to cross many."""
    import graphrag_engine.index.chunking as chunking

    books = list(DocumentReader([shared_data / "ultradomain_cs_corpus.jsonl"]))
    book = max(books, key=lambda d: len(d.text))
    cfg = ChunkingConfig(chunk_tokens=200, overlap_tokens=32)
    monkeypatch.setattr(chunking, "SEGMENT_CHARS", 10**9)
    whole = [c for _, cs in chunk_documents([book], cfg) for c in cs]
    monkeypatch.setattr(chunking, "SEGMENT_CHARS", 20_000)
    parts = [c for _, cs in chunk_documents([book], cfg) for c in cs]
    assert len(book.text) > 15 * 20_000 and len(whole) > 300
    assert [(c.start_char, c.end_char, c.n_tokens, c.chunk_id) for c in parts] == [
        (c.start_char, c.end_char, c.n_tokens, c.chunk_id) for c in whole
    ]


def test_a_huge_document_gives_its_chunks_before_it_is_all_cut(
    shared_data: Path, monkeypatch
) -> None:
    """A document over SEGMENT_CHARS is tokenized while its chunks are read: the first
    chunk comes after one segment was encoded, not after all of them."""
    import graphrag_engine.index.chunking as chunking

    books = list(DocumentReader([shared_data / "ultradomain_cs_corpus.jsonl"]))
    book = max(books, key=lambda d: len(d.text))
    monkeypatch.setattr(chunking, "SEGMENT_CHARS", 20_000)
    tok = chunking.load_tokenizer(ChunkingConfig().tokenizer)
    encoded: list[int] = []
    real_encode = tok.encode

    class Counting:  # the real tokenizer, its encode calls counted
        def __getattr__(self, name: str):
            return getattr(tok, name)

        def encode(self, text: str, **kw):
            encoded.append(len(text))
            return real_encode(text, **kw)

    monkeypatch.setattr(chunking, "load_tokenizer", lambda _name: Counting())
    ((doc, chunks),) = list(chunking.chunk_documents([book], ChunkingConfig()))
    assert encoded == [], "nothing is cut before the chunks are asked for"
    first = next(chunks)
    assert first.idx == 0 and len(encoded) == 1
    rest = list(chunks)
    assert len(encoded) >= len(book.text) // 20_000 and rest[-1].end_char == len(book.text)
