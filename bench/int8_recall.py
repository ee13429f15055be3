"""How the int8 embedder moves dense retrieval on the *_train sets (where its scheme was
chosen; the dev sets are measured by bench/fast_index.py): Recall@2/@5 of each train set's
questions over its train corpus with fp32 MiniLM, and with the int8 ONNX Runtime MiniLM for the
passages and either int8 or fp32 (what `encode_queries` does) for the questions; with each
path's passage cosine to fp32 and chunk rate (best of three interleaved rounds).

    .venv/bin/python -m bench.int8_recall [--sets musique,hotpotqa]

Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from bench.common import write_result
from bench.retrieval import DATA
from graphrag_engine.models.embed import SentenceTransformerEmbedder
from graphrag_engine.models.onnx_embed import OnnxInt8Embedder
from graphrag_engine.names import titled_chunk


def recall(questions: np.ndarray, passages: np.ndarray, gold: list[list[int]], k: int) -> float:
    """Mean share of each question's gold passages among its k nearest, in points."""
    top = np.argsort(-(questions @ passages.T), axis=1)[:, :k]
    return 100 * float(
        np.mean([len(set(g) & set(t)) / len(g) for g, t in zip(gold, top, strict=True)])
    )


def main() -> None:
    """Embed each train set both ways, score the three pairings and time the chunks."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="musique,hotpotqa")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    fp32, int8 = SentenceTransformerEmbedder(), OnnxInt8Embedder()
    rows, chunks = [], []
    for name in args.sets.split(","):
        corpus = [json.loads(x) for x in (DATA / f"{name}_train_corpus.jsonl").open()]
        asked = [json.loads(x) for x in (DATA / f"{name}_train.jsonl").open()]
        where = {r["id"]: i for i, r in enumerate(corpus)}
        texts = [titled_chunk(r.get("title"), r["text"]) for r in corpus]
        chunks += texts[:200]
        gold = [[where[p] for p in q["supporting_passage_ids"] if p in where] for q in asked]
        kept = [i for i, g in enumerate(gold) if g]
        questions = [asked[i]["question"] for i in kept]
        gold = [gold[i] for i in kept]
        p32, p8 = fp32.encode(texts), int8.encode(texts)
        q32, q8 = fp32.encode(questions), int8.encode(questions)
        base = {k: recall(q32, p32, gold, k) for k in (2, 5)}
        for label, q in (("int8", q8), ("fp32", int8.encode_queries(questions))):
            rows.append(
                {
                    "set": name,
                    "questions": len(questions),
                    "queries": label,
                    "fp32": [round(base[k], 2) for k in (2, 5)],
                    "change": [round(recall(q, p8, gold, k) - base[k], 2) for k in (2, 5)],
                    "passage_cosine": round(float((p8 * p32).sum(1).mean()), 5),
                }
            )
    best = {"fp32": np.inf, "int8": np.inf}
    for _ in range(3):
        for label, model in (("fp32", fp32), ("int8", int8)):
            model.encode(chunks[:16])
            started = time.perf_counter()
            model.encode(chunks)
            best[label] = min(best[label], time.perf_counter() - started)
    rate = {k: round(len(chunks) / v, 1) for k, v in best.items()}
    print(
        f"load average {os.getloadavg()[0]:.2f}; chunks/s {rate}, int8 x{best['fp32'] / best['int8']:.2f}"
    )
    print(
        f"{'set':<10}{'questions':>10}{'queries':>9}{'fp32 R@2/R@5':>15}{'int8 change (pt)':>19}{'cosine':>9}"
    )
    for r in rows:
        print(
            f"{r['set']:<10}{r['questions']:>10}{r['queries']:>9}{r['fp32'][0]:>8.1f} / {r['fp32'][1]:.1f}"
            f"{r['change'][0]:>+11.2f} / {r['change'][1]:+.2f}{r['passage_cosine']:>9.4f}"
        )
    write_result("int8_recall", {"bench": "int8_recall", "rows": rows, "chunks_per_s": rate})


if __name__ == "__main__":
    main()
