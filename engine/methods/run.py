"""`graphrag-engine query`: run one method over a question set, batch by batch, resumably.

Run folder layout:

* `run.json`: method, config, index (path, generation, config hash) and question file; a
  re-run into the same folder must match it;
* `parts/NNNNN.retrieved.json`: a batch's retrieval checkpoint (written atomically);
* `parts/NNNNN.parquet`: a finished batch (retrieval + answers);
* `llm_cache.sqlite`: every LLM answer, cached per slice as it returns (the resume ledger);
* `results.parquet`, `results.jsonl`, `summary.json`: written when every batch is done.

A run killed at any point and started again skips finished batches, reloads the retrieval
checkpoint of an unfinished one, and sends only the LLM prompts that are not in the cache.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine.config import QueryConfig
from engine.errors import BadInputError
from engine.eval.datasets import Question
from engine.methods.answer import answer_prompts, clean_answer, fit_context, generate_answers
from engine.methods.base import ANSWER_PROMPTS, Retrieved, StageClock, get_method, llm_tokens
from engine.progress import progress
from engine.retrieve.context import QueryContext
from engine.retrieve.ranking import ChunkRanking, passages_of
from engine.store.index_store import Index

RESULT_SCHEMA = pa.schema(
    [
        ("qid", pa.string()),
        ("question", pa.string()),
        ("method", pa.string()),
        ("answer", pa.string()),
        ("retrieved_ids", pa.list_(pa.string())),
        ("retrieved_chunk_ids", pa.list_(pa.string())),
        ("retrieved_scores", pa.list_(pa.float32())),
        ("context_ids", pa.list_(pa.string())),
        ("context_text", pa.list_(pa.string())),
        ("gold_answers", pa.list_(pa.string())),
        ("supporting_ids", pa.list_(pa.string())),
        ("qtype", pa.string()),
        ("kind", pa.string()),
        ("tokens", pa.string()),
        ("seconds", pa.string()),
        ("extras", pa.string()),
    ]
)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _run_identity(index: Index, cfg: QueryConfig, questions_src: str, n: int) -> dict[str, Any]:
    return {
        "method": cfg.method,
        "config": cfg.to_dict(),
        "index": {
            "path": "none" if index.root == Path("none") else str(Path(index.root).resolve()),
            "generation": index.generation,
            "config_hash": index.manifest.get("config_hash"),
        },
        "questions": {"source": questions_src, "count": n},
    }


def _check_run_dir(out: Path, identity: dict[str, Any]) -> None:
    """Create the run folder, or check that an existing one holds the same run."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "parts").mkdir(exist_ok=True)
    marker = out / "run.json"
    if marker.exists():
        old = json.loads(marker.read_text())
        for key in ("method", "config", "index", "questions"):
            if old.get(key) != identity[key]:
                raise BadInputError(
                    f"{out}: holds a run with a different {key}; resume it with the same "
                    "arguments, or give a new --out"
                )
        return
    _write_atomic(marker, json.dumps(identity, indent=2).encode())


def _save_retrieved(path: Path, r: Retrieved) -> None:
    payload = {
        "ids": None if r.ranking is None else r.ranking.ids.tolist(),
        "scores": None if r.ranking is None else r.ranking.scores.tolist(),
        "extras": r.extras,
        "tokens": r.tokens,
        "seconds": r.seconds,
        "contexts": r.contexts,
    }
    _write_atomic(path, json.dumps(payload).encode())


def _load_retrieved(path: Path) -> Retrieved:
    p = json.loads(path.read_text())
    ranking = None
    if p["ids"] is not None:
        ranking = ChunkRanking(
            np.asarray(p["ids"], dtype=np.int64), np.asarray(p["scores"], dtype=np.float32)
        )
    return Retrieved(ranking, p["extras"], p["tokens"], p["seconds"], p.get("contexts"))


