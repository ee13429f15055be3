"""One scorer protocol for every method: "score these candidate texts against their question"
for a whole batch in one call (`graphrag_engine.models.rerank.Scorer`: model id, `score_batch`, usage as
`take_tokens`, parse `failures`), and a name -> factory registry so any method reaches any
scorer by name (`make_scorer`).

Registered: random, bm25 (Okapi over each question's own candidates), bi-encoder (the index's
embedder), cross-encoder (models.reranker, or a local folder), llm (numbered candidates, the
model names the useful ones), bi-encoder-ft and llm-ft (fine-tuned models from a local folder).
An LLM scorer can sit behind a bi-encoder prefilter (PrefilteredScorer), so it reads only the
best candidates. `score_flat` scores flat (owner, text) arrays; `reuses_index_vectors` says when
a bi-encoder's scores can come from the vectors the index already stores.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from graphrag_engine.config import LLMConfig
from graphrag_engine.errors import ConfigError
from graphrag_engine.kernels.segments import group_by_owner
from graphrag_engine.models import make_llm, make_reranker
from graphrag_engine.models.base import GenParams
from graphrag_engine.models.embed import SentenceTransformerEmbedder
from graphrag_engine.models.rerank import BiEncoderReranker, Scorer, ScorerBase
from graphrag_engine.models.structured import ParseError, generate_structured

FINETUNE_HINT = {
    "bi-encoder-ft": "train one with `.venv/bin/python -m bench.lego_finetune --kind bi-encoder "
    "--out PATH` (the margin loss of LEGO-GraphRAG on WebQSP's gold triples)",
    "llm-ft": "train one with `.venv/bin/python -m bench.lego_finetune --kind llm --out PATH` "
    "(SmolLM2 supervised on picking WebQSP's gold triples, about 20 minutes on 2 cores)",
}


class RandomScorer(ScorerBase):
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


class BM25Scorer(ScorerBase):
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


class LLMScorer(ScorerBase):
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


class PrefilteredScorer(ScorerBase):
    """A cheap scorer ranks each question's candidates and only its best `keep` go to a choosing
    scorer (an LLM: score > 0 means chosen), as the paper's LLM modules rank with an embedding
    model first. Scores come in tiers, each ordered within: chosen (by the chooser's score),
    then prefiltered but not chosen, then the rest (both by the cheap scorer's rank)."""

    def __init__(self, first: Scorer, chooser: Scorer, keep: int) -> None:
        self.first, self.chooser, self.keep = first, chooser, keep
        self.model_id = f"{chooser.model_id}|top{keep}:{first.model_id}"

    @property
    def failures(self) -> int:  # type: ignore[override]
        """Unparsable chooser answers so far."""
        return self.chooser.failures

    def take_tokens(self) -> list[int]:
        """The chooser's tokens per pair position since the last take."""
        return self.chooser.take_tokens()

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


ScorerFactory = Callable[..., Scorer]
"""(ctx, model, seed) -> a scorer; `ctx` (a QueryContext) supplies the embedder, reranker
settings, LLM, run folder and ledger; `model` a local folder where the scorer reads one."""
SCORERS: dict[str, ScorerFactory] = {}
LLM_SCORERS = ("llm", "llm-ft")
"""Scorers that choose among candidates with an LLM (they may sit behind a prefilter)."""


def register_scorer(name: str) -> Callable[[ScorerFactory], ScorerFactory]:
    """`@register_scorer("bm25")` on a factory (ctx, model, seed) -> Scorer."""

    def wrap(factory: ScorerFactory) -> ScorerFactory:
        SCORERS[name] = factory
        return factory

    return wrap


def scorer_names() -> list[str]:
    """Every registered scorer name, and "none" (no scoring)."""
    return ["none", *SCORERS]


def make_scorer(
    name: str, ctx, model: str | None = None, seed: int = 0, prefilter: int = 0
) -> Scorer | None:
    """The scorer registered as `name` (None for "none"). LLM scorers see only the
    bi-encoder's best `prefilter` candidates when it is > 0."""
    if name == "none":
        return None
    if name not in SCORERS:
        raise ConfigError(f"unknown scorer {name!r}; known: {', '.join(scorer_names())}")
    scorer = SCORERS[name](ctx, model, seed)
    if prefilter > 0 and name in LLM_SCORERS:
        return PrefilteredScorer(BiEncoderReranker(ctx.embedder), scorer, prefilter)
    return scorer


def _local_model(name: str, model: str | None) -> str:
    if not model or not Path(model).exists():
        raise ConfigError(
            f"the fine-tuned model {model!r} of scorer {name!r} is not there; "
            f"{FINETUNE_HINT[name]}, or pick an instance without a fine-tuned model"
        )
    return model


@register_scorer("random")
def _random(ctx, model: str | None, seed: int) -> Scorer:
    return RandomScorer(seed)


@register_scorer("bm25")
def _bm25(ctx, model: str | None, seed: int) -> Scorer:
    return BM25Scorer()


@register_scorer("bi-encoder")
def _bi_encoder(ctx, model: str | None, seed: int) -> Scorer:
    return BiEncoderReranker(ctx.embedder)


@register_scorer("cross-encoder")
def _cross_encoder(ctx, model: str | None, seed: int) -> Scorer:
    rr = ctx.cfg.models.reranker
    backend = "cross-encoder" if rr.backend == "bi-encoder" else rr.backend
    return make_reranker(replace(rr, backend=backend, model=model or rr.model), ctx.embedder)


@register_scorer("llm")
def _llm(ctx, model: str | None, seed: int) -> Scorer:
    return LLMScorer(ctx.llm)


@register_scorer("bi-encoder-ft")
def _bi_encoder_ft(ctx, model: str | None, seed: int) -> Scorer:
    return BiEncoderReranker(SentenceTransformerEmbedder(_local_model("bi-encoder-ft", model)))


@register_scorer("llm-ft")
def _llm_ft(ctx, model: str | None, seed: int) -> Scorer:
    cfg = LLMConfig(backend="transformers", model=_local_model("llm-ft", model))
    llm = make_llm(cfg, default_cache=ctx.run_dir / "llm_ft_cache.sqlite", ledger=ctx.ledger)
    return LLMScorer(llm)


def score_flat(
    scorer: Scorer, questions: list[str], owner: np.ndarray, texts: list[str]
) -> np.ndarray:
    """Scores of flat (question owner[i], texts[i]) candidates in one scorer call; every
    question is a pair (empty when it has no candidates), so pair positions are questions."""
    groups = group_by_owner(owner, len(questions))
    pairs = [(q, [texts[i] for i in g]) for q, g in zip(questions, groups, strict=True)]
    out = np.zeros(len(texts), dtype=np.float32)
    for g, s in zip(groups, scorer.score_batch(pairs), strict=True):
        out[g] = s
    return out


def reuses_index_vectors(scorer: Scorer, embedder) -> bool:
    """Whether `scorer` is the bi-encoder of the index's own embedder, so the cosine of stored
    index vectors gives its scores without embedding the texts again."""
    return isinstance(scorer, BiEncoderReranker) and scorer.embedder is embedder
