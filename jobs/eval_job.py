"""Ray job entry point for scoring query runs: `ray job submit -- python jobs/eval_job.py RUN...
--out REPORT [--judge ...]`.

It takes the arguments of `graphrag-engine eval`. Scoring reads the run folders the query jobs
wrote (shared storage on a multi-node cluster) and writes one report folder; the LLM judge, when
asked for, uses the backend its flags name (a vLLM server on the cluster: `--judge-backend openai
--base-url ...`), with its answers cached in the report folder so a resubmitted job pays for
nothing twice.
"""

from __future__ import annotations

import sys

from graphrag_engine.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", *sys.argv[1:]]))
