"""RAPTOR and SiReRAG on real data (MuSiQue passages, MiniLM): the trees' structure holds
(levels, parents, soft membership, leaves), extractive summaries are sentences of the chunks
below them, the clustering equals umap-learn and scikit-learn called directly, SiReRAG's
proposition aggregates equal a reference written from the index tables, and retrieval (RAPTOR's
two modes, SiReRAG's pool) equals a brute-force reference that scores every node and counts
tokens one text at a time; batched equals one question at a time."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.mixture import GaussianMixture

from graphrag_engine.cli import main
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.index.tree_clusters import ClusterSettings, global_local
from graphrag_engine.methods import query_config
from graphrag_engine.methods.raptor import raptor
from graphrag_engine.methods.sirerag import sirerag
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.types import StageClock
from graphrag_engine.store import open_index


@pytest.fixture(scope="module")
def tree_index(musique_subset: dict, tmp_path_factory):
    """The MuSiQue subset's passages indexed with both trees (extractive summaries)."""
    root = tmp_path_factory.mktemp("trees")
    cfg = root / "index.yaml"
    cfg.write_text("tree:\n  enabled: true\n  relatedness: true\n")
    corpus = str(musique_subset["root"] / "corpus.jsonl")
    assert main(["index", corpus, "--out", str(root / "index"), "--config", str(cfg)]) == 0
    return open_index(root / "index"), load_questions(musique_subset["questions"]), root


def _run(index, questions, run_dir, method=raptor, **options):
    cfg = query_config(method.__name__)
    cfg.generation.enabled = False
    for k, v in options.items():
        setattr(cfg.options, k, v)
    ctx = QueryContext(index, cfg, run_dir)
    return ctx, method(ctx, questions, StageClock())


def test_the_tree_has_levels_parents_and_the_chunks_below_each_node(tree_index) -> None:
    index, _, _ = tree_index
    rows = index.table("tree").to_pylist()
    n = index.table("chunks", ["chunk_id"]).num_rows
    level_of = [0] * n + [r["level"] for r in rows]
    assert max(level_of) >= 2, "the subset's ~570 chunks make at least two levels"
    assert index.vectors("tree_vectors").shape[0] == len(rows)
    for r in rows:
        kids = r["children"]
        assert kids and all(level_of[k] == r["level"] - 1 for k in kids)
        below = set()
        for k in kids:
            below |= {k} if k < n else set(rows[k - n]["leaves"])
        assert sorted(below) == r["leaves"]
    for level in range(1, max(level_of) + 1):  # each level's parents are the next level's nodes
        nodes = [n + i for i, r in enumerate(rows) if r["level"] == level]
        counted = [k for r in rows if r["level"] == level + 1 for k in r["children"]]
        assert set(counted) <= set(nodes)
    parents = np.bincount([k for r in rows for k in r["children"]], minlength=n + len(rows))
    assert parents.max() >= 2, "soft membership: some node has two parents"
    assert len(rows) == len({r["node_id"] for r in rows})


def test_extractive_summaries_are_sentences_of_the_chunks_below(tree_index) -> None:
    index, _, _ = tree_index
    rows = index.table("tree").to_pylist()
    texts = index.table("chunks", ["text"]).column(0).to_pylist()
    for r in rows[:40]:
        below = "\n".join(texts[c] for c in r["leaves"])
        assert r["text"], r["node_id"]
        assert _made_of_sentences(r["text"], below), r["node_id"]
        assert not _made_of_sentences(r["text"] + " Made up here.", below)


def _made_of_sentences(text: str, below: str) -> bool:
    """Whether `text` splits at spaces into pieces of `below` that each end a sentence (at
    . ! ? or a closing quote or bracket) or are a whole line of it: a search over the cuts,
    each piece grown word by word while it is still a substring of `below`."""
    lines = {line.strip() for line in below.split("\n")}
    cuts = [i for i, ch in enumerate(text) if ch == " "] + [len(text)]
    reached, starts = {0}, [0]
    while starts:
        a = starts.pop()
        for b in cuts:
            if b <= a:
                continue
            piece = text[a:b]
            if piece not in below:
                break
            if piece[-1] in ".!?\"')\u201d\u2019" or piece in lines:
                if b == len(text):
                    return True
                if b + 1 not in reached:
                    reached.add(b + 1)
                    starts.append(b + 1)
    return False


