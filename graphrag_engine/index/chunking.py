"""Token-based chunking with overlap and sentence-aware boundaries, streaming over documents.

Tokens come from a local tokenizer (by default the packaged all-MiniLM-L6-v2 tokenizer, the
default embedder's own), never from the network. Documents are tokenized in batches of
`batch_docs`, so memory stays bounded however large the corpus is; a document longer than
SEGMENT_CHARS is tokenized a segment at a time (each segment resumes where the previous one's
last, possibly cut-short window began), so one huge document does not hold all its token
offsets at once, and its chunks come out as they are cut (never all at once). A word the
tokenizer maps to one unknown token because it is too long (WordPiece does so over 100
characters) counts one token per MAX_TOKEN_CHARS characters, so no chunk exceeds
`chunk_tokens` whatever the text looks like.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from graphrag_engine.config import ChunkingConfig
from graphrag_engine.index.ingest import Document
from graphrag_engine.models.tokenizer import load_tokenizer

# A sentence ends at . ! ? (optionally followed by closing quotes or brackets) before
# whitespace, or at a blank line / line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
SEGMENT_CHARS = 1 << 18
"""A document longer than this (characters) is tokenized segment by segment."""
LONG_WORD_CHARS = 100
"""An unknown token spanning more characters is a word WordPiece would not split ..."""
MAX_TOKEN_CHARS = 8
"""... and counts as one token per this many characters."""


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


def _split_unknown(enc, unk: int | None) -> list[tuple[int, int]]:
    """The encoding's non-empty token spans, an unknown-token span over LONG_WORD_CHARS
    characters cut into pieces of MAX_TOKEN_CHARS (continuations of one word)."""
    long = unk is not None and any(
        i == unk and b - a > LONG_WORD_CHARS for i, (a, b) in zip(enc.ids, enc.offsets, strict=True)
    )
    if not long:
        return [o for o in enc.offsets if o[1] > o[0]]
    out: list[tuple[int, int]] = []
    for i, (a, b) in zip(enc.ids, enc.offsets, strict=True):
        if i == unk and b - a > LONG_WORD_CHARS:
            out.extend((c, min(c + MAX_TOKEN_CHARS, b)) for c in range(a, b, MAX_TOKEN_CHARS))
        elif b > a:
            out.append((a, b))
    return out


def _windows_of(
    text: str, offsets: list[tuple[int, int]], cfg: ChunkingConfig
) -> list[tuple[int, int, int]]:
    """(start char, end char, tokens) of each window over one text's token spans."""
    if not offsets:
        return []
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
    return [(offsets[a][0], offsets[b - 1][1], b - a) for a, b in windows]


def _chunks_of(doc: Document, spans: Iterable[tuple[int, int, int]]) -> Iterator[Chunk]:
    """The document's chunks from its (start char, end char, tokens) windows, as they come."""
    text = doc.text
    blank = True
    for idx, (cs, ce, n) in enumerate(spans):
        blank = False
        piece = text[cs:ce]
        yield Chunk(chunk_id(doc.doc_id, idx, piece), doc.doc_id, idx, piece, n, cs, ce)
    if blank:  # no token at all: the whole text is the one chunk
        yield Chunk(chunk_id(doc.doc_id, 0, text), doc.doc_id, 0, text, 0, 0, len(text))


def _segmented_windows(tok, text: str, cfg: ChunkingConfig) -> Iterator[tuple[int, int, int]]:
    """Windows of a long text, SEGMENT_CHARS at a time: each segment ends at a whitespace
    before its limit (or at the limit), and its last window, which the segment end may have
    cut short, is redone as the start of the next segment. Windows come out segment by
    segment."""
    start = 0
    while start < len(text):
        end = min(start + SEGMENT_CHARS, len(text))
        if end < len(text):
            space = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
            end = space + 1 if space > start + SEGMENT_CHARS // 2 else end
        piece = text[start:end]
        enc = tok.encode(piece, add_special_tokens=False)
        local = _windows_of(piece, _split_unknown(enc, tok.token_to_id("[UNK]")), cfg)
        if end < len(text) and len(local) > 1:
            # the last window may be cut short by the segment end: the next segment starts
            # with it, where the whole-text pass would have started it
            yield from ((a + start, b + start, n) for a, b, n in local[:-1])
            start += local[-1][0]
        else:
            yield from ((a + start, b + start, n) for a, b, n in local)
            start = end


def chunk_documents(
    docs: Iterable[Document], cfg: ChunkingConfig | None = None
) -> Iterator[tuple[Document, Iterator[Chunk]]]:
    """Stream (document, its chunks), tokenizing `batch_docs` documents at a time; a document
    longer than SEGMENT_CHARS is cut segment by segment while its chunks are consumed (read
    them before taking the next document)."""
    cfg = cfg or ChunkingConfig()
    tok = load_tokenizer(cfg.tokenizer)
    batch: list[Document] = []

    def flush() -> Iterator[tuple[Document, Iterator[Chunk]]]:
        encodings = tok.encode_batch([d.text for d in batch], add_special_tokens=False)
        for doc, enc in zip(batch, encodings, strict=True):
            spans = _split_unknown(enc, tok.token_to_id("[UNK]"))
            yield doc, _chunks_of(doc, _windows_of(doc.text, spans, cfg))
        batch.clear()

    for doc in docs:
        if len(doc.text) > SEGMENT_CHARS:
            yield from flush()
            yield doc, _chunks_of(doc, _segmented_windows(tok, doc.text, cfg))
            continue
        batch.append(doc)
        if len(batch) >= cfg.batch_docs:
            yield from flush()
    if batch:
        yield from flush()
