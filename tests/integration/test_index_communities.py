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
    tmp_path: Path, name: str, extra: str = "", corpus: Path | None = None, add: bool = False
) -> Path:
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(
        "graph:\n  embed: false\ncommunities:\n  enabled: true\n  max_cluster_size: 6\n" + extra
    )
    out = tmp_path / name
    args = ["index", str(corpus) if corpus else "--demo", "--out", str(out), "--config", str(cfg)]
    assert main(args + (["--add"] if add else [])) == 0
    return out


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
def test_reports_resummarise_only_touched_communities(tmp_path: Path, capsys) -> None:
    extra = (
        "  reports: true\n  report_max_tokens: 40\nmodels:\n  llm:\n    backend: transformers\n"
        "    batch_size: 8\n    parse_retries: 0\n"
        "    max_failed_share: 1.0\n"  # 40-token reports are often cut short: recorded
    )
    lines = corpus_path().read_text().splitlines()
    base = tmp_path / "base.jsonl"
    base.write_text("\n".join(lines[:14]) + "\n")
    # before any build: estimated from the NER graph of (here all of) the chunks
    (tmp_path / "r.yaml").write_text(
        "communities:\n  enabled: true\n  max_cluster_size: 6\n" + extra
    )
    first_dry = ["index", str(base), "--out", str(tmp_path / "none"), "--dry-run"]
    assert main([*first_dry, "--config", str(tmp_path / "r.yaml")]) == 0
    estimate = capsys.readouterr().out
    assert "community_reports: " in estimate and "estimate for a first build" in estimate
    assert not (tmp_path / "none").exists()
    out = build(tmp_path, "r", extra, corpus=base)
    first = open_index(out)
    stage = first.manifest["stats"]["stages"]["communities"]
    n = stage["items"]
    assert stage["model_calls"] == n and stage["reports"] == n  # failures: extractive ones
    assert stage.get("extractive_for_failures", 0) == stage["parse_failures"]
    for r in first.table("reports").to_pylist():
        assert r["title"] and r["summary"] and r["full_text"]
    # a dry run over that build forecasts its reports from it (same corpus: the same count),
    # instead of "not forecast"
    capsys.readouterr()
    dry = ["index", str(base), "--out", str(out), "--config", str(tmp_path / "r.yaml")]
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
    build(tmp_path, "r", extra, corpus=new, add=True)
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


def test_extractive_reports_serve_global_search_and_report_search(tmp_path: Path, smollm) -> None:
    """An LLM-free build with communities writes an extractive report for every community;
    PankRAG's report search finds the community of a question's entity among them, and
    global search maps them with SmolLM2 as it maps LLM reports."""
    from graphrag_engine.eval.datasets import Question
    from graphrag_engine.index.extractive_reports import KIND_LINE
    from graphrag_engine.methods import query_config
    from graphrag_engine.methods.graphrag_global import graphrag_global
    from graphrag_engine.retrieve.communities import communities, report_search
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.retrieve.types import StageClock

    cfg = tmp_path / "c.yaml"
    cfg.write_text("communities:\n  enabled: true\n  max_cluster_size: 6\n")
    assert main(["index", "--demo", "--out", str(tmp_path / "idx"), "--config", str(cfg)]) == 0
    idx = open_index(tmp_path / "idx")
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
