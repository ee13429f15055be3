"""Token-based chunking with overlap and sentence-aware boundaries, streaming over documents.

Tokens come from a local tokenizer (by default the packaged all-MiniLM-L6-v2 tokenizer, the
default embedder's own), never from the network. Documents are tokenized in batches of
`batch_docs`, so memory stays bounded however large the corpus is.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.config import ChunkingConfig
from engine.index.ingest import Document
from engine.models.tokenizer import load_tokenizer

# A sentence ends at . ! ? (optionally followed by closing quotes or brackets) before
# whitespace, or at a blank line / line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")


@dataclass(frozen=True)
class Chunk:
    """A token window of one document."""

    chunk_id: str
    doc_id: str
    idx: int
    text: str
    n_tokens: int
    start_char: int
    end_char: int

    def to_row(self) -> dict[str, Any]:
        """Row of the `chunks` table."""
        return self.__dict__.copy()


def sentence_starts(text: str) -> list[int]:
    """Character offsets where sentences begin (always includes 0)."""
    starts = [0]
    for match in _SENTENCE_END.finditer(text):
        if match.end() < len(text):
            starts.append(match.end())
    return starts


def split_windows(
    token_starts: list[int],
    boundaries: list[int],
    chunk_tokens: int,
    overlap: int,
    word_starts: list[int] | None = None,
) -> list[tuple[int, int]]:
    """Token windows [start, end) covering all tokens, cut at sentence boundaries when possible.

    `boundaries` are token indices where a sentence starts (sorted). A window ends at the last
    boundary that leaves it at least half full; otherwise at the last word start within
    `chunk_tokens` (never inside a word, so a chunk re-tokenizes to the same tokens), or hard
    at `chunk_tokens` when one word is longer than that. The next window starts `overlap` tokens
    back, moved forward to a sentence start (or else a word start) inside the overlap.
    """
    n = len(token_starts)
    words = word_starts if word_starts is not None else list(range(n))
    windows: list[tuple[int, int]] = []
    start = 0
    while start < n:
        limit = start + chunk_tokens
        if limit >= n:
            windows.append((start, n))
            break
        end = _last_in(boundaries, start + chunk_tokens // 2, limit)
        if end is None:
            end = _last_in(words, start + 1, limit) or limit
        windows.append((start, end))
        if not overlap:
            start = end
            continue
        nxt = max(end - overlap, start + 1)
        start = _first_in(boundaries, nxt, end - 1) or _first_in(words, nxt, end - 1) or nxt
    return windows


def _last_in(sorted_idx: list[int], lo: int, hi: int) -> int | None:
    """Largest value v of sorted_idx with lo <= v <= hi, or None."""
    i = bisect.bisect_right(sorted_idx, hi) - 1
    return sorted_idx[i] if i >= 0 and sorted_idx[i] >= lo else None


def _first_in(sorted_idx: list[int], lo: int, hi: int) -> int | None:
    """Smallest value v of sorted_idx with lo <= v <= hi, or None."""
    i = bisect.bisect_left(sorted_idx, lo)
    return sorted_idx[i] if i < len(sorted_idx) and sorted_idx[i] <= hi else None


def chunk_id(doc_id: str, idx: int, text: str) -> str:
    """Content-hash id of a chunk."""
    return hashlib.sha1(f"{doc_id}\x00{idx}\x00{text}".encode()).hexdigest()[:16]


def _chunks_of(doc: Document, offsets: list[tuple[int, int]], cfg: ChunkingConfig) -> list[Chunk]:
    text = doc.text
    offsets = [o for o in offsets if o[1] > o[0]]
    if not offsets:
        return [Chunk(chunk_id(doc.doc_id, 0, text), doc.doc_id, 0, text, 0, 0, len(text))]
    token_starts = [s for s, _ in offsets]
    boundaries: list[int] = []
    if cfg.sentence_aware:
        boundaries = sorted(
            {bisect.bisect_left(token_starts, c) for c in sentence_starts(text)} - {0}
        )
        boundaries = [b for b in boundaries if b < len(offsets)]
    # a token begins a word when whitespace precedes it (no "##" continuation of the word before)
    word_starts = [i for i in range(1, len(offsets)) if offsets[i][0] > offsets[i - 1][1]]
    windows = split_windows(
        token_starts, boundaries, cfg.chunk_tokens, cfg.overlap_tokens, word_starts
    )
    chunks = []
    for idx, (a, b) in enumerate(windows):
        cs, ce = offsets[a][0], offsets[b - 1][1]
        piece = text[cs:ce]
        chunks.append(
            Chunk(chunk_id(doc.doc_id, idx, piece), doc.doc_id, idx, piece, b - a, cs, ce)
        )
    return chunks


def chunk_documents(
    docs: Iterable[Document], cfg: ChunkingConfig | None = None
) -> Iterator[tuple[Document, list[Chunk]]]:
    """Stream (document, its chunks), tokenizing `batch_docs` documents at a time."""
    cfg = cfg or ChunkingConfig()
    tok = load_tokenizer(cfg.tokenizer)
    batch: list[Document] = []

    def flush() -> Iterator[tuple[Document, list[Chunk]]]:
        encodings = tok.encode_batch([d.text for d in batch], add_special_tokens=False)
        for doc, enc in zip(batch, encodings, strict=True):
            yield doc, _chunks_of(doc, enc.offsets, cfg)
        batch.clear()

    for doc in docs:
        batch.append(doc)
        if len(batch) >= cfg.batch_docs:
            yield from flush()
    if batch:
        yield from flush()
