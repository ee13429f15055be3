"""`graphrag-engine query`: run one method over a question set, batch by batch, resumably.

Run folder layout:

* `run.json`: method, config, the index's content identity (its documents' content ids, build
  config and files) and the questions' (a hash of the records); a re-run into the same folder
  must match it, whatever the paths: an edited question file or an index rebuilt from another
  corpus at the same path is refused (exit 2, naming what changed);
* `.lock`: held while a `query` writes the folder; a second process is refused;
* `parts/NNNNN.retrieved.json`: a batch's retrieval checkpoint (written atomically);
* `parts/NNNNN.parquet`: a finished batch (retrieval + answers); `parts/NNNNN.failed` beside
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
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from graphrag_engine.config import QueryConfig
from graphrag_engine.errors import BadInputError
from graphrag_engine.eval.datasets import Question
from graphrag_engine.methods import method_spec, query_config
from graphrag_engine.methods.answer import answer_batch, answer_style, keeps_whole, prompt_for
from graphrag_engine.progress import move_bar, progress
from graphrag_engine.results import part_table, read_rows, results_table
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.ranking import passages_of
from graphrag_engine.retrieve.types import Context, Retrieved, StageClock
from graphrag_engine.store.index_store import Index
from graphrag_engine.store.locks import try_lock

GOLD_WARN_SHARE = 0.5
"""`query` warns when fewer of the questions' gold passages than this share are in the index."""


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one rename, synced first: a reader sees old or new."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


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


def questions_content_id(questions: list[Question]) -> str:
    """A hash of the question records (text, gold, graphs), in order."""
    h = hashlib.sha256()
    for q in questions:
        h.update(json.dumps(dataclasses.asdict(q), sort_keys=True, default=str).encode() + b"\n")
    return h.hexdigest()[:24]


def warn_gold(index: Index, questions: list[Question]) -> float | None:
    """The share of gold passages in the index, with a warning on stderr when it is low."""
    gold_share = gold_in_index(index, questions)
    if gold_share is not None and gold_share < GOLD_WARN_SHARE:
        print(
            f"warning: only {gold_share:.0%} of the questions' gold passages are in the index "
            f"{index.root}: recall will be low whatever the method; were these questions "
            "meant for another corpus?",
            file=sys.stderr,
        )
    return gold_share


def gold_in_index(index: Index, questions: list[Question]) -> float | None:
    """The share of the questions' gold passage ids that are documents of the index (None
    when the questions name no gold passages or there is no index)."""
    gold = [pid for q in questions for pid in (q.supporting_ids or [])]
    if not gold or index.root == Path("none"):
        return None
    docs = index.table("documents", columns=["doc_id", "external_id"]).to_pydict()
    held = {ext or doc for doc, ext in zip(docs["doc_id"], docs["external_id"], strict=True)}
    return sum(pid in held for pid in gold) / len(gold)


