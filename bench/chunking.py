"""Streaming ingest + chunking on a generated corpus larger than a typical RAM budget.

Generates a JSONL corpus of --size-gb (default 2 GB) and a reference corpus 10x smaller,
indexes each in a fresh process, and prints peak RSS, throughput and their ratio, measured
in the same run. Bounded memory means the big corpus peaks near the small one.

    .venv/bin/python -m bench.chunking --size-gb 2 --workdir /tmp/chunk-bench
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

from bench.common import index_in_child, work_dir, write_result

WORDS = (
    "harbour island council river market railway engineer composer opera bridge museum storm "
    "archive festival captain treaty village school painter station ferry lighthouse governor "
    "merchant tower garden library theatre canal mill quarry valley orchard chapel square"
).split()


def generate(path: Path, size_bytes: int, seed: int) -> int:
    """Write synthetic documents (~3 KB each, unique) until the file reaches size_bytes."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(5000):
        words = rng.choices(WORDS, k=rng.randint(8, 24))
        sentences.append(" ".join(words).capitalize() + ".")
    n = 0
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < size_bytes:
            text = f"Record {n} of the bench corpus. " + " ".join(rng.choices(sentences, k=24))
            line = json.dumps({"id": f"b{n}", "title": f"Doc {n}", "text": text}) + "\n"
            fh.write(line)
            written += len(line)
            n += 1
    return n


def index_run(corpus: Path, out: Path) -> dict:
    """Index `corpus` (ingest + chunking only) in a new process; its seconds and peak RSS."""
    run = index_in_child(corpus, out, "graph:\n  enabled: false\n")
    stage = run["manifest"]["stats"]["stages"]["ingest_chunk"]
    seconds = run["seconds"]
    return {
        "corpus_mib": round(corpus.stat().st_size / 2**20, 1),
        "documents": stage["items"],
        "chunks": stage["chunks"],
        "tokens": stage["tokens"],
        "seconds": round(seconds, 1),
        "mib_per_s": round(corpus.stat().st_size / 2**20 / seconds, 2),
        "peak_rss_mib": run["peak_rss_mib"],
        "peak_rss_exact": run["peak_rss_exact"],
    }


def main() -> None:
    """Run the benchmark and print a table and a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=2.0)
    parser.add_argument("--workdir", default=work_dir("chunk"))
    parser.add_argument("--keep", action="store_true", help="keep the generated corpora")
    args = parser.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    big, small = work / "big.jsonl", work / "small.jsonl"
    size = int(args.size_gb * 2**30)
    generate(small, size // 10, seed=1)
    generate(big, size, seed=2)
    # the small (reference) run goes first: ru_maxrss of children is a running maximum
    ref = index_run(small, work / "idx-small")
    res = index_run(big, work / "idx-big")
    ratio = res["peak_rss_mib"] / ref["peak_rss_mib"]
    print(
        f"{'corpus':<10}{'MiB':>9}{'docs':>10}{'chunks':>10}{'s':>8}{'MiB/s':>8}{'peak RSS MiB':>14}"
    )
    for name, r in (("reference", ref), ("big", res)):
        print(
            f"{name:<10}{r['corpus_mib']:>9}{r['documents']:>10}{r['chunks']:>10}"
            f"{r['seconds']:>8}{r['mib_per_s']:>8}{r['peak_rss_mib']:>14}"
        )
    print(
        f"corpus size ratio {res['corpus_mib'] / ref['corpus_mib']:.1f}x, peak RSS ratio {ratio:.2f}x"
    )
    write_result(
        "chunking",
        {"bench": "chunking", "reference": ref, "big": res, "peak_rss_ratio": round(ratio, 3)},
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
