"""The seams of the query side in one screen: what a method's retrieval hands to the answer
stage for a whole batch.

* `ChunkRanking` (ranking.py): (B, k) chunk rows and scores, best first, for Recall@k.
* `Context`: ordered `Section`s of text the answer prompt shows, and an optional preset answer
  that skips generation for that question (a refusal, a value computed without the LLM).
* `Retrieved`: a batch's rankings, contexts, per-question extras, LLM tokens and stage seconds.
* `StageClock`: wall seconds per named stage of a batch.

Question blocks are owner arrays: flat candidate arrays with `owner[i]` = the question (or path,
or node) entry i belongs to; graphrag_engine.kernels.segments holds the operators over them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from graphrag_engine.retrieve.ranking import ChunkRanking


@dataclass
class Section:
    """A group of context items; the answer stage cuts items from its end to fit the token
    budget, or drops the section as a whole when `whole` (never cut in the middle)."""

    items: list[str]
    title: str | None = None
    whole: bool = False
    counts: list[int] | None = field(default=None, compare=False)
    """Tokens of each item by the index's tokenizer, where the budget that kept them knew
    them (stored line counts): the answer stage reads them instead of counting again."""

    def text(self) -> str:
        """The section as one block: its title line (when titled) above its items."""
        body = "\n".join(self.items)
        return f"{self.title}\n{body}" if self.title else body


@dataclass
class Context:
    """What the answer prompt of one question holds: ordered sections, or a preset answer."""

    sections: list[Section] = field(default_factory=list)
    preset_answer: str | None = None
    """Set: this is the question's answer and no prompt is sent (e.g. a refusal)."""

    @classmethod
    def of(cls, items: list[str]) -> Context:
        """One untitled section of items (passages, reasoning paths)."""
        return cls([Section(list(items))])

    def texts(self) -> list[str]:
        """The prompt's context texts: every item of untitled sections, one block per titled one."""
        out: list[str] = []
        for s in self.sections:
            out.extend([s.text()] if s.title else s.items)
        return out

    @classmethod
    def from_json(cls, data: Any) -> Context:
        """Inverse of `asdict` (a checkpoint); a plain list of texts is one section."""
        if isinstance(data, list):
            return cls.of(data)
        return cls([Section(**s) for s in data["sections"]], data.get("preset_answer"))


@dataclass
class Retrieved:
    """A batch's retrieval result: ranked chunks (None for no retrieval), per-question extras
    (e.g. linked entities, a HyDE passage), per-question LLM tokens, per-stage seconds, and the
    contexts a method built itself (None: the ranking's top chunks are the context)."""

    ranking: ChunkRanking | None
    extras: list[dict[str, Any]]
    tokens: list[dict[str, int]]
    seconds: dict[str, float] = field(default_factory=dict)
    contexts: list[Context] | None = None

    @classmethod
    def empty(cls, n: int, seconds: dict[str, float] | None = None) -> Retrieved:
        """No ranking, no context, nothing extra for n questions (no retrieval)."""
        return cls(None, [{} for _ in range(n)], [{} for _ in range(n)], seconds or {})

    @classmethod
    def ranked(cls, ranking: ChunkRanking, seconds: dict[str, float]) -> Retrieved:
        """A chunk ranking with nothing extra."""
        n = ranking.ids.shape[0]
        return cls(ranking, [{} for _ in range(n)], [{} for _ in range(n)], seconds)

    @classmethod
    def joined(cls, parts: list[Retrieved]) -> Retrieved:
        """Consecutive blocks of one batch as one result: rankings padded to the widest (-1,
        score 0), per-question lists in order, seconds summed per stage."""
        ranking = None
        if any(p.ranking is not None for p in parts):
            width = max(p.ranking.ids.shape[1] for p in parts)
            ids, scores = [], []
            for p in parts:
                pad = ((0, 0), (0, width - p.ranking.ids.shape[1]))
                ids.append(np.pad(p.ranking.ids, pad, constant_values=-1))
                scores.append(np.pad(p.ranking.scores, pad))
            ranking = ChunkRanking(np.concatenate(ids), np.concatenate(scores))
        seconds: dict[str, float] = {}
        for p in parts:
            for k, v in p.seconds.items():
                seconds[k] = seconds.get(k, 0.0) + v
        contexts = None
        if any(p.contexts is not None for p in parts):
            contexts = [c for p in parts for c in p.contexts]
        extras = [e for p in parts for e in p.extras]
        return cls(ranking, extras, [t for p in parts for t in p.tokens], seconds, contexts)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready checkpoint of the batch."""
        return {
            "ids": None if self.ranking is None else self.ranking.ids.tolist(),
            "scores": None if self.ranking is None else self.ranking.scores.tolist(),
            "extras": self.extras,
            "tokens": self.tokens,
            "seconds": self.seconds,
            "contexts": None if self.contexts is None else [asdict(c) for c in self.contexts],
        }

    @classmethod
    def from_json(cls, p: dict[str, Any]) -> Retrieved:
        """Inverse of `to_json`."""
        ranking = None
        if p["ids"] is not None:
            ranking = ChunkRanking(
                np.asarray(p["ids"], dtype=np.int64), np.asarray(p["scores"], dtype=np.float32)
            )
        contexts = p.get("contexts")
        if contexts is not None:
            contexts = [Context.from_json(c) for c in contexts]
        return cls(ranking, p["extras"], p["tokens"], p["seconds"], contexts)


class StageClock:
    """Wall seconds per named stage of a batch."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block under `name` (repeated names add up)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0


def stage_tokens(stage: str, counts: Sequence[int]) -> list[dict[str, int]]:
    """Per-question LLM tokens of one stage, as `Retrieved.tokens` holds them."""
    return [{stage: n} for n in counts]


def summed_tokens(*stages: list[dict[str, int]]) -> list[dict[str, int]]:
    """Per-question LLM tokens of several stages in one dict a question (new dicts; counts
    under the same key added), keys in the order the stages first name them."""
    out: list[dict[str, int]] = [{} for _ in stages[0]]
    for stage in stages:
        for merged, counts in zip(out, stage, strict=True):
            for key, n in counts.items():
                merged[key] = merged.get(key, 0) + n
    return out


def tokens_by_question(
    owners: Sequence[int], counts: Sequence[dict[str, int]], n: int
) -> list[dict[str, int]]:
    """Per-question LLM tokens of a stage whose prompts belong to questions `owners` (the
    counts of a question's several prompts added), for `n` questions."""
    out: list[dict[str, int]] = [{} for _ in range(n)]
    for q, spent in zip(owners, counts, strict=True):
        for key, value in spent.items():
            out[q][key] = out[q].get(key, 0) + value
    return out
