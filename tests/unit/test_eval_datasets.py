"""Question loaders on every file of ../shared/data, the demo set and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.demo import questions_path
from graphrag_engine.eval.datasets import QuestionFileError, load_questions


def test_aliases_follow_the_answer(tmp_path: Path) -> None:
    f = tmp_path / "q.jsonl"
    f.write_text(
        json.dumps({"id": "a", "question": "Q?", "answer": "X", "answer_aliases": ["Y"]}) + "\n"
    )
    (q,) = load_questions(f)
    assert q.answers == ["X", "Y"] and q.kind == "plain"


def test_demo_and_user_questions(tmp_path: Path) -> None:
    demo = load_questions(questions_path())
    assert len(demo) == 45 and all(q.supporting_ids for q in demo)
    f = tmp_path / "mine.jsonl"
    f.write_text(
        '{"question": "Who founded Port Calloway?"}\n\n{"question": "Where?", "answers": ["a"]}\n'
    )
    qs = load_questions(f)
    assert [q.qid for q in qs] == ["q1", "q3"] and qs[1].answers == ["a"]
    assert len(load_questions(questions_path(), limit=5)) == 5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "ok"}\n{"question": \n', ":2: not valid JSON"),
        (
            '{"id": "x", "question": "a"}\n{"id": "x", "question": "b"}\n',
            ":2: question id 'x' repeats line 1",
        ),
        ('{"answer": "a"}\n', ":1: missing or empty `question`"),
        ('{"question": "a", "answer_aliases": "b"}\n', ":1: `answer_aliases` must be a list"),
        ('["question"]\n', ":1: a question record must be a JSON object"),
        ('{"question": "a", "graph": [["x", "y"]]}\n', ":1: `graph` must be a list"),
        ("\n", "no questions in the file"),
        ('{"question": "ok"}\n{"question": "a\\ud800"}\n', ":2: holds a lone surrogate escape"),
        ('{"question": "ok"}\n{"question": "caf\xe9"}\n'.encode("latin-1"), ":2: not valid UTF-8"),
    ],
)
def test_bad_question_files_name_file_and_line(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(QuestionFileError) as err:
        load_questions(f)
    assert str(err.value).startswith(str(f)) and message in str(err.value)


def test_a_byte_order_mark_before_the_first_question_is_tolerated(tmp_path: Path) -> None:
    f = tmp_path / "bom.jsonl"
    f.write_bytes(
        b'\xef\xbb\xbf{"id": "a", "question": "Who?"}\n{"id": "b", "question": "Where?"}\n'
    )
    assert [q.qid for q in load_questions(f)] == ["a", "b"]
