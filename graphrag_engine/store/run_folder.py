"""A query run's folder: what identifies the run, the lock, the batch parts and their usage.

Run folder layout:

* `run.json`: method, config, the index's content identity (its documents' content ids, build
  config and files) and the questions' (a hash of the records); a re-run into the same folder
  must match it, whatever the paths: an edited question file or an index rebuilt from another
  corpus at the same path is refused (exit 2, naming what changed);
* `.lock`: held while a `query` writes the folder; a second process is refused;
* `parts/NNNNN.retrieved.json`: a batch's retrieval checkpoint (written atomically), kept when
  answers follow or the retrieval called an LLM;
* `parts/NNNNN.jsonl`: a finished batch (retrieval + answers), its rows as JSON lines (an
  older engine's `NNNNN.parquet` is read as well); `parts/NNNNN.failed` beside
  it when some of its answer prompts failed after every retry: those questions hold no answer
  and say why (column `answer_failed`), and a re-run answers that batch again;
* `llm_cache.sqlite`: every LLM answer, cached per slice as it returns (the resume ledger);
* `llm_usage.json`: LLM calls and tokens per stage and model, summed over the invocations
  that finished (the summary's `llm`);
* `results.parquet` (typed columns, see `graphrag_engine/results.py`), `results.jsonl`, `summary.json`:
  written when every batch is done.

A run killed at any point and started again skips finished batches, reloads the retrieval
checkpoint of an unfinished one, and sends only the LLM prompts that are not in the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa

from graphrag_engine.errors import BadInputError
from graphrag_engine.results import read_rows, write_results
from graphrag_engine.store.index_store import Index
from graphrag_engine.store.locks import try_lock
from graphrag_engine.store.staging import replace_with, write_atomic

TRANSPORT = frozenset(
    ("base_url", "api_key_env", "concurrency", "connect_timeout_s", "read_timeout_s")
    + ("max_retries", "flush_every", "cache", "price_input_per_million", "price_output_per_million")
    + ("max_failed_share",)
)
"""Model settings that say how answers are fetched, not what they are: a run resumes across
them (a restarted server on another port, a longer timeout, the cache moved)."""


def _without_transport(config: dict[str, Any]) -> dict[str, Any]:
    models = {
        name: {k: v for k, v in section.items() if k not in TRANSPORT}
        if isinstance(section, dict)
        else section
        for name, section in (config.get("models") or {}).items()
    }
    return {**config, "models": models}


def _with_added_keys(old: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """A config recorded before some keys existed, with those keys at their defaults (what
    the run did without them), so a run folder resumes across an engine upgrade."""
    out = dict(old)
    for key, value in defaults.items():
        if key not in out:
            out[key] = value
        elif isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = _with_added_keys(out[key], value)
    return out


def index_content_id(index: Index) -> str:
    """What an index holds, whatever its path or generation number: its build config and every
    file's sha256 from the manifest (an index written before checksums adds its documents'
    content ids and its files' sizes and shapes); "none" for per-question graphs."""
    if index.root == Path("none"):
        return "none"
    h = hashlib.sha256(str(index.manifest.get("config_hash")).encode())
    files = sorted(index.manifest.get("files", {}).items())
    for name, entry in files:
        h.update(
            json.dumps(
                [name, entry["sha256"]]
                if "sha256" in entry
                else [name, entry.get("bytes"), entry.get("rows"), entry.get("shape")]
            ).encode()
        )
    if not all("sha256" in entry for _, entry in files):
        column = index.table("documents", columns=["doc_id"]).column("doc_id")
        for doc_id in sorted(column.to_pylist()):
            h.update(doc_id.encode())
    return h.hexdigest()[:24]


def questions_content_id(questions: Sequence[Any]) -> str:
    """A hash of the question records (text, gold, graphs), in order (a question file keeps
    the one it took while it was checked)."""
    known = getattr(questions, "content_id", None)
    if known is not None:
        return known
    h = hashlib.sha256()
    for q in questions:
        h.update(q.content())
    return h.hexdigest()[:24]


