"""Peak memory of ingest + chunking on one huge document: a .txt of real text (the UltraDomain
CS books of ../shared/data repeated to the size asked), read and chunked in a fresh process
each time, segment by segment (the engine) and, as the reference measured in the same run, in
one tokenizer pass over the whole text (the engine before segmenting; skipped above
--whole-limit MB, where it would not fit in memory).

    .venv/bin/python -m bench.huge_document [--sizes 50,500] [--work DIR] [--whole-limit 50]

Prints, per size and path: peak RSS (ru_maxrss), chunks, the largest chunk in tokens, seconds.

With --full, a whole default index of each document instead (every stage after chunking), in
a fresh process per size, smallest first. The smallest size pays the model work; its
embedding and NER caches are copied beside each larger index before it runs, and since the
larger documents repeat the same text every chunk, unit, entity and relation text is found
there: what grows with the size is then what the build holds per row, which is what this
measures (peak RSS per stage from the manifest, ratio to the smallest size).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import DATA, REPO, work_dir, write_result

CHILD = """
import json, resource, sys, time
import graphrag_engine.index.chunking as chunking
from graphrag_engine.config import ChunkingConfig
from graphrag_engine.index.ingest import DocumentReader
if {whole}:
    chunking.SEGMENT_CHARS = 1 << 62
t0 = time.perf_counter()
n = biggest = 0
for doc, chunks in chunking.chunk_documents(DocumentReader([{path!r}]), ChunkingConfig()):
    for c in chunks:  # a huge document's chunks come as they are cut, as the index reads them
        n += 1
        biggest = max(biggest, c.n_tokens)
    del doc, chunks
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"peak_rss_mb": round(peak / 2**20), "chunks": n, "max_chunk_tokens": biggest,
                  "seconds": round(time.perf_counter() - t0, 1)}}))
"""


def make_document(path: Path, megabytes: int) -> None:
    """Write `megabytes` MB of real book text (repeated) as one .txt document."""
    if path.exists() and path.stat().st_size >= megabytes * 2**20:
        return
    books = [json.loads(x)["text"] for x in (DATA / "ultradomain_cs_corpus.jsonl").open()]
    block = "\n\n".join(books).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.write(b"# One huge document\n")
        written = 0
        while written < megabytes * 2**20:
            part = block[: megabytes * 2**20 - written]
            fh.write(part)
            written += len(part)


def measure(path: Path, whole: bool) -> dict:
    """Ingest + chunk `path` in a fresh process; its peak RSS, chunks and seconds."""
    code = CHILD.format(repo=str(REPO), path=str(path), whole=whole)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


FULL_CHILD = """
import json, resource, sys, time
from graphrag_engine.cli import main
t0 = time.perf_counter()
code = main(["index", {path!r}, "--out", {out!r}, "--config", {config!r}])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"code": code, "peak_rss_mb": round(peak / 2**20),
                  "seconds": round(time.perf_counter() - t0, 1)}}))
"""
CACHES = ("embed_cache.sqlite", "ner_cache.sqlite")


def measure_full(path: Path, out: Path, config: Path, seed: Path | None) -> dict:
    """A whole index of `path` in a fresh process (the seed index's caches copied beside it
    first); peak RSS, seconds, and the rows and per-stage peaks of its manifest."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in CACHES if seed is not None else ():
        if (seed / name).exists():
            shutil.copy(seed / name, out / name)
    code = FULL_CHILD.format(repo=str(REPO), path=str(path), out=str(out), config=str(config))
    env = {**os.environ, "GRAPHRAG_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    row = json.loads(done.stdout.strip().splitlines()[-1])
    manifest = json.loads((out / "manifest.json").read_text())
    stages = manifest["stats"]["stages"]
    files = manifest["files"]
    return row | {
        "chunks": files["chunks"]["rows"],
        "units": files["units"]["rows"],
        "entities": files["entities"]["rows"],
        "stage_peaks": {k: v["peak_rss_mb"] for k, v in stages.items() if "peak_rss_mb" in v},
    }


def main_full(sizes: list[int], work: Path, config: str | None, seed: Path | None) -> None:
    """--full: a whole index of every size, smallest first, seeded by the smallest's caches
    (and the smallest by `seed`'s, when given)."""
    work.mkdir(parents=True, exist_ok=True)
    cfg = work / "index.yaml"
    shutil.copy(config or REPO / "configs" / "index.yaml", cfg)
    rows = []
    for mb in sorted(sizes):
        path = work / f"doc-{mb}mb.txt"
        make_document(path, mb)
        out = work / f"index-{mb}mb"
        row = {"mb": mb} | measure_full(path, out, cfg, seed)
        seed = out if not rows else seed
        base = rows[0] if rows else row
        row["rss_vs_smallest"] = round(row["peak_rss_mb"] / base["peak_rss_mb"], 2)
        rows.append(row)
        print(
            f"{mb:>5} MB  peak RSS {row['peak_rss_mb']:>6} MB ({row['rss_vs_smallest']}x the "
            f"smallest)  {row['chunks']} chunks  {row['units']} units  {row['entities']} "
            f"entities  {row['seconds']} s  per stage: {row['stage_peaks']}",
            flush=True,
        )
    write_result("huge_document", {"rows": rows}, tag="full")


def main() -> None:
    """Measure every size, segmented and (up to --whole-limit) whole; print a table and JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,500", help="document sizes in MB")
    ap.add_argument("--work", default=work_dir("huge-document"))
    ap.add_argument("--whole-limit", type=int, default=50, help="largest MB for the whole pass")
    ap.add_argument("--full", action="store_true", help="a whole index of each size")
    ap.add_argument("--config", help="index config of --full (default configs/index.yaml)")
    ap.add_argument("--seed", help="--full: an index folder whose caches start the smallest")
    args = ap.parse_args()
    if args.full:
        sizes = [int(x) for x in args.sizes.split(",")]
        main_full(sizes, Path(args.work), args.config, args.seed and Path(args.seed))
        return
    rows = []
    for mb in map(int, args.sizes.split(",")):
        path = Path(args.work) / f"doc-{mb}mb.txt"
        make_document(path, mb)
        for whole in (False, True):
            if whole and mb > args.whole_limit:
                continue
            row = {"mb": mb, "path": "one pass" if whole else "segments"} | measure(path, whole)
            rows.append(row)
            print(
                f"{mb:>5} MB  {row['path']:<9} peak RSS {row['peak_rss_mb']:>6} MB  "
                f"{row['chunks']:>8} chunks  largest {row['max_chunk_tokens']} tokens  "
                f"{row['seconds']} s",
                flush=True,
            )
    write_result("huge_document", {"rows": rows})


if __name__ == "__main__":
    main()
