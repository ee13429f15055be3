"""PankRAG on MuSiQue dev (200 questions) over the LLM-free (alpha = 0) index: retrieval recall
of gold passages over all levels' contexts next to the baselines, an Eq. 5 alpha sweep with gold
plans, and level-synchronous batching vs one question at a time.

    .venv/bin/python -m bench.pankrag [--work DIR] [--questions 200]
    .venv/bin/python -m bench.pankrag --llm [--llm-questions N] [--llm-threads 2]
                                      [--llm-backend llama|transformers] [--batch-size 16]
    .venv/bin/python -m bench.pankrag --ragas 50 [--llm-backend llama|transformers]
    .venv/bin/python -m bench.pankrag --plans-only [--llm-backend llama|transformers]
                                      [--batch-size 16] [--llm-questions N]

Without --llm everything is LLM-free: gold (oracle) plans with the gold intermediate answers,
full / -Ank, and -Path (the question as its only step); the alpha sweep (0.4 .. 1.0) with gold
plans; NaiveRAG, HippoRAG-style PPR and GraphRAG-style local search from the same run (the
index is bench/method_runs.py's, shared under WORK/idx/musique). Prints Recall@2/5 with 95% CIs,
the plan shape (steps, levels), and (c) questions/s batched vs one at a time (in process, same
context, the ratio) with gold plans.

With --llm it sends its prompts to the packaged SmolLM2 (a llama.cpp server, or in process
with `--llm-backend transformers`) and runs, on the first
`--llm-questions` questions, SmolLM2 plans with SmolLM2 intermediate answers (full and -Ank),
the gold-plan rows on the same questions, and the plan statistics: valid-plan rate, steps and
levels per question, agreement with the gold step count, LLM tokens per question by stage. The
runs share one response cache (WORK/pankrag_cache.sqlite), so a re-run resumes. A 135M model's
plans and answers make these rows a floor.

With --ragas N, PankRAG (SmolLM2 plans and answers) and NaiveRAG answer the first N questions
and the engine's RAGAS-style metrics score both, SmolLM2 as judge: (b), a floor (response cache
WORK/pankrag_ragas_cache.sqlite; the index must exist: run without flags first).

With --plans-only the planner runs alone (no index) on the first `--llm-questions` questions,
through a llama.cpp server or in process with llguidance (`--llm-backend transformers`): the
plan statistics of (c) with a 95% CI on the valid-plan rate, the step-count histogram, asks
and the failures' kinds (response cache WORK/pankrag_plans_<backend>.sqlite).
"""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from pathlib import Path

from bench import method_runs
from bench.common import work_dir, write_result
from graphrag_engine.config import LLMConfig

YAML = "configs/methods/pankrag.yaml"
GOLD = ("plan: gold", "sub_answers: gold")
VARIANTS = {
    "pk_gold": ("PankRAG gold plans (oracle)", YAML, *GOLD),
    "pk_gold_noank": ("  -Ank", YAML, *GOLD, "rerank: false"),
    "pk_direct": ("  -Path (question as its only step)", YAML, "plan: direct"),
}
SWEEP = {
    f"pk_gold_a{a}": (f"  gold plans, alpha = {a}", YAML, *GOLD, f"alpha_specific: {a}")
    for a in ("0.4", "0.5", "0.7", "0.8", "0.9", "1.0")
}
BASELINES = ["naive", "hipporag", "gr_local"]
CPU_BUDGET = ("max_context_tokens: 1024",)
"""Intermediate answers read at most 1,024 context tokens (2,048 in the shipped config): on two
CPU cores a 2,048-token prompt costs SmolLM2 about 30 s."""
LLM_VARIANTS = {  # run name: (label, `key: value` lines replacing the config's)
    "pk_llm": ("PankRAG SmolLM2 plans + answers", CPU_BUDGET),
    "pk_llm_noank": ("  -Ank", (*CPU_BUDGET, "rerank: false")),
}


def extras_of(run: Path) -> list[dict]:
    """Each question's extras (plan, levels, fallback) and token counts from a run."""
    return [r["extras"] | {"tokens": r["tokens"]} for r in method_runs.run_rows(run)]


