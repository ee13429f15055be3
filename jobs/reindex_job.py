"""Ray job entry point for the scheduled re-index: `ray job submit -- python jobs/reindex_job.py
SOURCE --out INDEX [--executor ray]`.

It takes the arguments of `graphrag-engine reindex`: the index is brought up to date with what
SOURCE holds now (only new and changed documents are extracted and embedded, deleted ones are
removed), a run on an unchanged source writes nothing, and a run started while another one is
at work exits 75 without touching the index. Readers keep serving the previous generation until
the atomic commit. With `--executor ray`, a submitted job joins the cluster it runs on.
"""

from __future__ import annotations

import sys

from graphrag_engine.cli import main

if __name__ == "__main__":
    sys.exit(main(["reindex", *sys.argv[1:]]))
