"""RAPTOR's clustering of one tree level (Sarthi et al., ICLR 2024, section 3 and its code),
over all the level's node vectors at once:

1. Global: UMAP to `dim` dimensions (cosine, n_neighbors = sqrt(n - 1)); a Gaussian mixture
   whose size minimises BIC over 1 .. min(max_clusters, n) - 1; a node joins every component
   whose probability for it exceeds `threshold` (soft membership).
2. Local: each global cluster of more than dim + 1 nodes is reduced again (n_neighbors 10) and
   split the same way; a smaller one stays whole.
3. A cluster whose members hold more than `max_tokens` is clustered again by the same two
   steps; one that cannot be divided that way (too few nodes, or it comes back whole) is cut
   into runs of nodes in order of closeness to its centroid, each within `max_tokens`.

UMAP (umap-learn) and the mixtures (scikit-learn) are the libraries the authors use; nothing
here reads the engine's tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

LOCAL_NEIGHBORS = 10
"""UMAP's n_neighbors for the local step (the authors' code)."""


@dataclass(frozen=True)
class ClusterSettings:
    """What one level's clustering takes (TreeConfig's values)."""

    dim: int = 10
    threshold: float = 0.1
    max_clusters: int = 50
    max_tokens: int = 3500
    seed: int = 224
    tick: Callable[[], object] | None = None
    """Called after every mixture fit (a progress bar that moves while a level clusters)."""


def reduce(vectors: np.ndarray, dim: int, neighbors: int, seed: int) -> np.ndarray:
    """UMAP of the vectors to `dim` dimensions by cosine (n_neighbors clipped to n - 1)."""
    import umap  # imported here: its numba compilation costs seconds, and only trees need it

    n = len(vectors)
    model = umap.UMAP(
        n_neighbors=max(2, min(neighbors, n - 1)),
        n_components=min(dim, n - 2),
        metric="cosine",
        random_state=seed,
        init="spectral" if n > dim + 2 else "random",
        n_jobs=1,
    )
    return np.asarray(model.fit_transform(np.asarray(vectors, dtype=np.float32)))


def mixture(points: np.ndarray, k: int, seed: int):
    """A fitted k-component Gaussian mixture, or None where none fits: nodes with equal vectors
    (equal aggregates, duplicated sentences) can leave a component no spread, and scikit-learn
    then refuses the fit; it is tried once more in float64 with 100x the covariance floor."""
    from sklearn.mixture import GaussianMixture

    try:
        return GaussianMixture(k, random_state=seed).fit(points)
    except ValueError:
        pass
    try:
        wide = GaussianMixture(k, random_state=seed, reg_covar=1e-4)
        return wide.fit(np.asarray(points, dtype=np.float64))
    except ValueError:
        return None


def bic_size(
    points: np.ndarray, max_clusters: int, seed: int, tick: Callable[[], object] | None = None
) -> int:
    """The mixture size with the least BIC among 1 .. min(max_clusters, n) - 1 (the authors'
    sweep; 1 where n < 3); a size no mixture fits is passed over (1 if none fits)."""
    sizes = range(1, max(2, min(max_clusters, len(points))))
    bics = []
    for k in sizes:
        model = mixture(points, k, seed)
        bics.append(np.inf if model is None else model.bic(np.asarray(points, model.means_.dtype)))
        if tick is not None:
            tick()
    return sizes[int(np.argmin(bics))] if np.isfinite(min(bics)) else 1


def soft_clusters(points: np.ndarray, s: ClusterSettings) -> list[np.ndarray]:
    """Members (positions into `points`) of each mixture component that some node joins, the
    mixture's size chosen by BIC; a node joins every component above `threshold` (all nodes
    one cluster where no mixture fits them)."""
    k = bic_size(points, s.max_clusters, s.seed, s.tick)
    model = mixture(points, k, s.seed)
    if model is None:
        return [np.arange(len(points))]
    probs = model.predict_proba(np.asarray(points, model.means_.dtype))
    members = [np.flatnonzero(probs[:, c] > s.threshold) for c in range(k)]
    return [m for m in members if m.size]


def global_local(vectors: np.ndarray, s: ClusterSettings) -> list[np.ndarray]:
    """Steps 1 and 2: clusters as arrays of positions into `vectors`, global cluster by global
    cluster (a node may be in several)."""
    n = len(vectors)
    if n <= 2:
        return [np.arange(n)]
    reduced = reduce(vectors, s.dim, int((n - 1) ** 0.5), s.seed)
    out = []
    for members in soft_clusters(reduced, s):
        if len(members) <= s.dim + 1:
            out.append(members)
            continue
        local = reduce(vectors[members], s.dim, LOCAL_NEIGHBORS, s.seed)
        out += [members[m] for m in soft_clusters(local, s)]
    return out


def level_clusters(vectors: np.ndarray, tokens: np.ndarray, s: ClusterSettings) -> list[np.ndarray]:
    """Every cluster of one level (steps 1 to 3), each within `max_tokens` where it can be."""
    out = []
    for members in global_local(vectors, s):
        out += _within_tokens(vectors, tokens, members, s)
    return out


def _within_tokens(
    vectors: np.ndarray, tokens: np.ndarray, members: np.ndarray, s: ClusterSettings
) -> list[np.ndarray]:
    """`members` as one cluster if their tokens fit, else clustered again (step 3)."""
    if len(members) == 1 or tokens[members].sum() <= s.max_tokens:
        return [members]
    if len(members) > s.dim + 1:
        parts = global_local(vectors[members], s)
        if not (len(parts) == 1 and len(parts[0]) == len(members)):
            return [m for p in parts for m in _within_tokens(vectors, tokens, members[p], s)]
    return _runs(vectors, tokens, members, s.max_tokens)


def _runs(
    vectors: np.ndarray, tokens: np.ndarray, members: np.ndarray, max_tokens: int
) -> list[np.ndarray]:
    """Members in order of cosine to their centroid, cut into runs within `max_tokens` (a
    member longer than that alone)."""
    v = vectors[members]
    centroid = v.mean(axis=0)
    order = members[np.argsort(-(v @ centroid), kind="stable")]
    runs, run, used = [], [], 0
    for m in order.tolist():
        if run and used + tokens[m] > max_tokens:
            runs.append(np.asarray(run))
            run, used = [], 0
        run.append(m)
        used += int(tokens[m])
    runs.append(np.asarray(run))
    return runs
