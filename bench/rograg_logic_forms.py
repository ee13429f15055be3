"""ROGRAG's logic forms on the comparison questions of 2WikiMultiHopQA and HotpotQA dev (their
`type` field): share of plans that parse, share with a compare step over two earlier steps,
operators used. Plans come from the packaged SmolLM2 (a floor): a llama.cpp server
(`--llm-backend llama`, the schema as response_format) or in process (`--llm-backend
transformers`, llguidance's grammar, `--batch-size` prompts a pass); all in one batched call
per set with a response cache (WORK/logic_forms_cache.sqlite, keyed by backend), so a re-run
resumes.

    .venv/bin/python -m bench.rograg_logic_forms [--work DIR] [--llm-backend llama|transformers]
                                                 [--llm-threads 2] [--batch-size 16] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from bench.common import DATA, QUESTIONS, work_dir, write_result

SETS = {name: QUESTIONS[name] for name in ("2wiki", "hotpotqa")}


def comparison_questions(name: str, limit: int | None) -> list[dict]:
    """The set's dev questions whose `type` is a comparison."""
    qs = [json.loads(x) for x in (DATA / SETS[name]).open()]
    picked = [q for q in qs if q.get("type") in ("comparison", "bridge_comparison")]
    return picked[:limit] if limit else picked


def main() -> None:
    """Plan every comparison question, print the shares and a JSON line."""
    from retrieval import error_kind  # bench/retrieval.py

    from graphrag_engine.config import LLMConfig
    from graphrag_engine.methods.rograg import (
        ROGRAGConfig,
        logic_form_max_tokens,
        logic_form_prompt,
    )
    from graphrag_engine.methods.rograg.logic_forms import logic_form_schema
    from graphrag_engine.models import make_llm
    from graphrag_engine.models.base import GenParams
    from graphrag_engine.models.llama_server import LlamaServer
    from graphrag_engine.models.structured import generate_structured

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=work_dir("rograg"))
    ap.add_argument("--llm-backend", choices=["llama", "transformers"], default="llama")
    ap.add_argument("--llm-threads", type=int, default=2, help="llama: the server's threads")
    ap.add_argument("--batch-size", type=int, default=16, help="transformers: prompts per pass")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    steps = ROGRAGConfig().max_steps  # ROGRAG's default plan length
    schema = logic_form_schema(steps)
    rows = {}
    with ExitStack() as stack:
        if args.llm_backend == "llama":
            log = work / "llama-server.log"
            server = stack.enter_context(LlamaServer(n_threads=args.llm_threads, log=log))
            cfg = LLMConfig(backend="openai", model=server.alias, base_url=server.url)
            cfg.read_timeout_s, cfg.flush_every = 600.0, 16
        else:
            cfg = LLMConfig(backend="transformers", batch_size=args.batch_size)
        llm = make_llm(cfg, default_cache=work / "logic_forms_cache.sqlite")
        for name in SETS:
            qs = comparison_questions(name, args.limit)
            prompts = [
                [{"role": "user", "content": logic_form_prompt(q["question"], steps)}] for q in qs
            ]
            budget = GenParams(max_tokens=logic_form_max_tokens(steps))
            run = generate_structured(llm, prompts, schema, budget, stage="logic_form", retries=2)
            forms = [r.value for r in run.results if r.ok]
            compare = [
                f
                for f in forms
                if any(s.operator == "compare" and len(s.inputs) == 2 for s in f.steps)
            ]
            ops = Counter(s.operator for f in forms for s in f.steps)
            rows[name] = {
                "questions": len(qs),
                "parse": round(len(forms) / len(qs), 3),
                "compare_over_two_steps": round(len(compare) / len(qs), 3),
                "operators": dict(ops.most_common()),
                "tokens_per_question": round(sum(r.tokens for r in run.results) / len(qs), 1),
                "asks_per_question": round(sum(r.attempts for r in run.results) / len(qs), 2),
                "errors": dict(
                    Counter(error_kind(r.error) for r in run.results if r.error).most_common(8)
                ),
                "example": next((r.raw for r in run.results if r.ok), None),
            }
            print(name, json.dumps(rows[name]))
    write_result("rograg_logic_forms", rows)


if __name__ == "__main__":
    main()
