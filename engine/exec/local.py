"""The default executor: models run in this process."""

from __future__ import annotations

import numpy as np

from engine.config import EmbedderConfig
from engine.models import make_embedder
from engine.models.ner import entity_recognizer


class LocalExecutor:
    """Embeds and tags texts in-process with the shared (once-loaded) models."""

    name = "local"

    def __init__(self, embedder: EmbedderConfig, ner_backend: str) -> None:
        self._embedder_cfg = embedder
        self._embedder = None
        self._ner_backend = ner_backend
        self._ner = None

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

    def llm_backend(self, llm_cfg) -> None:
        """LLMs run in this process (make_llm builds them)."""
        return None

    def close(self) -> None:
        """Nothing to release."""
