"""The cluster bootstrap both studies' intervals come from.

The unit of resampling is the cluster (a capital prompt's country, else the prompt; a pair's
cluster): tokens or pairs of one cluster share their context, so they are not independent.
Each replicate draws as many clusters as there are, with replacement (:func:`cluster_weights`:
how often each is drawn), and recomputes the statistic over the drawn clusters' values (a
cluster drawn twice counts twice). Intervals are percentile intervals of the replicates.

* :func:`bootstrap_interval` — the mean's interval (1-D values, or the columns of a matrix
  drawn with the same resamples, so they can be compared);
* :func:`bootstrap_means` — its vectorised core, from a :class:`numpy.random.Generator`;
* :func:`median_interval` — the median's, with the same draws for the same seed and clusters.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from iglens_viz.errors import InvalidRequestError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "bootstrap_interval",
    "bootstrap_means",
    "check_level",
    "cluster_weights",
    "median_interval",
]


def cluster_weights(n_clusters: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_boot, n_clusters)`` counts: how often each cluster is drawn in each replicate
    (n_clusters draws with replacement per replicate)."""
    idx = rng.integers(0, n_clusters, size=(n_boot, n_clusters))
    flat = idx + (np.arange(n_boot) * n_clusters)[:, None]
    return (
        np.bincount(flat.ravel(), minlength=n_boot * n_clusters)
        .reshape(n_boot, n_clusters)
        .astype(np.float64)
    )


def bootstrap_means(
    values: np.ndarray,
    clusters: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
    level: float,
    center: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised cluster bootstrap of nan-means of the columns of ``values`` ``(N, M)``.

    A replicate mean is the estimate's mean summed in another order, so a bound can pass
    the estimate ``center`` (default: the columns' nan-means) by rounding: every replicate of
    identical prompts is the estimate, give or take an ulp. A bound past ``center`` by no
    more than that rounding is set to it, so the interval holds its estimate."""
    m = values.shape[1]
    nan = np.full(m, np.nan)
    _, inverse = np.unique(clusters, return_inverse=True)
    n_clusters = int(inverse.max()) + 1 if len(inverse) else 0
    if n_clusters < 2 or n_boot < 1:
        return nan, nan.copy()
    finite = np.isfinite(values)
    sums = np.zeros((n_clusters, m))
    counts = np.zeros((n_clusters, m))
    np.add.at(sums, inverse, np.where(finite, values, 0.0))
    np.add.at(counts, inverse, finite.astype(np.float64))
    weights = cluster_weights(n_clusters, n_boot, rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (weights @ sums) / (weights @ counts)  # (n_boot, m); 0/0 -> NaN
    alpha = (1.0 - level) / 2.0
    lo, hi = nan.copy(), nan.copy()
    # a column needs at least two clusters with a finite value to vary
    ok = (counts > 0).sum(axis=0) >= 2
    if ok.any():
        q = np.nanquantile(means[:, ok], [alpha, 1.0 - alpha], axis=0)
        lo[ok], hi[ok] = q[0], q[1]
        # Sums of N terms in float64 (numerator and denominator of each mean) are within
        # N·eps of the sum of the terms' magnitudes.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column
            masked = np.where(finite, values, np.nan)
            center = np.nanmean(masked, axis=0) if center is None else center
            size = np.nanmax(np.abs(masked), axis=0)
        rounding = 4 * len(values) * np.finfo(np.float64).eps * np.nan_to_num(size)
        lo = np.where(ok & (lo > center) & (lo - center <= rounding), center, lo)
        hi = np.where(ok & (hi < center) & (center - hi <= rounding), center, hi)
    return lo, hi


def check_level(level: float) -> float:
    """``level`` as a float in (0, 1), or :class:`~iglens_viz.InvalidRequestError`."""
    level = float(level)
    if not 0.0 < level < 1.0:
        raise InvalidRequestError(f"level must be in (0, 1), got {level}")
    return level


def bootstrap_interval(
    values: ArrayLike,
    clusters: ArrayLike,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """Percentile cluster-bootstrap interval of the mean of ``values``.

    The tokens of one prompt share the prompt's context, so they are not independent; the
    unit of resampling is therefore the cluster (the prompt): each of ``n_boot`` replicates
    draws as many clusters as there are, with replacement, and recomputes the mean over all
    tokens of the drawn clusters (a cluster drawn twice counts twice). The interval is the
    ``(1 − level)/2`` and ``(1 + level)/2`` quantiles of the replicate means (a bound that
    passes the mean of ``values`` by float rounding only is set to it). NaN values are
    left out of the means (as ``numpy.nanmean``); vectorised as one ``(n_boot, clusters)``
    matrix of draw counts.

    Parameters
    ----------
    values:
        ``(N,)`` per-token values (bools count as 0/1), or ``(N, M)`` for M quantities over
        the same tokens (drawn with the same resamples, so they can be compared).
    clusters:
        ``(N,)`` cluster id of each value (the prompt).
    n_boot:
        Number of bootstrap replicates.
    seed:
        Seed of the resampling: the same seed gives the same interval.
    level:
        Coverage of the interval, in (0, 1).

    Returns
    -------
    ``(lo, hi)``: floats for 1-D ``values``, ``(M,)`` arrays for 2-D; NaN when fewer than two
    clusters hold a finite value (one prompt says nothing about prompt-to-prompt variation).
    """
    level = check_level(level)
    v = np.asarray(values, dtype=np.float64)
    one = v.ndim == 1
    v2 = v.reshape(len(v), -1)
    clusters = np.asarray(clusters).reshape(-1)
    if len(clusters) != len(v2):
        raise InvalidRequestError(
            f"values and clusters differ in length: {len(v2)} vs {len(clusters)}"
        )
    lo, hi = bootstrap_means(v2, clusters, int(n_boot), np.random.default_rng(seed), level)
    return (float(lo[0]), float(hi[0])) if one else (lo, hi)


def median_interval(
    values: np.ndarray, clusters: np.ndarray, n_boot: int, seed: int, level: float
) -> tuple[float, float, float]:
    """The median of ``values`` and its percentile cluster-bootstrap interval.

    A replicate draws the clusters with replacement (the same draws as
    :func:`bootstrap_interval` for the same seed and clusters)
    and takes the median of the pooled values of the drawn clusters, a cluster drawn twice
    counting twice (as :func:`numpy.median` of the repeated values)."""
    ok = np.isfinite(values)
    v, g = values[ok], np.asarray(clusters)[ok]
    if not len(v):
        return np.nan, np.nan, np.nan
    point = float(np.median(v))
    _, inverse = np.unique(g, return_inverse=True)
    n_clusters = int(inverse.max()) + 1
    if n_clusters < 2 or n_boot < 1:
        return point, np.nan, np.nan
    weights = cluster_weights(n_clusters, n_boot, np.random.default_rng(seed))[:, inverse]
    order = np.argsort(v, kind="stable")
    sv = v[order]
    cum = np.cumsum(weights[:, order], axis=1)
    total = cum[:, -1]
    picks = []
    for rank in ((total - 1) // 2, total // 2):
        picks.append(sv[(cum <= rank[:, None]).sum(axis=1)])
    medians = (picks[0] + picks[1]) / 2.0
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(medians, [alpha, 1.0 - alpha])
    return point, float(lo), float(hi)
