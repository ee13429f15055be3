"""A question file read a batch at a time holds the same questions as one read whole, hashes to
the same run identity, refuses what the whole read refuses, and refuses a file changed under
a run; the typed results written a batch at a time equal the table of the whole run."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphrag_engine import results
from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import QuestionFileError, load_questions
from graphrag_engine.eval.question_file import QuestionFile
from graphrag_engine.results import read_rows, results_table, write_results
from graphrag_engine.store.run_folder import questions_content_id


def test_the_demo_questions_read_lazily_equal_the_whole_read() -> None:
    whole = load_questions(questions_path())
    lazy = QuestionFile(questions_path())
    assert len(lazy) == len(whole) > 10
    assert list(lazy) == whole
    assert lazy[3:9] == whole[3:9] and lazy[-1] == whole[-1] and lazy[::4] == whole[::4]
    assert lazy.content_id == questions_content_id(whole)  # a run started either way resumes
    assert lazy.kinds == {q.kind for q in whole}
    assert list(QuestionFile(questions_path(), limit=5)) == whole[:5]


def _write(path, lines: list[str]) -> None:
    path.write_bytes("".join(lines).encode("utf-8"))


def test_blank_lines_a_byte_order_mark_and_default_ids(tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    _write(
        path,
        [
            "\ufeff" + json.dumps({"question": "Who wrote Hamlet?", "answer": "Shakespeare"}),
            "\n\n   \n",
            json.dumps({"id": "x", "question": "Où est Paris ?"}, ensure_ascii=False) + "\n",
            json.dumps({"question": "third"}) + "\n",
        ],
    )
    lazy = QuestionFile(path)
    assert [q.qid for q in lazy] == ["q1", "x", "q5"]
    assert [q.question for q in lazy] == ["Who wrote Hamlet?", "Où est Paris ?", "third"]
    assert list(lazy) == load_questions(path)
    assert lazy[0].answers == ["Shakespeare"]


def test_a_repeated_id_names_both_lines(tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    lines = [json.dumps({"id": f"q{i}", "question": f"question {i}"}) + "\n" for i in range(50)]
    lines.insert(40, json.dumps({"id": "q7", "question": "again"}) + "\n")
    _write(path, lines)
    with pytest.raises(QuestionFileError) as whole:
        load_questions(path)
    with pytest.raises(QuestionFileError) as lazy:
        QuestionFile(path)
    assert str(lazy.value) == str(whole.value)
    assert f"{path}:41: question id 'q7' repeats line 8" in str(lazy.value)


def test_a_bad_record_stops_the_open_as_the_whole_read_does(tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    _write(path, [json.dumps({"question": "fine"}) + "\n", "{not json\n"])
    with pytest.raises(QuestionFileError) as lazy:
        QuestionFile(path)
    with pytest.raises(QuestionFileError) as whole:
        load_questions(path)
    assert str(lazy.value) == str(whole.value) and f"{path}:2:" in str(lazy.value)
    with pytest.raises(QuestionFileError, match="no questions"):
        _write(path, ["\n"])
        QuestionFile(path)


def test_a_file_changed_after_the_check_is_refused(tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    _write(path, [json.dumps({"question": f"q {i}"}) + "\n" for i in range(5)])
    lazy = QuestionFile(path)
    assert lazy[4].question == "q 4"
    _write(path, [json.dumps({"question": f"other {i}"}) + "\n" for i in range(5)])
    os.utime(path, ns=(1, 1))  # a rewrite within the clock's resolution still differs
    with pytest.raises(QuestionFileError, match="changed after the run checked it"):
        lazy[0:2]


def _row(i: int, extras) -> dict:
    return {
        "qid": f"q{i}", "question": f"question {i}", "method": "m", "answer": None,
        "retrieved_ids": [f"p{i}"], "retrieved_chunk_ids": [f"c{i}"], "retrieved_scores": [0.5],
        "context_ids": [], "context_text": [], "gold_answers": ["a"], "supporting_ids": None,
        "qtype": None, "kind": "passage", "tokens": {"x": i}, "seconds": {"s": 0.1},
        "answer_failed": None, "extras": extras,
    }  # fmt: skip


@pytest.mark.parametrize(
    "extras",
    [
        [{"n": 1}, {"n": 2.5}, {"n": 3, "names": ["a"]}, {"names": None}, {"plan": [{"k": 1}]}],
        [{}, {}, {}, {}, {}],  # no field: a null column
        [{"n": 1}, {"n": "one"}, {"n": 2}, {"n": None}, {"n": 3}],  # changes type: JSON
        [{"e": {}}, {"e": {}}, {"e": {"a": 1}}, {"e": {}}, {"e": {"a": 2}}],  # {} then typed
        [{"e": {}}, {"e": {}}, {"e": {}}, {"e": {}}, {"e": {}}],  # always {}: JSON
    ],
    ids=["widened", "empty", "conflict", "empty-then-typed", "always-empty"],
)
def test_results_written_a_batch_at_a_time_equal_the_whole_table(tmp_path, extras) -> None:
    rows = [_row(i, e) for i, e in enumerate(extras)]
    batches = [rows[:2], rows[2:3], rows[3:]]
    write_results(tmp_path / "streamed.parquet", lambda: iter(batches))
    pq.write_table(results_table(rows), tmp_path / "whole.parquet")
    streamed, whole = (pq.read_table(tmp_path / f"{n}.parquet") for n in ("streamed", "whole"))
    assert streamed.schema.field("extras").type == whole.schema.field("extras").type
    assert read_rows(tmp_path / "streamed.parquet") == read_rows(tmp_path / "whole.parquet")
    assert pq.ParquetFile(tmp_path / "streamed.parquet").metadata.num_row_groups == 1


def test_results_start_a_row_group_at_its_bound(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(results, "ROW_GROUP_ROWS", 3)
    rows = [_row(i, {"n": i}) for i in range(8)]
    write_results(tmp_path / "r.parquet", lambda: iter([rows[:2], rows[2:4], rows[4:7], rows[7:]]))
    meta = pq.ParquetFile(tmp_path / "r.parquet").metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [4, 3, 1]
    pq.write_table(results_table(rows), tmp_path / "whole.parquet")
    assert read_rows(tmp_path / "r.parquet") == read_rows(tmp_path / "whole.parquet")


def test_results_of_no_batch_are_an_empty_typed_table(tmp_path) -> None:
    write_results(tmp_path / "r.parquet", lambda: iter([]))
    table = pq.read_table(tmp_path / "r.parquet")
    assert table.num_rows == 0 and table.schema.field("extras").type == pa.null()