def test_the_first_level_clusters_as_umap_and_the_mixtures_do(tree_index) -> None:
    """The level-1 clusters equal global UMAP + BIC-sized mixtures + local passes written
    here from the libraries' own calls (tokens aside: the subset's clusters fit 3,500)."""
    import umap

    index, _, _ = tree_index
    vectors = np.asarray(index.vectors("chunk_vectors"), dtype=np.float32)
    s = ClusterSettings()

    def reduce(x, neighbors):
        return umap.UMAP(
            n_neighbors=neighbors, n_components=10, metric="cosine", random_state=224, n_jobs=1
        ).fit_transform(x)

    def split(points):
        sizes = list(range(1, min(50, len(points))))
        bics = [GaussianMixture(k, random_state=224).fit(points).bic(points) for k in sizes]
        k = sizes[int(np.argmin(bics))]
        probs = GaussianMixture(k, random_state=224).fit(points).predict_proba(points)
        return [m for m in (np.flatnonzero(probs[:, c] > 0.1) for c in range(k)) if m.size]

    expected = []
    for g in split(reduce(vectors, int((len(vectors) - 1) ** 0.5))):
        if len(g) <= 11:
            expected.append(sorted(g.tolist()))
            continue
        expected += [sorted(g[m].tolist()) for m in split(reduce(vectors[g], 10))]
    got = [sorted(c.tolist()) for c in global_local(vectors, s)]
    assert got == expected
    built = [r["children"] for r in index.table("tree").to_pylist() if r["level"] == 1]
    if all(len(c) > 0 for c in got):
        assert sorted(map(sorted, built)) == sorted(got) or len(built) >= len(got)


def _reference(ctx: QueryContext, question: str, mode: str, budget: int, top_k: int) -> list[int]:
    """One question: every node scored in a loop, tokens counted text by text, the paper's
    collapsed walk or traversal written out plainly."""
    index = ctx.index
    rows = index.table("tree").to_pylist()
    chunks = ctx.chunks["titled"]
    texts = list(chunks) + [r["text"] for r in rows]
    vectors = list(np.asarray(ctx.chunk_vectors)) + list(np.asarray(index.vectors("tree_vectors")))
    q = ctx.encode_queries([question])[0]
    score = [round(float(np.dot(q, v)), 5) for v in vectors]  # ties: node number
    tokens = [ctx.tokenizer.encode(t).ids.__len__() for t in texts]
    if mode == "collapsed":
        order = sorted(range(len(texts)), key=lambda i: (-score[i], i))
    else:
        n = len(chunks)
        top = max(r["level"] for r in rows)
        layer = [n + i for i, r in enumerate(rows) if r["level"] == top]
        order = []
        while layer:
            best = sorted(layer, key=lambda i: (-score[i], i))[:top_k]
            order += best
            layer = sorted({k for b in best if b >= n for k in rows[b - n]["children"]})
    picked, used = [], 0
    for i in order:
        if used + tokens[i] > budget:
            break
        picked.append(i)
        used += tokens[i]
    return [texts[i] for i in picked]


@pytest.mark.parametrize("mode", ["collapsed", "traversal"])
def test_retrieval_equals_the_brute_force_reference(tree_index, mode: str) -> None:
    index, questions, root = tree_index
    ctx, got = _run(index, questions[:12], root / f"run-{mode}", retrieval=mode)
    budget = ctx.scaled(2000)
    for q, context in zip(questions[:12], got.contexts, strict=True):
        want = _reference(ctx, q.question, mode, budget, 5)
        assert context.sections[0].items == want, q.qid
        assert context.sections[0].counts == ctx.count_tokens(want)
        assert want, "a 2,000-token budget holds some node"


def test_batched_equals_one_question_at_a_time(tree_index) -> None:
    index, questions, root = tree_index
    _, batch = _run(index, questions, root / "batch")
    for i, q in enumerate(questions[:8]):
        _, one = _run(index, [q], root / f"one-{i}")
        assert one.contexts[0] == batch.contexts[i]
        assert one.ranking.row(0)[0] == batch.ranking.row(i)[0]


def test_the_ranking_leads_with_the_picked_nodes_chunks(tree_index) -> None:
    index, questions, root = tree_index
    ctx, got = _run(index, questions[:10], root / "rank")
    rows = index.table("tree").to_pylist()
    n = len(ctx.chunks["ids"])
    text_node = {t: i for i, t in enumerate(ctx.chunks["titled"])}
    text_node.update({r["text"]: n + i for i, r in enumerate(rows)})
    for q in range(10):
        first = text_node[got.contexts[q].sections[0].items[0]]
        lead = [first] if first < n else rows[first - n]["leaves"]
        ranked = got.ranking.row(q)[0]
        assert set(ranked[: len(lead)]) == set(lead[: len(ranked)])
        assert len(ranked) == len(set(ranked)) == 2 * ctx.cfg.retrieval.candidates


def test_the_cli_runs_it_over_real_questions(tree_index, musique_subset, tmp_path) -> None:
    """Through the CLI, as a user runs it: every question gets ranked passages."""
    index, _, _ = tree_index
    out = tmp_path / "run"
    args = ["query", str(index.root), str(musique_subset["questions"]), "--method", "raptor"]
    assert main([*args, "--retrieval-only", "--out", str(out)]) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").open()]
    assert len(rows) == 30 and all(len(r["retrieved_ids"]) >= 5 for r in rows)


