"""How the method benches run the engine: named retrieval runs (METHODS) and config variants on
one LLM-free index per dev set (WORK/idx/SET), retrieval-only CLI runs then one `eval`, the same
with SmolLM2 serving a method's LLM stages (LocalLLM), and batched against one-at-a-time speed.
(Once the retrieval bench, retired: docs/measurements.md, "Retired benches".)"""

from __future__ import annotations

import argparse
import csv
import json
import re
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from bench.common import DATA, DEV_SETS, REPO, work_dir
from graphrag_engine.cli import main as cli

CFG = "configs/methods/"
METHODS = {  # run name: (label, --method)
    "bm25": ("BM25", "bm25"),
    "naive": ("dense MiniLM", "naive"),
    "hipporag": ("HippoRAG-style PPR", "hipporag"),
    "clue": ("Clue-RAG Q-Iter", CFG + "clue.yaml"),
    "clue_no_ka": ("  w/o knowledge anchoring", CFG + "clue_no_knowledge_anchoring.yaml"),
    "clue_no_sa": ("  w/o spreading activation", CFG + "clue_no_spreading_activation.yaml"),
    "clue_no_update": ("  w/o query update", CFG + "clue_no_query_update.yaml"),
    # entity-graph baselines, LLM-free (NER keywords; local search by description embedding)
    "lr_local": ("LightRAG-style local (NER)", CFG + "lightrag_ner.yaml", "mode: local"),
    "lr_global": ("LightRAG-style global (NER)", CFG + "lightrag_ner.yaml", "mode: global"),
    "lr_hybrid": ("LightRAG-style hybrid (NER)", CFG + "lightrag_ner.yaml", "mode: hybrid"),
    "lr_mix": ("LightRAG-style mix (NER)", CFG + "lightrag_ner.yaml", "mode: mix"),
    "gr_local": ("GraphRAG-style local search", CFG + "graphrag_local.yaml"),
    # ROGRAG's dual-level retrieval alone, LLM-free (NER keys): fuzzy vs exact (Table 5)
    "rog_fuzzy": ("ROGRAG dual-level fuzzy (NER)", CFG + "rograg_ner.yaml"),
    "rog_exact": ("ROGRAG dual-level exact (NER)", CFG + "rograg_ner.yaml", "match: exact"),
    # LinearRAG and its two ablations (bench/linearrag.py chose its threshold on train)
    "linearrag": ("LinearRAG", CFG + "linearrag.yaml"),
    "linearrag_no_activation": ("  w/o activation", CFG + "linearrag_no_activation.yaml"),
    "linearrag_no_dense_seeds": ("  w/o dense seeds", CFG + "linearrag_no_dense_seeds.yaml"),
}
"""run name: (label, --method, and optionally `key: value` lines, each replacing the one in
that method section of the config)."""


def method_spec(method: str, work: Path) -> str:
    """The --method argument of a run: a config path (a variant written into WORK) or a name."""
    label, spec, *overrides = METHODS[method]
    if not spec.endswith(".yaml"):
        return spec
    if not overrides:
        return str(REPO / spec)
    return config_variant(spec, overrides, work / "configs" / f"{method}.yaml")


def config_variant(spec: str, overrides: list[str] | tuple[str, ...], path: Path) -> str:
    """A method YAML of the repo with each `key: value` override replacing that key's line in
    its method section, written to `path`."""
    lines = (REPO / spec).read_text().splitlines()
    for override in overrides:
        key = override.split(":")[0]
        lines = [f"  {override}" if x.strip().startswith(f"{key}:") else x for x in lines]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run_rows(run: Path) -> list[dict]:
    """A run's result rows from its results.jsonl, with tokens and extras as dicts."""
    rows = [json.loads(x) for x in (run / "results.jsonl").open()]
    for r in rows:
        for key in ("tokens", "extras"):
            r[key] = json.loads(r[key]) if isinstance(r[key], str) else (r[key] or {})
    return rows


def recall_cell(row: dict, k: int) -> str:
    """Recall@k of a result row with its 95% CI, as the tables print it."""
    lo, hi = row[f"R@{k}_ci"]
    return f"{row[f'R@{k}']:.3f} [{lo:.3f}, {hi:.3f}]"


