"""Non-monotone stretches of one token's probability trajectory (pure numpy).

The trajectory of a position is f(h_L) along the boundaries, ``lens_probs[i]``; its net
change is Δp. A stretch is *non-monotone* when it moves against the net direction. Two
levels are flagged, both with one threshold fraction ``threshold`` (default
:data:`NONMONOTONE_THRESHOLD`, 60%, which the widget payload carries and the views state;
docs/method.md "Non-monotone marks" says why 60%):

* **segments** (:func:`against_segments`): segment j is flagged when its contribution has
  the sign opposite to Δp and ``|contribution_j| > threshold * max_j |contribution_j|``.
  A token whose probability rises then partly falls has its falling segments flagged. With
  Δp = 0 (or NaN) there is no net direction and nothing is flagged.
* **interior steps** (:func:`against_steps`, only when ``path_probs`` exists, i.e. steps
  m > 1): step s of segment j (from interpolation point s−1 to s) is flagged when it moves
  opposite to the segment's own net change ``path[j, m] − path[j, 0]`` and
  ``|step| > threshold * max |step|`` over all steps of the token. A segment with no net
  change flags nothing.

"Sign" is numpy's sign (0 for exactly 0), and comparisons are strict, so an all-zero row or
a zero threshold on a monotone path flags nothing. NaN rows (positions without a target)
flag nothing. A token is *monotone* when no segment is flagged (:func:`is_monotone`); the
causal validation, the tidy table and every view use these functions, and the JS widget
mirrors the two rules (``js/lib/nonmonotone.js``, checked against golden cases).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InvalidRequestError

if TYPE_CHECKING:
    from .result import AttributionResult

NONMONOTONE_THRESHOLD = 0.6
"""The default threshold: a stretch must exceed 60% of the token's largest move to count.

Chosen from data (docs/method.md, "Non-monotone marks"): on the default model's logit lens most
tokens overshoot in the late blocks and are pulled back by the last ones, so at 5% 25 of the
47 positions of the Vietnam demo and 77% of the 70 shipped prompts' positions were flagged; at
60% 8 of 47 and 46% are, and the answer's clear reversal (88% → 7% → 46%) still is."""


def _check_threshold(threshold: float) -> float:
    threshold = float(threshold)
    if not 0.0 <= threshold <= 1.0:
        raise InvalidRequestError(f"threshold must be a fraction in [0, 1], got {threshold}")
    return threshold


def against_segments(
    contributions: ArrayLike, delta_p: ArrayLike, threshold: float = NONMONOTONE_THRESHOLD
) -> np.ndarray:
    """Boolean mask of segments whose contribution opposes Δp by more than the threshold.

    Parameters
    ----------
    contributions:
        ``(k,)`` one token's segment contributions, or ``(T, k)`` for many tokens.
    delta_p:
        The net change Δp: a scalar, or ``(T,)``.
    threshold:
        Fraction of the token's largest ``|contribution|`` a segment must exceed.

    Returns
    -------
    A boolean array shaped like ``contributions``.
    """
    threshold = _check_threshold(threshold)
    c = np.asarray(contributions, dtype=np.float64)
    d = np.asarray(delta_p, dtype=np.float64)[..., None]
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(c)
        scale = np.max(np.where(finite, np.abs(c), 0.0), axis=-1, keepdims=True)
        opposite = np.sign(c) * np.sign(d) < 0
        big = np.abs(c) > threshold * scale
    return opposite & big & finite & np.isfinite(d)


def against_steps(path_probs: ArrayLike, threshold: float = NONMONOTONE_THRESHOLD) -> np.ndarray:
    """Boolean mask of interpolation steps that move against their segment's net change.

    Parameters
    ----------
    path_probs:
        ``(k, m+1)`` f along each segment of one token (``result.path_probs[i]``), or
        ``(T, k, m+1)``.
    threshold:
        Fraction of the token's largest ``|step|`` a step must exceed.

    Returns
    -------
    ``(k, m)`` (or ``(T, k, m)``) booleans; entry ``[j, s]`` is the step from interpolation
    point s to s+1 of segment j.
    """
    threshold = _check_threshold(threshold)
    p = np.asarray(path_probs, dtype=np.float64)
    if p.ndim < 2 or p.shape[-1] < 2:
        raise ValueError(f"path_probs must be (..., k, m+1) with m >= 1, got {p.shape}")
    steps = np.diff(p, axis=-1)  # [..., k, m]
    net = p[..., -1:] - p[..., :1]  # [..., k, 1]
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(steps)
        flat = np.where(finite, np.abs(steps), 0.0)
        scale = flat.max(axis=(-2, -1), keepdims=True)
        opposite = np.sign(steps) * np.sign(net) < 0
        big = np.abs(steps) > threshold * scale
    return opposite & big & finite


def is_monotone(
    contributions: ArrayLike, delta_p: ArrayLike, threshold: float = NONMONOTONE_THRESHOLD
) -> bool | np.ndarray:
    """Whether each trajectory moves one way: no segment flagged by :func:`against_segments`.

    ``contributions`` ``(k,)`` with a scalar ``delta_p`` gives a bool; ``(T, k)`` with
    ``(T,)`` gives a boolean array. Δp = 0 has no direction to go against: monotone.
    """
    flags = against_segments(contributions, delta_p, threshold).any(axis=-1)
    return (not bool(flags)) if np.ndim(flags) == 0 else ~np.asarray(flags)


@dataclass(frozen=True)
class NonMonotone:
    """The non-monotone stretches of one position's trajectory."""

    segments: np.ndarray
    """``(k,)`` bool: segment j opposes Δp (see :func:`against_segments`)."""
    steps: np.ndarray | None
    """``(k, m)`` bool: step s of segment j opposes the segment (None without path_probs)."""

    @property
    def segment_indices(self) -> list[int]:
        """Indices j of the flagged segments."""
        return [int(j) for j in np.flatnonzero(self.segments)]

    @property
    def step_indices(self) -> list[tuple[int, int]]:
        """``(j, s)`` pairs of flagged steps (empty without path_probs)."""
        if self.steps is None:
            return []
        return [(int(j), int(s)) for j, s in zip(*np.nonzero(self.steps))]

    @property
    def any(self) -> bool:
        """Whether anything is flagged."""
        return bool(self.segments.any() or (self.steps is not None and self.steps.any()))


def non_monotone(
    result: AttributionResult, i: int, threshold: float = NONMONOTONE_THRESHOLD
) -> NonMonotone:
    """Flag the non-monotone segments (and interior steps) of position ``i`` of a result.

    ``result`` is an :class:`~iglens_viz.AttributionResult` (only ``contributions``,
    ``delta_p`` and ``path_probs`` are read).
    """
    segments = against_segments(result.contributions[i], result.delta_p[i], threshold)
    path = getattr(result, "path_probs", None)
    steps = None if path is None else against_steps(path[i], threshold)
    return NonMonotone(segments=segments, steps=steps)
