"""LEGO-GraphRAG's 21 instances (configs/lego/, the paper's Table 4) on WebQSP's per-question graphs and on the
entity graph of a multi-hop index: per-module answer-entity F1 / recall and seconds per
question, retrieval only.

    .venv/bin/python -m bench.lego [--instances 0-20] [--webqsp N] [--multihop N] [--llm N]
                                   [--index DIR] [--work DIR] [--cross-encoder DIR]

`--index` is an index of the multi-hop corpus (default: the MuSiQue index bench/retrieval.py
builds). Instances that score with the LLM run on the first `--llm` questions only (SmolLM2 on
2 cores); instances whose cross-encoder or fine-tuned model folder is absent are skipped with
the reason; `--cross-encoder` names a local cross-encoder folder to use in place of the
configs' bge-reranker-v2-m3 (e.g. the MiniLM one bench/lego_finetune.py trains). Seconds are per
question and include loading the module's model the first time.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
from pathlib import Path

from bench.common import DATA, REPO, work_dir, write_result
from graphrag_engine.cli import main as cli

METRICS = ["se_entity_f1", "se_entity_recall", "pf_entity_f1", "pf_entity_recall"]
METRICS += ["pr_entity_f1", "pr_entity_recall", "seconds_se", "seconds_pf", "seconds_pr"]


def instance_ids(spec: str) -> list[int]:
    """'0-20', '0,3,8' or a mix ('0-6,8-13,15')."""
    ids: list[int] = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        ids += range(int(a), int(b or a) + 1)
    return ids


def missing_model(text: str) -> str | None:
    """Why an instance cannot run here (a model folder it names is absent), or None."""
    for path in re.findall(r"^\s*model: (\S+)", text, flags=re.M):
        if not (REPO / path).exists() and not Path(path).exists():
            return f"model folder {path} is absent"
    return None


def run(config: Path, index: str, questions: Path, limit: int, out: Path) -> dict:
    """One retrieval-only query run; its per-metric means from `graphrag-engine eval`."""
    args = ["query", index, str(questions), "--method", str(config), "--limit", str(limit)]
    assert cli([*args, "--retrieval-only", "--label", out.name, "--out", str(out)]) == 0
    report = out.parent / f"{out.name}-report"
    assert cli(["eval", str(out), "--out", str(report), "--k", "5"]) == 0
    means = {r["metric"]: float(r["mean"]) for r in csv.DictReader((report / "summary.csv").open())}
    summary = json.loads((out / "summary.json").read_text())
    llm = summary.get("llm", {}).values()
    return {
        "questions": summary["questions"],
        **{m: means.get(m) for m in METRICS},
        "llm_tokens_per_question": sum(
            v for k, v in summary["query_tokens_per_question"].items() if k.startswith("lego_")
        ),
        "llm_prompts": sum(u["calls"] + u["cached_calls"] for u in llm),
        "llm_parse_failures": sum(u["parse_failures"] for u in llm),
    }


def main() -> None:
    """Run the instances and print one table per dataset and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", default="0-20")
    ap.add_argument("--webqsp", type=int, default=200, help="WebQSP dev questions")
    ap.add_argument("--multihop", type=int, default=10, help="MuSiQue dev questions")
    ap.add_argument("--llm", type=int, default=10, help="questions for LLM-scored instances")
    ap.add_argument("--index", default=str(Path(work_dir("retrieval")) / "idx" / "musique"))
    ap.add_argument("--work", default=work_dir("lego"))
    ap.add_argument("--cross-encoder", default=None, help="local folder for bge-reranker-v2-m3")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sets = [("webqsp", "none", DATA / "webqsp_dev.jsonl", args.webqsp, "question")]
    if args.multihop and (Path(args.index) / "manifest.json").exists():
        sets.append(("musique", args.index, DATA / "musique_dev.jsonl", args.multihop, "index"))
    elif args.multihop:
        print(f"skipping the multi-hop set: no index at {args.index} (run bench/retrieval.py)")
    results = []
    for i in instance_ids(args.instances):
        src = REPO / "configs" / "lego" / f"instance_{i:02d}.yaml"
        text = src.read_text()
        if args.cross_encoder:
            text = text.replace("models/bge-reranker-v2-m3", args.cross_encoder)
        title = text.splitlines()[0].split("): ", 1)[-1]  # "SE ... | PF ... | PR ..."
        why = missing_model(text)
        if why:
            print(
                f"skipping instance {i:02d}: {why} (see docs/querying.md, LEGO-GraphRAG instances)"
            )
            results.append({"instance": i, "title": title, "skipped": why})
            continue
        uses_llm = "scorer: llm" in text
        for name, index, questions, limit, graph in sets:
            cfg = work / f"instance_{i:02d}_{name}.yaml"
            cfg.write_text(text.replace("graph: question", f"graph: {graph}"))
            n = min(limit, args.llm) if uses_llm else limit
            row = run(cfg, index, questions, n, work / "runs" / f"{name}_{i:02d}")
            results.append({"instance": i, "title": title, "set": name, **row})
    for name, *_ in sets:
        print(f"\n{name}: answer-entity F1 / recall after each module, seconds per question")
        print(
            f"{'#':<4}{'q':>5}{'SE F1/R':>14}{'PF F1/R':>14}{'PR F1/R':>14}{'s SE/PF/PR':>24}"
            f"{'LLM tok/q':>11}{'prompts':>9}{'failed':>8}  instance"
        )
        for r in results:
            if r.get("set") != name:
                continue
            fr = [
                f"{r[f'{m}_entity_f1']:.3f}/{r[f'{m}_entity_recall']:.3f}"
                for m in ("se", "pf", "pr")
            ]
            sec = "/".join(f"{r[f'seconds_{m}']:.4f}" for m in ("se", "pf", "pr"))
            llm = f"{r['llm_tokens_per_question']:>11.0f}{r['llm_prompts']:>9}{r['llm_parse_failures']:>8}"
            print(
                f"{r['instance']:<4}{r['questions']:>5}{fr[0]:>14}{fr[1]:>14}{fr[2]:>14}{sec:>24}"
                f"{llm}  {r['title']}"
            )
    for r in results:
        if "skipped" in r:
            print(f"skipped {r['instance']:02d}: {r['skipped']}")
    write_result("lego", {"bench": "lego", "results": results})


if __name__ == "__main__":
    main()
