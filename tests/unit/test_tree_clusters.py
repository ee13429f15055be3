"""RAPTOR's clustering steps that need no UMAP, against scikit-learn called directly, and the
tree's settings refused with the file, line and key (exit 2) before any work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.mixture import GaussianMixture

from graphrag_engine.cli import main
from graphrag_engine.index.tree_clusters import ClusterSettings, _runs, bic_size, soft_clusters


def _blobs(seed: int = 0) -> np.ndarray:
    """Three well-separated Gaussian blobs of 20 points in 4 dimensions."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0, 0, 0, 0], [8, 0, 0, 0], [0, 8, 0, 0]], dtype=float)
    return np.concatenate([c + rng.normal(scale=0.5, size=(20, 4)) for c in centres])


def test_bic_size_is_the_least_bic_of_the_sweep() -> None:
    points = _blobs()
    bics = [GaussianMixture(k, random_state=7).fit(points).bic(points) for k in range(1, 12)]
    assert bic_size(points, 12, 7) == 1 + int(np.argmin(bics)) == 3


def test_soft_clusters_keep_every_component_above_the_threshold() -> None:
    points = _blobs(1)
    s = ClusterSettings(threshold=0.1, max_clusters=12, seed=7)
    probs = GaussianMixture(3, random_state=7).fit(points).predict_proba(points)
    expected = [np.flatnonzero(probs[:, c] > 0.1) for c in range(3)]
    got = soft_clusters(points, s)
    assert [m.tolist() for m in got] == [m.tolist() for m in expected if m.size]
    assert sorted(np.concatenate(got).tolist()) == list(range(60))  # separated: one each


def test_nodes_between_two_components_join_both() -> None:
    rng = np.random.default_rng(0)  # two overlapping blobs: the nodes between have two homes
    points = np.concatenate([rng.normal(c, 1.0, size=(30, 2)) for c in (0.0, 3.0)])
    s = ClusterSettings(threshold=0.1, max_clusters=6, seed=7)
    got = soft_clusters(points, s)
    k = bic_size(points, 6, 7)
    probs = GaussianMixture(k, random_state=7).fit(points).predict_proba(points)
    twice = {i for i in range(60) if (probs[i] > 0.1).sum() >= 2}
    homes = np.bincount(np.concatenate(got), minlength=60)
    assert twice and {i for i in range(60) if homes[i] >= 2} == twice


def test_a_cluster_that_cannot_divide_is_cut_into_runs_within_the_budget() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(9, 5))
    tokens = np.array([40, 70, 10, 300, 55, 20, 90, 60, 30])
    members = np.arange(9)
    runs = _runs(vectors, tokens, members, 120)
    assert sorted(np.concatenate(runs).tolist()) == list(range(9))
    for run in runs:
        assert tokens[run].sum() <= 120 or len(run) == 1
    centroid = vectors.mean(axis=0)
    order = np.argsort(-(vectors @ centroid), kind="stable").tolist()
    assert np.concatenate(runs).tolist() == order


@pytest.mark.parametrize(
    ("yaml", "key"),
    [
        ("tree:\n  enabled: true\n  dim: 0\n", "tree.dim"),
        ("tree:\n  enabled: true\n  summary_tokens: 0\n", "tree.summary_tokens"),
        ("tree:\n  enabled: true\n  threshold: 1.5\n", "tree.threshold"),
        ("tree:\n  enabled: true\n  max_clusters: 1\n", "tree.max_clusters"),
    ],
)
def test_bad_tree_settings_exit_2_with_the_file_and_key(
    tmp_path: Path, capsys, yaml: str, key: str
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml)
    assert main(["index", "--demo", "--out", str(tmp_path / "i"), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cfg) in err[0] and key in err[0], err
    assert not (tmp_path / "i").exists()


def test_an_llm_tree_without_an_llm_exits_2(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("tree:\n  enabled: true\n  summaries: llm\n")
    assert main(["index", "--demo", "--out", str(tmp_path / "i"), "--config", str(cfg)]) == 2
    assert "tree.summaries: llm needs an LLM" in capsys.readouterr().err


def _collapsed_points() -> np.ndarray:
    """Four vectors repeated 15 times and three near-copies of one: float32 points whose
    one-component mixture scikit-learn refuses (a covariance with no spread), as the
    proposition aggregates of 2Wiki dev gave (equal aggregates after UMAP)."""
    rng = np.random.default_rng(0)
    for _ in range(4):
        base = rng.normal(size=(4, 10)).astype(np.float32)
        near = rng.normal(size=(3, 10)).astype(np.float32) * 1e-3 + base[0]
        points = np.concatenate([np.repeat(base, 15, axis=0), near]).astype(np.float32)
    return points


def test_points_no_mixture_fits_as_given_still_cluster() -> None:
    points = _collapsed_points()
    with pytest.raises(ValueError):
        GaussianMixture(1, random_state=224).fit(points)
    s = ClusterSettings(threshold=0.1, max_clusters=12, seed=224)
    clusters = soft_clusters(points, s)
    covered = np.concatenate(clusters)
    assert sorted(set(covered.tolist())) == list(range(len(points)))
    assert 1 <= bic_size(points, 12, 224) <= 11
