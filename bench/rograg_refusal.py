"""ROGRAG's refusal on a set built from real data: the first N/2 MuSiQue and N/2 HotpotQA dev
questions, their reading-comprehension contexts (gold + distractor passages) indexed once whole
and once without the gold passages of every second question (the unanswerable half).

    .venv/bin/python -m bench.rograg_refusal [--work DIR] [--questions 100]
                                             [--llm-backend llama|transformers] [--llm-threads 1]
                                             [--batch-size 16]

On the holed index every question runs through ROGRAG's dual-level stage (keys from the LLM)
under argument checking, result checking and no check; on the whole index under argument
checking (every question answerable there). The gold-context oracle refuses exactly the
unanswerable half and answers the rest as the no-check run did: the pipeline's upper bound.
Per variant: the confusion matrix of refusals (answerable / unanswerable x answered / refused),
accuracy on answered answerable questions (a gold answer or alias contained in the answer),
and LLM tokens per question per stage. Contexts are cut to ~800 tokens (CPU_BUDGET) so that
a verdict costs ~20 s on one llama.cpp core. The packaged SmolLM2 answers and judges (a floor),
served by a llama.cpp server (`--llm-backend llama`, the default) or in process by transformers
with llguidance, `--batch-size` prompts per forward pass (`--llm-backend transformers`: each
stage's prompts of all questions go to it in one call, which on this 2-core CPU reads prompts
several times faster than the server's one-request-at-a-time threads); all variants share one
response cache (WORK/refusal_cache.sqlite, keyed by backend), so a re-run resumes. Indexes are
LLM-free (alpha = 0).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from bench import retrieval
from bench.common import work_dir, write_result
from graphrag_engine.cli import main as cli
from graphrag_engine.models import llm_yaml as models_llm_yaml
from graphrag_engine.models.embed_cache import EMBED_CACHE

SOURCES = {"musique": retrieval.SETS["musique"], "hotpotqa": retrieval.SETS["hotpotqa"]}
CPU_BUDGET = ("entity_tokens: 200", "relation_tokens: 200", "chunk_tokens: 400")
"""Section budgets cut to ~800 context tokens: SmolLM2 on one core reads ~40 tokens/s."""
DUAL = ("stages: [dual_level]", *CPU_BUDGET)
VARIANTS = {  # run name: (index, label, `key: value` lines for the rograg section)
    "argument": ("holed", "argument checking", (*DUAL, "check: argument")),
    "result": ("holed", "result checking", (*DUAL, "check: result")),
    "none": ("holed", "no check", (*DUAL, "check: none")),
    "argument_whole": ("whole", "argument checking, whole index", (*DUAL, "check: argument")),
}


def build_set(work: Path, n: int) -> tuple[Path, set[str]]:
    """Write the questions and the two corpora under WORK; the ids of the unanswerable half."""
    questions, passages = [], {}
    for corpus, dev in SOURCES.values():
        picked = [json.loads(x) for x in (retrieval.DATA / dev).open()][: n // 2]
        wanted = {p for q in picked for p in q["context_passage_ids"]}
        for line in (retrieval.DATA / corpus).open():
            p = json.loads(line)
            if p["id"] in wanted:
                passages[p["id"]] = p
        questions += picked
    holed = {q["id"] for q in questions[1::2]}
    kept_gold = {p for q in questions if q["id"] not in holed for p in q["supporting_passage_ids"]}
    removed = {
        p for q in questions if q["id"] in holed for p in q["supporting_passage_ids"]
    } - kept_gold
    work.mkdir(parents=True, exist_ok=True)
    (work / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    for name, drop in (("whole", set()), ("holed", removed)):
        rows = [p for pid, p in sorted(passages.items()) if pid not in drop]
        (work / f"{name}.jsonl").write_text("".join(json.dumps(p) + "\n" for p in rows))
    return work / "questions.jsonl", holed


def confusion(run: Path, holed: set[str], golds: dict[str, list[str]]) -> dict:
    """Refusals by answerability, accuracy on answered answerable questions, LLM cost."""
    from graphrag_engine.eval.metrics import accuracy

    rows = retrieval.run_rows(run)
    cell = {"answerable": [0, 0], "unanswerable": [0, 0]}  # [answered, refused]
    right, spent_by_stage = [], Counter()
    for r in rows:
        extras = r["extras"]
        refused = extras["stage"] == "refused"
        cell["unanswerable" if r["qid"] in holed else "answerable"][refused] += 1
        if r["qid"] not in holed and not refused:
            right.append(accuracy(r["answer"] or "", golds[r["qid"]]))
        spent = r["tokens"]
        spent_by_stage.update(spent or {})
    a, u = cell["answerable"], cell["unanswerable"]
    per_stage = {k: round(v / len(rows), 1) for k, v in spent_by_stage.items()}
    return {
        "answerable_answered": a[0],
        "answerable_refused": a[1],
        "unanswerable_answered": u[0],
        "unanswerable_refused": u[1],
        "refusal_rate_answerable": round(a[1] / max(1, sum(a)), 3),
        "refusal_rate_unanswerable": round(u[1] / max(1, sum(u)), 3),
        "accuracy_answered_answerable": round(sum(right) / max(1, len(right)), 3),
        "llm_tokens_per_q": round(sum(per_stage.values()), 1),
        "llm_tokens_per_q_by_stage": per_stage,
    }


def main() -> None:
    """Build the set, index twice, run the variants, print the confusion table and JSON."""
    from graphrag_engine.models.llama_server import LlamaServer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=work_dir("rograg-refusal"))
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--llm-backend", choices=["llama", "transformers"], default="llama")
    ap.add_argument("--llm-threads", type=int, default=2, help="llama: the server's threads")
    ap.add_argument("--batch-size", type=int, default=16, help="transformers: prompts per pass")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work) / f"n{args.questions}"
    questions, holed = build_set(work, args.questions)
    golds = {
        q["id"]: [q["answer"], *q.get("answer_aliases", [])]
        for q in map(json.loads, questions.open())
    }
    cfg = work / "alpha0.yaml"
    cfg.write_text("graph:\n  alpha: 0.0\n")
    for name in ("whole", "holed"):
        index = work / "idx" / name
        seed = work / "idx" / "whole" / EMBED_CACHE
        if name == "holed" and seed.exists() and not (index / EMBED_CACHE).exists():
            # the holed corpus is the whole one less some passages: most vectors are cached
            index.mkdir(parents=True, exist_ok=True)
            shutil.copy2(seed, index / EMBED_CACHE)
        if not (index / "manifest.json").exists():
            assert (
                cli(
                    [
                        "index",
                        str(work / f"{name}.jsonl"),
                        "--out",
                        str(index),
                        "--config",
                        str(cfg),
                    ]
                )
                == 0
            )
    rows = {}
    with ExitStack() as stack:
        if args.llm_backend == "llama":
            server = LlamaServer(n_threads=args.llm_threads, log=work / "llama-server.log")
            llm_yaml = stack.enter_context(server).llm_yaml()
        else:
            llm_yaml = models_llm_yaml(backend="transformers", batch_size=args.batch_size)
        for run, (index, label, overrides) in VARIANTS.items():
            spec = retrieval.llm_variant_config(
                work, "configs/methods/rograg.yaml", run, overrides, llm_yaml,
                work / "refusal_cache.sqlite",
            )  # fmt: skip
            out = work / "runs" / run
            query = ["query", str(work / "idx" / index), str(questions), "--method", str(spec)]
            assert cli([*query, "--label", run, "--out", str(out)]) == 0
            rows[label] = confusion(out, holed, golds)
    none = rows["no check"]
    right = none["accuracy_answered_answerable"]  # no check answers every answerable question
    n_answerable = len(golds) - len(holed)
    rows["gold-context oracle"] = {
        "answerable_answered": n_answerable,
        "answerable_refused": 0,
        "unanswerable_answered": 0,
        "unanswerable_refused": len(holed),
        "refusal_rate_answerable": 0.0,
        "refusal_rate_unanswerable": 1.0,
        "accuracy_answered_answerable": right,
        "llm_tokens_per_q": None,
        "llm_tokens_per_q_by_stage": None,
    }
    keys = list(next(iter(rows.values())))[:-1]
    print(f"{'variant':<34}" + "".join(f"{k[:14]:>16}" for k in keys))
    for label, r in rows.items():
        print(f"{label:<34}" + "".join(f"{str(r[k]):>16}" for k in keys))
    write_result(
        "rograg_refusal", {"questions": len(golds), "unanswerable": len(holed), "rows": rows}
    )


if __name__ == "__main__":
    main()