def test_proposition_aggregates_equal_a_reference_from_the_tables(tree_index) -> None:
    """Per entity its units, one per line in unit order; an entity of one unit that names other
    entities is skipped; equal texts kept once; the leaves are the units' chunks."""
    index, _, _ = tree_index
    units = index.table("units", ["unit_id", "chunk_id", "text"]).to_pylist()
    row = {u["unit_id"]: i for i, u in enumerate(units)}
    chunk_row = {
        c: i for i, c in enumerate(index.table("chunks", ["chunk_id"]).column(0).to_pylist())
    }
    of_entity: dict[str, list[int]] = {}
    count: dict[int, int] = {}
    for link in index.table("unit_entity").to_pylist():
        r = row[link["unit_id"]]
        if r not in of_entity.setdefault(link["entity_id"], []):
            of_entity[link["entity_id"]].append(r)
            count[r] = count.get(r, 0) + 1
    want, seen = [], set()
    for rows in of_entity.values():
        rows = sorted(rows)
        if len(rows) == 1 and count[rows[0]] > 1:
            continue
        text = "\n".join(units[r]["text"] for r in rows)
        if text not in seen:
            seen.add(text)
            want.append((text, sorted({chunk_row[units[r]["chunk_id"]] for r in rows})))
    got = [
        (r["text"], r["leaves"]) for r in index.table("related_tree").to_pylist() if r["level"] == 0
    ]
    assert got == want and len(got) > 500


def test_the_relatedness_tree_grows_from_the_aggregates(tree_index) -> None:
    index, _, _ = tree_index
    rows = index.table("related_tree").to_pylist()
    n = index.table("chunks", ["chunk_id"]).num_rows
    assert index.vectors("related_tree_vectors").shape[0] == len(rows)
    assert max(r["level"] for r in rows) >= 2
    for r in rows:
        if r["level"] == 0:
            assert not r["children"]
            continue
        kids = [rows[k - n] for k in r["children"]]
        assert all(k >= n for k in r["children"])  # aggregates and summaries, never chunks
        assert all(k["level"] == r["level"] - 1 for k in kids)
        assert sorted({c for k in kids for c in k["leaves"]}) == r["leaves"]


def test_sirerag_takes_the_pools_best_nodes_as_brute_force_does(tree_index) -> None:
    index, questions, root = tree_index
    ctx, got = _run(index, questions[:12], root / "sire", method=sirerag)
    tables = [index.table(t).to_pylist() for t in ("tree", "related_tree")]
    texts = list(ctx.chunks["titled"]) + [r["text"] for rows in tables for r in rows]
    vectors = np.concatenate(
        [np.asarray(ctx.chunk_vectors)]
        + [np.asarray(index.vectors(f"{t}_vectors")) for t in ("tree", "related_tree")]
    )
    for q, context in zip(questions[:12], got.contexts, strict=True):
        qv = ctx.encode_queries([q.question])[0]
        score = [round(float(np.dot(qv, v)), 5) for v in vectors]  # ties: node number
        best = sorted(range(len(texts)), key=lambda i: (-score[i], i))[:20]
        assert context.sections[0].items == [texts[i] for i in best], q.qid
    _, batch = _run(index, questions, root / "sire-batch", method=sirerag)
    for i, q in enumerate(questions[:6]):
        _, one = _run(index, [q], root / f"sire-one-{i}", method=sirerag)
        assert one.contexts[0] == batch.contexts[i]
        assert one.ranking.row(0)[0] == batch.ranking.row(i)[0]


def test_a_killed_llm_tree_build_resumes_without_asking_again(tmp_path) -> None:
    """SmolLM2 summarises the demo's clusters one prompt at a time; the build is killed once
    some summaries are cached, and the re-run asks the model only for the rest."""
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    from tests.paths import REPO

    cfg = tmp_path / "index.yaml"
    cfg.write_text(
        "tree:\n  enabled: true\n  summaries: llm\n"
        "models:\n  llm:\n    backend: transformers\n    batch_size: 1\n"
    )
    index = tmp_path / "index"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRAPHRAG_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "graphrag_engine.cli", "index", "--demo", "--out", str(index)]
    proc = subprocess.Popen(
        [*cmd, "--config", str(cfg)], env=env, cwd=REPO, stderr=subprocess.PIPE, text=True
    )
    cache = index / "llm_cache.sqlite"

    def cached() -> int:
        if not cache.exists():
            return 0
        try:
            with sqlite3.connect(cache, timeout=1) as db:
                return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        except sqlite3.OperationalError:
            return 0

    deadline = time.monotonic() + 600
    while cached() < 2:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "no summary was cached"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    before = cached()
    assert not (index / "manifest.json").exists()
    rerun = subprocess.run(
        [*cmd, "--config", str(cfg)], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr
    stage = json.loads((index / "manifest.json").read_text())["stats"]["stages"]["tree"]
    assert stage["cached_calls"] == before >= 2
    assert stage["model_calls"] + stage["cached_calls"] >= stage["items"] > before
    assert cached() == before + stage["model_calls"], "an answer was asked for twice"
    rows = open_index(index).table("tree").to_pylist()
    assert len(rows) == stage["items"] and all(r["text"] for r in rows)
