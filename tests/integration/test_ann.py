"""Approximate vector search (faiss HNSW / IVF) against the exact blocked cosine top-k, on the
real vectors of a MuSiQue index, and its cache under the index folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.cli import main
from graphrag_engine.kernels.ann import AnnIndex, AnnParams, ivf_lists_for
from graphrag_engine.kernels.similarity import cosine_topk
from graphrag_engine.results import read_rows
from graphrag_engine.store.index_store import Index


@pytest.fixture(scope="module")
def real_vectors(musique_subset: dict) -> tuple[np.ndarray, np.ndarray]:
    """(distinct relation vectors, chunk vectors as queries) of the MuSiQue subset index.
    Relations described by the same sentence share its vector; recall by row id needs each
    vector once."""
    index = Index(musique_subset["index"])
    return (
        np.unique(np.asarray(index.vectors("relation_vectors")), axis=0),
        np.asarray(index.vectors("chunk_vectors"))[:200],
    )


def _recall(found, exact) -> float:
    return float(
        np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact, strict=True)])
    )


def test_ivf_probing_every_list_is_exact_search(real_vectors) -> None:
    vectors, queries = real_vectors
    lists = ivf_lists_for(len(vectors))
    ann = AnnIndex.build(vectors, AnnParams("ivf", ivf_probe=lists))
    scores, ids = ann.search(queries, 10)
    ref_scores, ref_ids = cosine_topk(queries, vectors, 10)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-5)
    assert _recall(ids, ref_ids) > 0.999  # only exact ties may swap


def test_hnsw_recall_and_a_saved_index_searches_the_same(real_vectors, tmp_path: Path) -> None:
    vectors, queries = real_vectors
    ann = AnnIndex.build(vectors, AnnParams("hnsw"))
    scores, ids = ann.search(queries, 10)
    _, ref_ids = cosine_topk(queries, vectors, 10)
    assert _recall(ids, ref_ids) >= 0.95
    assert (np.diff(scores, axis=1) <= 1e-6).all()  # best first
    ann.save(tmp_path / "x.faiss")
    again = AnnIndex.load(tmp_path / "x.faiss", AnnParams("hnsw"))
    assert again.ntotal == len(vectors)
    s2, i2 = again.search(queries, 10)
    np.testing.assert_array_equal(i2, ids)
    # fewer rows than k: padded like cosine_topk
    small = AnnIndex.build(vectors[:3], AnnParams("hnsw"))
    s3, i3 = small.search(queries[:2], 5)
    assert (i3[:, 3:] == -1).all() and np.isinf(s3[:, 3:]).all()
    # a low IVF probe trades recall for speed: below exact, far above chance
    coarse = AnnIndex.build(vectors, AnnParams("ivf", ivf_probe=1))
    assert 0.2 < _recall(coarse.search(queries, 10)[1], ref_ids) < 1.0


def _ann_config(tmp: Path, method: str, backend: str, min_vectors: int = 1) -> Path:
    cfg = tmp / f"{method}-{backend}.yaml"
    cfg.write_text(
        f"method: {method}\nretrieval:\n  ann:\n    backend: {backend}\n"
        f"    min_vectors: {min_vectors}\n"
    )
    return cfg


def _query(index: Path, questions: Path, method: str, out: Path) -> list[dict]:
    args = ["query", str(index), str(questions), "--method", method, "--out", str(out)]
    assert main([*args, "--retrieval-only"]) == 0
    return read_rows(out / "results.parquet")


def test_query_with_hnsw_ranks_like_exact_and_caches_its_indexes(
    musique_subset: dict, tmp_path: Path, capfd
) -> None:
    index, questions = tmp_path / "index", musique_subset["questions"]
    shutil.copytree(musique_subset["index"], index)  # ann/ is written beside the index
    exact = _query(index, questions, "hipporag", tmp_path / "exact")
    assert not (index / "ann").exists()  # default: tables this small are searched exactly
    cfg = _ann_config(tmp_path, "hipporag", "hnsw")
    rows = _query(index, questions, str(cfg), tmp_path / "hnsw")
    saved = sorted(p.name for p in (index / "ann").iterdir())
    # HippoRAG-style search reads three tables: chunk vectors (dense), entity vectors (links)
    # and relation vectors (fact links)
    tables = ["chunk_vectors", "entity_vectors", "relation_vectors"]
    assert [p.split("-")[0] for p in saved] == [t for t in tables for _ in range(2)]
    meta = json.loads(next((index / "ann").glob("entity_vectors-*.json")).read_text())
    assert meta["rows"] == Index(index).rows("entity_vectors") and meta["dim"] == 384
    top5 = [r["retrieved_ids"][:5] for r in rows]
    ref5 = [r["retrieved_ids"][:5] for r in exact]
    assert _recall(top5, ref5) >= 0.9
    capfd.readouterr()

    # a second run loads the saved indexes (nothing rebuilt) and ranks the same
    stamp = {p: p.stat().st_mtime_ns for p in (index / "ann").iterdir()}
    again = _query(index, questions, str(cfg), tmp_path / "hnsw2")
    assert [r["retrieved_ids"] for r in again] == [r["retrieved_ids"] for r in rows]
    assert {p: p.stat().st_mtime_ns for p in (index / "ann").iterdir()} == stamp
    assert "rebuilding" not in capfd.readouterr().err

    # a damaged index file and a meta file naming another embedder are rebuilt, saying why
    faiss_file = next((index / "ann").glob("chunk_vectors-*.faiss"))
    faiss_file.write_bytes(faiss_file.read_bytes()[:1000])
    meta_file = next((index / "ann").glob("entity_vectors-*.json"))
    meta_file.write_text(json.dumps({**meta, "model": "another-embedder"}))
    third = _query(index, questions, str(cfg), tmp_path / "hnsw3")
    err = capfd.readouterr().err
    assert f"{faiss_file} does not match chunk_vectors: it cannot be read" in err
    assert "entity_vectors: its model differ" in err
    assert [r["retrieved_ids"] for r in third] == [r["retrieved_ids"] for r in rows]
    assert json.loads(meta_file.read_text())["model"] == meta["model"]
    # exact again: the same rankings as the default run
    cfg_exact = _ann_config(tmp_path, "hipporag", "exact")
    back = _query(index, questions, str(cfg_exact), tmp_path / "exact2")
    assert [r["retrieved_ids"] for r in back] == [r["retrieved_ids"] for r in exact]


def test_ann_settings_are_checked(run_cli, musique_subset: dict, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: naive\nretrieval:\n  ann:\n    backend: annoy\n")
    proc = run_cli("query", str(musique_subset["index"]), str(musique_subset["questions"]),
                   "--method", str(bad), "--out", str(tmp_path / "r"), "--retrieval-only")  # fmt: skip
    assert proc.returncode == 2
    assert "retrieval.ann.backend' must be one of 'auto', 'exact', 'hnsw', 'ivf'" in proc.stderr
    bad.write_text("method: naive\nretrieval:\n  ann:\n    min_vectors: 0\n")
    proc = run_cli("query", str(musique_subset["index"]), str(musique_subset["questions"]),
                   "--method", str(bad), "--out", str(tmp_path / "r"), "--retrieval-only")  # fmt: skip
    assert proc.returncode == 2 and "retrieval.ann.min_vectors' must be >= 1" in proc.stderr


def test_a_run_folder_from_before_the_ann_keys_resumes(
    musique_subset: dict, tmp_path: Path
) -> None:
    index, questions = musique_subset["index"], musique_subset["questions"]
    out = tmp_path / "run"
    rows = _query(index, questions, "naive", out)
    marker = json.loads((out / "run.json").read_text())
    del marker["config"]["retrieval"]["ann"]  # as an engine before retrieval.ann wrote it
    (out / "run.json").write_text(json.dumps(marker))
    assert _query(index, questions, "naive", out) == rows
    # a changed ANN setting is a different run
    cfg = _ann_config(tmp_path, "naive", "ivf")
    args = ["query", str(index), str(questions), "--method", str(cfg), "--out", str(out)]
    assert main([*args, "--retrieval-only"]) == 2
