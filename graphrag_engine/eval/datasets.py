"""Question loaders: every file format in ../shared/data, the built-in demo questions and a
user's own JSONL, all read into one `Question` record.

Formats are recognised per record:

* passage QA (HotpotQA, 2Wiki, MuSiQue, demo): `question`, `answer`, `answer_aliases`,
  `supporting_passage_ids` (corpus ids, matched to the index's `external_id`);
* MultiHop-RAG: the same fields with `supporting_passage_ids: null` and the evidence list in
  `meta.evidence_list` (title, fact, ...);
* UltraDomain: long-form reference answers (`kind = "abstract"`, judged by an LLM);
* KBQA (WebQSP): `answers` (a list), `graph` (the question's triples), `gold_triples`;
* a user's JSONL: `question` and optionally `id`, `answer` or `answers`.

A malformed record stops the load with `file:line: what is wrong`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrag_engine.errors import BadInputError
from graphrag_engine.jsonl import records


class QuestionFileError(BadInputError):
    """A question file or record that cannot be read; the message starts with `file:line:`."""


@dataclass
class Question:
    """One question with whatever gold the source provides."""

    qid: str
    question: str
    answers: list[str] = field(default_factory=list)
    """Gold answer first, then aliases; empty when the source has none."""
    supporting_ids: list[str] | None = None
    """Gold passages as corpus ids (the index's `external_id`); None when unknown."""
    supporting_titles: list[str] = field(default_factory=list)
    qtype: str | None = None
    kind: str = "passage"
    """passage | evidence (MultiHop-RAG) | abstract (UltraDomain) | kbqa | plain."""
    evidence: list[str] = field(default_factory=list)
    """MultiHop-RAG evidence sentences (verbatim facts of the cited articles)."""
    triples: list[list[str]] | None = None
    """KBQA: the question's own graph as [head, relation, tail] triples."""
    gold_triples: list[list[str]] = field(default_factory=list)
    decomposition: list[dict] | None = None
    """MuSiQue: the gold sub-questions ({"question", "answer"}; "#k" names step k's answer)."""

    def content(self) -> bytes:
        """The record as canonical JSON, one line: what a run's question hash is taken over."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=str).encode() + b"\n"

    def gold(self) -> dict[str, Any]:
        """The gold fields copied into every result row, so eval needs only the run folder."""
        return {
            "answers": self.answers,
            "supporting_ids": self.supporting_ids,
            "qtype": self.qtype,
            "kind": self.kind,
        }


def load_questions(path: str | Path, limit: int | None = None) -> list[Question]:
    """Read a question file (JSONL, optionally the demo's), checking every record."""
    path = Path(path)
    if limit is not None and limit < 1:
        raise QuestionFileError(f"{path}: a limit of {limit} questions reads none; give 1 or more")
    if not path.is_file():
        raise QuestionFileError(f"{path}: no such question file; give a JSONL file of questions")
    out: list[Question] = []
    seen: dict[str, int] = {}
    with open(path, "rb") as fh:
        try:
            for lineno, record in records(fh):
                where = f"{path}:{lineno}"
                q = parse_question(record, where, default_id=f"q{lineno}")
                if q.qid in seen:
                    raise QuestionFileError(
                        f"{where}: question id {q.qid!r} repeats line {seen[q.qid]}; "
                        "ids must be unique"
                    )
                seen[q.qid] = lineno
                out.append(q)
                if limit is not None and len(out) >= limit:
                    break
        except ValueError as exc:  # a line that is not one JSON record
            raise QuestionFileError(f"{path}:{exc}") from None
    if not out:
        raise QuestionFileError(f"{path}: no questions in the file")
    return out


def _str_list(value: Any, where: str, name: str, allow_none: bool = False) -> list[str] | None:
    if value is None and allow_none:
        return None
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise QuestionFileError(f"{where}: `{name}` must be a list of strings")
    return list(value)


def parse_question(record: Any, where: str, default_id: str) -> Question:
    """One record of any supported format into a `Question`."""
    if not isinstance(record, dict):
        raise QuestionFileError(f"{where}: a question record must be a JSON object")
    text = record.get("question")
    if not isinstance(text, str) or not text.strip():
        raise QuestionFileError(f"{where}: missing or empty `question` (a string)")
    qid = record.get("id", default_id)
    if not isinstance(qid, (str, int)):
        raise QuestionFileError(f"{where}: `id` must be a string or an integer")
    qid = str(qid)
    meta = record.get("meta") or {}
    if not isinstance(meta, dict):
        raise QuestionFileError(f"{where}: `meta` must be an object")

    if "graph" in record or "gold_triples" in record:
        answers = _str_list(record.get("answers"), where, "answers")
        triples = record.get("graph") or []
        if not isinstance(triples, list) or not all(
            isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) for x in t)
            for t in triples
        ):
            raise QuestionFileError(f"{where}: `graph` must be a list of [head, relation, tail]")
        return Question(
            qid,
            text,
            answers or [],
            kind="kbqa",
            triples=triples,
            gold_triples=record.get("gold_triples") or [],
        )

    answer = record.get("answer")
    answers = record.get("answers")
    if answer is not None and not isinstance(answer, str):
        raise QuestionFileError(f"{where}: `answer` must be a string")
    gold = ([answer] if answer else []) + (
        _str_list(record.get("answer_aliases"), where, "answer_aliases") or []
    )
    gold += [a for a in (_str_list(answers, where, "answers") or []) if a not in gold]
    support = _str_list(
        record.get("supporting_passage_ids"), where, "supporting_passage_ids", allow_none=True
    )
    titles = _str_list(record.get("supporting_titles"), where, "supporting_titles") or []
    evidence = [
        e["fact"]
        for e in meta.get("evidence_list") or []
        if isinstance(e, dict) and isinstance(e.get("fact"), str)
    ]
    if "evidence_list" in meta:
        kind = "evidence"
    elif "domain" in meta:
        kind = "abstract"
    elif support is not None:
        kind = "passage"
    else:
        kind = "plain"
    qtype = record.get("type")
    decomposition = meta.get("question_decomposition")
    if decomposition is not None and not (
        isinstance(decomposition, list)
        and all(isinstance(d, dict) and isinstance(d.get("question"), str) for d in decomposition)
    ):
        raise QuestionFileError(
            f"{where}: `meta.question_decomposition` must be a list of objects with a `question`"
        )
    return Question(
        qid,
        text,
        gold,
        supporting_ids=support,
        supporting_titles=titles,
        qtype=qtype if isinstance(qtype, str) else None,
        kind=kind,
        evidence=evidence,
        decomposition=decomposition,
    )