def plan_figures(
    steps: list[int], levels: list[int], deps: list[bool], valid: list[bool], gold: list[int]
) -> dict:
    """Per question set: valid-plan rate (95% bootstrap CI); steps, levels, step-count histogram
    and share with a dependency over the valid plans; step-count agreement with the gold
    decomposition (`gold` may be empty: no agreement reported)."""
    from collections import Counter

    from graphrag_engine.eval.metrics import bootstrap_ci

    n, ok = len(valid), [i for i, v in enumerate(valid) if v]
    rate, lo, hi = bootstrap_ci([float(v) for v in valid])
    figures = {
        "questions": n,
        "valid_plans": round(rate, 3),
        "valid_ci": [round(lo, 3), round(hi, 3)],
        "steps_valid": round(sum(steps[i] for i in ok) / max(len(ok), 1), 2),
        "levels_valid": round(sum(levels[i] for i in ok) / max(len(ok), 1), 2),
        "steps_histogram_valid": dict(sorted(Counter(steps[i] for i in ok).items())),
        "with_dependencies_valid": round(sum(deps[i] for i in ok) / max(len(ok), 1), 3),
    }
    if gold:
        agree = sum(steps[i] == gold[i] for i in ok)
        figures["gold_steps"] = round(sum(gold) / len(gold), 2)
        figures["gold_step_count_agrees_all"] = round(agree / n, 3)
        figures["gold_step_count_agrees_valid"] = round(agree / max(len(ok), 1), 3)
    return figures


def plan_stats(run: Path, gold_steps: list[int]) -> dict:
    """A run's plan figures (plan_figures, all plans' mean steps and levels) and its LLM tokens
    per question by stage."""
    ex = extras_of(run)
    n = len(ex)
    stages: dict[str, int] = {}
    for e in ex:
        for k, v in e["tokens"].items():
            stages[k] = stages.get(k, 0) + v
    steps, levels = [len(e["plan"]) for e in ex], [e["levels"] for e in ex]
    deps = [bool(e["edges"]) for e in ex]
    valid = [not e.get("plan_fallback") for e in ex]
    return plan_figures(steps, levels, deps, valid, gold_steps) | {
        "steps": round(sum(steps) / n, 2),
        "levels": round(sum(levels) / n, 2),
        "tokens_per_question": {k: round(v / n, 1) for k, v in sorted(stages.items())},
    }


def speed(index: Path, questions: int) -> dict[str, float]:
    """Gold plans, gold answers: the whole batch level by level vs one question at a time."""
    from graphrag_engine.eval.datasets import load_questions
    from graphrag_engine.methods import query_config
    from graphrag_engine.methods.pankrag import pankrag
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.store import open_index

    qs = load_questions(str(method_runs.DATA / "musique_dev.jsonl"), limit=questions)
    cfg = query_config("pankrag")
    cfg.generation.enabled = False
    cfg.options.plan, cfg.options.sub_answers = "gold", "gold"
    ctx = QueryContext(open_index(index), cfg, Path(work_dir("pankrag-speed")))
    return method_runs.batched_vs_single(pankrag, ctx, qs)[0]


def with_llm(work: Path, limit: int, local: method_runs.LocalLLM) -> tuple[list[dict], dict]:
    """SmolLM2-planned rows next to the gold-plan rows and baselines on the first `limit`
    questions; the rows and each LLM variant's plan statistics."""
    others = [*VARIANTS, *BASELINES]
    cache = "pankrag_cache.sqlite"
    rows = method_runs.run_with_llm(
        work, "pankrag-llm", limit, local, YAML, LLM_VARIANTS, others, cache
    )
    from graphrag_engine.eval.datasets import load_questions
    from graphrag_engine.methods.pankrag.plans import gold_plan

    qs = load_questions(method_runs.DATA / "musique_dev.jsonl", limit=limit)
    gold = [len(gold_plan(q).steps) for q in qs]
    runs = {Path(r["run"]).name: Path(r["run"]) for r in rows}
    return rows, {name: plan_stats(runs[name], gold) for name in LLM_VARIANTS}


def planner_stats(work: Path, limit: int, local: method_runs.LocalLLM) -> dict:
    """(c) The planner alone on the first `limit` MuSiQue dev questions: plan_figures, asks
    and planner tokens per question, the failures' last errors."""
    from collections import Counter

    from graphrag_engine.eval.datasets import load_questions
    from graphrag_engine.methods.pankrag import PankRAGConfig
    from graphrag_engine.methods.pankrag.plans import gold_plan, make_plans
    from graphrag_engine.models import make_llm

    qs = load_questions(method_runs.DATA / "musique_dev.jsonl", limit=limit)
    max_steps, retries = PankRAGConfig().max_steps, LLMConfig().parse_retries
    cache = str(work / f"pankrag_plans_{local.backend}.sqlite")
    with ExitStack() as stack:
        llm = make_llm(LLMConfig(**local.keys(stack, work / "llama.log"), cache=cache))
        t0 = time.perf_counter()
        planned = make_plans(llm, [q.question for q in qs], max_steps, retries)
        seconds = time.perf_counter() - t0
    plans = planned.plans
    figures = plan_figures(
        [len(p.steps) for p in plans],
        [len(p.levels()) for p in plans],
        [bool(p.edges()) for p in plans],
        [not f for f in planned.fallback],
        [len(gold_plan(q).steps) for q in qs],
    )
    cost = {
        "asks_per_question": round(sum(planned.attempts) / len(qs), 2),
        "planner_tokens_per_question": round(sum(planned.tokens) / len(qs), 1),
        "seconds_per_question": round(seconds / len(qs), 2),
        "errors": dict(
            Counter(method_runs.error_kind(e) for e in planned.errors if e).most_common(8)
        ),
    }
    return {"backend": llm.model_id} | figures | cost


