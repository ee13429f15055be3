"""`graphrag-engine import` checks every source table's value types before reading a row: a
value of the wrong type (a null text, a string level, a list id, a text weight, NaN or a
negative weight, JSON nested past any real export) exits 2 naming the file, the row and the
column, and leaves nothing behind. The sources are small ones made here in each system's
layout, each with one value broken."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphrag_engine.cli import main


def graphrag_tables() -> dict[str, dict[str, list]]:
    """A well-formed GraphRAG 2.x output: two text units, two entities, one relationship, one
    community and its report (columns as GraphRAG writes them)."""
    return {
        "text_units": {
            "id": ["u1", "u2"],
            "text": ["Ada founded Calloway.", "Calloway is a port."],
            "document_id": ["d1", "d1"],
        },
        "entities": {
            "id": ["e1", "e2"],
            "title": ["ADA", "CALLOWAY"],
            "type": ["PERSON", "GEO"],
            "description": ["a founder", "a port"],
            "text_unit_ids": [["u1"], ["u1", "u2"]],
        },
        "relationships": {
            "id": ["r1"],
            "source": ["ADA"],
            "target": ["CALLOWAY"],
            "description": ["founded"],
            "weight": [1.0],
            "text_unit_ids": [["u1"]],
        },
        "communities": {
            "community": [0],
            "level": [0],
            "parent": [-1],
            "entity_ids": [["e1", "e2"]],
        },
        "community_reports": {
            "community": [0],
            "title": ["Calloway"],
            "summary": ["A port founded by Ada."],
            "rank": [5.0],
        },
    }


def write_graphrag(folder: Path, tables: dict[str, dict[str, list]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, columns in tables.items():
        pq.write_table(pa.table(columns), folder / f"{name}.parquet")
    return folder


BROKEN_GRAPHRAG = {
    "level null": ("communities", "level", [None], "column 'level': a whole number expected"),
    "level text": ("communities", "level", ["x"], "column 'level': a whole number expected"),
    "parent text": ("communities", "parent", ["top"], "column 'parent': a whole number or null"),
    "entity id a list": ("entities", "id", [["e1"], ["e2"]], "row 0, column 'id': text expected"),
    "rank text": ("community_reports", "rank", ["high"], "column 'rank': a finite number"),
    "weight text": ("relationships", "weight", ["1.0"], "column 'weight': a finite number >= 0"),
    "weight NaN": ("relationships", "weight", [math.nan], "column 'weight': a finite number >= 0"),
    "weight inf": ("relationships", "weight", [math.inf], "column 'weight': a finite number >= 0"),
    "weight negative": ("relationships", "weight", [-2.0], "column 'weight': a finite number >= 0"),
    "text an int": ("text_units", "text", [1, 2], "row 0, column 'text': text expected"),
    "text null": ("text_units", "text", [None, "b"], "row 0, column 'text': text expected"),
}


def _refused(args: list[str], out: Path, capsys, says: str) -> None:
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and "internal error" not in err[0], err
    assert not out.exists(), "a refused import left its --out folder behind"


def test_a_wellformed_graphrag_source_passes_the_checks(tmp_path: Path) -> None:
    """The checks refuse nothing GraphRAG writes (the integration tier imports it whole)."""
    from graphrag_engine.importers.columns import check_columns
    from graphrag_engine.importers.msgraphrag import KINDS

    for name, columns in graphrag_tables().items():
        check_columns(pa.table(columns).to_pylist(), name, KINDS[name], "fix")


@pytest.mark.parametrize("case", sorted(BROKEN_GRAPHRAG))
def test_graphrag_values_of_the_wrong_type_exit_2(case: str, tmp_path: Path, capsys) -> None:
    table, column, values, says = BROKEN_GRAPHRAG[case]
    tables = graphrag_tables()
    tables[table][column] = values
    src = write_graphrag(tmp_path / "output", tables)
    _refused(["import", str(src)], tmp_path / "idx", capsys, says)


def test_graphrag_relationship_ids_that_repeat_exit_2(tmp_path: Path, capsys) -> None:
    tables = graphrag_tables()
    rel = tables["relationships"]
    for column in rel:
        rel[column] = rel[column] * 2  # every relationship twice: weights would double
    src = write_graphrag(tmp_path / "output", tables)
    _refused(["import", str(src)], tmp_path / "idx", capsys, "have the same id 'r1'")


def hipporag_openie(docs: list) -> dict:
    return {"docs": docs, "avg_ent_chars": 5, "avg_ent_words": 1}


BROKEN_HIPPORAG = {
    "entries not objects": ([123, None], "docs: entry 0 is int 123, not an object"),
    "text null": (
        [{"idx": 0, "title": "A", "text": None, "extracted_entities": [], "extracted_triples": []}],
        "entry 0, column 'text': text expected",
    ),
    "entities a string": (
        [
            {
                "idx": 0,
                "title": "A",
                "text": "t",
                "extracted_entities": "Ada",
                "extracted_triples": [],
            }
        ],
        "entry 0, column 'extracted_entities': a list of texts of at most 10000 characters",
    ),
    "a 20 MB entity": (
        [
            {
                "idx": 0,
                "title": "A",
                "text": "t",
                "extracted_entities": ["x" * 20_000_000],
                "extracted_triples": [],
            }
        ],
        "entry 0, column 'extracted_entities': a list of texts of at most 10000 characters",
    ),
    "a 20 MB triple part": (
        [
            {
                "idx": 0,
                "title": "A",
                "text": "t",
                "extracted_entities": [],
                "extracted_triples": [["Ada", "founded", "x" * 20_000_000]],
            }
        ],
        "entry 0, column 'extracted_triples': a list of lists whose texts have at most 10000",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_HIPPORAG))
def test_hipporag_values_of_the_wrong_type_exit_2(case: str, tmp_path: Path, capsys) -> None:
    docs, says = BROKEN_HIPPORAG[case]
    openie = tmp_path / "openie_results.json"
    openie.write_text(json.dumps(hipporag_openie(docs)))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "p1", "title": "A", "text": "t"}) + "\n")
    args = ["import", str(openie), "--corpus", str(corpus)]
    _refused(args, tmp_path / "idx", capsys, says)


def test_json_nested_past_any_real_export_exits_2(tmp_path: Path, capsys) -> None:
    openie = tmp_path / "openie_results.json"
    openie.write_text('{"docs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "p1", "title": "A", "text": "t"}) + "\n")
    args = ["import", str(openie), "--corpus", str(corpus)]
    _refused(args, tmp_path / "idx", capsys, "JSON nested too deep")


GRAPHML = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
<key id="d0" for="node" attr.name="entity_type" attr.type="string"/>
<key id="d1" for="node" attr.name="description" attr.type="string"/>
<key id="d2" for="node" attr.name="source_id" attr.type="string"/>
<key id="d3" for="edge" attr.name="weight" attr.type="double"/>
<key id="d4" for="edge" attr.name="description" attr.type="string"/>
<key id="d5" for="edge" attr.name="source_id" attr.type="string"/>
<graph edgedefault="undirected">
<node id="&quot;ADA&quot;"><data key="d0">"PERSON"</data><data key="d1">a founder</data><data key="d2">c1</data></node>
<node id="&quot;CALLOWAY&quot;"><data key="d0">"GEO"</data><data key="d1">a port</data><data key="d2">c1</data></node>
<edge source="&quot;ADA&quot;" target="&quot;CALLOWAY&quot;"><data key="d3">WEIGHT</data><data key="d4">founded</data><data key="d5">c1</data></edge>
</graph>
</graphml>
"""


