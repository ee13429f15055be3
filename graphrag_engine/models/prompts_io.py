"""Reading prompt files and writing answer files for `graphrag-engine generate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphrag_engine.errors import BadInputError
from graphrag_engine.jsonl import records
from graphrag_engine.models.base import Completion, Prompt
from graphrag_engine.store.staging import write_atomic


def read_prompts(path: str | Path) -> tuple[list[str], list[Prompt]]:
    """(ids, prompts) from JSONL with a `prompt` string or a `messages` list per line."""
    ids: list[str] = []
    prompts: list[Prompt] = []
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise BadInputError(f"{path}: no such file") from None
    with fh:
        try:
            first_line: dict[str, int] = {}
            for lineno, rec in records(fh):
                prompts.append(_prompt_of(rec, f"{path}:{lineno}"))
                pid = str(rec.get("id", lineno))
                if pid in first_line:
                    raise BadInputError(
                        f"{path}:{lineno}: prompt id {pid!r} was given before, on line "
                        f"{first_line[pid]}; give each prompt an id of its own"
                    )
                first_line[pid] = lineno
                ids.append(pid)
        except ValueError as exc:  # a line that is not one JSON record
            raise BadInputError(f"{path}:{exc}") from None
    if not prompts:
        raise BadInputError(f"{path}: no prompts")
    return ids, prompts


def _prompt_of(rec: Any, where: str) -> Prompt:
    """A record's `prompt` string or `messages` list, or a BadInputError naming `where`."""
    if not isinstance(rec, dict):
        raise BadInputError(f"{where}: expected a JSON object")
    if isinstance(rec.get("prompt"), str) and rec["prompt"].strip():
        return rec["prompt"]
    messages = rec.get("messages")
    if (
        isinstance(messages, list)
        and messages
        and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
            for m in messages
        )
    ):
        return messages
    raise BadInputError(
        f"{where}: needs a non-empty 'prompt' string or a 'messages' list of "
        "{role, content} objects"
    )


def write_answers(path: str | Path, ids: list[str], completions: list[Completion]) -> None:
    """Write answers as JSONL atomically (temporary file, fsync, rename)."""
    rows = [
        {
            "id": i,
            "answer": c.text,
            "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens,
            "cached": c.cached,
            "finish_reason": c.finish_reason,
            "latency_s": round(c.latency_s, 4),
        }
        for i, c in zip(ids, completions, strict=True)
    ]
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    write_atomic(Path(path), text.encode("utf-8"))