def ragas(work: Path, limit: int, local: method_runs.LocalLLM) -> str:
    """(b) PankRAG (SmolLM2 plans, intermediate and final answers, the CPU context budget) and
    NaiveRAG answer the first `limit` MuSiQue dev questions; the engine's RAGAS-style metrics
    (faithfulness, context recall, context precision) score both with the same SmolLM2 as
    judge. Returns the report's metric sections."""
    from graphrag_engine.models import llm_yaml

    index, questions = work / "idx" / "musique", method_runs.DATA / "musique_dev.jsonl"
    cache = work / "pankrag_ragas_cache.sqlite"
    runs = work / "runs" / f"musique-ragas{limit}"
    with ExitStack() as stack:
        keys = local.keys(stack, work / "llama-server.log")
        section = llm_yaml(**keys)
        for name, base, overrides in (
            ("pankrag", YAML, CPU_BUDGET),
            ("naive", "configs/methods/naive.yaml", ()),
        ):
            spec = method_runs.llm_variant_config(
                work, base, f"ragas_{name}", overrides, section, cache
            )
            args = [
                "query",
                str(index),
                str(questions),
                "--method",
                str(spec),
                "--limit",
                str(limit),
            ]
            assert method_runs.cli([*args, "--out", str(runs / name)]) == 0
        judge = local.judge_flags(keys)
        report = work / "reports" / f"musique-ragas{limit}"
        eval_args = ["eval", str(runs / "pankrag"), str(runs / "naive"), "--out", str(report)]
        assert method_runs.cli([*eval_args, "--ragas", *judge, "--judge-limit", str(limit)]) == 0
    text = (report / "report.md").read_text()
    start = text.find("## faithfulness")
    return text[start:] if start >= 0 else text


def print_rows(title: str, rows: list[dict]) -> None:
    """One recall table."""
    print(f"\n{title}\n{'method':<40}{'R@2 [95% CI]':<24}{'R@5 [95% CI]':<24}")
    for r in rows:
        cells = [method_runs.recall_cell(r, k) for k in (2, 5)]
        print(f"{r['method']:<40}{cells[0]:<24}{cells[1]:<24}")


def main() -> None:
    """Index (shared), run, evaluate, time; print the tables and a JSON line."""
    ap = method_runs.llm_bench_parser(
        __doc__.splitlines()[0], "add SmolLM2 plans (llama.cpp server)", 200
    )
    ap.add_argument("--plans-only", action="store_true", help="(c): the planner alone, no index")
    ap.add_argument(
        "--ragas", type=int, metavar="N", help="(b): RAGAS-style scores on the first N questions"
    )
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    method_runs.METHODS.update(VARIANTS | SWEEP)
    if args.plans_only:
        work.mkdir(parents=True, exist_ok=True)
        stats = planner_stats(work, args.llm_questions, method_runs.LocalLLM.of(args))
        print("\n(c) plans:", json.dumps(stats))
        return
    if args.ragas:
        print(ragas(work, args.ragas, method_runs.LocalLLM.of(args)))
        return
    if args.llm:
        rows, stats = with_llm(work, args.llm_questions, method_runs.LocalLLM.of(args))
        print_rows(f"(a) MuSiQue dev, first {args.llm_questions} questions, SmolLM2 plans", rows)
        print("\n(c, d) plans:", json.dumps(stats))
        write_result("pankrag", {"llm_rows": rows, "plan_stats": stats}, tag="llm")
        return
    rows = method_runs.run_set("musique", work, [*VARIANTS, *SWEEP, *BASELINES])
    print_rows("(a) MuSiQue dev, LLM-free index, gold plans and answers", rows)
    runs = work / "runs" / "musique"
    shape = {}
    for v in ("pk_gold", "pk_direct"):
        stats = plan_stats(runs / v, [])
        shape[v] = {"steps": stats["steps"], "levels": stats["levels"]}
    print("\nplan shape (mean steps, levels per question):", json.dumps(shape))
    fast = speed(work / "idx" / "musique", args.questions)
    print("\n(d) speed, gold plans:", json.dumps(fast))
    write_result("pankrag", {"rows": rows, "shape": shape, "speed": fast})


if __name__ == "__main__":
    main()
