"""Grammar engines for constrained JSON decoding in process, measured here: llguidance (the
engine's), xgrammar, outlines-core and lm-format-enforcer, on SmolLM2's tokenizer and the
schemas of `bench/structured.py`'s 15 stages.

    PYTHONPATH=<folder with the other engines> .venv/bin/python -m bench.grammar_engines \
        [--answers 50] [--timeout 300] [--work DIR] [--data DIR]

Per engine: footprint (its installed files, and the requirements it would add to the
project's environment), seconds to build its view of the tokenizer, and per stage schema the
seconds to compile it (or its error). Then, along SmolLM2's real constrained extraction answers
(round one of `bench/structured.py`, WORK/smollm2-transformers-schema-triples.json), each
answer's tokens are forced one at a time: per step the engine computes the next-token mask
(the step's cost in decoding) and must allow the token; milliseconds a step are printed with
their ratio to llguidance's, measured in the same run. Each (engine, schema) runs in a forked
child, stopped after --timeout seconds.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import multiprocessing as mp
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import work_dir, write_result
from bench.structured import DATA, build_tasks
from graphrag_engine.models.transformers_llm import TransformersLLM

ENGINES = {  # engine -> its distribution on the package index
    "llguidance": "llguidance",
    "xgrammar": "xgrammar",
    "outlines-core": "outlines-core",
    "lm-format-enforcer": "lm-format-enforcer",
}


def footprint(dist: str) -> dict[str, Any]:
    """MB of the distribution's installed files, and the requirements it would add to this
    environment (those neither installed in it nor meant for another platform)."""
    try:
        d = md.distribution(dist)
    except md.PackageNotFoundError:
        return {"installed": False}
    from packaging.requirements import Requirement

    size = sum((Path(d.locate_file(f)).stat().st_size for f in d.files or []), 0)
    missing = []
    for req in map(Requirement, d.requires or []):
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue  # an extra, or a requirement for another platform or Python
        try:  # installed in this environment, not only on PYTHONPATH for this bench
            found = str(md.distribution(req.name).locate_file("")).startswith(sys.prefix)
        except md.PackageNotFoundError:
            found = False
        if not found:
            missing.append(req.name)
    return {"installed": True, "version": d.version, "mb": size / 2**20, "would_add": missing}


class View:
    """One engine's view of the tokenizer: compile a schema, then walk an answer's tokens."""

    def __init__(self, engine: str, tokenizer: Any) -> None:
        self.engine, self.tok, self.eos = engine, tokenizer, tokenizer.eos_token_id
        self.vocab = len(tokenizer)
        if engine == "llguidance":
            import llguidance.hf

            self.view = llguidance.hf.from_tokenizer(tokenizer)
        elif engine == "xgrammar":
            import xgrammar as xgr

            info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=self.vocab)
            self.view = xgr.GrammarCompiler(info, max_threads=1)
        elif engine == "outlines-core":
            from outlines_core import Vocabulary

            self.view = Vocabulary(self.eos, byte_vocabulary(tokenizer))
        else:
            self.view = enforcer_tokenizer_data(tokenizer)

    def compile(self, schema: dict[str, Any]) -> Any:
        """The engine's compiled form of a JSON schema (compact JSON where it has the option)."""
        text = json.dumps(schema)
        if self.engine == "llguidance":
            import llguidance

            grammar = llguidance.LLMatcher.grammar_from_json_schema(
                schema, defaults={"whitespace_flexible": False}
            )
            if error := llguidance.LLMatcher.validate_grammar(grammar):
                raise ValueError(error)
            return grammar
        if self.engine == "xgrammar":
            return self.view.compile_json_schema(text, any_whitespace=False, separators=(",", ":"))
        if self.engine == "outlines-core":
            from outlines_core import Index
            from outlines_core.json_schema import build_regex_from_schema

            return Index(build_regex_from_schema(text, whitespace_pattern=""), self.view)
        from lmformatenforcer import JsonSchemaParser

        return JsonSchemaParser(schema)

    def walk(self, compiled: Any, ids: list[int]) -> tuple[list[float], list[int], bool]:
        """Force `ids` one token at a time: seconds per step (mask, then advance), the
        positions whose token the mask disallowed, and whether end-of-sequence is allowed after
        the last."""
        fill, allowed, advance = self.matcher(compiled, ids)
        steps, refused = [], []
        for t in [*ids, None]:
            t0 = time.perf_counter()
            fill(len(steps))
            if t is None:
                return steps, refused, allowed(self.eos)
            if not allowed(t):
                refused.append(len(steps))
            advance(t)
            steps.append(time.perf_counter() - t0)
        raise AssertionError("unreachable")

    def matcher(self, compiled: Any, ids: list[int]) -> tuple[Any, Any, Any]:
        """(fill the next mask given the step, is a token allowed, advance by a token) for a
        fresh match of `compiled`; `ids` only for lm-format-enforcer, which takes prefixes."""
        if self.engine == "llguidance":
            import llguidance
            import llguidance.torch

            m = llguidance.LLMatcher(self.view, compiled)
            words = llguidance.torch.allocate_token_bitmask(1, self.view.vocab_size)
            fill = lambda _: llguidance.torch.fill_next_token_bitmask(m, words, 0)  # noqa: E731
            return fill, partial(bit_set, words), m.consume_token
        if self.engine == "xgrammar":
            import xgrammar as xgr

            m = xgr.GrammarMatcher(compiled)
            words = xgr.allocate_token_bitmask(1, self.vocab)
            fill = lambda _: m.fill_next_token_bitmask(words)  # noqa: E731
            return fill, partial(bit_set, words), m.accept_token
        if self.engine == "outlines-core":
            import torch
            from outlines_core import Guide

            g = Guide(compiled)
            words = torch.zeros(1, (self.vocab + 31) // 32 + 1, dtype=torch.int32)
            in_words = partial(bit_set, words)

            def write(_: int) -> None:
                g.write_mask_into(words.data_ptr(), words.numel(), words.element_size())

            def advance(token: int) -> None:
                if in_words(token):  # a refused token would put the guide in error
                    g.advance(token, return_tokens=False)

            return write, in_words, advance
        from lmformatenforcer import TokenEnforcer

        enforcer, prompt, ok = TokenEnforcer(self.view, compiled), [self.eos], set()

        def allowed_after(k: int) -> None:
            ok.clear()
            allowed = enforcer.get_allowed_tokens(prompt + ids[:k])  # a TokenList or a list
            ok.update(getattr(allowed, "allowed_tokens", allowed))

        return allowed_after, ok.__contains__, lambda _: None


def bit_set(words: Any, token: int) -> bool:
    """Whether a packed token bitmask (int32 words, bit i of word w = token 32 w + i) allows
    `token`."""
    return bool((int(words[0, token // 32]) >> (token % 32)) & 1)


def enforcer_tokenizer_data(tokenizer: Any) -> Any:
    """lm-format-enforcer's view of a tokenizer, built through its documented
    `TokenEnforcerTokenizerData` as its transformers integration builds it (that module does not
    import under transformers 5: it imports `PreTrainedTokenizerBase` from a moved module)."""
    from lmformatenforcer.tokenenforcer import TokenEnforcerTokenizerData

    zero = tokenizer.encode("0", add_special_tokens=False)[-1]
    special = set(tokenizer.all_special_ids)
    regular = []
    for i in range(len(tokenizer)):
        if i in special:
            continue
        after_zero = tokenizer.decode([zero, i])[1:]  # keeps a word-start token's space
        regular.append((i, after_zero, len(after_zero) > len(tokenizer.decode([i]))))

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids).rstrip("\ufffd")

    return TokenEnforcerTokenizerData(
        regular, decode, tokenizer.eos_token_id, False, len(tokenizer)
    )


def byte_vocabulary(tokenizer: Any) -> dict[bytes, list[int]]:
    """A byte-level BPE vocabulary as outlines-core takes it: each token's bytes -> its ids
    (GPT-2's byte-to-character table undone; special tokens left out)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    back = {c: b for b, c in bytes_to_unicode().items()}
    special = set(tokenizer.all_special_ids)
    out: dict[bytes, list[int]] = {}
    for token, i in tokenizer.get_vocab().items():
        if i in special or any(c not in back for c in token):
            continue
        out.setdefault(bytes(back[c] for c in token), []).append(i)
    return out


def measure(view: View, schema: dict, answers: list[list[int]], out: Any) -> None:
    """Child process: compile, then walk every answer; the result dict goes to `out`."""
    try:
        t0 = time.perf_counter()
        compiled = view.compile(schema)
        row: dict[str, Any] = {"compile_s": time.perf_counter() - t0}
        steps, refused, blocked, ends = [], 0, 0, 0
        for ids in answers:
            s, where, e = view.walk(compiled, ids)
            steps += s
            refused += len(where)
            ends += e
            if where:  # the engine would not let this valid answer be generated
                blocked += 1
                text = view.tok.decode(ids[: where[0]])[-50:]
                row.setdefault(
                    "first_blocked",
                    f"{text!r} then {view.tok.decode(ids[where[0] : where[0] + 1])!r}",
                )
        if answers:
            row |= {"steps": len(steps), "ms_per_step": 1e3 * sum(steps) / len(steps)}
            row |= {"refused_tokens": refused, "answers_blocked": blocked, "ended": ends}
            row["answers"] = len(answers)
        out.put(row)
    except Exception as exc:  # noqa: BLE001 - an engine's refusal is a result here
        out.put({"error": f"{type(exc).__name__}: {str(exc)[:160]}"})


def run(view: View, schema: dict, answers: list[list[int]], timeout: float) -> dict[str, Any]:
    """`measure` in a forked child, stopped after `timeout` seconds."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=measure, args=(view, schema, answers, out))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return {"error": f"did not finish in {timeout:.0f} s"}
    return out.get() if not out.empty() else {"error": f"child exited {child.exitcode}"}


def main() -> None:
    """Footprints, tokenizer views, schema compiles, then the per-step walk; prints a table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=50, help="extraction answers to walk")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per (engine, schema)")
    ap.add_argument("--work", default=work_dir("structured"), help="structured.py's")
    ap.add_argument("--data", default=str(DATA))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch_threads = os.environ.setdefault("OMP_NUM_THREADS", "1")
    work = Path(args.work)
    answers = work / "smollm2-transformers-schema-triples.json"
    if not answers.exists():
        raise SystemExit(
            f"{answers} is missing: run bench/structured.py --models smollm2 --backend "
            f"transformers --decodings schema --stages triples --work {work} first"
        )
    raws = json.loads(answers.read_text())
    tasks = build_tasks(len(raws), {"triples": raws}, Path(args.data), work)
    tok = TransformersLLM().tokenizer
    valid = []
    for raw in raws[: args.answers]:
        try:
            tasks["triples"].schema.parse(raw)
            valid.append(tok(raw.strip(), add_special_tokens=False)["input_ids"])
        except ValueError:
            continue
    print(
        f"{len(valid)} valid SmolLM2 extraction answers, {sum(map(len, valid))} tokens; "
        f"vocabulary {len(tok)}; OMP_NUM_THREADS={torch_threads}"
    )
    results: dict[str, tuple[float, dict[str, Any]]] = {}  # engine -> (tokenizer s, stage rows)
    for engine, dist in ENGINES.items():
        fp = footprint(dist)
        print(f"\n{engine}: {json.dumps(fp)}", flush=True)
        if not fp["installed"]:
            continue
        t0 = time.perf_counter()
        view = View(engine, tok)
        tokenizer_s, rows = time.perf_counter() - t0, {}
        for stage, task in tasks.items():
            walk = valid if stage == "triples" else []
            rows[stage] = run(view, task.schema.json_schema, walk, args.timeout)
            print(f"  {stage}: {json.dumps(rows[stage])}", flush=True)
        results[engine] = tokenizer_s, rows
    base = results.get("llguidance", (0, {}))[1].get("triples", {}).get("ms_per_step")
    print(
        f"\n{'engine':<20}{'tokenizer s':>12}{'compiled':>10}{'compile s':>11}"
        f"{'ms/step':>9}{'x llg':>7}{'blocked':>9}"
    )
    for engine, (tokenizer_s, rows) in results.items():
        stages = list(rows.values())
        ok = [r for r in stages if "error" not in r]
        tri = rows["triples"]
        ms = tri.get("ms_per_step")
        ratio = f"{ms / base:.2f}" if ms and base else "-"
        print(
            f"{engine:<20}{tokenizer_s:>12.2f}{len(ok):>7}/{len(stages):<2}"
            f"{sum(r['compile_s'] for r in ok):>11.2f}{ms or float('nan'):>9.3f}{ratio:>7}"
            f"{tri.get('answers_blocked', '-')!s:>6}/{tri.get('answers', '-')}"
        )
    write_result(
        "grammar_engines",
        {
            "answers": len(valid),
            "engines": {
                engine: {"tokenizer_s": tokenizer_s, "stages": rows}
                for engine, (tokenizer_s, rows) in results.items()
            },
        },
    )


if __name__ == "__main__":
    main()