def error_kind(error: str) -> str:
    """A failure's message with its quoted text and numbers masked, so like failures count
    together."""
    return re.sub(r"\d+", "k", re.sub(r"'[^']*'|\"[^\"]*\"", "'...'", error))[:80]


def llm_bench_parser(
    description: str, llm_help: str, llm_questions: int
) -> argparse.ArgumentParser:
    """The arguments the method benches share: --work, --questions, --llm, --llm-questions,
    and LocalLLM's --llm-backend, --llm-threads, --batch-size."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--work", default=work_dir("retrieval"))
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--llm", action="store_true", help=llm_help)
    ap.add_argument("--llm-questions", type=int, default=llm_questions)
    ap.add_argument(
        "--llm-backend",
        choices=["llama", "transformers"],
        default="llama",
        help="llama: a llama.cpp server on 127.0.0.1; transformers: in process with llguidance",
    )
    ap.add_argument("--llm-threads", type=int, default=2, help="llama: the server's threads")
    ap.add_argument("--batch-size", type=int, default=16, help="transformers: prompts per pass")
    return ap


@dataclass(frozen=True)
class LocalLLM:
    """How a bench's LLM rows reach the packaged SmolLM2: a llama.cpp server on 127.0.0.1
    (`threads`) or in process with llguidance-constrained decoding (`batch_size`)."""

    backend: str = "llama"
    threads: int = 2
    batch_size: int = 16

    @classmethod
    def of(cls, args: argparse.Namespace) -> LocalLLM:
        """The choice llm_bench_parser's flags made."""
        return cls(args.llm_backend, args.llm_threads, args.batch_size)

    def keys(self, stack: ExitStack, log: Path) -> dict[str, object]:
        """The `models.llm` settings to use, starting the server in `stack` when there is one
        (it answers one request at a time, so a queued request may wait: a long timeout)."""
        if self.backend == "transformers":
            return {"backend": "transformers", "batch_size": self.batch_size}
        from graphrag_engine.models.llama_server import LlamaServer

        server = stack.enter_context(LlamaServer(n_threads=self.threads, log=log))
        return {
            "backend": "openai",
            "model": server.alias,
            "base_url": server.url,
            "read_timeout_s": 600.0,
        }

    def judge_flags(self, keys: dict[str, object]) -> list[str]:
        """`eval`'s judge flags for the LLM that `keys` (from `keys()`) reaches."""
        return judge_flags(self.backend, self.batch_size, keys.get("model"), keys.get("base_url"))


def judge_flags(
    backend: str, batch_size: int, model: object = None, base_url: object = None
) -> list[str]:
    """`eval`'s judge flags: in process (`transformers`, `batch_size` prompts a pass) or the
    OpenAI-compatible server at `base_url` serving `model`."""
    if backend == "transformers":
        return ["--judge-backend", "transformers", "--judge-batch-size", str(batch_size)]
    return ["--judge-backend", "openai", "--judge-model", str(model), "--base-url", str(base_url)]


def llm_variant_config(
    work: Path, base: str, name: str, overrides: tuple[str, ...], llm_yaml: str, cache: Path
) -> Path:
    """`base` (a method YAML in the repo) with each `key: value` override replacing that key's
    line, its `models:` section replaced by `llm_yaml` with the shared response `cache`."""
    lines = (REPO / base).read_text().split("\nmodels:")[0].splitlines()
    for override in overrides:
        key = override.split(":")[0]
        lines = [f"  {override}" if x.strip().startswith(f"{key}:") else x for x in lines]
    path = work / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    # a bench measures how often answers fail to parse: failures are recorded, not fatal
    failures = "    max_failed_share: 1.0\n"
    path.write_text("\n".join(lines) + "\n" + llm_yaml + f"    cache: {cache}\n" + failures)
    return path


