"""Ray job entry point for a query run: `ray job submit -- python jobs/query_job.py INDEX
QUESTIONS --method M --out RUN [--workers N]`.

It takes the arguments of `graphrag-engine query` and shards the question batches over Ray
actors (`--executor ray` is implied); each actor loads the index and the method's models once,
the driver writes every finished batch into the run folder, and re-submitting the same command
resumes a job that was stopped. Inside `ray job submit` the job joins the cluster it was
submitted to; run by hand outside one, it starts a private cluster.
"""

from __future__ import annotations

import sys

from graphrag_engine.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(
        main(["query", *args] if "--executor" in args else ["query", "--executor", "ray", *args])
    )
