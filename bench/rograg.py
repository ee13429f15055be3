"""ROGRAG on MuSiQue dev over the LLM-free (alpha = 0) index: retrieval recall of its stages
next to the baselines, context length per stage (the paper's Table 6), LLM cost per stage, and
batched vs one-at-a-time speed.

    .venv/bin/python -m bench.rograg [--work DIR] [--questions 200]
    .venv/bin/python -m bench.rograg --llm [--llm-questions 30] [--llm-threads 1]

Without `--llm` (bench/method_runs.py's machinery, the index shared with it under
WORK/idx/musique): dual-level with NER keys (LLM-free), fuzzy and exact matching, beside BM25,
dense, HippoRAG-style PPR, LightRAG-style hybrid and GraphRAG-style local search; then
questions/s batched vs one question at a time for the fuzzy variant.

With `--llm` a llama.cpp server on the packaged SmolLM2 (a floor) writes keys, logic forms,
step answers and verdicts for the first `--llm-questions` questions, all variants sharing one
response cache (WORK/rograg_cache.sqlite: a re-run resumes): dual-level with LLM keys (fuzzy,
exact, and with both levers: expanded low-level keys and the question as a high-level key),
the logic form alone, and the whole chain (logic form -> dual-level) under argument checking
(result checking and refusal: the retired bench/rograg_refusal.py, docs/measurements.md). Each row: Recall@2/5 of the chunks the chosen stage retrieved, context
tokens per question, LLM tokens per question per stage, and which stage answered.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from bench import method_runs
from bench.common import work_dir, write_result

FREE = ["rog_fuzzy", "rog_exact"]
BASELINES = ["bm25", "naive", "hipporag", "lr_hybrid", "gr_local"]
DUAL_ONLY = ("stages: [dual_level]", "check: none")
CPU_BUDGET = ("max_context_tokens: 1024",)
"""The verdict prompts carry the context cut to 1024 tokens: SmolLM2's window is 2048 and it
reads ~45 tokens/s on one core."""
LLM_VARIANTS = {  # run name: (label, `key: value` lines for the rograg section)
    "rog_llm_fuzzy": ("dual-level fuzzy, LLM keys", DUAL_ONLY),
    "rog_llm_exact": ("dual-level exact, LLM keys", (*DUAL_ONLY, "match: exact")),
    "rog_llm_levers": (
        "dual-level fuzzy, both levers",
        (*DUAL_ONLY, "expand_low_keys: true", "long_query: true"),
    ),
    "rog_llm_lf": ("logic form alone", ("stages: [logic_form]", "check: none")),
    "rog_llm_argument": ("chain, argument checking", ("check: argument", *CPU_BUDGET)),
}


def shape(run: Path) -> dict:
    """Context tokens, LLM tokens per stage (means per question) and the answering stages."""
    from graphrag_engine.models.tokenizer import load_tokenizer

    rows = method_runs.run_rows(run)
    texts = ["\n".join(r["context_text"] or []) for r in rows]
    context = [len(e.ids) for e in load_tokenizer().encode_batch(texts)]
    stages = Counter(r["extras"].get("stage", "?") for r in rows)
    per_stage = Counter()
    for r in rows:
        per_stage.update(r["tokens"] or {})
    planned = [r["extras"].get("logic_form") for r in rows]
    return {
        "context_tokens": round(sum(context) / len(rows), 1),
        "llm_tokens": {k: round(v / len(rows), 1) for k, v in per_stage.items()},
        "stage": dict(stages),
        "logic_form_parsed": sum(p is not None for p in planned),
    }


def speed(index: Path, questions: int) -> dict[str, float]:
    """Batched vs one at a time, in process, for dual-level fuzzy with NER keys."""
    from graphrag_engine.eval.datasets import load_questions
    from graphrag_engine.methods import query_config
    from graphrag_engine.methods.rograg import rograg
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.store import open_index

    qs = load_questions(str(method_runs.DATA / "musique_dev.jsonl"), limit=questions)
    cfg = query_config("rograg")
    cfg.generation.enabled = False
    cfg.options.keys, cfg.options.stages, cfg.options.check = "ner", ["dual_level"], "none"
    cfg.options.analysis = False
    ctx = QueryContext(open_index(index), cfg, Path(work_dir("rograg-speed")))
    figures, _ = method_runs.batched_vs_single(rograg, ctx, qs)
    return figures


def print_rows(rows: list[dict]) -> None:
    """Recall with CIs, context tokens, LLM tokens per stage and answering stages."""
    print(f"{'variant':<34}{'R@2 [95% CI]':<24}{'R@5 [95% CI]':<24}{'ctx tok/q':>10}  stages")
    for r in rows:
        cells = [method_runs.recall_cell(r, k) for k in (2, 5)]
        s = r.get("shape", {})
        print(
            f"{r['method']:<34}{cells[0]:<24}{cells[1]:<24}{s.get('context_tokens', ''):>10}"
            f"  {s.get('stage', '')} {s.get('llm_tokens', '')}"
        )


def main() -> None:
    """Run, evaluate, time; print the table and a JSON line."""
    ap = method_runs.llm_bench_parser(__doc__.splitlines()[0], "add the SmolLM2 variants", 30)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    if args.llm:
        base, cache = "configs/methods/rograg.yaml", "rograg_cache.sqlite"
        rows = method_runs.run_with_llm(
            work, "rograg", args.llm_questions, method_runs.LocalLLM.of(args), base, LLM_VARIANTS,
            [*FREE, *BASELINES], cache,
        )  # fmt: skip
        for row in rows:
            if Path(row["run"]).name.startswith("rog_"):
                row["shape"] = shape(Path(row["run"]))
        print_rows(rows)
        write_result("rograg", {"llm_rows": rows}, tag="llm")
        return
    rows = method_runs.run_set("musique", work, [*FREE, *BASELINES])
    for row, name in zip(rows, [*FREE, *BASELINES], strict=True):
        row["run"] = str(work / "runs" / "musique" / name)
        row["shape"] = shape(Path(row["run"]))
    print_rows(rows)
    fast = speed(work / "idx" / "musique", args.questions)
    print("speed:", json.dumps(fast))
    write_result("rograg", {"rows": rows, "speed": fast})


if __name__ == "__main__":
    main()
