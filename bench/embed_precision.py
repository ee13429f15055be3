"""The int8 embedder path against fp32 MiniLM (issue 22 item 3): texts/s of both on the same
passages in the same run, and dense-retrieval Recall@2 / Recall@5 on the MuSiQue, 2Wiki and
HotpotQA dev sets over their whole corpora, with the paired difference and its 95% interval.

    .venv/bin/python bench/embed_precision.py [--sets musique,2wiki,hotpotqa] [--threads 1]

Passages are embedded as the index embeds chunks ("title\\ntext"); a passage longer than the
model's 256 tokens is cut by the model, as in `bench/retrieval.py`'s reference check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)  # `bench/kernels.py` must not shadow the `kernels` package

import numpy as np  # noqa: E402

from engine.eval.metrics import bootstrap_ci, paired_test, recall_at_k  # noqa: E402
from engine.models.embed import SentenceTransformerEmbedder  # noqa: E402

DATA = REPO.parent / "shared" / "data"
SETS = {
    "musique": ("musique_corpus.jsonl", "musique_dev.jsonl"),
    "2wiki": ("2wikimultihopqa_corpus.jsonl", "2wikimultihopqa_dev.jsonl"),
    "hotpotqa": ("hotpotqa_corpus.jsonl", "hotpotqa_dev.jsonl"),
}


def main() -> None:
    """Embed each set with both precisions; print speed and recall rows."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="musique,2wiki,hotpotqa")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    models = {p: SentenceTransformerEmbedder(precision=p) for p in ("fp32", "int8")}
    print(f"{args.threads} thread(s); load average {os.getloadavg()[0]:.2f}")
    print("| set | passages | fp32 texts/s | int8 texts/s | x fp32 | R@2 fp32 | R@2 int8 | "
          "R@5 fp32 | R@5 int8 | int8 - fp32: R@2, R@5 [95% CI] | mean cosine fp32 vs int8 |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.sets.split(","):
        corpus_file, questions_file = SETS[name]
        corpus = [json.loads(x) for x in (DATA / corpus_file).open()]
        questions = [json.loads(x) for x in (DATA / questions_file).open()]
        texts = [f"{p['title']}\n{p['text']}" for p in corpus]
        ids = [p["id"] for p in corpus]
        vecs, speed = {}, {}
        for p, emb in models.items():
            t0 = time.perf_counter()
            vecs[p] = emb.encode(texts)
            speed[p] = len(texts) / (time.perf_counter() - t0)
        qs = {p: emb.encode([q["question"] for q in questions]) for p, emb in models.items()}
        rec = {}
        for p in models:
            top = np.argsort(-(qs[p] @ vecs[p].T), axis=1, kind="stable")[:, :5]
            ranked = [[ids[i] for i in row] for row in top]
            for k in (2, 5):
                rec[p, k] = [
                    recall_at_k(r, q["supporting_passage_ids"], k)
                    for r, q in zip(ranked, questions, strict=True)
                ]
        d2, d5 = (paired_test(rec["fp32", k], rec["int8", k]) for k in (2, 5))
        cos = float(np.mean(np.sum(vecs["fp32"] * vecs["int8"], axis=1)))

        def fmt(p: str, k: int, rec: dict = rec) -> str:
            mean, lo, hi = bootstrap_ci(rec[p, k])
            return f"{mean:.3f} [{lo:.3f}, {hi:.3f}]"

        print(f"| {name} | {len(texts):,} | {speed['fp32']:.1f} | {speed['int8']:.1f} | "
              f"{speed['int8'] / speed['fp32']:.2f} | {fmt('fp32', 2)} | {fmt('int8', 2)} | "
              f"{fmt('fp32', 5)} | {fmt('int8', 5)} | {_diff(d2)}, {_diff(d5)} | {cos:.4f} |", flush=True)  # fmt: skip


def _diff(d: dict) -> str:
    return f"{d['mean_diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"


if __name__ == "__main__":
    main()
