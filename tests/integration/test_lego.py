"""LEGO-GraphRAG on real WebQSP graphs and a real MuSiQue index: kernels against networkx and
the exact solver, each module's contract, the 21 instance configs, the CLI end to end, and
the answer prompt on SmolLM2."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from graphrag_engine.errors import ConfigError
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.kernels.graph import CSRGraph
from graphrag_engine.kernels.ppr import random_walk_with_restart, sampled_rwr
from graphrag_engine.methods import load_query_config, query_config
from graphrag_engine.methods.lego.graph import question_graphs, topic_entities_by_name
from graphrag_engine.methods.lego.method import answer_prompt, lego
from graphrag_engine.methods.lego.modules import (
    LegoPFConfig,
    LegoSEConfig,
    extract_subgraphs,
    filter_paths,
    refine_paths,
)
from graphrag_engine.methods.lego.paths import PathText
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.scoring import BM25Scorer, RandomScorer, make_scorer
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index
from graphrag_engine.store.index_store import NoIndex
from tests.paths import REPO


@pytest.fixture(scope="module")
def webqsp(shared_data: Path):
    """The first 120 WebQSP dev questions with their graphs and topic entities."""
    qs = [q for q in load_questions(shared_data / "webqsp_dev.jsonl", limit=120) if q.triples]
    tg = question_graphs([q.triples for q in qs])
    return qs, tg


@pytest.fixture(scope="module")
def seeds(webqsp, minilm):
    qs, tg = webqsp
    return topic_entities_by_name(tg, [q.question for q in qs], minilm.encode)


def test_sampled_rwr_converges_to_the_exact_solver() -> None:
    rng = np.random.default_rng(3)
    n = 80
    src, dst = rng.integers(0, n, 400), rng.integers(0, n, 400)
    g = CSRGraph.from_edges(src, dst, rng.random(400) + 0.1, n_nodes=n, directed=True)
    seeds = [{0: 1.0}, {5: 2.0, 9: 1.0}]
    exact = random_walk_with_restart(g, seeds, restart_prob=0.3, tol=1e-12).to_dense()
    est = sampled_rwr(g, seeds, restart_prob=0.3, walks=100_000, seed=1).to_dense()
    assert np.allclose(est.sum(axis=0), 1.0)
    assert np.abs(est - exact).sum(axis=0).max() < 0.02
    rough = sampled_rwr(g, seeds, restart_prob=0.3, walks=1_000, seed=1).to_dense()
    assert np.abs(rough - exact).sum() > np.abs(est - exact).sum()  # more walks, closer


def test_topic_entities_come_from_the_question(webqsp, seeds) -> None:
    qs, tg = webqsp
    assert all(seeds), "every question with a graph gets a topic entity"
    by_name = sum(
        any(tg.names[s].lower() in q.question.lower() for s in ss)
        for q, ss in zip(qs, seeds, strict=True)
    )
    assert by_name / len(qs) > 0.6
    assert all(tg.node_owner[s] == q for q, ss in enumerate(seeds) for s in ss)


def test_se_keeps_topic_entities_and_the_best_ppr_nodes(webqsp, seeds) -> None:
    qs, tg = webqsp
    texts = [q.question for q in qs]
    cfg = LegoSEConfig(max_ent=3)
    sub, sub_seeds = extract_subgraphs(tg, seeds, texts, cfg, None)
    for q in range(len(qs)):
        nodes = np.flatnonzero(sub.node_owner == q)
        assert len(nodes) <= 3 + len(seeds[q])
        assert {sub.names[s] for s in sub_seeds[q]} == {tg.names[s] for s in seeds[q]}
    # every kept triple joins two kept nodes of its own question
    assert np.all(sub.node_owner[sub.heads] == sub.edge_owner)
    assert np.all(sub.node_owner[sub.tails] == sub.edge_owner)
    # max_ent 2000: every node the walk can reach from the topic entities, and only those
    full, _ = extract_subgraphs(tg, seeds, texts, LegoSEConfig(), None)
    G = nx.Graph()
    G.add_nodes_from(range(tg.n_nodes))
    G.add_edges_from(zip(tg.heads.tolist(), tg.tails.tolist(), strict=True))
    reach = set().union(*(nx.node_connected_component(G, s) for ss in seeds for s in ss))
    assert sorted(full.origin.tolist()) == sorted(reach)


def test_se_scorer_window_and_threshold(webqsp, seeds) -> None:
    qs, tg = webqsp
    texts = [q.question for q in qs]
    cfg = LegoSEConfig(scorer="bm25", window=1, edge_threshold=0.0)
    sub, _ = extract_subgraphs(tg, seeds, texts, cfg, BM25Scorer())
    # window 1: an edge survives only as the best edge of one of its ends
    assert len(sub.heads) < len(tg.heads)
    assert len(sub.heads) <= sub.n_nodes


def test_node_scores_only_with_a_node_threshold(webqsp, seeds) -> None:
    qs, tg = webqsp
    texts = [q.question for q in qs]
    free, _ = extract_subgraphs(tg, seeds, texts, LegoSEConfig(scorer="bm25"), BM25Scorer())
    cfg = LegoSEConfig(scorer="bm25", node_threshold=0.1)
    cut, cut_seeds = extract_subgraphs(tg, seeds, texts, cfg, BM25Scorer())
    assert cut.n_nodes < free.n_nodes
    names = [tg.names[n] for n in range(tg.n_nodes)]
    for q, ss in enumerate(seeds):  # topic entities stay whatever they score
        assert {names[s] for s in ss} == {cut.names[s] for s in cut_seeds[q]}


def test_llm_scorer_sees_only_the_prefiltered_candidates(webqsp, smollm) -> None:
    from graphrag_engine.models.llm import LLM
    from graphrag_engine.retrieve.scoring import LLMScorer, PrefilteredScorer

    qs, tg = webqsp
    pairs = []
    for q in range(len(qs)):
        idx = np.flatnonzero(tg.edge_owner == q)
        words = [f"{tg.names[tg.heads[e]]} {tg.relations[e]} {tg.names[tg.tails[e]]}" for e in idx]
        if len(words) >= 8:
            pairs.append((qs[q].question, words))
    pairs = pairs[:3]
    assert len(pairs) == 3
    llm = LLM(smollm)
    scorer = PrefilteredScorer(BM25Scorer(), LLMScorer(llm), keep=5)
    scores = scorer.score_batch(pairs)
    usage = llm.ledger.get("lego_score", smollm.model_id)
    assert usage.calls - usage.retries == 3  # one group of 5 per question, nothing else
    assert usage.parse_failures == scorer.failures
    spent = scorer.take_tokens()  # per question, every attempt counted
    assert len(spent) == 3 and min(spent) > 0
    assert sum(spent) == usage.prompt_tokens + usage.completion_tokens
    assert scorer.take_tokens() == []
    for (_, words), s, cheap in zip(pairs, scores, BM25Scorer().score_batch(pairs), strict=True):
        top = set(np.argsort(-cheap, kind="stable")[:5].tolist())
        assert {i for i in range(len(words)) if s[i] > 1.0} == top  # prefiltered tier
        assert all(i in top for i in np.flatnonzero(s > 3.0))  # chosen tier within it
        rest = [i for i in range(len(words)) if i not in top]
        assert list(np.argsort(-s[rest], kind="stable")) == list(
            np.argsort(-cheap[rest], kind="stable")
        )  # the rest keep the cheap order


def test_spf_cpf_and_beam_paths(webqsp, seeds, minilm) -> None:
    qs, tg = webqsp
    texts = [q.question for q in qs]
    show = PathText(tg)
    spf = filter_paths(tg, seeds, texts, LegoPFConfig(method="spf", max_hops=2), None, show)
    cpf = filter_paths(tg, seeds, texts, LegoPFConfig(method="cpf", max_hops=2), None, show)
    for q in range(len(qs)):
        G = nx.Graph()
        idx = np.flatnonzero(tg.edge_owner == q)
        G.add_edges_from(zip(tg.heads[idx].tolist(), tg.tails[idx].tolist(), strict=True))
        ends = {p[-1] for p in spf[q].paths}  # each seed's 2-hop neighbourhood, other seeds too
        near = [nx.single_source_shortest_path_length(G, s, cutoff=2) for s in seeds[q]]
        assert ends == {v for n in near for v, d in n.items() if d > 0}
        shortest = {  # every shortest path from each topic entity (the paper's SPF)
            tuple(p)
            for s in seeds[q]
            for v, d in nx.single_source_shortest_path_length(G, s, cutoff=2).items()
            if d > 0
            for p in nx.all_shortest_paths(G, s, v)
        }
        assert len(spf[q].paths) == min(len(shortest), 1000)
        assert set(spf[q].paths) <= shortest
        expected = sum(
            1
            for s in seeds[q]
            for v in G.nodes
            if v != s
            for _ in nx.all_simple_paths(G, s, v, cutoff=2)
        )
        assert len(cpf[q].paths) == min(expected, 1000)
        assert all(len(set(p)) == len(p) for p in cpf[q].paths)
    from graphrag_engine.models.rerank import BiEncoderReranker

    beam_cfg = LegoPFConfig(method="beam", max_hops=2, beam_width=3)
    beam = filter_paths(tg, seeds, texts, beam_cfg, BiEncoderReranker(minilm), show)
    for ps in beam:
        assert len(ps.paths) <= 2 * 3
        assert np.all(np.diff(ps.scores) <= 1e-6)


def test_pr_scorers(webqsp, seeds) -> None:
    qs, tg = webqsp
    texts = [q.question for q in qs]
    show = PathText(tg)
    spf = filter_paths(tg, seeds, texts, LegoPFConfig(), None, show)
    top = refine_paths(spf, texts, 2, BM25Scorer(), show)
    assert all(len(ps.paths) <= 2 for ps in top)
    r1 = refine_paths(spf, texts, 4, RandomScorer(7), show)
    r2 = refine_paths(spf, texts, 4, RandomScorer(7), show)
    assert [ps.paths for ps in r1] == [ps.paths for ps in r2]
    bm = BM25Scorer().score_batch(
        [
            (
                "who is the spouse of nixon",
                ["Nixon people person spouse s Pat", "Nixon born in Yorba"],
            )
        ]
    )[0]
    assert bm[0] > bm[1]


# the paper's Table 4 (section 4.2): instance No. -> (SE method, SE scorer, PF, PR scorer);
# PF "beam:X" is iterative path-filtering (beam search) scored by X
_SCORERS = ["bm25", "bi-encoder", "cross-encoder", "bi-encoder-ft", "llm", "llm-ft"]
TABLE_4 = (
    [("ppr", "none", "spf", "random"), ("rwr", "none", "spf", "random")]
    + [("ppr", s, "spf", "random") for s in _SCORERS]
    + [("ppr", "none", "cpf", "random")]
    + [("ppr", "none", f"beam:{s}", "random") for s in _SCORERS]
    + [("ppr", "none", "spf", s) for s in _SCORERS]
)


def test_the_21_instances_are_table_4_and_the_fine_tuned_ones_explain_themselves(
    run_cli, tmp_path
) -> None:
    files = sorted((REPO / "configs" / "lego").glob("instance_*.yaml"))
    assert [f.stem for f in files] == [f"instance_{i:02d}" for i in range(21)]
    assert len(TABLE_4) == 21
    for i, f in enumerate(files):
        lg = load_query_config(f).options
        pf = lg.pf.method + (f":{lg.pf.scorer}" if lg.pf.method == "beam" else "")
        assert (lg.se.method, lg.se.scorer, pf, lg.pr.scorer) == TABLE_4[i], f.name
        for part in (lg.se, lg.pf, lg.pr):
            assert part.prefilter == 64 or not part.scorer.startswith("llm")
        assert (lg.se.max_ent, lg.se.restart_prob, lg.se.window) == (2000, 0.8, 24)
        assert (lg.pf.beam_width, lg.pr.top_k) == (128, 64)
    # the authors' later fifteen compositions stay loadable under configs/lego/authors/
    authors = sorted((REPO / "configs" / "lego" / "authors").glob("no_*.yaml"))
    assert [f.stem for f in authors] == [f"no_{i:02d}" for i in range(1, 16)]
    assert all(load_query_config(f).method == "lego" for f in authors)
    ft = tmp_path / "instance_18.yaml"  # its model folder moved somewhere absent
    text = (REPO / "configs" / "lego" / "instance_18.yaml").read_text()
    ft.write_text(text.replace("models/lego/bi-encoder-ft", str(tmp_path / "absent")))
    res = run_cli(
        "query", "none", str(REPO.parent / "shared" / "data" / "webqsp_dev.jsonl"),
        "--method", str(ft), "--retrieval-only", "--limit", "2", "--out", str(tmp_path / "ft"),
    )  # fmt: skip
    assert res.returncode == 2
    assert "fine-tuned model" in res.stderr and "margin loss" in res.stderr


def test_lego_cli_end_to_end_with_module_metrics(run_cli, tmp_path, shared_data) -> None:
    out, rep = tmp_path / "run", tmp_path / "report"
    cfg = REPO / "configs" / "lego" / "instance_16.yaml"  # PPR / shortest / bi-encoder
    res = run_cli(
        "query", "none", str(shared_data / "webqsp_dev.jsonl"), "--method", str(cfg),
        "--retrieval-only", "--limit", "40", "--out", str(out),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    rows = [json.loads(x) for x in (out / "results.jsonl").open()]
    assert len(rows) == 40 and all(r["kind"] == "kbqa" for r in rows)
    assert all(r["context_text"] for r in rows if r["extras"]["topic_entities"])
    assert run_cli("eval", str(out), "--out", str(rep)).returncode == 0
    summary = {
        r.split(",")[1]: float(r.split(",")[2])
        for r in (rep / "summary.csv").read_text().splitlines()[1:]
    }
    for m in ("se", "pf", "pr"):
        assert 0.6 < summary[f"{m}_entity_recall"] <= 1.0
        assert f"seconds_{m}" in summary
    # a passage-QA question file with lego.graph: question is refused with the reason
    bad = run_cli(
        "query", "none", "demo", "--method", str(cfg), "--retrieval-only", "--out", str(tmp_path / "b"),
    )  # fmt: skip
    assert bad.returncode == 2 and "lego.graph" in bad.stderr


def test_lego_on_the_index_entity_graph(musique_subset: dict, minilm, tmp_path) -> None:
    index = open_index(musique_subset["index"])
    questions = load_questions(musique_subset["questions"])[:6]
    cfg = query_config("lego")
    cfg.generation.enabled = False
    cfg.options.graph = "index"
    cfg.options.se.max_ent = 200
    ctx = QueryContext(index, cfg, tmp_path)
    ctx.__dict__["embedder"] = minilm
    r = lego(ctx, questions, StageClock())
    assert r.ranking is not None and len(r.contexts) == 6
    rel = index.table("relations", ["src", "dst", "chunk_ids"]).to_pydict()
    chunk_ids = ctx.chunks["ids"]
    name_of = dict(zip(index.table("entities")["entity_id"].to_pylist(),
                       index.table("entities")["name"].to_pylist(), strict=True))  # fmt: skip
    behind: dict[frozenset, set[str]] = {}
    for s, d, cids in zip(rel["src"], rel["dst"], rel["chunk_ids"], strict=True):
        behind.setdefault(frozenset((name_of[s], name_of[d])), set()).update(cids)
    for q, e in enumerate(r.extras):
        ranked = [chunk_ids[i] for i in r.ranking.row(q)[0]]
        assert len(ranked) == len(set(ranked)), "each passage once"
        if e["topic_entities"]:
            assert e["module_counts"]["se_nodes"] <= 200 + len(e["topic_entities"])
            assert e["paths"] and all(p.split(" ")[0] for p in e["paths"])
        # every ranked passage is the source of a relation between two entities of its paths
        on_paths = set(e["retrieved_entities"])
        allowed = set().union(*(c for ends, c in behind.items() if ends <= on_paths), set())
        assert set(ranked) <= allowed
        assert bool(ranked) == any(" -[" in p or "]- " in p for p in e["paths"])
    assert any(e["paths"] for e in r.extras)


def test_answer_prompt_shots_and_smollm_answers(webqsp, smollm, tmp_path) -> None:
    zero = answer_prompt("q?", ["A -[r]-> B"], None)[0]["content"]
    cfg = query_config("lego")
    cfg.options.shots = 3
    few = answer_prompt("q?", ["A -[r]-> B"], cfg.options)[0]["content"]
    assert few.count("Reasoning paths:") == 4 and zero.count("Reasoning paths:") == 1
    qs, _ = webqsp
    cfg = query_config("lego")
    cfg.models.llm.backend = "transformers"
    cfg.generation.max_tokens = 16
    from graphrag_engine.query.run import run_query

    summary = run_query(NoIndex(), qs[:2], cfg, tmp_path / "ans", "webqsp", llm_backend=smollm)
    assert summary["questions"] == 2
    assert summary["query_tokens_per_question"]["answer_prompt"] > 50
    with pytest.raises(ConfigError, match="fine-tuned"):
        make_scorer("bi-encoder-ft", None, str(tmp_path / "absent"))


def test_fine_tuned_llm_instance_reads_a_local_folder(webqsp, tmp_path) -> None:
    """Instance 20 with SmolLM2 saved as a plain transformers folder standing in for a
    fine-tuned model: it loads, scores SE and PR, and its prompts and tokens are accounted."""
    from graphrag_engine.models.transformers_llm import (
        load_tokenizer,
        load_weights,
        save_dequantized,
        smollm2_gguf,
    )
    from graphrag_engine.query.run import run_query

    folder, gguf = smollm2_gguf()
    ft = tmp_path / "llm-ft"  # the process's SmolLM2 weights, saved as a folder of their own
    # (converting the GGUF again, as the first load did, would take about 20 s)
    save_dequantized(load_weights(folder, gguf, "cpu"), load_tokenizer(folder, gguf), ft)
    cfg = load_query_config(REPO / "configs" / "lego" / "instance_20.yaml")
    cfg.options.pr.model = str(ft)  # instance 20: the fine-tuned LLM at PR
    cfg.options.se.scorer, cfg.options.se.model = "llm-ft", str(ft)  # and at SE, as instance 07
    cfg.generation.enabled = False
    qs, _ = webqsp
    summary = run_query(NoIndex(), qs[:1], cfg, tmp_path / "run", "webqsp")
    used = {k: u for k, u in summary["llm"].items() if "/transformers:llm-ft" in k}
    assert {k.split("/")[0] for k in used} >= {"lego_score"}
    assert sum(u["calls"] for u in used.values()) >= 2  # SE and PR each ask at least once
    per_q = summary["query_tokens_per_question"]
    assert per_q["lego_se_llm"] > 100 and per_q["lego_pr_llm"] > 100
    assert (tmp_path / "run" / "llm_ft_cache.sqlite").is_file()
