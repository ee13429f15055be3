"""The entity-graph baselines on an index whose graph an LLM extracted: the first N MuSiQue
passages indexed with LLM triple extraction (gleaning 1) and LLM knowledge units (alpha 1), all
schema-constrained, by the packaged SmolLM2 (served by a real llama.cpp server on 127.0.0.1 with
`--llm-backend llama`, the default, or in-process with `transformers`), then LightRAG-style local / global / hybrid / mix with LLM keywords and with
NER keywords, GraphRAG-style local search, and BM25 / dense / HippoRAG-style PPR from the same
run, and ReGraphRAG (SmolLM2 perspective expansion; w/o Reorg, w/o Rerank, w/o P-exp) with
the structure Algorithm 1 made and the shares of questions whose gold passages its graph
reaches and connects, on the MuSiQue dev questions whose gold passages all lie in the slice.

    .venv/bin/python -m bench.entity_llm_slice [--passages 200] [--work DIR] [--alpha 1.0]
                                               [--gleaning 1]
                                               [--llm-backend llama|transformers|openai]
                                               [--llm-threads 2]
                                               [--index-only]

Prints the index's extraction figures (entities, relations with descriptions, units, LLM calls,
tokens, seconds, parse failures) with three extracted relations and three LLM units next to
their passage, the
keyword stage's parse figures, and Recall@2 / Recall@5 with 95% intervals. The slice and its
questions are written under WORK (never into the project); an index already built there is
reused, and a killed build resumes from its LLM cache (so WORK outside /tmp keeps it across
machine restarts).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from contextlib import ExitStack
from pathlib import Path

from bench import regraphrag, retrieval
from bench.common import DATA, work_dir, write_result
from graphrag_engine.cli import main as cli
from graphrag_engine.models.llama_server import LlamaServer
from graphrag_engine.store import open_index

LLM_VARIANTS = {
    f"lr_llm_{mode}": (f"LightRAG-style {mode} (LLM keywords)", "configs/methods/lightrag.yaml")
    + (f"mode: {mode}",)
    for mode in ("local", "global", "hybrid", "mix")
}
REGRAPHRAG = "configs/methods/regraphrag.yaml"
LLM_VARIANTS |= {  # ReGraphRAG on the LLM-extracted graph (issue 18: structure and recall)
    "rg_full": ("ReGraphRAG full (SmolLM2 expansion)", REGRAPHRAG),
    "rg_noreorg": ("ReGraphRAG w/o Reorg", REGRAPHRAG, "reorganize: false"),
    "rg_norerank": ("ReGraphRAG w/o Rerank", REGRAPHRAG, "rerank: false"),
    "rg_noexp": ("ReGraphRAG w/o P-exp (no LLM)", REGRAPHRAG, "expansion: false"),
}
BASELINES = ["bm25", "naive", "hipporag", "lr_local", "lr_global", "lr_hybrid", "lr_mix"]
BASELINES += ["gr_local"]


def write_slice(work: Path, passages: int) -> tuple[Path, Path, int]:
    """The first `passages` corpus records and the dev questions they fully support."""
    corpus = [json.loads(x) for x in (DATA / "musique_corpus.jsonl").open()][:passages]
    ids = {p["id"] for p in corpus}
    questions = [json.loads(x) for x in (DATA / "musique_dev.jsonl").open()]
    kept = [q for q in questions if set(q["supporting_passage_ids"]) <= ids]
    work.mkdir(parents=True, exist_ok=True)
    corpus_file, questions_file = work / "corpus.jsonl", work / "questions.jsonl"
    corpus_file.write_text("".join(json.dumps(p) + "\n" for p in corpus))
    questions_file.write_text("".join(json.dumps(q) + "\n" for q in kept))
    return corpus_file, questions_file, len(kept)


def build_index(
    work: Path, corpus: Path, llm_yaml: str, alpha: float, gleaning: int
) -> tuple[Path, float | None]:
    """Index the slice with LLM triples and units (reused when already built)."""
    index = work / "idx"
    if (index / "manifest.json").exists():
        return index, None
    cfg = work / "index.yaml"
    cfg.write_text(
        f"graph:\n  alpha: {alpha}\nextraction:\n  enabled: true\n  gleaning: {gleaning}\n{llm_yaml}"
    )
    t0 = time.perf_counter()
    assert cli(["index", str(corpus), "--out", str(index), "--config", str(cfg)]) == 0
    return index, round(time.perf_counter() - t0, 1)


def show_extraction(index: Path) -> dict:
    """The extraction stage's figures and three extracted relations beside their passage."""
    idx = open_index(index)
    stats = idx.manifest["stats"]["stages"]
    entities = idx.table("entities").to_pylist()
    relations = idx.table("relations").to_pylist()
    described = [r for r in relations if r.get("description")]
    print("extract stage:", json.dumps(stats.get("extract", {})))
    print(
        f"entities {len(entities)}, relations {len(relations)}, with descriptions {len(described)}"
    )
    chunks = {c["chunk_id"]: c for c in idx.table("chunks").to_pylist()}
    names = {e["entity_id"]: e["name"] for e in entities}
    shown = 0
    for r in described:
        source = (r.get("chunk_ids") or [None])[0]
        if source is None or source not in chunks:
            continue
        print(f"\n[{names[r['src']]} -> {names[r['dst']]}] {r['description']}")
        print(f"  passage: {chunks[source]['text'][:300]}")
        shown += 1
        if shown == 3:
            break
    units = [u for u in idx.table("units").to_pylist() if u["origin"] == "llm"]
    print(f"\nLLM units {len(units)} (units stage: {json.dumps(stats.get('units', {}))})")
    shown_chunks: list[str] = []
    for u in units:
        if u["chunk_id"] in shown_chunks or len(shown_chunks) == 3:
            continue
        shown_chunks.append(u["chunk_id"])
        mine = [x["text"] for x in units if x["chunk_id"] == u["chunk_id"]]
        print(f"\npassage: {chunks[u['chunk_id']]['text'][:300]}")
        for text in mine[:4]:
            print(f"  unit: {text}")
    return {
        "llm_units": len(units),
        "units_stage": stats.get("units", {}),
        "extract": stats.get("extract", {}),
        "entities": len(entities),
        "relations": len(relations),
        "described_relations": len(described),
    }


