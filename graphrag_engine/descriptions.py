"""Descriptions without an LLM: an entity is described by the sentences that mention it, a
relation by the sentences where its two ends co-occur, and a relation's keywords are the
content words of those sentences.

The index build picks them as it resolves entities (graphrag_engine/index/resolve.py); a query
that embeds lazy relation vectors replays the same picks from the index's tables
(`relation_picks`), so both give a relation the same vector: the mean of its sentences' vectors.
An entity's vector pools its name's vector with its sentences' (`entity_pool`), so the build
embeds each sentence once, as a unit (graphrag_engine/index/vectors.py).

Each entity and relation keeps at most k sentences, the most informative first: those naming
the most entities (a sentence that links more of the graph says more about each), then the
first seen; a sentence is cut at MAX_SENTENCE_CHARS. Only k strings per key are held, so the
memory of a build grows with its entities and relations, not with its mentions.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from itertools import combinations

import numpy as np

MAX_SENTENCE_CHARS = 300
"""Longest sentence kept in a description (longer ones are cut at a word boundary)."""
KEYWORDS = 5
"""Content words kept as a relation's keywords."""
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]+")
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in into
    is it its itself just me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    first second one two three also later known became become born called named many well
    however would including include includes included since within without among along upon
    """.split()
)
"""English function words and the commonest filler of encyclopedic prose, never keywords."""


def clip(sentence: str) -> str:
    """A sentence with its whitespace collapsed, cut at MAX_SENTENCE_CHARS on a word boundary."""
    text = " ".join(sentence.split())
    if len(text) <= MAX_SENTENCE_CHARS:
        return text
    return text[:MAX_SENTENCE_CHARS].rsplit(" ", 1)[0] + " ..."


class SentencePicks:
    """At most `k` distinct sentences per key, most informative first."""

    def __init__(self, k: int) -> None:
        """`k` sentences per key (0 keeps none)."""
        self.k = k
        self._picks: dict[Hashable, list[tuple[int, int, str, int]]] = {}
        self._seen = 0

    def offer(self, key: Hashable, sentence: str, named: int, row: int = -1) -> None:
        """Consider `sentence` (naming `named` entities; `row`: its unit's row) for `key`."""
        if self.k <= 0 or not sentence.strip():
            return
        self._seen += 1
        picks = self._picks.setdefault(key, [])
        if any(s == sentence for _, _, s, _ in picks):
            return
        entry = (-named, self._seen, sentence, row)
        if len(picks) < self.k:
            picks.append(entry)
            picks.sort()
        elif entry < picks[-1]:
            picks[-1] = entry
            picks.sort()

    def texts(self, key: Hashable) -> list[str]:
        """The kept sentences of `key`, best first, clipped."""
        return [clip(s) for _, _, s, _ in self._picks.get(key, [])]

    def rows(self, key: Hashable) -> list[int]:
        """The unit rows of the kept sentences of `key`, in the order of `texts`."""
        return [row for *_, row in self._picks.get(key, [])]


def content_words(sentences: Iterable[str], names: Iterable[str], n: int = KEYWORDS) -> list[str]:
    """The `n` most frequent content words of the sentences (lower case; ties by first
    occurrence), leaving out stopwords and the words of `names`."""
    skip = {w.lower() for name in names for w in _WORD.findall(name)}
    counts: Counter = Counter()
    for sentence in sentences:
        for word in _WORD.findall(sentence):
            w = word.lower()
            if len(w) > 2 and w not in STOPWORDS and w not in skip:
                counts[w] += 1
    return [w for w, _ in counts.most_common(n)]


def relation_picks(units: Iterable[tuple[str, Sequence[str]]], k: int) -> SentencePicks:
    """The sentences a build picked for its relations, replayed from its units in table order:
    each unit's text and the entity ids it names in the order the build linked them (its
    unit_entity rows); the same offers in the same order as graphrag_engine/index/resolve.py."""
    picks = SentencePicks(k)
    for row, (text, ids) in enumerate(units):
        for a, b in combinations(sorted(ids), 2):
            picks.offer((a, b), text, len(ids), row)
    return picks


def sentence_mean(unit_vectors: np.ndarray, rows: Sequence[int]) -> np.ndarray:
    """A sentence-described relation's vector: the normalised mean of its sentences' unit
    vectors (the build and lazy relation vectors both call this, so they agree)."""
    mean = np.asarray(unit_vectors[list(rows)], dtype=np.float32).mean(axis=0)
    return mean / max(float(np.linalg.norm(mean)), 1e-12)


def sentence_weights(chars: np.ndarray) -> np.ndarray:
    """How much each sentence's unit vector counts when pooled with others: its characters, as
    mean pooling a joined text counts its tokens, up to MAX_SENTENCE_CHARS."""
    return np.minimum(chars, MAX_SENTENCE_CHARS).astype(np.float32)


def entity_pool(
    name_vector: np.ndarray,
    name: str,
    unit_vectors: np.ndarray,
    rows: Sequence[int],
    unit_chars: np.ndarray,
) -> np.ndarray:
    """A sentence-described entity's vector: the normalised sum of its name's vector and its
    sentences' unit vectors, each weighted by its characters. Embedding "name: sentences" as one
    text mean-pools its tokens, which weighs each part by its length the same way; on MuSiQue's
    train index this came closest to those vectors (bench/descriptions.py)."""
    rows = list(rows)
    weights = sentence_weights(unit_chars[rows])
    pooled = (len(name) + 1) * np.asarray(name_vector, dtype=np.float32)
    pooled = pooled + weights @ np.asarray(unit_vectors[rows], dtype=np.float32)
    return pooled / max(float(np.linalg.norm(pooled)), 1e-12)