def run_identity(
    index: Index, method: str, config: dict[str, Any], questions_src: str, questions: Sequence[Any]
) -> dict[str, Any]:
    """What run.json records of a run: method, config (less transport), index and questions."""
    return {
        "method": method,
        "config": _without_transport(config),
        "index": {"content": index_content_id(index), "path": str(index.root)},
        "questions": {
            "content": questions_content_id(questions),
            "count": len(questions),
            "source": questions_src,
        },
    }


IDENTITY = {  # run.json key -> (the fields that identify it, what to call a mismatch)
    "method": (None, "method"),
    "config": (None, "config"),
    "index": ("content", "index content (rebuilt, added to, or another index)"),
    "questions": ("content", "questions (the file's records changed, or another file)"),
}


def _legacy_match(old: dict[str, Any], identity: dict[str, Any], index: Index) -> bool:
    """A run.json written before content identities: the same index path, generation and
    build config, and the same question file and count (all it recorded)."""
    was_index, was_questions = old.get("index") or {}, old.get("questions") or {}
    path = "none" if index.root == Path("none") else str(Path(index.root).resolve())
    return (
        was_index.get("path") == path
        and was_index.get("generation") == index.generation
        and was_index.get("config_hash") == index.manifest.get("config_hash")
        and Path(str(was_questions.get("source"))).resolve()
        == Path(identity["questions"]["source"]).resolve()
        and was_questions.get("count") == identity["questions"]["count"]
    )


def _check_run_dir(
    out: Path, identity: dict[str, Any], index: Index, defaults: dict[str, Any]
) -> None:
    """Create the run folder, or check that an existing one holds the same run; the paths
    an input was read from may change, its content may not. `defaults` is the method's
    default config, for keys a run.json of an older engine lacks."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "parts").mkdir(exist_ok=True)
    marker = out / "run.json"
    if marker.exists():
        old = read_json(marker)
        old["config"] = _with_added_keys(  # older runs kept transport keys, lacked new ones
            _without_transport(old.get("config") or {}),
            _without_transport(defaults),
        )
        legacy = "content" not in (old.get("index") or {})
        if legacy and not _legacy_match(old, identity, index):
            raise BadInputError(
                f"{out}/run.json: this run folder was made by an older graphrag-engine from "
                "another index (path, generation or build config) or question file; resume it "
                "with the same inputs, or give a new --out"
            )
        if legacy:
            old["index"], old["questions"] = identity["index"], identity["questions"]
        for key, (field_name, what) in IDENTITY.items():
            was, now = old.get(key), identity[key]
            if field_name is not None:
                was = (was or {}).get(field_name)
                now = now[field_name]
            if was != now:
                raise BadInputError(
                    f"{out}/run.json: this run folder was made with different {what}; "
                    "resume it with the same inputs, or give a new --out"
                )
        if not legacy:
            return
    write_atomic(marker, json.dumps(identity, indent=2).encode())


def lock_run_dir(out: Path) -> int:
    """Hold the run folder's lock for this process; a second `query` into it is refused."""
    fd = try_lock(out / ".lock")
    if fd is None:
        raise BadInputError(
            f"{out}: another query process is writing this run folder; wait for it to finish "
            "or give a new --out"
        )
    return fd


@contextmanager
def claim_run_folder(
    out: Path, identity: dict[str, Any], index: Index, defaults: dict[str, Any]
) -> Iterator[None]:
    """Hold the run folder's lock while a run writes it, after checking that the folder holds
    this run (same method, config, index content and questions) or making it."""
    lock = lock_run_dir(out)
    try:
        _check_run_dir(out, identity, index, defaults)
        yield
    finally:
        os.close(lock)