def main() -> None:
    """Slice, index, query every method, evaluate; print the tables and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=200)
    ap.add_argument("--work", default=work_dir("entity-llm-slice"))
    ap.add_argument("--alpha", type=float, default=1.0, help="share of tokens in LLM units")
    ap.add_argument("--gleaning", type=int, default=1, help="extraction gleaning rounds")
    ap.add_argument("--llm-backend", default="llama", choices=["llama", "transformers", "openai"])
    ap.add_argument("--llm-threads", type=int, default=2, help="llama.cpp server threads")
    ap.add_argument("--index-only", action="store_true", help="build and show the index only")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    corpus, questions, n_questions = write_slice(work, args.passages)
    print(f"slice: {args.passages} passages, {n_questions} dev questions fully inside it")
    with ExitStack() as stack:
        if args.llm_backend == "llama":
            server = stack.enter_context(
                LlamaServer(n_threads=args.llm_threads, log=work / "llama-server.log")
            )
            llm_yaml, llm_flags = server.llm_yaml(), server.query_flags()
        else:
            llm_yaml = f"models:\n  llm:\n    backend: {args.llm_backend}\n"
            llm_flags = ["--llm-backend", args.llm_backend]
        index, seconds = build_index(work, corpus, llm_yaml, args.alpha, args.gleaning)
        facts = show_extraction(index) | {"index_seconds": seconds, "gleaning": args.gleaning}
        if not args.index_only:
            query_all(work, index, questions, n_questions, llm_flags, facts, args.passages)


def query_all(
    work: Path,
    index: Path,
    questions: Path,
    n_questions: int,
    llm_flags: list[str],
    facts: dict,
    passages: int,
) -> None:
    """Every method on the slice's questions, evaluated; prints the table and a JSON line."""
    retrieval.METHODS.update(LLM_VARIANTS)
    runs = []
    for method in [*BASELINES, *LLM_VARIANTS]:
        out = work / "runs" / method
        spec = retrieval.method_spec(method, work)
        q = ["query", str(index), str(questions), "--method", spec, "--retrieval-only"]
        assert cli([*q, *llm_flags, "--label", method, "--out", str(out)]) == 0
        runs.append(out)
    report = work / "report"
    assert cli(["eval", *map(str, runs), "--out", str(report), "--k", "2,5"]) == 0
    summary = {(r["run"], r["metric"]): r for r in csv.DictReader((report / "summary.csv").open())}
    rows = []
    print(f"\n{'method':<40}{'R@2 [95% CI]':<24}{'R@5 [95% CI]':<24}{'keyword parse'}")
    for out in runs:
        s = json.loads((out / "summary.json").read_text())
        results = retrieval.run_rows(out)
        fallbacks = sum(bool(r["extras"].get("keyword_fallback")) for r in results)
        kw = [u for key, u in s.get("llm", {}).items() if key.startswith("keywords/")]
        row = {"method": retrieval.METHODS[out.name][0], "questions": s["questions"]}
        for k in (2, 5):
            m = summary[(out.name, f"recall@{k}")]
            row[f"R@{k}"] = round(float(m["mean"]), 3)
            row[f"R@{k}_ci"] = [round(float(m["ci_low"]), 3), round(float(m["ci_high"]), 3)]
        if out.name.startswith("lr_llm_"):
            row["keyword_fallbacks"] = fallbacks
            row["keyword_parse_failures"] = sum(u["parse_failures"] for u in kw)
        rows.append(row)
        cells = [
            f"{row[f'R@{k}']:.3f} [{row[f'R@{k}_ci'][0]:.3f}, {row[f'R@{k}_ci'][1]:.3f}]"
            for k in (2, 5)
        ]
        parse = (
            f"{n_questions - fallbacks}/{n_questions} parsed" if "keyword_fallbacks" in row else ""
        )
        print(f"{row['method']:<40}{cells[0]:<24}{cells[1]:<24}{parse}")
    figures = regraphrag.STRUCTURE + regraphrag.GOLD
    print(
        f"\n{'ReGraphRAG structure, mean per question':<40}"
        + "".join(f"{k[:12]:>13}" for k in figures)
    )
    mentioned_in = regraphrag.entity_passages(index)
    for out, row in zip(runs, rows, strict=True):
        if out.name.startswith("rg_"):
            row |= regraphrag.run_figures(mentioned_in, out)
            cells = "".join(f"{row['structure'][k]:>13}" for k in figures)
            print(f"{row['method']:<40}{cells}  expansion {json.dumps(row['expansion'])}")
    write_result(
        "entity_llm_slice", {"slice": passages, "questions": n_questions, **facts, "rows": rows}
    )


if __name__ == "__main__":
    main()
