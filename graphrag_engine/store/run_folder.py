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

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from graphrag_engine.errors import BadInputError
from graphrag_engine.store.index_store import Index
from graphrag_engine.store.locks import try_lock
from graphrag_engine.store.staging import write_atomic

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
