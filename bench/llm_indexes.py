"""What the tree and skeleton methods' LLM variants cost to index (Clue-RAG's cost metric):
RAPTOR, SiReRAG and KET-RAG, each built from its own index config twice over the same slice
of MuSiQue passages, once LLM-free (the engine's default) and once with the packaged SmolLM2
doing what the paper's LLM does: RAPTOR's cluster summaries, SiReRAG's propositions and
summaries, KET-RAG's triples on its skeleton's core chunks.

    .venv/bin/python -m bench.llm_indexes [--passages 200] [--work DIR] [--batch-size 16]
        [--methods raptor,sirerag,ketrag] [--tag TAG]

Each build runs as `graphrag-engine index` in a child process with nothing cached (a fresh
folder, its own LLM cache). Per build: wall seconds, peak RSS, and for every stage that
called the model its calls, prompt and completion tokens, parse failures and seconds; the
LLM build's tokens per passage and its seconds against the LLM-free build's. SmolLM2 is a
floor for the summaries' and triples' quality, and its tokens are the engine's prompts as a
135M model answers them (a larger model writes longer summaries and more triples).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from bench.common import DATA, REPO, index_in_child, offline_work, work_dir, write_result

VARIANTS = {  # method: (its index config, what turns its LLM steps on)
    "raptor": ("index-raptor.yaml", {"tree": {"summaries": "llm"}}),
    "sirerag": ("index-sirerag.yaml", {"graph": {"alpha": 1.0}, "tree": {"summaries": "llm"}}),
    "ketrag": ("index-ketrag.yaml", {"extraction": {"enabled": True}}),
}
STAGE_FIELDS = ("model_calls", "prompt_tokens", "completion_tokens", "parse_failures", "seconds")


def slice_corpus(work: Path, passages: int) -> Path:
    """The first `passages` MuSiQue dev passages as a JSONL corpus under `work`."""
    out = work / f"musique-{passages}.jsonl"
    with (DATA / "musique_corpus.jsonl").open() as f:
        lines = [line for _, line in zip(range(passages), f, strict=False)]
    out.write_text("".join(lines))
    return out


def config_text(method: str, llm: bool, batch: int) -> str:
    """The method's shipped index config, with its LLM steps and SmolLM2 added when `llm`."""
    name, switch = VARIANTS[method]
    cfg = yaml.safe_load((REPO / "configs" / name).read_text())
    if llm:
        for section, values in switch.items():
            cfg.setdefault(section, {}).update(values)
        cfg["models"] = {"llm": {"backend": "transformers", "batch_size": batch}}
    return yaml.safe_dump(cfg, sort_keys=False)


def build_figures(built: dict, passages: int) -> dict:
    """Seconds, peak RSS and each model stage's calls, tokens and failures of one build."""
    stages = built["manifest"]["stats"]["stages"]
    model = {
        name: {k: s.get(k, 0) for k in STAGE_FIELDS}
        for name, s in stages.items()
        if s.get("prompt_tokens", 0)
    }
    tokens = sum(s["prompt_tokens"] + s["completion_tokens"] for s in model.values())
    return {
        "seconds": round(built["seconds"], 1),
        "peak_rss_mb": built["peak_rss_mb"],
        "chunks": stages["ingest_chunk"].get("chunks"),
        "index_tokens": tokens,
        "index_tokens_per_passage": round(tokens / passages, 1),
        "model_stages": model,
    }


def main() -> None:
    """Build every variant with and without SmolLM2; write bench/results/llm_indexes.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--methods", default=",".join(VARIANTS))
    ap.add_argument("--work", default=work_dir("llm_indexes"))
    ap.add_argument("--tag", default="", help="names the result when --methods is a part")
    args = ap.parse_args()
    work = offline_work(args)
    corpus = slice_corpus(work, args.passages)
    rows, stages = [], {}
    for method in args.methods.split(","):
        free = build_figures(
            index_in_child(corpus, work / f"{method}-free", config_text(method, False, 0)),
            args.passages,
        )
        text = config_text(method, True, args.batch_size)
        with_llm = build_figures(
            index_in_child(corpus, work / f"{method}-llm", text), args.passages
        )
        rows.append(
            {
                "method": method,
                "free_seconds": free["seconds"],
                "llm_seconds": with_llm["seconds"],
                "llm_over_free": round(with_llm["seconds"] / free["seconds"], 1),
                "index_tokens": with_llm["index_tokens"],
                "index_tokens_per_passage": with_llm["index_tokens_per_passage"],
                "chunks": with_llm["chunks"],
                "llm_peak_rss_mb": with_llm["peak_rss_mb"],
            }
        )
        stages[method] = with_llm["model_stages"]
        print(json.dumps(rows[-1]), flush=True)
    write_result(
        "llm_indexes",
        {"passages": args.passages, "model": "SmolLM2-135M-Instruct", "builds": rows,
         "model_stages": stages},
        tag=args.tag,
    )  # fmt: skip


if __name__ == "__main__":
    main()
