"""What an LLM-built graph changes: every LLM-free retrieval method on the engine's default
LLM-free index of MuSiQue train's passages and on the import of HippoRAG's gpt-3.5-turbo OpenIE
of the same passages, over the MuSiQue train questions, in one run: R@2 / R@5 with 95%
bootstrap intervals per index, and the paired difference (import minus default) of R@5 per
method. Also the import's time and the share of it the embedder takes. Passages, questions and
triples are counted from the files.

    python -m bench.imported_graph [--reuse]

It measures; no setting is chosen from it. But the OpenIE exists for MuSiQue train only, and
that is the split on which the LLM-free index's defaults and several methods' settings were
picked (bench/descriptions.py, bench/train_picks.py, bench/linearrag.py): the default index
plays on the ground it was fitted to, so a difference in the import's favour is if anything
understated.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from bench.common import DATA, offline_work, read_jsonl, work_dir, write_result
from bench.descriptions import RUNS, build_or_reuse, recall_rows
from bench.llm_free import METHODS
from graphrag_engine.cli import main as cli
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.eval.metrics import paired_test
from graphrag_engine.store import open_index

CORPUS = "musique_train_corpus.jsonl"
QUESTIONS = "musique_train.jsonl"
OPENIE = "hipporag_openie_musique_train_gpt35.json"
RUNS_HERE = {
    **{k: v for k, v in RUNS.items() if k != "regraphrag_no_expansion_with_ends"},
    "clue": METHODS["clue"],
    "lego_index": METHODS["lego_index"],
}
"""The LLM-free runs of bench/text_graph.py, with Clue-RAG and LEGO on the index's graph."""
EMBED_STAGES = ("embed_chunks", "embed", "synonyms")


def imported(work: Path, reuse: bool) -> tuple[Path, dict]:
    """The OpenIE import at WORK/idx/openie (its wall seconds, stage seconds and the share
    the embedder's stages took)."""
    out = work / "idx" / "openie"
    if reuse and (out / "manifest.json").exists():
        return out, {"reused": True}
    shutil.rmtree(out, ignore_errors=True)
    load_before, t0 = os.getloadavg()[0], time.perf_counter()
    args = ["import", str(DATA / OPENIE), "--corpus", str(DATA / CORPUS), "--out", str(out)]
    assert cli(args) == 0
    seconds = time.perf_counter() - t0
    stages = open_index(out).manifest["stats"]["stages"]
    embed = sum(stages[s]["seconds"] for s in EMBED_STAGES if s in stages)
    return out, {
        "seconds": round(seconds, 1),
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "stage_seconds": {k: v.get("seconds") for k, v in stages.items()},
        "embed_share": round(embed / seconds, 3),
        "counts": stages["import"],
    }


def main() -> None:
    """Build both indexes, run every method on each, compare, write one result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=work_dir("imported_graph"))
    ap.add_argument("--reuse", action="store_true", help="reuse indexes built by an earlier run")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    work = offline_work(args)
    indexes = {}
    indexes["default"], built = build_or_reuse(
        "musique_train", DATA / CORPUS, "sentences", work, args.reuse
    )
    indexes["openie"], imports = imported(work, args.reuse)
    recall, per_q = [], {}
    for name, index in indexes.items():
        rows, per_q[name] = recall_rows(
            index, DATA / QUESTIONS, work, per_question=True, runs=RUNS_HERE
        )
        recall += [{"index": name, **r} for r in rows]
    differences = [
        {
            "method": run,
            **{
                k: round(v, 4)
                for k, v in paired_test(per_q["default"][run], per_q["openie"][run]).items()
            },
        }
        for run in RUNS_HERE
    ]
    write_result(
        "imported_graph",
        {
            "bench": "imported_graph",
            "questions": len(load_questions(DATA / QUESTIONS)),
            "passages": len(read_jsonl(DATA / CORPUS)),
            "default_build": built,
            "import": imports,
            "recall": recall,
            "openie_minus_default_R@5": differences,
        },
        args.tag,
    )
    for r in recall:
        print(
            f"{r['index']:<9}{r['method']:<42}R@2 {r['R@2']:.3f} R@5 {r['R@5']:.3f} {r['R@5_ci']}"
        )
    for d in differences:
        print(d)


if __name__ == "__main__":
    main()
