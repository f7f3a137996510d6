"""One question about one trace: the object the core's helpers take instead of loose
arguments (the trace, the boundaries, the positions, their targets, the estimator)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .estimators import SegmentPairs, segment_pairs
from .request import Estimator
from .trace import Trace

__all__ = ["Question"]


@dataclass(frozen=True)
class Question:
    """Which positions of ``trace`` are asked about, for which target (and contrast), across
    which segments, by which estimator at how many steps."""

    trace: Trace
    bounds: Sequence[float]
    """The segments' depths, ``[0, …, n]`` (half depths for sub-layers)."""
    positions: torch.Tensor
    """``[P]`` the positions asked about."""
    ids: torch.Tensor
    """``[P]`` their target tokens."""
    contrast: torch.Tensor | None = None
    """``[P]`` their contrast tokens (f is p(target) − p(contrast)), or None."""
    estimator: Estimator = "prediction_aware"
    steps: int = 1
    """m, the interpolation steps per segment."""

    @property
    def k(self) -> int:
        """The number of segments."""
        return len(self.bounds) - 1

    def pairs(self) -> SegmentPairs:
        """The segments' ends and ids, one row per (position, segment)."""
        return segment_pairs(self.trace, list(self.bounds), self.ids, self.contrast, self.positions)