def write_lightrag(folder: Path, chunk: dict, weight: str = "1.0", level: object = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph_chunk_entity_relation.graphml").write_text(GRAPHML.replace("WEIGHT", weight))
    (folder / "kv_store_text_chunks.json").write_text(json.dumps({"c1": chunk}))
    reports = {"0": {"level": level, "nodes": ['"ADA"'], "sub_communities": []}}
    (folder / "kv_store_community_reports.json").write_text(json.dumps(reports))
    return folder


GOOD_CHUNK = {"content": "Ada founded Calloway.", "chunk_order_index": 0, "full_doc_id": "d1"}
BROKEN_LIGHTRAG = {
    "content an int": ({**GOOD_CHUNK, "content": 7}, "1.0", 0, "chunk 'c1', column 'content'"),
    "content null": ({**GOOD_CHUNK, "content": None}, "1.0", 0, "chunk 'c1', column 'content'"),
    "order index text": (
        {**GOOD_CHUNK, "chunk_order_index": "first"},
        "1.0",
        0,
        "column 'chunk_order_index': a whole number or null expected",
    ),
    "weight text": (GOOD_CHUNK, "heavy", 0, "weight: a finite number >= 0 expected"),
    "weight negative": (GOOD_CHUNK, "-1", 0, "weight: a finite number >= 0 expected"),
    "level text": (GOOD_CHUNK, "1.0", "top", "community '0', column 'level'"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_LIGHTRAG))
def test_lightrag_values_of_the_wrong_type_exit_2(case: str, tmp_path: Path, capsys) -> None:
    chunk, weight, level, says = BROKEN_LIGHTRAG[case]
    src = write_lightrag(tmp_path / "work", chunk, weight, level)
    _refused(["import", str(src)], tmp_path / "idx", capsys, says)


def test_a_kv_store_nested_past_any_real_export_exits_2(tmp_path: Path, capsys) -> None:
    src = write_lightrag(tmp_path / "work", GOOD_CHUNK)
    nested = '{"c1": {"content": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    (src / "kv_store_text_chunks.json").write_text(nested)
    _refused(["import", str(src)], tmp_path / "idx", capsys, "JSON nested too deep")


def test_a_number_of_more_than_4300_digits_is_named_not_pythons_advice(
    tmp_path: Path, capsys
) -> None:
    """Python refuses to read such an integer and says to call a Python function; the user is
    told what is wrong with the file instead (a corpus line, and a source JSON)."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": ' + "9" * 5000 + ', "title": "A", "text": "t"}\n')
    openie = tmp_path / "openie_results.json"
    openie.write_text('{"docs": [], "n": ' + "9" * 5000 + "}")
    for args in (
        ["index", str(corpus), "--out", str(tmp_path / "idx")],
        ["import", str(openie), "--corpus", str(corpus), "--out", str(tmp_path / "imp")],
    ):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "more than 4300 digits" in err and "set_int_max_str_digits" not in err, err


def test_a_community_hierarchy_with_a_cycle_exits_2(tmp_path: Path, capsys) -> None:
    """Two communities each the other's parent: a walk down the hierarchy would never end."""
    tables = graphrag_tables()
    tables["communities"] = {
        "community": [0, 1],
        "level": [0, 1],
        "parent": [1, 0],
        "entity_ids": [["e1", "e2"], ["e1"]],
    }
    src = write_graphrag(tmp_path / "output", tables)
    _refused(["import", str(src)], tmp_path / "idx", capsys, "a parent must sit above")


def test_a_source_without_documents_exits_2_as_index_refuses_an_empty_corpus(
    tmp_path: Path, capsys
) -> None:
    tables = {
        "text_units": {
            "id": pa.array([], pa.string()),
            "text": pa.array([], pa.string()),
            "document_id": pa.array([], pa.string()),
        },
        "entities": {
            "id": pa.array([], pa.string()),
            "title": pa.array([], pa.string()),
            "type": pa.array([], pa.string()),
            "description": pa.array([], pa.string()),
            "text_unit_ids": pa.array([], pa.list_(pa.string())),
        },
        "relationships": {
            "id": pa.array([], pa.string()),
            "source": pa.array([], pa.string()),
            "target": pa.array([], pa.string()),
            "description": pa.array([], pa.string()),
            "weight": pa.array([], pa.float64()),
            "text_unit_ids": pa.array([], pa.list_(pa.string())),
        },
    }
    src = write_graphrag(tmp_path / "output", tables)
    _refused(["import", str(src)], tmp_path / "idx", capsys, "holds no documents")


def test_openie_is_recognised_when_its_docs_key_comes_late(tmp_path: Path, capsys) -> None:
    """A `docs` key after megabytes of other keys is still HippoRAG's OpenIE: the refusal names
    what it lacks (its corpus), not "not an index this engine reads"."""
    openie = tmp_path / "openie.json"
    openie.write_text(json.dumps({"notes": "x" * (3 << 20), "docs": []}))
    _refused(["import", str(openie)], tmp_path / "idx", capsys, "needs the corpus")