def read_json(path: Path, kind: type = dict) -> Any:
    """A JSON file of the run folder read back, refused (exit 2, naming it) when it does not
    parse or is not a `kind`: a damaged bookkeeping file, never an internal error."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise damaged_run_file(path, f"not JSON: {exc}") from None
    if not isinstance(value, kind):
        raise damaged_run_file(path, f"a {type(value).__name__}, not a {kind.__name__}")
    return value


def damaged_run_file(path: Path, why: str) -> BadInputError:
    """The error for a run-folder file that cannot be read back."""
    what = (
        "delete it and run the same command again (a batch without its rows is computed again)"
        if path.parent.name == "parts"
        else "move the run folder aside and run the command again into a new one"
    )
    return BadInputError(f"{path}: damaged ({why}); {what}")


PART = ".jsonl"
"""A finished batch's rows: JSON lines, the text `results.jsonl` is made of."""
OLDER_PART = ".parquet"
"""A finished batch's rows as runs of earlier engines kept them (read on resume)."""


def part_path(out: Path, b: int, suffix: str = PART) -> Path:
    """Where batch `b` of the run in `out` keeps its part (or, by suffix, its checkpoint)."""
    return out / "parts" / f"{b:05d}{suffix}"


def committed_part(out: Path, b: int) -> Path | None:
    """Batch `b`'s part file (JSON lines, or an older run's Parquet); None when not written."""
    for suffix in (PART, OLDER_PART):
        path = part_path(out, b, suffix)
        if path.exists():
            return path
    return None


def batch_done(out: Path, b: int) -> bool:
    """Whether batch `b` of the run in `out` is finished (its part written, nothing failed)."""
    return committed_part(out, b) is not None and not part_path(out, b, ".failed").exists()


