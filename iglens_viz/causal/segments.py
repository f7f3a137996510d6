"""Ablate the segments of an attribution, for one token: its total-effect counterpart.

An :class:`~iglens_viz.AttributionResult` splits a token's probability over segments (blocks,
groups of blocks, or attention and MLP halves). :func:`ablate_segments` removes each segment
in the real forward pass and measures the drop, so each contribution — what the final norm
and head can newly read — stands beside the segment's total effect through later blocks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..core.boundaries import segment_parts
from ..core.inputs import is_position_index
from ..errors import InvalidRequestError
from .ablation import AblationMode, AblationPart, ablate
from .positions import PositionSpec

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedTokenizerBase

    from ..core.result import AttributionResult

__all__ = [
    "SegmentAblation",
    "ablate_segments",
    "is_position_index",
    "segment_drops",
    "segment_parts",
]


class SegmentAblation(NamedTuple):
    """The drops of one token's target value when each segment is ablated."""

    position: int
    drops: np.ndarray
    """``(k,)`` drop of f (p(target), minus p(contrast) with a contrast) per segment."""
    clean: float
    """f in the unablated model."""
    parts: list[str]
    """What each segment's ablation removed: ``block``, ``attn`` or ``mlp``."""
    target_id: int
    contrast_id: int | None
    seconds: float


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


def ablate_segments(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    result: AttributionResult,
    position: int,
    *,
    mode: AblationMode = "zero",
) -> SegmentAblation:
    """The causal check of one token: the drop of the lens value f at ``position`` when each
    segment of ``result`` (an :class:`~iglens_viz.AttributionResult` of ``model``) is
    zero-ablated.

    A segment of whole blocks a → b has blocks a+1 … b ablated together (``part="block"``:
    their outputs are their inputs); a half block (``"sublayer"`` boundaries) has its
    attention's or its MLP's write zeroed (``part="attn"`` / ``"mlp"``). Every later block
    runs on the changed stream, so a drop is the segment's total effect, where the
    contribution is what the final norm and head can read of its update. The forward passes
    run on the input ids up to ``position`` (causal attention: later tokens cannot change
    it), all segments of one part in one batched :func:`~iglens_viz.causal.ablate` call. With
    a contrast, f = p(target) − p(contrast): both are measured and the drop is the drop of
    their difference, the quantity the contributions split. ``clean`` is f in the unablated
    model.
    """
    if mode != "zero":
        raise InvalidRequestError(f"the causal check zero-ablates (mode 'zero'), got {mode!r}")
    T = len(result.input_ids)
    if not is_position_index(position) or not int(position) < T:
        raise InvalidRequestError(
            f"position {position!r} is not a position of this result (0 … {T - 1})"
        )
    p = int(position)
    target = int(result.target_ids[p])
    if target < 0:
        raise InvalidRequestError(f"position {p} has no target: there is no probability to ablate")
    contrast = None if result.contrast_ids is None else int(result.contrast_ids[p])
    if contrast is not None and contrast < 0:
        contrast = None
    plan = segment_parts(result.boundaries)
    ids = [int(i) for i in result.input_ids[: p + 1]]
    start = time.perf_counter()
    drops = np.zeros(len(plan))
    clean = 0.0
    for sign, token in ((1.0, target), (-1.0, contrast)):
        if token is None:
            continue
        measured = np.full(p + 1, -1, dtype=np.int64)
        measured[p] = token
        unablated, dropped = segment_drops(model, tokenizer, ids, measured, plan, mode=mode)
        drops += sign * dropped[p]
        clean += sign * float(unablated[p])
    return SegmentAblation(
        p, drops, clean, [what for what, _ in plan], target, contrast, time.perf_counter() - start
    )
