"""GraphRAG-style global search on a slice of UltraDomain CS, end to end with the packaged
SmolLM2 (a floor: a 135M model writes the community reports, the map points and the reduce
answers): what it costs per question, and which reports the level selection reads.

    .venv/bin/python -m bench.global_search [--chars 20000] [--questions 8] [--level 1]
        [--work DIR] [--batch-size 16] [--reports llm|extractive]

The slice is the first `--chars` characters of each of the four CS books. The index is LLM-free
(spaCy entities, co-occurrence relations) with hierarchical Leiden communities and SmolLM2
reports; the query runs `graphrag_global` over the first `--questions` CS questions with
long answers (UltraDomain has no short gold answers) and the papers' budgets fitted to
SmolLM2's window. The result holds the index's report cost, the reports selected at each
level (leaf-most at or below it), and per question the map prompts, tokens by stage and
seconds. With `--reports extractive` the communities get extractive reports (no LLM at index
time) and PankRAG with every step abstract (`plan: direct, scope: abstract`, its report search)
answers the same questions with SmolLM2 beside global search; the result is tagged
`extractive`.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from bench.common import DATA, read_jsonl, work_dir, write_result
from graphrag_engine.cli import main as cli


def slice_corpus(work: Path, chars: int) -> Path:
    """The first `chars` characters of every CS book, as a JSONL corpus under `work`."""
    out = work / f"cs-{chars}.jsonl"
    if not out.exists():
        rows = read_jsonl(DATA / "ultradomain_cs_corpus.jsonl")
        with out.open("w") as f:
            for r in rows:
                cut = {"id": r["id"], "title": r["title"], "text": r["text"][:chars]}
                f.write(json.dumps(cut) + "\n")
    return out


def configs(work: Path, batch_size: int, level: int, reports: str = "llm") -> tuple[Path, Path]:
    """The index config (communities with SmolLM2 or extractive reports) and the query
    config."""
    llm = f"models:\n  llm:\n    backend: transformers\n    batch_size: {batch_size}\n"
    index = work / "index.yaml"
    with_llm = "true" if reports == "llm" else "false"
    index.write_text(
        f"communities:\n  enabled: true\n  max_cluster_size: 10\n  reports: {with_llm}\n"
        "  report_max_tokens: 160\n" + llm + "    max_failed_share: 1.0\n"
    )
    query = work / "global.yaml"
    query.write_text(
        f"method: graphrag_global\ngraphrag_global:\n  community_level: {level}\n"
        "generation:\n  max_tokens: 200\n  long_max_tokens: 200\n" + llm
    )
    return index, query


def main() -> None:
    """Index the slice, run global search, write bench/results/global_search.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=20_000)
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--reports", default="llm", choices=["llm", "extractive"])
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tag = "" if args.reports == "llm" else args.reports
    work = Path(args.work or work_dir("global_search" + (f"-{tag}" if tag else "")))
    work.mkdir(parents=True, exist_ok=True)
    corpus = slice_corpus(work, args.chars)
    index_cfg, query_cfg = configs(work, args.batch_size, args.level, args.reports)
    index = work / "idx"
    if not (index / "manifest.json").exists():
        assert cli(["index", str(corpus), "--out", str(index), "--config", str(index_cfg)]) == 0
    run = work / "run"
    questions = DATA / "ultradomain_cs_dev.jsonl"
    query = ["query", str(index), str(questions), "--method", str(query_cfg)]
    assert cli([*query, "--limit", str(args.questions), "--out", str(run)]) in (0, 3)
    result = {
        "chars_per_book": args.chars,
        "reports": args.reports,
        "index": index_figures(index),
        "selection": selection(index),
        "query": query_figures(run),
    }
    if args.reports == "extractive":
        result["pankrag_abstract"] = pankrag_abstract(work, index, questions, args)
    print(json.dumps(result, indent=2))
    write_result("global_search", result, tag=tag)


def pankrag_abstract(work: Path, index: Path, questions: Path, args: argparse.Namespace) -> dict:
    """PankRAG with every step abstract over the same questions: its report search reads the
    index's reports, SmolLM2 answers; seconds and tokens per question, and how many steps fell
    back to local search for want of reports."""
    cfg = work / "pankrag.yaml"
    cfg.write_text(
        "method: pankrag\npankrag:\n  plan: direct\n  scope: abstract\n"
        "generation:\n  max_tokens: 200\n  long_max_tokens: 200\n"
        f"models:\n  llm:\n    backend: transformers\n    batch_size: {args.batch_size}\n"
    )
    run = work / "run-pankrag"
    query = ["query", str(index), str(questions), "--method", str(cfg)]
    assert cli([*query, "--limit", str(args.questions), "--out", str(run)]) in (0, 3)
    figures, rows = run_figures(run)
    return {**figures, "abstract_as_local": [r["extras"].get("abstract_as_local", 0) for r in rows]}


def index_figures(index: Path) -> dict:
    """Chunks, entities, communities and the report stage's calls, tokens and seconds."""
    manifest = json.loads((index / "manifest.json").read_text())
    stages = manifest["stats"]["stages"]
    c = stages["communities"]
    keep = ("items", "levels", "reports", "parse_failures", "model_calls", "seconds")
    return {
        "chunks": stages["ingest_chunk"].get("chunks"),
        "entities": stages["resolve_graphs"].get("items"),
        "communities": {k: c.get(k) for k in keep},
        "report_tokens": c.get("prompt_tokens", 0) + c.get("completion_tokens", 0),
    }


def selection(index: Path) -> dict:
    """Per level: reported communities at that level, and the leaf-most ones global search
    reads at or below it."""
    from graphrag_engine.config.query import QueryConfig
    from graphrag_engine.retrieve.communities import communities
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.store import open_index

    ctx = QueryContext(open_index(index), QueryConfig(), Path(work_dir("global_search-ctx")))
    comms = communities(ctx, need_reports=True)
    levels = sorted({comms.level[c] for c in comms.report})
    return {
        str(lv): {
            "at_level": sum(comms.level[c] == lv for c in comms.report),
            "selected": len(comms.reported_at(lv)),
        }
        for lv in levels
    }


def query_figures(run: Path) -> dict:
    """Per question: seconds, tokens by stage, map prompts and key points; the budget."""
    figures, rows = run_figures(run)
    summary = json.loads((run / "summary.json").read_text())
    return {
        **figures,
        "answer_style": summary["answer_style"],
        "context_budget": summary["context_budget"],
        "map_prompts": [r["extras"]["map_prompts"] for r in rows],
        "points": [r["extras"]["points"] for r in rows],
        "reports_read": [r["extras"]["reports"] for r in rows],
    }


def run_figures(run: Path) -> tuple[dict, list[dict]]:
    """A run folder's questions, seconds and tokens per question, failures and answer lengths,
    and its result rows."""
    from graphrag_engine.results import read_rows

    summary = json.loads((run / "summary.json").read_text())
    rows = read_rows(run / "results.parquet")
    figures = {
        "questions": summary["questions"],
        "seconds_per_question": round(summary["seconds"] / summary["questions"], 2),
        "stage_seconds": summary["stage_seconds"],
        "tokens_per_question": summary["query_tokens_per_question"],
        "failed": summary["failed_questions"],
        "answer_words": [len((r["answer"] or "").split()) for r in rows],
    }
    return figures, rows


if __name__ == "__main__":
    main()
