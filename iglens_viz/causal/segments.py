"""Ablate the segments of an attribution: their total-effect counterpart.

An :class:`~iglens_viz.AttributionResult` splits a token's probability over segments (blocks,
groups of blocks, or attention and MLP halves). :func:`segment_drops` removes each segment in
the real forward pass and measures the drop, so each contribution — what the final norm and
head can newly read — stands beside the segment's total effect through later blocks (the
widget's causal check, :func:`~iglens_viz.causal.check.check_segments`, and ``iglens
validate``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.boundaries import segment_parts
from ..core.inputs import is_position_index
from .ablation import AblationMode, AblationPart, ablate
from .positions import PositionSpec

__all__ = [
    "is_position_index",
    "segment_drops",
    "segment_parts",
]


def segment_drops(
    model: Any,
    tokenizer: Any,
    ids: Any,
    target: Any,
    plan: Sequence[tuple[AblationPart, tuple[int, ...]]],
    *,
    mode: AblationMode = "zero",
    batch_size: int | None = None,
    positions: PositionSpec = "all",
) -> tuple[np.ndarray, np.ndarray]:
    """``(clean (T,), drops (T, k))``: the target probability of the unablated model and its
    drop when each segment of ``plan`` (:func:`segment_parts`) is ablated at ``positions``
    (:func:`~iglens_viz.causal.positions.resolve_positions`), one batched
    :func:`~iglens_viz.causal.ablate` call per part (``block``, ``attn``, ``mlp``)."""
    drops = clean = None
    for part in dict.fromkeys(what for what, _ in plan):
        cols = [j for j, (what, _) in enumerate(plan) if what == part]
        res = ablate(
            model,
            tokenizer,
            ids,
            target=target,
            mode=mode,
            part=part,
            layers=[_layer(plan[j][1]) for j in cols],
            batch_size=batch_size,
            positions=positions,
        )
        if drops is None:
            clean, drops = res.clean_probs, np.empty((len(res.clean_probs), len(plan)))
        drops[:, cols] = res.drop
    assert clean is not None and drops is not None, "a plan has at least one segment"
    return clean, drops


def _layer(blocks: tuple[int, ...]) -> int | tuple[int, ...]:
    """The ``layers=`` entry of a segment's blocks: the block alone, or the group."""
    return blocks[0] if len(blocks) == 1 else blocks
