"""Text scorers of LEGO-GraphRAG's modules: each scores, for a batch of questions, that
question's candidate texts (node names, triples, paths) in one call for the whole batch.

none (no scoring), random, BM25 (Okapi over each question's own candidates), bi-encoder (the
embedder), cross-encoder (a local folder), vanilla LLM (numbered candidates, the model names the
useful ones), and fine-tuned bi-encoder or LLM read from a local folder. An LLM scorer can sit
behind a bi-encoder prefilter (PrefilteredScorer), so it reads only the best candidates.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Protocol

import numpy as np

from engine.errors import ConfigError
from engine.models.base import GenParams
from engine.models.structured import ParseError, generate_structured

FINETUNE_HINT = {
    "bi-encoder-ft": "train one with `.venv/bin/python bench/lego_finetune.py --kind bi-encoder "
    "--out PATH` (the margin loss of LEGO-GraphRAG on WebQSP's gold triples)",
    "llm-ft": "train one with `.venv/bin/python bench/lego_finetune.py --kind llm --out PATH` "
    "(SmolLM2 supervised on picking WebQSP's gold triples, about 20 minutes on 2 cores)",
}


class TextScorer(Protocol):
    """Scores candidate texts against their question; higher is more relevant."""

    model_id: str

    def score_batch(self, pairs: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """One score array per (question, candidates) pair."""


class RandomScorer:
    """Uniform scores, reproducible: a hash of (seed, question, text)."""

    model_id = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def score_batch(self, pairs: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """A stable pseudo-random score per candidate."""
        out = []
        for q, texts in pairs:
            vals = [
                int.from_bytes(
                    hashlib.blake2b(f"{self.seed}\x00{q}\x00{t}".encode(), digest_size=8).digest()
                )
                / 2**64
                for t in texts
            ]
            out.append(np.asarray(vals, dtype=np.float32))
        return out


_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25Scorer:
    """Okapi BM25 (k1 1.5, b 0.75) with each question's candidates as the collection, so the
    IDF says what separates them (Freebase relation names split on dots and underscores)."""

    model_id = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b

    def score_batch(self, pairs: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """BM25 of each candidate for its question."""
        out = []
        for q, texts in pairs:
            docs = [_words(t) for t in texts]
            if not docs:
                out.append(np.zeros(0, np.float32))
                continue
            lengths = np.asarray([len(d) for d in docs], dtype=np.float64)
            avg = max(lengths.mean(), 1.0)
            df: dict[str, int] = {}
            for d in docs:
                for w in set(d):
                    df[w] = df.get(w, 0) + 1
            n = len(docs)
            scores = np.zeros(n)
            for w in set(_words(q)):
                if w not in df:
                    continue
                idf = np.log(1.0 + (n - df[w] + 0.5) / (df[w] + 0.5))
                tf = np.asarray([d.count(w) for d in docs], dtype=np.float64)
                scores += (
                    idf
                    * tf
                    * (self.k1 + 1)
                    / (tf + self.k1 * (1 - self.b + self.b * lengths / avg))
                )
            out.append(scores.astype(np.float32))
        return out


LLM_PROMPT = """Question: {question}

Candidates:
{candidates}

Which candidates help answer the question? Reply with their numbers only, most useful first, separated by commas."""


def choice_prompt(question: str, candidates: list[str]) -> list[dict[str, str]]:
    """The LLM scorer's chat prompt: the question and its candidates numbered from 1."""
    listing = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(candidates))
    return [{"role": "user", "content": LLM_PROMPT.format(question=question, candidates=listing)}]


def _parse_choice(n: int):
    def parse(text: str) -> list[int]:
        picks = []
        for tok in re.findall(r"\d+", text):
            i = int(tok)
            if 1 <= i <= n and i not in picks:
                picks.append(i)
        if not picks:
            raise ParseError(f"no candidate number between 1 and {n}")
        return picks

    return parse


