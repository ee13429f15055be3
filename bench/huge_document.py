"""Peak memory of ingest + chunking on one huge document: a .txt of real text (the UltraDomain
CS books of ../shared/data repeated to the size asked), read and chunked in a fresh process
each time, segment by segment (the engine) and, as the reference measured in the same run, in
one tokenizer pass over the whole text (the engine before segmenting; skipped above
--whole-limit MB, where it would not fit in memory).

    .venv/bin/python bench/huge_document.py [--sizes 50,500] [--work DIR] [--whole-limit 50]

Prints, per size and path: peak RSS (ru_maxrss), chunks, the largest chunk in tokens, seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)  # `bench/kernels.py` must not shadow the `kernels` package
DATA = REPO.parent / "shared" / "data"

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
import engine.index.chunking as chunking
from engine.config import ChunkingConfig
from engine.index.ingest import DocumentReader
if {whole}:
    chunking.SEGMENT_CHARS = 1 << 62
t0 = time.perf_counter()
n = biggest = 0
for doc, chunks in chunking.chunk_documents(DocumentReader([{path!r}]), ChunkingConfig()):
    n += len(chunks)
    biggest = max([biggest] + [c.n_tokens for c in chunks])
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


def main() -> None:
    """Measure every size, segmented and (up to --whole-limit) whole; print a table and JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,500", help="document sizes in MB")
    ap.add_argument("--work", default="/tmp/graphrag-huge-document")
    ap.add_argument("--whole-limit", type=int, default=50, help="largest MB for the whole pass")
    args = ap.parse_args()
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
    print(json.dumps({"bench": "huge_document", "rows": rows}))


if __name__ == "__main__":
    main()