def _answer_batch(
    ctx: QueryContext, batch: list[Question], r: Retrieved, clock: StageClock
) -> list[dict[str, Any]]:
    """Contexts, answers and result rows of one retrieved batch."""
    cfg = ctx.cfg
    rows = []
    contexts: list[list[int] | None] = []
    for q in range(len(batch)):
        contexts.append(None if r.ranking is None else r.ranking.row(q)[0][: cfg.retrieval.top_k])
    answers = [None] * len(batch)
    ans_tokens: list[dict[str, int]] = [{} for _ in batch]
    chunks = ctx.chunks if r.ranking is not None else None
    if cfg.generation.enabled:
        with clock.stage("answer"):
            texts: list[list[str] | None] = []
            for q, rows_q in enumerate(contexts):
                if r.contexts is not None:
                    given = r.contexts[q]
                    counts = [len(e.ids) for e in ctx.tokenizer.encode_batch(given)]
                    texts.append(fit_context(given, counts, cfg.generation.max_context_tokens))
                    continue
                if rows_q is None:
                    texts.append(None)
                    continue
                passages = [chunks["titled"][i] for i in rows_q]
                counts = [len(e.ids) for e in ctx.tokenizer.encode_batch(passages)]
                texts.append(fit_context(passages, counts, cfg.generation.max_context_tokens))
                contexts[q] = rows_q[: len(texts[-1])]  # what the prompt really holds
            custom = ANSWER_PROMPTS.get(cfg.method)
            if custom is not None:
                prompts = [custom(q.question, t, cfg) for q, t in zip(batch, texts, strict=True)]
            else:
                prompts = answer_prompts([q.question for q in batch], texts)
            done = generate_answers(ctx.llm, prompts, cfg.generation.max_tokens)
            answers = [clean_answer(c.text) for c in done]
            ans_tokens = llm_tokens(done, "answer")
    per_q = {k: v / len(batch) for k, v in clock.seconds.items()}
    for q, question in enumerate(batch):
        ranked, scores = ([], []) if r.ranking is None else r.ranking.row(q)
        ctx_rows = contexts[q] or []
        if r.contexts is not None:
            given = texts[q] if cfg.generation.enabled else r.contexts[q]
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
                "context_text": given
                if r.contexts is not None
                else ([chunks["titled"][i] for i in ctx_rows] if chunks else []),
                "gold_answers": question.answers,
                "supporting_ids": question.supporting_ids,
                "qtype": question.qtype,
                "kind": question.kind,
                "tokens": json.dumps({**r.tokens[q], **ans_tokens[q]}),
                "seconds": json.dumps(per_q),
                "extras": json.dumps(r.extras[q]),
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
) -> dict[str, Any]:
    """Run `cfg.method` over `questions` into the run folder `out`; returns the summary.

    `llm_backend` replaces the backend the config names (e.g. a model already in memory)."""
    out = Path(out)
    if not dry_run:  # a dry run counts prompts and tokens and writes nothing
        _check_run_dir(out, _run_identity(index, cfg, questions_src, len(questions)))
    ctx = QueryContext(index, cfg, out, dry_run=dry_run, llm_backend=llm_backend)
    method = get_method(cfg.method)
    started = time.perf_counter()
    bs = cfg.batch_size
    n_batches = (len(questions) + bs - 1) // bs
    bar = progress(f"query {cfg.method}", total=len(questions), unit="q")
    resumed = 0
    for b in range(n_batches):
        batch = questions[b * bs : (b + 1) * bs]
        done_path = out / "parts" / f"{b:05d}.parquet"
        if done_path.exists() and not dry_run:
            resumed += len(batch)
            bar.update(len(batch))
            continue
        ckpt = out / "parts" / f"{b:05d}.retrieved.json"
        clock = StageClock()
        if ckpt.exists() and not dry_run:
            r = _load_retrieved(ckpt)
            clock.seconds = dict(r.seconds)
        else:
            r = method(ctx, batch, clock)
            if not dry_run:
                _save_retrieved(ckpt, r)
        rows = _answer_batch(ctx, batch, r, clock)
        if dry_run:
            bar.update(len(batch))
            continue
        table = pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)
        tmp = done_path.with_name(done_path.name + ".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, done_path)
        bar.update(len(batch))
    bar.close()
    if dry_run:
        return {"dry_run": True, "llm": ctx.ledger.summary()}
    return _finish(out, index, cfg, n_batches, time.perf_counter() - started, resumed, ctx)


def _finish(
    out: Path,
    index: Index,
    cfg: QueryConfig,
    n_batches: int,
    seconds: float,
    resumed: int,
    ctx: QueryContext,
) -> dict[str, Any]:
    """Merge the batch parts into results.parquet / results.jsonl and write summary.json."""
    table = pa.concat_tables(
        [pq.read_table(out / "parts" / f"{b:05d}.parquet") for b in range(n_batches)]
    )
    tmp = out / "results.parquet.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, out / "results.parquet")
    rows = table.to_pylist()
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    _write_atomic(out / "results.jsonl", lines.encode())
    stage_seconds: dict[str, float] = {}
    tokens: dict[str, float] = {}
    for r in rows:
        for k, v in json.loads(r["seconds"]).items():
            stage_seconds[k] = stage_seconds.get(k, 0.0) + v
        for k, v in json.loads(r["tokens"]).items():
            tokens[k] = tokens.get(k, 0) + v
    n = len(rows)
    index_tokens = sum(
        int(s.get("prompt_tokens", 0)) + int(s.get("completion_tokens", 0))
        for s in index.manifest.get("stats", {}).get("stages", {}).values()
    )
    summary = {
        "method": cfg.method,
        "questions": n,
        "seconds": round(seconds, 3),
        "resumed_questions": resumed,
        "questions_per_s": round((n - resumed) / seconds, 3) if seconds > 0 else None,
        "stage_seconds": {k: round(v, 3) for k, v in stage_seconds.items()},
        "query_tokens_per_question": {k: round(v / n, 2) for k, v in tokens.items()},
        "index_tokens": index_tokens,
        "index_tokens_per_question": round(index_tokens / n, 2),
        "llm": ctx.ledger.summary(),
    }
    _write_atomic(out / "summary.json", json.dumps(summary, indent=2).encode())
    return summary