def _run_identity(
    index: Index, cfg: QueryConfig, questions_src: str, questions: list[Question]
) -> dict[str, Any]:
    return {
        "method": cfg.method,
        "config": _without_transport(cfg.to_dict()),
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


def _check_run_dir(out: Path, identity: dict[str, Any], index: Index) -> None:
    """Create the run folder, or check that an existing one holds the same run; the paths
    an input was read from may change, its content may not."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "parts").mkdir(exist_ok=True)
    marker = out / "run.json"
    if marker.exists():
        old = json.loads(marker.read_text())
        old["config"] = _with_added_keys(  # older runs kept transport keys, lacked new ones
            _without_transport(old.get("config") or {}),
            _without_transport(query_config(identity["method"]).to_dict()),
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


def _lock_run_dir(out: Path) -> int:
    """Hold the run folder's lock for this process; a second `query` into it is refused."""
    fd = try_lock(out / ".lock")
    if fd is None:
        raise BadInputError(
            f"{out}: another query process is writing this run folder; wait for it to finish "
            "or give a new --out"
        )
    return fd


def _chunk_contexts(ctx: QueryContext, r: Retrieved, n: int) -> list[list[int]]:
    """Chunk rows of each question's context: the ranking's top_k (none without a ranking)."""
    top_k = ctx.cfg.retrieval.top_k
    return [[] if r.ranking is None else r.ranking.row(q)[0][:top_k] for q in range(n)]


def _answer_batch(
    ctx: QueryContext,
    batch: list[Question],
    r: Retrieved,
    clock: StageClock,
    fail_fast: bool,
    on_answer: Callable[[float], None] | None = None,
) -> list[dict[str, Any]]:
    """Answers and result rows of one retrieved batch."""
    cfg = ctx.cfg
    spec, style = method_spec(cfg.method), cfg.generation.answer_style
    chunks = ctx.chunks if r.ranking is not None else None
    rows_of = _chunk_contexts(ctx, r, len(batch))
    if r.contexts is not None:
        contexts: list[Context | None] = list(r.contexts)
    elif chunks is not None:
        contexts = [Context.of([chunks["titled"][i] for i in rows]) for rows in rows_of]
    else:
        contexts = [None] * len(batch)
    answers: list[str | None] = [None] * len(batch)
    ans_tokens: list[dict[str, int]] = [{} for _ in batch]
    failed: list[str | None] = [None] * len(batch)  # why an answer prompt failed
    if cfg.generation.enabled:
        with clock.stage("answer"):
            done = answer_batch(
                ctx.llm,
                ctx.tokenizer,
                [q.question for q in batch],
                contexts,
                ctx.context_tokens,
                cfg.generation.max_tokens,
                prompt_for(spec, style),
                cfg.options,
                keep_failures=not fail_fast,
                on_progress=on_answer,
                whole=keeps_whole(spec, style),
            )
        answers, ans_tokens, contexts = list(done.answers), done.tokens, done.contexts
        failed = list(done.failed)
    per_q = {k: v / len(batch) for k, v in clock.seconds.items()}
    rows = []
    for q, question in enumerate(batch):
        ranked, scores = ([], []) if r.ranking is None else r.ranking.row(q)
        shown = [] if contexts[q] is None else contexts[q].texts()
        # what the prompt really holds: the chunks that fit
        ctx_rows = rows_of[q][: len(shown)] if r.contexts is None else []
        rows.append(
            {
                "qid": question.qid,
                "question": question.question,
                "method": cfg.method,
                "answer": answers[q],
                "retrieved_ids": passages_of(ranked, chunks["passage"])[: cfg.retrieval.candidates]
                if chunks
                else [],
                "retrieved_chunk_ids": [chunks["ids"][i] for i in ranked] if chunks else [],
                "retrieved_scores": scores,
                "context_ids": [chunks["ids"][i] for i in ctx_rows] if chunks else [],
                "context_text": shown,
                "gold_answers": question.answers,
                "supporting_ids": question.supporting_ids,
                "qtype": question.qtype,
                "kind": question.kind,
                "tokens": {**r.tokens[q], **ans_tokens[q]},
                "seconds": per_q,
                "answer_failed": failed[q],
                "extras": r.extras[q],
            }
        )
    return rows


def run_query(
    index: Index,
    questions: list[Question],
    cfg: QueryConfig,
    out: str | Path,
    questions_src: str,
    dry_run: bool = False,
    llm_backend=None,
    fail_fast: bool = False,
) -> dict[str, Any]:
    """Run `cfg.method` over `questions` into the run folder `out`; returns the summary.

    `llm_backend` replaces the backend the config names (e.g. a model already in memory). An
    answer prompt that fails after every retry is recorded as that question's failure and the
    run goes on (summary `failed_questions`); `fail_fast` stops the run instead."""
    out = Path(out)
    cfg = with_answer_style(cfg, questions)
    if dry_run:  # a dry run writes nothing
        return _run_batches(index, questions, cfg, out, dry_run, llm_backend, fail_fast)
    with run_folder(index, cfg, out, questions_src, questions):
        return _run_batches(index, questions, cfg, out, dry_run, llm_backend, fail_fast)


@contextmanager
def run_folder(
    index: Index, cfg: QueryConfig, out: Path, questions_src: str, questions: list[Question]
) -> Iterator[None]:
    """Hold the run folder's lock while a run writes it, after checking that the folder holds
    this run (same method, config, index content and questions) or making it."""
    lock = _lock_run_dir(out)
    try:
        _check_run_dir(out, _run_identity(index, cfg, questions_src, questions), index)
        yield
    finally:
        os.close(lock)


def _run_batches(
    index: Index, questions: list[Question], cfg: QueryConfig, out: Path, dry_run: bool,
    llm_backend, fail_fast: bool,
) -> dict[str, Any]:  # fmt: skip
    """Every batch not finished yet: retrieve (or reload its checkpoint), answer, write."""
    ctx = QueryContext(index, cfg, out, dry_run=dry_run, llm_backend=llm_backend)
    gold_share = warn_gold(index, questions)
    method = method_spec(cfg.method).retrieve
    started = time.perf_counter()
    bs = cfg.batch_size
    n_batches = (len(questions) + bs - 1) // bs
    bar = progress(f"query {cfg.method}", total=len(questions), unit="q")
    resumed = 0
    for b in range(n_batches):
        batch = questions[b * bs : (b + 1) * bs]
        if not dry_run and batch_done(out, b):
            resumed += len(batch)
            bar.update(len(batch))
            continue
        batch_started = time.perf_counter()
        base = b * bs

        def answered(n: float, base: int = base) -> None:  # the batch's answers as they come
            move_bar(bar, base + n)

        rows, usage = run_batch(ctx, method, b, batch, fail_fast, answered)
        if not dry_run:
            write_part(out, b, rows, usage, time.perf_counter() - batch_started)
        move_bar(bar, base + len(batch))
    bar.close()
    if dry_run:
        return {"dry_run": True, "questions": len(questions), "llm": ctx.ledger.summary()}
    seconds = time.perf_counter() - started
    return finish_run(out, index, cfg, n_batches, seconds, resumed, gold_share, ctx)


def with_answer_style(cfg: QueryConfig, questions: list[Question]) -> QueryConfig:
    """`cfg` with `generation.answer_style` resolved for this question set (auto: long for
    question kinds without short gold answers), so every batch and worker answers alike."""
    style = answer_style(cfg.generation.answer_style, [q.kind for q in questions])
    return dataclasses.replace(
        cfg, generation=dataclasses.replace(cfg.generation, answer_style=style)
    )


def part_path(out: Path, b: int, suffix: str = ".parquet") -> Path:
    """Where batch `b` of the run in `out` keeps its part (or, by suffix, its checkpoint)."""
    return out / "parts" / f"{b:05d}{suffix}"


def batch_done(out: Path, b: int) -> bool:
    """Whether batch `b` of the run in `out` is finished (its part written, nothing failed)."""
    done_path = part_path(out, b)
    return done_path.exists() and not done_path.with_suffix(".failed").exists()


def run_batch(
    ctx: QueryContext,
    method,
    b: int,
    batch: list[Question],
    fail_fast: bool,
    on_answer: Callable[[float], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Result rows of batch `b`: retrieval (or its checkpoint in the run folder), then answers
    (`on_answer` hears how many are done, for the run's bar); and the LLM usage that produced
    them, to be committed with them (a checkpoint written by a process that died before
    committing the batch brings its retrieval's usage along)."""
    ckpt = part_path(ctx.run_dir, b, ".retrieved.json")
    ckpt_usage = part_path(ctx.run_dir, b, ".retrieved.usage.json")
    clock = StageClock()
    before = ctx.ledger.summary()
    carried: dict[str, dict[str, Any]] = {}
    if ckpt.exists() and not ctx.dry_run:
        r = Retrieved.from_json(json.loads(ckpt.read_text()))
        clock.seconds = dict(r.seconds)
        committed = part_path(ctx.run_dir, b, ".usage.json").exists()
        if ckpt_usage.exists() and not committed:
            carried = json.loads(ckpt_usage.read_text())
    else:
        r = method(ctx, batch, clock)
        if not ctx.dry_run:
            write_atomic(ckpt_usage, json.dumps(usage_since(before, ctx.ledger.summary())).encode())
            write_atomic(ckpt, json.dumps(r.to_json()).encode())
    rows = _answer_batch(ctx, batch, r, clock, fail_fast, on_answer)
    return rows, sum_usage(carried, usage_since(before, ctx.ledger.summary()))


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
    _add_usage(part_path(out, b, ".usage.json"), usage)
    if seconds is not None:
        add_batch_seconds(out, b, seconds)
    done_path = part_path(out, b)
    failed_marker = done_path.with_suffix(".failed")
    tmp = done_path.with_name(done_path.name + ".tmp")
    pq.write_table(part_table(rows), tmp)
    os.replace(tmp, done_path)
    failed = [row["qid"] for row in rows if row["answer_failed"] is not None]
    if failed:
        write_atomic(failed_marker, "\n".join(failed).encode())
    elif failed_marker.exists():
        failed_marker.unlink()


def _add_usage(path: Path, usage: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What `path` holds plus `usage` (numbers summed per stage/model), written back: a
    batch's usage over every process that worked on it."""
    total = sum_usage(json.loads(path.read_text()) if path.exists() else {}, usage)
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
            total = sum_usage(total, json.loads(path.read_text()))
    return total


def add_batch_seconds(out: Path, b: int, seconds: float) -> None:
    """Add wall seconds spent on batch `b` to its seconds file (summed over processes)."""
    _add_usage(part_path(out, b, ".seconds.json"), {"batch": {"seconds": seconds}})


def _read_seconds(path: Path) -> float | None:
    """The wall seconds a batch's seconds file holds (None when there is none)."""
    if not path.exists():
        return None
    return float(json.loads(path.read_text()).get("batch", {}).get("seconds", 0.0))


def finish_run(
    out: Path,
    index: Index,
    cfg: QueryConfig,
    n_batches: int,
    seconds: float,
    resumed: int,
    gold_share: float | None,
    ctx: QueryContext | None = None,
) -> dict[str, Any]:
    """Merge the batch parts into results.parquet / results.jsonl and write summary.json; its
    LLM usage is the sum of every batch's, so it covers every process that worked on the run
    (one killed mid-run included, for the batches it committed)."""
    rows = [r for b in range(n_batches) for r in read_rows(part_path(out, b))]
    tmp = out / "results.parquet.tmp"
    pq.write_table(results_table(rows), tmp)
    os.replace(tmp, out / "results.parquet")
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    write_atomic(out / "results.jsonl", lines.encode())
    stage_seconds: dict[str, float] = {}
    tokens: dict[str, float] = {}
    for r in rows:
        for k, v in r["seconds"].items():
            stage_seconds[k] = stage_seconds.get(k, 0.0) + v
        for k, v in r["tokens"].items():
            tokens[k] = tokens.get(k, 0) + v
    n = len(rows)
    # every process that worked on the run: each batch's wall seconds, summed over its tries
    # (a batch of an older run folder without its seconds file counts this process's share)
    spent = [_read_seconds(part_path(out, b, ".seconds.json")) for b in range(n_batches)]
    total_seconds = sum(x for x in spent if x is not None)
    if any(x is None for x in spent):
        total_seconds = max(total_seconds, seconds)
    failed = sum(r["answer_failed"] is not None for r in rows)
    index_tokens = sum(
        int(s.get("prompt_tokens", 0)) + int(s.get("completion_tokens", 0))
        for s in index.manifest.get("stats", {}).get("stages", {}).values()
    )
    summary = {
        "method": cfg.method,
        "questions": n,
        "seconds": round(total_seconds, 3),
        "seconds_this_process": round(seconds, 3),
        "resumed_questions": resumed,
        "failed_questions": failed,
        "questions_per_s": round(n / total_seconds, 3) if total_seconds > 0 else None,
        "stage_seconds": {k: round(v, 3) for k, v in stage_seconds.items()},
        "query_tokens_per_question": {k: round(v / n, 2) for k, v in tokens.items()},
        "index_tokens": index_tokens,
        "index_tokens_per_question": round(index_tokens / n, 2),
        "gold_in_index": None if gold_share is None else round(gold_share, 4),
        "answer_style": cfg.generation.answer_style,
        "context_budget": (ctx or QueryContext(index, cfg, out)).budget.as_dict(),
        "llm": run_usage(out, n_batches),
    }
    write_atomic(out / "llm_usage.json", json.dumps(summary["llm"], indent=2).encode())
    write_atomic(out / "summary.json", json.dumps(summary, indent=2).encode())
    return summary