def run_with_llm(
    work: Path,
    tag: str,
    limit: int,
    local: LocalLLM,
    base: str,
    variants: dict[str, tuple[str, tuple[str, ...]]],
    others: list[str],
    cache_name: str,
) -> list[dict]:
    """On MuSiQue dev's first `limit` questions: every LLM variant of `base` (label,
    overrides) with its prompts sent to the packaged SmolLM2 as `local` says, all sharing the
    response cache WORK/`cache_name` so a re-run resumes; then the LLM-free `others` (names of
    METHODS); one eval. Rows of recall@2/5 with 95% CIs, each with its run folder."""
    from graphrag_engine.models import llm_yaml

    index = work / "idx" / "musique"
    questions = DATA / "musique_dev.jsonl"
    runs_dir = work / "runs" / f"musique-{tag}{limit}"
    cache = work / cache_name
    runs, labels = [], {}

    def retrieve(spec: str, name: str) -> None:  # one retrieval-only run, labelled `name`
        runs.append(runs_dir / name)
        q = ["query", str(index), str(questions), "--method", spec, "--limit", str(limit)]
        assert cli([*q, "--retrieval-only", "--label", name, "--out", str(runs[-1])]) == 0

    with ExitStack() as stack:
        section = llm_yaml(**local.keys(stack, work / "llama-server.log"))
        for name, (label, overrides) in variants.items():
            spec = llm_variant_config(work, base, name, overrides, section, cache)
            labels[name] = label
            retrieve(str(spec), name)
    for name in others:
        labels[name] = METHODS[name][0]
        retrieve(method_spec(name, work), name)
    report = work / "reports" / f"musique-{tag}{limit}"
    assert cli(["eval", *map(str, runs), "--out", str(report), "--k", "2,5"]) == 0
    summary = {(r["run"], r["metric"]): r for r in csv.DictReader((report / "summary.csv").open())}
    rows = []
    for run in runs:
        row = {"method": labels[run.name], "run": str(run), "questions": limit}
        for k in (2, 5):
            m = summary[(run.name, f"recall@{k}")]
            row[f"R@{k}"] = round(float(m["mean"]), 3)
            row[f"R@{k}_ci"] = [round(float(m["ci_low"]), 3), round(float(m["ci_high"]), 3)]
        rows.append(row)
    return rows


def batched_vs_single(method, ctx, questions: list) -> tuple[dict, object]:
    """A registered method's questions/s over the whole batch vs one question at a time, in
    process on the same context after a warm-up call; the figures and the batched run's clock."""
    from graphrag_engine.retrieve.types import StageClock

    method(ctx, questions[:4], StageClock())  # warm: models, graph, vectors
    clock = StageClock()
    t0 = time.perf_counter()
    method(ctx, questions, clock)
    batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    for q in questions:
        method(ctx, [q], StageClock())
    single = time.perf_counter() - t0
    n = len(questions)
    figures = {
        "questions": n,
        "batched_q_per_s": round(n / batched, 2),
        "one_at_a_time_q_per_s": round(n / single, 2),
        "ratio": round(single / batched, 2),
    }
    return figures, clock


def run_set(name: str, work: Path, methods: list[str]) -> list[dict]:
    """Index (once), query with every method, evaluate; rows of the result table."""
    corpus, questions = DEV_SETS[name]
    index = work / "idx" / name
    index_seconds = None
    if not (index / "manifest.json").exists():
        t0 = time.perf_counter()
        cfg = work / "alpha0.yaml"
        work.mkdir(parents=True, exist_ok=True)
        cfg.write_text("graph:\n  alpha: 0.0\n")
        assert cli(["index", str(DATA / corpus), "--out", str(index), "--config", str(cfg)]) == 0
        index_seconds = round(time.perf_counter() - t0, 1)
    runs = []
    for method in methods:
        out = work / "runs" / name / method
        args = ["query", str(index), str(DATA / questions), "--method", method_spec(method, work)]
        assert cli([*args, "--retrieval-only", "--label", method, "--out", str(out)]) == 0
        runs.append(str(out))
    report = work / "reports" / name
    assert cli(["eval", *runs, "--out", str(report), "--k", "1,2,5,10"]) == 0
    summary = {(r["run"], r["metric"]): r for r in csv.DictReader((report / "summary.csv").open())}
    rows = []
    for method in methods:
        label = METHODS[method][0]
        s = json.loads((work / "runs" / name / method / "summary.json").read_text())
        row = {
            "set": name,
            "method": label,
            "questions": s["questions"],
            "q_per_s": s["questions_per_s"],
        }
        for k in (2, 5):
            m = summary[(method, f"recall@{k}")]
            row[f"R@{k}"] = round(float(m["mean"]), 3)
            row[f"R@{k}_ci"] = [round(float(m["ci_low"]), 3), round(float(m["ci_high"]), 3)]
        row["index_seconds"] = index_seconds
        rows.append(row)
    return rows
