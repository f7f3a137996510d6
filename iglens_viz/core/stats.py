"""Row statistics the onset rule, the validation and the study share: pure numpy.

- :func:`argmax_rows`: per row, the index of the largest finite value (ties: the lowest
  index, as :func:`numpy.argmax`), -1 for a row without one. The onset rule
  (:func:`~iglens_viz.core.result.onset_segments`) and the study's predictors use it.
- :func:`spearman_rows` / :func:`spearman`: Spearman rank correlation over the pairs finite
  in both, average ranks for ties (as ``scipy.stats.spearmanr``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InvalidRequestError

__all__ = ["argmax_rows", "average_ranks", "spearman", "spearman_rows"]


def argmax_rows(x: ArrayLike) -> np.ndarray:
    """Per row of ``x`` ``(N, k)``, the index of the largest finite value (the lowest index
    on ties); -1 when the row has no finite value."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    out = np.argmax(np.where(finite, x, -np.inf), axis=1)
    return np.where(finite.any(axis=1), out, -1).astype(np.int64)


def average_ranks(x: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Per row of ``x`` ``(N, k)``, the ranks 1 … n of the entries where ``ok`` (ties: their
    average rank, as ``scipy.stats.rankdata``), ranked among those entries only; 0 elsewhere."""
    keyed = np.where(ok, x, np.inf)  # the others sort last, apart from every kept value
    order = np.argsort(keyed, axis=1, kind="stable")
    ordered = np.take_along_axis(keyed, order, axis=1)
    k = ordered.shape[1]
    index = np.broadcast_to(np.arange(k), ordered.shape)
    differs = ordered[:, 1:] != ordered[:, :-1]
    first = np.concatenate([np.ones((len(ordered), 1), bool), differs], axis=1)
    last = np.concatenate([differs, np.ones((len(ordered), 1), bool)], axis=1)
    start = np.maximum.accumulate(np.where(first, index, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, index, k - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(ordered.shape)
    np.put_along_axis(ranks, order, (start + end) / 2 + 1.0, axis=1)
    return np.where(ok, ranks, 0.0)


def spearman_rows(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Spearman rank correlation of each row of ``a`` with the same row of ``b`` ``(N, k)``.

    Computed over the pairs finite in both, with average ranks for ties (as
    ``scipy.stats.spearmanr``); NaN where fewer than two pairs remain or either side is
    constant.
    """
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b, dtype=np.float64))
    if a.shape != b.shape:
        raise InvalidRequestError(f"spearman_rows needs equal shapes, got {a.shape}, {b.shape}")
    ok = np.isfinite(a) & np.isfinite(b)
    n = ok.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        devs = []
        for x in (a, b):
            r = average_ranks(x, ok)
            mean = r.sum(axis=1, keepdims=True) / n[:, None]
            devs.append(np.where(ok, r - mean, 0.0))
        ra, rb = devs
        num = (ra * rb).sum(axis=1)
        den = np.sqrt((ra * ra).sum(axis=1) * (rb * rb).sum(axis=1))
        rho = np.clip(num / den, -1.0, 1.0)
    # the ranks of a constant row are all equal: their deviations are exactly 0, den = 0
    return np.where((n >= 2) & (den > 0), rho, np.nan)


def spearman(a: ArrayLike, b: ArrayLike) -> float:
    """Spearman rank correlation of two equal-length vectors (average ranks for ties).

    NaN when fewer than two finite pairs remain or either vector is constant.
    """
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise InvalidRequestError(f"spearman needs equal lengths, got {a.size} and {b.size}")
    return float(spearman_rows(a[None], b[None])[0])