def usage_since(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The LLM usage between two ledger summaries (stages with nothing spent left out)."""
    out = {}
    for key, fields in after.items():
        prev = before.get(key, {})
        spent = {
            name: round(value - prev.get(name, 0), 6)
            if isinstance(value, int | float) and not isinstance(value, bool)
            else value
            for name, value in fields.items()
        }
        if any(
            isinstance(v, int | float) and not isinstance(v, bool) and v for v in spent.values()
        ):
            out[key] = spent
    return out


def write_part(
    out: Path,
    b: int,
    rows: list[dict[str, Any]],
    usage: dict[str, dict[str, Any]],
    seconds: float | None = None,
) -> None:
    """Commit batch `b`: the LLM usage and wall seconds that produced it (added to what earlier
    processes spent on it), its part file atomically, and a `.failed` marker naming the
    questions whose answer prompt failed (removed once none did)."""
    add_usage(part_path(out, b, ".usage.json"), usage)
    if seconds is not None:
        add_batch_seconds(out, b, seconds)
    done_path = part_path(out, b)
    failed_marker = done_path.with_suffix(".failed")
    typed = [
        {
            **r,
            "tokens": {k: int(v) for k, v in r["tokens"].items()},
            "seconds": {k: float(v) for k, v in r["seconds"].items()},
        }
        for r in rows
    ]
    replace_with(done_path, lambda tmp: write_jsonl(tmp, typed))
    part_path(out, b, OLDER_PART).unlink(missing_ok=True)  # an older engine's try at it
    failed = [row["qid"] for row in rows if row["answer_failed"] is not None]
    if failed:
        write_atomic(failed_marker, "\n".join(failed).encode())
    elif failed_marker.exists():
        failed_marker.unlink()


def add_usage(path: Path, usage: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What `path` holds plus `usage` (numbers summed per stage/model), written back: a
    batch's usage over every process that worked on it."""
    total = sum_usage(read_json(path) if path.exists() else {}, usage)
    write_atomic(path, json.dumps(total, indent=2).encode())
    return total


def sum_usage(
    total: dict[str, dict[str, Any]], usage: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """LLM usage summaries added up per stage/model (numbers summed, other fields the latest)."""
    total = {key: dict(fields) for key, fields in total.items()}
    for key, fields in usage.items():
        into = total.setdefault(key, {})
        for name, value in fields.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                into[name] = round(into.get(name, 0) + value, 6)
            else:
                into[name] = value
    return total


def run_usage(out: Path, n_batches: int) -> dict[str, dict[str, Any]]:
    """The LLM usage of the whole run: every committed batch's, summed."""
    total: dict[str, dict[str, Any]] = {}
    for b in range(n_batches):
        path = part_path(out, b, ".usage.json")
        if path.exists():
            total = sum_usage(total, read_json(path))
    return total


def add_batch_seconds(out: Path, b: int, seconds: float) -> None:
    """Add wall seconds spent on batch `b` to its seconds file (summed over processes)."""
    add_usage(part_path(out, b, ".seconds.json"), {"batch": {"seconds": seconds}})


def read_seconds(path: Path) -> float | None:
    """The wall seconds a batch's seconds file holds (None when there is none)."""
    if not path.exists():
        return None
    seconds = read_json(path).get("batch", {})
    value = seconds.get("seconds", 0.0) if isinstance(seconds, dict) else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise damaged_run_file(path, "no number at batch.seconds")
    return float(value)


def read_part(out: Path, b: int) -> list[dict[str, Any]]:
    """The rows batch `b` committed, refused (exit 2, naming the file) when it is damaged."""
    path = committed_part(out, b) or part_path(out, b)
    try:
        if path.suffix == OLDER_PART:
            return read_rows(path)
        with path.open("rb") as fh:
            rows = [json.loads(line) for line in fh]
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise damaged_run_file(path, str(exc)[:160]) from None
    if not all(isinstance(r, dict) and PART_KEYS <= r.keys() for r in rows):
        raise damaged_run_file(path, "a line is not a result row")
    return rows


PART_KEYS = {"qid", "question", "method", "answer", "tokens", "seconds", "extras"}
"""Keys every row of a part holds (what the summary and the results table read)."""


@dataclasses.dataclass
class RunTotals:
    """What a run's summary adds up over its rows: questions, failed answers, seconds and
    LLM tokens per stage."""

    questions: int = 0
    failed: int = 0
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    tokens: dict[str, float] = dataclasses.field(default_factory=dict)

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Count a batch's rows in."""
        self.questions += len(rows)
        for r in rows:
            self.failed += r["answer_failed"] is not None
            for k, v in r["seconds"].items():
                self.seconds[k] = self.seconds.get(k, 0.0) + v
            for k, v in r["tokens"].items():
                self.tokens[k] = self.tokens.get(k, 0) + v


def merge_parts(out: Path, n_batches: int) -> RunTotals:
    """Write results.parquet and results.jsonl from every batch's part, in order, holding one
    part at a time (the JSON lines parts are copied as they are); returns the rows' totals."""
    totals, walks = RunTotals(), 0

    def parts() -> Iterator[list[dict[str, Any]]]:
        nonlocal walks
        walks += 1
        for b in range(n_batches):
            rows = read_part(out, b)
            if walks == 1:
                totals.add(rows)
            yield rows

    replace_with(out / "results.parquet", lambda tmp: write_results(tmp, parts))
    replace_with(out / "results.jsonl", lambda tmp: _join_parts(out, n_batches, tmp))
    return totals


def _join_parts(out: Path, n_batches: int, path: Path) -> None:
    """The batches' parts one after another as JSON lines into `path`."""
    with path.open("wb") as fh:
        for b in range(n_batches):
            part = committed_part(out, b) or part_path(out, b)
            if part.suffix == OLDER_PART:
                write_lines(fh, read_part(out, b))
            else:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, fh)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as a JSON lines file."""
    with path.open("wb") as fh:
        write_lines(fh, rows)


def write_lines(fh: BinaryIO, rows: list[dict[str, Any]]) -> None:
    """`rows` as JSON lines, each encoded and written as it comes (a batch's text is never one
    string: a single non-ASCII character would widen all of it to four bytes a character)."""
    for row in rows:
        fh.write(json.dumps(row, ensure_ascii=False).encode())
        fh.write(b"\n")


def spent_seconds(out: Path, n_batches: int, this_process: float) -> float:
    """Wall seconds every process spent on the run: each batch's, summed over its tries (a
    batch of an older run folder without its seconds file counts this process's share)."""
    spent = [read_seconds(part_path(out, b, ".seconds.json")) for b in range(n_batches)]
    total = sum(x for x in spent if x is not None)
    return max(total, this_process) if any(x is None for x in spent) else total
