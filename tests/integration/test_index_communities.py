"""Communities: hierarchical Leiden structure against networkx's modularity, and LLM reports
that an incremental add re-summarises only for the communities it touched."""

from __future__ import annotations

import json
import re
from pathlib import Path

import networkx as nx
import pytest

from graphrag_engine.cli import main
from graphrag_engine.demo import corpus_path
from graphrag_engine.store import open_index


def build(
    tmp_path: Path,
    name: str,
    extra: str = "",
    corpus: Path | None = None,
    add: bool = False,
    graph: str = "",
) -> Path:
    """Index the demo (or `corpus`) with communities and no vectors; `graph` adds to the graph
    section, `extra` to the communities section (and may open further sections)."""
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(
        "graph:\n  embed: false\n"
        + graph
        + "communities:\n  enabled: true\n  max_cluster_size: 6\n"
        + extra
    )
    out = tmp_path / name
    args = ["index", str(corpus) if corpus else "--demo", "--out", str(out), "--config", str(cfg)]
    assert main(args + (["--add"] if add else [])) == 0
    return out


REPORTS_CONFIG = (
    "  reports: true\n  report_max_tokens: 100\nmodels:\n  llm:\n    backend: transformers\n"
    "    batch_size: 8\n    parse_retries: 0\n"
    "    max_failed_share: 1.0\n"  # a report cut at 100 tokens is recorded, replaced by an extractive one
)
"""The index settings of SmolLM2-written community reports."""
REPORTS_GRAPH = "  entity_sentences: 0\n  relation_sentences: 0\n"
"""Their graph: entities and relations without corpus sentences, so that the report prompts
are half as long (about 3,700 tokens for the fixture's 15 communities, not 7,600) and SmolLM2
reads them in half the time; the communities are the same."""


@pytest.fixture(scope="module")
def smollm_reports(tmp_path_factory) -> dict:
    """The first 9 demo documents with communities (clusters of at most 6) and SmolLM2-written
    reports, built once for this file: the reports are checked, re-summarised after an add (on a
    copy) and read by global search."""
    root = tmp_path_factory.mktemp("smollm-reports")
    base = root / "base.jsonl"
    base.write_text("\n".join(corpus_path().read_text().splitlines()[:9]) + "\n")
    return {
        "root": root,
        "corpus": base,
        "index": build(root, "r", REPORTS_CONFIG, corpus=base, graph=REPORTS_GRAPH),
    }


def test_hierarchy_partitions_and_is_deterministic(tmp_path: Path) -> None:
    idx = open_index(build(tmp_path, "a"))
    rows = idx.table("communities").to_pylist()
    relations = idx.table("relations").to_pylist()
    linked = {r["src"] for r in relations} | {r["dst"] for r in relations}
    level0 = [r for r in rows if r["level"] == 0]
    members0 = [e for r in level0 for e in r["entity_ids"]]
    assert sorted(members0) == sorted(linked), "level 0 partitions every linked entity"
    ids = {r["community_id"]: r for r in rows}
    for r in rows:
        if r["level"] > 0:
            parent = ids[r["parent_id"]]
            assert parent["level"] == r["level"] - 1 and set(r["entity_ids"]) <= set(
                parent["entity_ids"]
            )
    finals = {}
    for r in rows:  # the deepest community of each entity
        for e in r["entity_ids"]:
            if e not in finals or finals[e]["level"] < r["level"]:
                finals[e] = r
    assert (
        max(len(r["entity_ids"]) for r in finals.values()) <= 6
        or len({r["level"] for r in rows}) > 1
    )
    # quality: modularity of level 0 against networkx's own Louvain on the same graph
    G = nx.Graph()
    G.add_weighted_edges_from((r["src"], r["dst"], r["weight"]) for r in relations)
    ours = nx.community.modularity(G, [set(r["entity_ids"]) for r in level0])
    ref = nx.community.modularity(G, nx.community.louvain_communities(G, seed=0))
    assert ours >= 0.9 * ref
    again = open_index(build(tmp_path, "b")).table("communities").to_pylist()
    assert sorted(r["community_id"] for r in again) == sorted(ids)