class LLMScorer:
    """The LLM names the useful candidates among numbered groups of `group` candidates; a
    candidate's score is 1 for the first pick, falling linearly, and 0 when not picked. A group
    whose answer never parses scores 0 everywhere and is counted in `failures`."""

    def __init__(self, llm, group: int = 16, max_tokens: int = 48, retries: int = 2) -> None:
        self.llm, self.group, self.max_tokens, self.retries = llm, group, max_tokens, retries
        self.model_id = f"llm:{getattr(llm, 'model_id', 'llm')}"
        self.failures = 0
        self._tokens: list[int] = []

    def score_batch(self, pairs: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """One batched LLM call (plus re-asks) for every group of every question."""
        prompts, parsers, where = [], [], []
        for p, (q, texts) in enumerate(pairs):
            for start in range(0, len(texts), self.group):
                part = texts[start : start + self.group]
                prompts.append(choice_prompt(q, part))
                parsers.append(_parse_choice(len(part)))
                where.append((p, start))
        out = [np.zeros(len(t), np.float32) for _, t in pairs]
        self._tokens += [0] * (len(pairs) - len(self._tokens))
        if not prompts:
            return out
        run = generate_structured(
            self.llm,
            prompts,
            parsers,
            GenParams(max_tokens=self.max_tokens),
            stage="lego_score",
            retries=self.retries,
        )
        self.failures += run.failures
        for (p, start), res in zip(where, run.results, strict=True):
            self._tokens[p] += res.tokens
            if res.ok:
                for rank, i in enumerate(res.value):
                    out[p][start + i - 1] = 1.0 - rank / len(res.value) + 1e-3
        return out

    def take_tokens(self) -> list[int]:
        """Prompt + completion tokens per pair position since the last take (LEGO's pairs are
        its questions, in the same order on every call)."""
        out, self._tokens = self._tokens, []
        return out


class PrefilteredScorer:
    """A cheap scorer ranks each question's candidates and only its best `keep` go to a choosing
    scorer (an LLM: score > 0 means chosen), as the paper's LLM modules rank with an embedding
    model first. Scores come in tiers, each ordered within: chosen (by the chooser's score),
    then prefiltered but not chosen, then the rest (both by the cheap scorer's rank)."""

    def __init__(self, first: TextScorer, chooser: TextScorer, keep: int) -> None:
        self.first, self.chooser, self.keep = first, chooser, keep
        self.model_id = f"{chooser.model_id}|top{keep}:{first.model_id}"

    @property
    def failures(self) -> int:
        """Unparsable chooser answers so far."""
        return getattr(self.chooser, "failures", 0)

    def take_tokens(self) -> list[int]:
        """The chooser's tokens per pair position since the last take."""
        return self.chooser.take_tokens() if hasattr(self.chooser, "take_tokens") else []

    def score_batch(self, pairs: list[tuple[str, list[str]]]) -> list[np.ndarray]:
        """One cheap call over every candidate, one chooser call over the prefiltered ones."""
        cheap = self.first.score_batch(pairs)
        orders = [np.argsort(-s, kind="stable") for s in cheap]
        tops = [order[: self.keep] for order in orders]
        chosen = self.chooser.score_batch(
            [(q, [texts[i] for i in top]) for (q, texts), top in zip(pairs, tops, strict=True)]
        )
        out = []
        for s, order, top, c in zip(cheap, orders, tops, chosen, strict=True):
            rank = np.empty(len(s), np.float64)
            rank[order] = np.arange(len(s))
            score = 1.0 - rank / max(len(s), 1)  # (0, 1], the cheap order
            score[top] += 1.0 + np.where(c > 0, 2.0 + c, 0.0)
            out.append(score.astype(np.float32))
        return out


def make_scorer(
    kind: str, model: str | None, ctx, seed: int = 0, prefilter: int = 0
) -> TextScorer | None:
    """The scorer a LEGO module names; `ctx` supplies the shared embedder, reranker and LLM.
    LLM scorers see only the bi-encoder's best `prefilter` candidates when it is > 0."""
    scorer = _make_scorer(kind, model, ctx, seed)
    if prefilter > 0 and kind in ("llm", "llm-ft"):
        from engine.models.rerank import BiEncoderReranker

        return PrefilteredScorer(BiEncoderReranker(ctx.embedder), scorer, prefilter)
    return scorer


def _make_scorer(kind: str, model: str | None, ctx, seed: int) -> TextScorer | None:
    if kind == "none":
        return None
    if kind == "random":
        return RandomScorer(seed)
    if kind == "bm25":
        return BM25Scorer()
    from engine.models.rerank import BiEncoderReranker

    if kind == "bi-encoder":
        return BiEncoderReranker(ctx.embedder)
    if kind == "cross-encoder":
        import dataclasses

        from engine.models import make_reranker

        rr = ctx.cfg.models.reranker
        backend = "cross-encoder" if rr.backend == "bi-encoder" else rr.backend
        return make_reranker(
            dataclasses.replace(rr, backend=backend, model=model or rr.model), ctx.embedder
        )
    if kind == "llm":
        return LLMScorer(ctx.llm)
    if kind in ("bi-encoder-ft", "llm-ft"):
        if not model or not Path(model).exists():
            raise ConfigError(
                f"lego: the fine-tuned model {model!r} is not there; {FINETUNE_HINT[kind]}, "
                "or pick an instance without a fine-tuned model"
            )
        if kind == "bi-encoder-ft":
            from engine.models.embed import SentenceTransformerEmbedder

            return BiEncoderReranker(SentenceTransformerEmbedder(model))
        from engine.config import LLMConfig
        from engine.models import make_llm

        cfg = LLMConfig(backend="transformers", model=model)
        llm = make_llm(cfg, default_cache=ctx.run_dir / "llm_ft_cache.sqlite", ledger=ctx.ledger)
        return LLMScorer(llm)
    raise ConfigError(f"lego: unknown scorer {kind!r}")
