"""Reading prompt files and writing answer files for `graphrag-engine generate`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from engine.errors import BadInputError
from engine.jsonl import BOM, decode_line, parse_line
from engine.models.base import Completion, Prompt


def read_prompts(path: str | Path) -> tuple[list[str], list[Prompt]]:
    """(ids, prompts) from JSONL with a `prompt` string or a `messages` list per line."""
    ids: list[str] = []
    prompts: list[Prompt] = []
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise BadInputError(f"{path}: no such file") from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = decode_line(raw)
                if not line.strip(BOM + " \t\r\n"):
                    continue
                rec = parse_line(line, first=lineno == 1)
            except ValueError as exc:
                raise BadInputError(f"{path}:{lineno}: {exc}") from None
            if not isinstance(rec, dict):
                raise BadInputError(f"{path}:{lineno}: expected a JSON object")
            if isinstance(rec.get("prompt"), str) and rec["prompt"].strip():
                prompts.append(rec["prompt"])
            elif (
                isinstance(rec.get("messages"), list)
                and all(
                    isinstance(m, dict)
                    and isinstance(m.get("role"), str)
                    and isinstance(m.get("content"), str)
                    for m in rec["messages"]
                )
                and rec["messages"]
            ):
                prompts.append(rec["messages"])
            else:
                raise BadInputError(
                    f"{path}:{lineno}: needs a non-empty 'prompt' string or a 'messages' list of "
                    "{role, content} objects"
                )
            ids.append(str(rec.get("id", lineno)))
    if not prompts:
        raise BadInputError(f"{path}: no prompts")
    return ids, prompts


def write_answers(path: str | Path, ids: list[str], completions: list[Completion]) -> None:
    """Write answers as JSONL atomically (temporary file, fsync, rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for i, c in zip(ids, completions, strict=True):
            row = {
                "id": i,
                "answer": c.text,
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "cached": c.cached,
                "finish_reason": c.finish_reason,
                "latency_s": round(c.latency_s, 4),
            }
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
