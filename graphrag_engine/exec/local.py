"""The default executor: models run in this process; a large NER job is spread over worker
processes, one spaCy each, since spaCy tags on one core."""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterator, Sequence

import numpy as np

from graphrag_engine.config import EmbedderConfig
from graphrag_engine.models import make_embedder
from graphrag_engine.models.embed_cache import encode_blocks
from graphrag_engine.models.ner import entity_recognizer, load_recognizer, tag_block
from graphrag_engine.models.ner_cache import BLOCK, Mentions
from graphrag_engine.models.text_cache import in_blocks
from graphrag_engine.progress import BlockSizer

NER_WORKERS_FROM = 3500
"""Texts to tag (ones the NER cache lacks) from which `ner_blocks` spreads them over worker
processes when none were started before: below it, their start-up (a few seconds of imports
and model load each) outweighs what they save. MuSiQue's 3,404 chunks hold 12,061 units."""


class LocalExecutor:
    """Embeds and tags texts in-process with the shared (once-loaded) models."""

    name = "local"

    def __init__(self, embedder: EmbedderConfig, ner_backend: str) -> None:
        self._embedder_cfg = embedder
        self._embedder = None
        self._ner_backend = ner_backend
        self._ner = None
        self._ner_pool = None
        self.ner_workers = 0  # worker processes started for NER in this executor's life

    @property
    def embedder(self):
        """The embedder, loaded on first use (shared across the process)."""
        if self._embedder is None:
            self._embedder = make_embedder(self._embedder_cfg)
        return self._embedder

    @property
    def model_id(self) -> str:
        """Id of the embedding model."""
        return self.embedder.model_id

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of the texts."""
        return self.embedder.encode(texts)

    def encode_blocks(self, texts: list[str]) -> Iterator[tuple[Sequence[int], np.ndarray]]:
        """(positions, vectors) as the embedder's own pipeline hands them back (the cache's
        `encode_blocks`), so the executor does not hide them."""
        return encode_blocks(self.embedder, texts)

    @property
    def ner_model_id(self) -> str:
        """Id of the NER model in use."""
        return self._recognizer().model_id

    def _recognizer(self):
        if self._ner is None:
            self._ner = entity_recognizer(self._ner_backend)
        return self._ner

    def ner(self, texts: list[str]) -> list[list[tuple[str, str]]]:
        """Entities of every text."""
        return self._recognizer().extract(texts)

    def start_ner_workers(self) -> bool:
        """Start one spaCy worker process per core for `ner_blocks`; False where it would not
        help (one core, rules NER)."""
        if self._ner_pool is None:
            affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere all cores
            cores = len(affinity(0)) if affinity else os.cpu_count() or 1
            if cores < 2 or self._recognizer().backend != "spacy":
                return False
            spawn = multiprocessing.get_context("spawn")  # no fork of a threaded model process
            self._ner_pool = spawn.Pool(cores, load_recognizer, (self._ner_backend,))
            self.ner_workers = cores
        return True

    def ner_blocks(self, texts: list[str]) -> Iterator[tuple[Sequence[int], list[Mentions]]]:
        """(positions, mentions) of blocks of texts, from worker processes when there are
        NER_WORKERS_FROM texts or more (so a re-index whose units are cached starts none), else
        tagged here; blocks come back as they finish."""
        if self._ner_pool is None and len(texts) >= NER_WORKERS_FROM:
            self.start_ner_workers()
        if self._ner_pool is None:
            yield from in_blocks(None, self.ner, texts, BLOCK)
            return
        sizer, lo, sent = BlockSizer(BLOCK, workers=self.ner_workers), 0, deque()
        while lo < len(texts) or sent:
            while lo < len(texts) and len(sent) < 2 * self.ner_workers:  # none waits for us
                hi = min(lo + sizer.size(), len(texts))
                job = (self._ner_backend, lo, texts[lo:hi])
                sent.append(self._ner_pool.apply_async(tag_block, (job,)))
                lo = hi
            start, found = sent.popleft().get()
            sizer.finished(len(found))
            yield range(start, start + len(found)), found

    def llm_backend(self, llm_cfg) -> None:
        """LLMs run in this process (make_llm builds them)."""
        return None

    def close(self) -> None:
        """Stop the NER worker processes, if any were started."""
        if self._ner_pool is not None:
            self._ner_pool.terminate()
            self._ner_pool.join()
            self._ner_pool = None
