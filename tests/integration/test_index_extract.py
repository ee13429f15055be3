"""LLM triple extraction: record parsing and merging, gleaning and loop-NER rounds with the (the part that needs models, servers or real data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import corpus_path
from graphrag_engine.index.extract import extract_triples
from graphrag_engine.models import LLM
from graphrag_engine.store import open_index

TEXTS = [json.loads(line)["text"] for line in corpus_path().read_text().splitlines()[:2]]
"""Two demo passages: every loop's rounds, checks and re-asks run over a batch of two."""


@pytest.mark.slow
@pytest.mark.parametrize(("loop", "gleaning"), [("none", 1), ("trial", 0), ("base", 0)])
def test_rounds_are_batched(smollm, loop: str, gleaning: int) -> None:
    llm = LLM(smollm, max_failed_share=1.0)  # 24-token answers are cut short: record, go on
    found = extract_triples(
        llm,
        TEXTS,
        ["person", "location"],
        gleaning=gleaning,
        loop=loop,
        max_rounds=2,
        max_tokens=24,
        retries=1,
    )
    usage = llm.ledger.get("extract", smollm.model_id)
    checks = llm.ledger.get("extract_loop_check", smollm.model_id)
    rounds = sum(f.rounds for f in found)
    assert usage.calls + usage.cached_calls == rounds + usage.retries
    assert usage.schema_decoded == usage.calls  # every round decoded under the triple schema
    assert all(1 <= f.rounds <= 3 for f in found)
    if loop == "none":
        assert all(f.rounds == 2 for f in found) and checks.calls == 0
    elif loop == "trial":
        assert checks.calls >= len(TEXTS)  # asked before any continuation
    else:
        assert all(f.rounds >= 2 for f in found) and checks.calls >= len(
            TEXTS
        )  # continued, then asked
    assert all(f.failures <= f.rounds for f in found)


@pytest.mark.slow
def test_extract_stage_in_index(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(corpus_path().read_text().splitlines()[:4]) + "\n")
    cfg = tmp_path / "x.yaml"
    cfg.write_text(
        "extraction:\n  enabled: true\n  gleaning: 0\n  max_tokens: 48\n"
        "models:\n  llm:\n    backend: transformers\n    batch_size: 4\n"
        "    max_failed_share: 1.0\n"  # 48-token answers are often cut short: recorded
    )
    out = tmp_path / "idx"
    dry = main(["index", str(corpus), "--out", str(out), "--config", str(cfg), "--dry-run"])
    assert dry == 0 and not out.exists()  # nothing written: no lock, cache or staging
    line = next(x for x in capsys.readouterr().out.splitlines() if "extract: " in x)
    assert "4 prompts" in line and "~192 completion tokens" in line  # 4 x max_tokens 48
    forecast = int(line.split("prompts, ")[1].split()[0])
    assert main(["index", str(corpus), "--out", str(out), "--config", str(cfg)]) == 0
    stage = open_index(out).manifest["stats"]["stages"]["extract"]
    # the forecast counted the first round's prompts exactly; re-asks repeat a prompt
    assert forecast <= stage["prompt_tokens"] <= forecast * (1 + stage["retries"])
    assert stage["items"] == 4 and stage["rounds"] == 4
    assert stage["model_calls"] == 4 + stage["retries"] == stage["schema_decoded"]
    assert stage["prompt_tokens"] > 0 and stage["completion_tokens"] > 0
    # a dry run over that build: its re-ask rate and mean completion stand in
    capsys.readouterr()
    assert main(["index", str(corpus), "--out", str(out), "--config", str(cfg), "--dry-run"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "extract: " in x)
    assert f"extract: {stage['model_calls']} prompts" in line, line
    assert "last build's mean" in line
    assert main(["index", str(corpus), "--out", str(out), "--config", str(cfg)]) == 0
    again = open_index(out).manifest["stats"]["stages"]["extract"]
    assert again["model_calls"] == 0 and again["cached_calls"] == stage["model_calls"]


@pytest.mark.slow
def test_long_descriptions_are_summarised_in_one_call(smollm) -> None:
    from graphrag_engine.index.extract import summarize_descriptions

    llm = LLM(smollm)
    long = "Hana Lirrow was an architect.\\n" * 10
    entities = [
        {"name": "Hana Lirrow", "description": long},
        {"name": "Vesk", "description": "A city on Quillon."},
        {"name": "Dunmere", "description": None},
    ]
    done = summarize_descriptions(llm, entities, above=100, max_tokens=24)
    usage = llm.ledger.get("summarize_descriptions", smollm.model_id)
    assert usage.calls == 1 and done == 1
    assert entities[0]["description"] != long and entities[0]["description"]
    assert entities[1]["description"] == "A city on Quillon." and entities[2]["description"] is None


def test_an_extraction_server_that_answers_garbage_fails_the_build(tmp_path, run_cli) -> None:
    """An OpenAI-compatible server (the FAULT INJECTOR, echoing prompts instead of triples)
    whose every extraction answer is schema-invalid used to give exit 0, nothing on stderr and
    a graph without its LLM entities; now exit 4 naming the stage and the share, nothing
    committed."""
    from tests.fault_server import FaultInjector

    out = tmp_path / "idx"
    with FaultInjector([]) as fault:
        cfg = tmp_path / "extract.yaml"
        cfg.write_text(
            "extraction:\n  enabled: true\n  retries: 1\n  gleaning: 0\n"
            f"models:\n  llm:\n    backend: openai\n    model: fault\n    base_url: {fault.url}\n"
        )
        proc = run_cli("index", "--demo", "--out", str(out), "--config", str(cfg))
    assert proc.returncode == 4, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "LLM stage 'extract'" in last and "(100%" in last and "nothing was committed" in last
    assert not (out / "manifest.json").exists() and not list(out.glob(".staging-*"))


def test_an_extraction_server_failing_every_call_is_a_documented_exit(tmp_path, run_cli) -> None:
    """A server answering HTTP 500 to every call (the FAULT INJECTOR) ends `index` with 69
    (the LLM is unavailable, documented), not 1 (a bug): one line naming the server and what
    to do, nothing committed, no staging left."""
    from tests.fault_server import FaultInjector

    out = tmp_path / "idx"
    with FaultInjector(["500"] * 200) as fault:
        cfg = tmp_path / "extract.yaml"
        cfg.write_text(
            "extraction:\n  enabled: true\n  retries: 0\n  gleaning: 0\n"
            f"models:\n  llm:\n    backend: openai\n    model: fault\n    base_url: {fault.url}\n"
            "    max_retries: 1\n"
        )
        proc = run_cli("index", "--demo", "--out", str(out), "--config", str(cfg))
    assert proc.returncode == 69, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "internal error" not in proc.stderr and "HTTP 500" in last and fault.url in last
    assert not (out / "manifest.json").exists() and not list(out.glob(".staging-*"))
