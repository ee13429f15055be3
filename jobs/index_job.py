"""Ray job entry point for (re-)indexing a corpus: `ray job submit -- python jobs/index_job.py ...`.

It takes the same arguments as `graphrag-engine index`, so a scheduled re-index (cron, Airflow)
submits this script to the cluster; the commit is atomic, so readers keep serving the previous
index until the new one is complete. With `--executor ray` and the default `--address local`,
a submitted job joins the cluster it runs on (`ray job submit` sets RAY_ADDRESS); run by hand
outside a cluster, it starts a private one.
"""

from __future__ import annotations

import sys

from graphrag_engine.cli import main

if __name__ == "__main__":
    sys.exit(main(["index", *sys.argv[1:]]))
