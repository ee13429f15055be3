"""Typed method needs: parts checked against a real (tiny) index's manifest and the questions
before anything runs, with one message naming the method, the part and what provides it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.errors import BadInputError
from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods import METHODS, method_spec, query_config
from graphrag_engine.methods.needs import SOURCES, Part, check_needs, describe, has_part
from graphrag_engine.store import IndexWriter, open_index
from graphrag_engine.store.index_store import NoIndex


def chunks_only_index(root: Path, graph_config: dict | None = None):
    """A real committed index holding documents, chunks and chunk vectors (no graph)."""
    w = IndexWriter(root)
    w.write_table(
        "documents",
        [
            {
                "doc_id": "d",
                "external_id": "d",
                "title": "t",
                "text": "x",
                "source": "s",
                "meta": None,
            }
        ],
    )
    w.write_vectors("chunk_vectors", np.ones((1, 4), np.float32), model="m")
    w.write_table(
        "chunks",
        [
            {
                "chunk_id": "c",
                "doc_id": "d",
                "idx": 0,
                "text": "x",
                "n_tokens": 1,
                "start_char": 0,
                "end_char": 1,
            }
        ],
    )
    config = {"graph": graph_config or {}}
    w.commit(config=config, config_hash="h", models={"embedder": "m"})
    return open_index(root)


def q(**fields) -> Question:
    return Question(qid="q1", question="Who?", **fields)


def test_every_method_declares_typed_parts_and_every_part_says_where_it_comes_from() -> None:
    assert set(SOURCES) == set(Part)
    for spec in METHODS.values():
        assert all(isinstance(p, Part) for p in spec.needs | spec.uses), spec.name
        assert describe(spec).startswith("needs: ")
    assert method_spec("bm25").needs == {Part.CHUNKS}
    assert method_spec("none").needs == frozenset()


def test_a_chunks_only_index_serves_the_baselines_and_refuses_the_graph_methods(tmp_path) -> None:
    index = chunks_only_index(tmp_path / "idx")
    questions = [q()]
    runs = [(m, method_spec(m), query_config(m).options) for m in ("bm25", "naive", "none")]
    check_needs(runs, index, questions)  # nothing missing: no error
    with pytest.raises(BadInputError) as err:
        check_needs(
            [("bm25", method_spec("bm25"), None), ("hipporag", method_spec("hipporag"), None)],
            index,
            questions,
        )
    msg = str(err.value)
    assert "'hipporag'" in msg and "entity_vectors" in msg and "graph.embed" in msg
    assert "Nothing was run" in msg and err.value.exit_code == 2


def test_lazy_vector_tables_count_as_present(tmp_path) -> None:
    eager = chunks_only_index(tmp_path / "a")
    lazy = chunks_only_index(tmp_path / "b", {"relation_vectors": "lazy"})
    assert not has_part(Part.RELATION_VECTORS, eager, [q()])
    assert has_part(Part.RELATION_VECTORS, lazy, [q()])
    assert not has_part(Part.UNIT_VECTORS, lazy, [q()])


def test_settings_change_the_parts_and_question_fields_are_checked() -> None:
    pank = query_config("pankrag").options
    pank.plan = "gold"
    spec = method_spec("pankrag")
    with pytest.raises(BadInputError, match=r"gold_decompositions \(1 of 2 questions lack it\)"):
        check_needs(
            [("pankrag", spec, pank)],
            _AllParts(),
            [q(decomposition=[{"question": "a", "answer": "b"}]), q()],
        )
    lego = query_config("lego").options
    assert lego.graph == "question"
    check_needs([("lego", method_spec("lego"), lego)], NoIndex(), [q(triples=[["a", "r", "b"]])])
    with pytest.raises(BadInputError, match="question_graphs"):
        check_needs([("lego", method_spec("lego"), lego)], NoIndex(), [q()])
    lego.graph = "index"
    with pytest.raises(BadInputError, match="needs chunks"):
        check_needs(
            [("lego", method_spec("lego"), lego)], NoIndex(), [q(triples=[["a", "r", "b"]])]
        )


class _AllParts(NoIndex):
    """NoIndex that holds every file: isolates the question-field check."""

    def has(self, name: str) -> bool:
        return True


def test_methods_lists_each_methods_parts(run_cli) -> None:
    proc = run_cli("methods")
    assert proc.returncode == 0, proc.stderr
    lines = {ln.split()[0]: ln for ln in proc.stdout.splitlines()}
    assert lines["bm25"].endswith("needs: chunks")
    assert "needs: chunk_vectors, chunks, entity_vectors, passage_entity_graph" in lines["hipporag"]
    assert "uses when present: community_reports" in lines["graphrag_local"]