@pytest.mark.slow
def test_reports_resummarise_only_touched_communities(
    smollm_reports: dict, tmp_path: Path, capsys
) -> None:
    import shutil

    base, built = smollm_reports["corpus"], smollm_reports["index"]
    cfg = smollm_reports["root"] / "r.yaml"  # the settings the fixture built with
    # before any build: estimated from the NER graph of (here all of) the chunks
    first_dry = ["index", str(base), "--out", str(tmp_path / "none"), "--dry-run"]
    assert main([*first_dry, "--config", str(cfg)]) == 0
    estimate = capsys.readouterr().out
    assert "community_reports: " in estimate and "estimate for a first build" in estimate
    assert not (tmp_path / "none").exists()
    first = open_index(built)
    stage = first.manifest["stats"]["stages"]["communities"]
    n = stage["items"]
    assert stage["model_calls"] == n and stage["reports"] == n  # failures: extractive ones
    assert stage.get("extractive_for_failures", 0) == stage["parse_failures"]
    for r in first.table("reports").to_pylist():
        assert r["title"] and r["summary"] and r["full_text"]
    # a dry run over that build forecasts its reports from it (same corpus: the same count),
    # instead of "not forecast"
    out = tmp_path / "r"
    shutil.copytree(built, out)  # the add below writes into a copy; the fixture stays as built
    capsys.readouterr()
    dry = ["index", str(base), "--out", str(out), "--config", str(cfg)]
    assert main([*dry, "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert f"community_reports: {n} prompts" in text and "scaled by corpus tokens (x1.00)" in text
    # the first-build estimate came from the same kind of graph: the count it gave is close
    guessed = int(re.search(r"community_reports: (\d+) prompts", estimate).group(1))
    assert 0.5 * n <= guessed <= 2 * n, (guessed, n)
    before_ids = set(first.table("communities")["community_id"].to_pylist())
    new = tmp_path / "new.jsonl"
    new.write_text(
        json.dumps(
            {
                "id": "x",
                "title": "Orrin Vale",
                "text": "Orrin Vale is a shepherd on Mount Kesh. Orrin Vale breeds goats with Talia Brenn.",
            }
        )
        + "\n"
    )
    build(tmp_path, "r", REPORTS_CONFIG, corpus=new, add=True, graph=REPORTS_GRAPH)
    after = open_index(out)
    stage2 = after.manifest["stats"]["stages"]["communities"]
    after_ids = set(after.table("communities")["community_id"].to_pylist())
    kept = len(before_ids & after_ids)
    assert kept > 0
    # untouched communities are not re-summarised (a new community whose report prompt equals
    # one already answered, e.g. a level-1 copy of its parent, is a cache hit too)
    assert stage2["cached_calls"] >= kept
    assert stage2["model_calls"] + stage2["cached_calls"] == len(after_ids)
    assert 0 < stage2["model_calls"] <= len(after_ids - before_ids)


def test_extractive_reports_serve_global_search_and_report_search(
    demo_reports_index: Path, tmp_path: Path, smollm
) -> None:
    """An LLM-free build with communities (the session's) writes an extractive report for every community;
    PankRAG's report search finds the community of a question's entity among them, and
    global search maps them with SmolLM2 as it maps LLM reports."""
    from graphrag_engine.eval.datasets import Question
    from graphrag_engine.index.extractive_reports import KIND_LINE
    from graphrag_engine.methods import query_config
    from graphrag_engine.methods.graphrag_global import graphrag_global
    from graphrag_engine.retrieve.communities import communities, report_search
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.retrieve.types import StageClock

    idx = open_index(demo_reports_index)
    stats = idx.manifest["stats"]["stages"]["communities"]
    assert stats["reports_kind"] == "extractive" and stats["reports"] == stats["items"]
    reports = idx.table("reports").to_pylist()
    assert {r["community_id"] for r in reports} == {
        c["community_id"] for c in idx.table("communities").to_pylist()
    }
    assert all(r["full_text"].startswith(KIND_LINE) and r["title"] for r in reports)
    assert all(0.0 <= r["rating"] <= 10.0 for r in reports)

    qcfg = query_config("graphrag_global")
    qcfg.models.llm.backend = "transformers"
    qcfg.options.community_level = 0
    qcfg.options.map_max_tokens = 64
    ctx = QueryContext(idx, qcfg, tmp_path / "run", llm_backend=smollm)
    comms = communities(ctx, need_reports=True)
    question = "Who designed the Quillon Opera House?"
    found = report_search(ctx, comms, [question], top_k=3)[0]
    assert found and any("Quillon" in comms.report_text(c) for c, _ in found)
    r = graphrag_global(ctx, [Question("q1", question, ["Hana Lirrow"])], StageClock())
    assert r.extras[0]["map_prompts"] >= 1 and r.tokens[0]["global_map"] > 0


@pytest.mark.slow
def test_global_search_map_reduce_on_smollm_reports(smollm_reports, tmp_path, smollm) -> None:
    """The demo index with SmolLM2-written community reports, then global search (fixed level and
    dynamic selection) with SmolLM2: one map prompt per report batch, points reduced by score,
    and every question either answered from key points or given the no-data answer."""
    from graphrag_engine.demo import questions_path
    from graphrag_engine.eval.datasets import load_questions
    from graphrag_engine.methods import query_config
    from graphrag_engine.methods.graphrag_global import NO_DATA, graphrag_global
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.retrieve.types import StageClock

    index = open_index(smollm_reports["index"])
    assert index.rows("reports") > 0
    questions = load_questions(questions_path())[:1]  # each check holds per question
    for dynamic in (False, True):
        qcfg = query_config("graphrag_global")
        qcfg.models.llm.backend = "transformers"
        qcfg.options.dynamic = dynamic
        qcfg.options.map_max_tokens = 120
        ctx = QueryContext(index, qcfg, tmp_path / f"run{dynamic}", llm_backend=smollm)
        r = graphrag_global(ctx, questions, StageClock())
        for c, e, t in zip(r.contexts, r.extras, r.tokens, strict=True):
            # a fixed level always maps; dynamic selection may rate every report irrelevant
            assert (e["map_prompts"] >= 1 and t["global_map"] > 0) or (
                dynamic and e["reports"] == 0
            )
            if e["reports"] == 0:
                assert c.preset_answer == NO_DATA
            if c.sections:  # key points: the reduce stage answered from them, its own call
                scores = [int(x.split(")")[0].split()[-1]) for x in c.sections[0].items]
                assert scores == sorted(scores, reverse=True) and min(scores) > 0
                assert c.preset_answer and c.preset_answer != NO_DATA
                assert t["global_reduce_prompt"] > 0
            else:
                assert c.preset_answer == NO_DATA and "global_reduce_prompt" not in t
        if not dynamic:  # the leaf-most reports at or below the level, the same for each
            assert {e["reports"] for e in r.extras} == {len(comms_at(ctx, 2))}


def comms_at(ctx, level: int) -> list[int]:
    """The reported communities global search reads at `level`, checked against their
    definition: at the level, or above it with no reported child at or above it."""
    from graphrag_engine.retrieve.communities import communities

    comms = communities(ctx, need_reports=True)
    rows = comms.reported_at(level)
    for c in comms.report:
        kids = [k for k in comms.children.get(c, []) if k in comms.report]
        leafmost = comms.level[c] == level or (
            comms.level[c] < level and not any(comms.level[k] <= level for k in kids)
        )
        assert (c in rows) == leafmost
    covered = {e for c in rows for e in comms.members[c]}
    assert covered == {e for c in comms.report for e in comms.members[c]}  # all of the graph
    return rows
