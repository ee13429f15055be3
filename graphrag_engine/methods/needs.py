"""What a method needs, as typed parts of an index or a question set, checked for every method
of a run before the first one starts.

A method registers the parts it always needs (`@register(..., needs={Part.ENTITY_GRAPH})`) and
those it uses when present (`uses=`); a config whose settings add parts (PankRAG's gold plans,
LEGO's question graphs) says so in `needs()`. `check_needs` compares them with the index's
manifest and the questions and exits 2 naming the method, the missing part and the index option
or question field that provides it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from graphrag_engine.errors import BadInputError
from graphrag_engine.eval.datasets import Question
from graphrag_engine.store.index_store import built_config


class Part(StrEnum):
    """One thing a method reads: an index part, or a field every question must carry."""

    CHUNKS = "chunks"
    CHUNK_VECTORS = "chunk_vectors"
    ENTITY_GRAPH = "entity_graph"
    PASSAGE_ENTITY_GRAPH = "passage_entity_graph"
    CUE_GRAPH = "cue_graph"
    ENTITY_VECTORS = "entity_vectors"
    RELATION_VECTORS = "relation_vectors"
    UNIT_VECTORS = "unit_vectors"
    COMMUNITY_REPORTS = "community_reports"
    COMMUNITIES = "communities"
    TREE = "tree"
    RELATED_TREE = "related_tree"
    SKELETON = "skeleton"
    GOLD_DECOMPOSITIONS = "gold_decompositions"
    QUESTION_GRAPHS = "question_graphs"


@dataclass(frozen=True)
class PartSource:
    """Where a part comes from: the manifest entries that hold it (or a question field), a
    vector table the index may leave lazy, and what a user does to get it."""

    files: tuple[str, ...] = ()
    question_field: str | None = None
    lazy: str | None = None
    provided_by: str = ""


SOURCES: dict[Part, PartSource] = {
    Part.CHUNKS: PartSource(("chunks",), provided_by="any index (`graphrag-engine index`)"),
    Part.CHUNK_VECTORS: PartSource(
        ("chunk_vectors",), provided_by="an index built with an embedder (models.embedder)"
    ),
    Part.ENTITY_GRAPH: PartSource(
        ("entities", "relations", "graph_entity"),
        provided_by="an index built with graph.enabled: true (the default)",
    ),
    Part.PASSAGE_ENTITY_GRAPH: PartSource(
        ("graph_passage_entity",), provided_by="an index built with graph.enabled: true"
    ),
    Part.CUE_GRAPH: PartSource(
        ("units", "unit_entity", "graph_cue"),
        provided_by="an index built with graph.enabled: true (knowledge units)",
    ),
    Part.ENTITY_VECTORS: PartSource(
        ("entity_vectors",), provided_by="an index built with graph.embed: true (the default)"
    ),
    Part.RELATION_VECTORS: PartSource(
        ("relation_vectors",),
        lazy="relation_vectors",
        provided_by="an index built with graph.embed: true and graph.relation_vectors: index or lazy",
    ),
    Part.UNIT_VECTORS: PartSource(
        ("unit_vectors",),
        lazy="unit_vectors",
        provided_by="an index built with graph.embed: true and graph.unit_vectors: index or lazy",
    ),
    Part.COMMUNITY_REPORTS: PartSource(
        ("communities", "reports"),
        provided_by="an index built with communities.enabled: true and communities.reports: true",
    ),
    Part.COMMUNITIES: PartSource(
        ("communities",), provided_by="an index built with communities.enabled: true"
    ),
    Part.TREE: PartSource(
        ("tree", "tree_vectors"), provided_by="an index built with tree.enabled: true (RAPTOR)"
    ),
    Part.RELATED_TREE: PartSource(
        ("related_tree", "related_tree_vectors"),
        provided_by="an index built with tree.enabled: true and tree.relatedness: true (SiReRAG)",
    ),
    Part.SKELETON: PartSource(
        ("skeleton", "keywords", "keyword_vectors"),
        provided_by="an index built with skeleton.enabled: true (KET-RAG)",
    ),
    Part.GOLD_DECOMPOSITIONS: PartSource(
        question_field="decomposition",
        provided_by="questions with gold decompositions (MuSiQue's question_decomposition)",
    ),
    Part.QUESTION_GRAPHS: PartSource(
        question_field="triples",
        provided_by="KBQA questions that carry their own triples (e.g. WebQSP)",
    ),
}
VECTOR_PARTS = frozenset(
    {Part.CHUNK_VECTORS, Part.ENTITY_VECTORS, Part.RELATION_VECTORS, Part.UNIT_VECTORS}
)


KEYED_GRAPH_SEARCH = frozenset(
    {Part.CHUNKS, Part.CHUNK_VECTORS, Part.ENTITY_GRAPH, Part.ENTITY_VECTORS, Part.RELATION_VECTORS}
)
"""What a method that searches entity and relation vectors and orders the chunks behind what
it found by their vectors needs (LightRAG-style retrieval, ROGRAG, ReGraphRAG)."""


def parts(values: Iterable[Part | str]) -> frozenset[Part]:
    """A set of parts from parts or their names (ValueError naming an unknown one)."""
    return frozenset(Part(v) for v in values)


def has_part(part: Part, index: Any, questions: Sequence[Question]) -> bool:
    """Whether the index (and the questions) provide `part`."""
    src = SOURCES[part]
    if src.question_field is not None:
        return bool(questions) and all(getattr(q, src.question_field) for q in questions)
    if all(index.has(f) for f in src.files):
        return True
    return src.lazy is not None and built_config(index, "graph").get(src.lazy) == "lazy"


def method_parts(spec: Any, options: Any) -> frozenset[Part]:
    """The parts a method needs with these options: its registered ones, or what its config's
    `needs()` says when the settings change them."""
    if options is not None and hasattr(options, "needs"):
        return parts(options.needs())
    return spec.needs


def missing_part(spec: Any, options: Any, index: Any, questions: Sequence[Question]) -> Part | None:
    """The first part (in name order) a method with these options needs and the index and
    questions lack, or None when it can run."""
    return next(
        (p for p in sorted(method_parts(spec, options)) if not has_part(p, index, questions)),
        None,
    )


def check_needs(
    runs: Sequence[tuple[str, Any, Any]], index: Any, questions: Sequence[Question]
) -> None:
    """For (label, spec, options) of every method of a run: BadInputError (exit 2) naming the
    first method whose index part or question field is missing, before anything runs."""
    for label, spec, options in runs:
        part = missing_part(spec, options, index, questions)
        if part is not None:
            src = SOURCES[part]
            if src.question_field is not None:
                lacking = sum(1 for q in questions if not getattr(q, src.question_field))
                where = f"{lacking} of {len(questions)} questions lack it"
            else:
                where = f"index {index.root} has no {', '.join(f for f in src.files if not index.has(f))}"
            note = f" ({spec.needs_note})" if spec.needs_note else ""
            raise BadInputError(
                f"method {label!r} needs {part.value} ({where}); it comes from "
                f"{src.provided_by}{note}. Nothing was run"
            )


def describe(spec: Any) -> str:
    """`needs: a, b; uses when present: c` for `graphrag-engine methods`."""
    text = "needs: " + (", ".join(sorted(p.value for p in spec.needs)) or "nothing")
    if spec.uses:
        text += "; uses when present: " + ", ".join(sorted(p.value for p in spec.uses))
    if spec.needs_note:
        text += f" ({spec.needs_note})"
    return text
