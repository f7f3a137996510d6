"""Segment boundaries: the forms a user may write, their validation, and segment labels.

A boundary spec is ``"all"`` (every block), ``"every:K"`` (every K blocks, n always
included), a comma list such as ``"0,10,20,30"``, a sequence of ints, or ``"sublayer"``
(every attention and every MLP output). The same forms are
accepted everywhere — the API, the CLI, the widget's boundary box — because they all go
through :func:`normalize_boundaries` (no model needed) and :func:`resolve_boundaries` (the
model's number of blocks n).

A boundary is a *depth* on the residual path: depth L is h_L, the stream after block L, and
depth L − ½ is h_L.attn, the stream inside block L after its attention's write and before its
MLP (only ``"sublayer"`` has such half depths). Segment labels read ``"12"`` (block 12),
``"11–15"`` (blocks 11 to 15), ``"12.attn"`` and ``"12.mlp"`` (the two halves of block 12).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal, get_args

import numpy as np

from ..errors import InvalidRequestError

__all__ = [
    "SEGMENT_PARTS",
    "SUBLAYER",
    "BoundarySpec",
    "SegmentPart",
    "block_of_depth",
    "depth_list",
    "is_sublayer",
    "normalize_boundaries",
    "parse_boundaries",
    "resolve_boundaries",
    "segment_label",
    "segment_labels",
    "segment_parts",
]

BoundarySpec = str | Sequence[int] | None
"""``"all"`` / None, ``"every:K"``, ``"0,10,20,30"``, a sequence of block indices, or
``"sublayer"``."""

SUBLAYER = "sublayer"
"""The spec with a boundary at every attention and every MLP output (sequential blocks)."""

SegmentPart = Literal["block", "attn", "mlp"]
"""What a segment covers (:func:`segment_parts`): whole blocks, or the attention or the MLP
half of one block."""
SEGMENT_PARTS: tuple[SegmentPart, ...] = get_args(SegmentPart)

_EXAMPLE = "'all', 'every:5', 'sublayer' or a comma list such as '0,10,20,30'"


def _int_list(values: Iterable[object], spec: object) -> tuple[int, ...]:
    out = []
    for value in values:
        if isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytes)):
            raise InvalidRequestError(
                f"boundaries must be a 1-D list of ints (block indices); "
                f"got the nested {value!r} in {spec!r}"
            )
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise InvalidRequestError(
                f"boundaries must be integers (block indices); got {value!r} in {spec!r}"
            )
        out.append(int(value))
    return tuple(out)


def normalize_boundaries(spec: BoundarySpec) -> str | tuple[int, ...]:
    """The canonical form of a boundary spec: ``"all"``, ``"every:K"`` or a tuple of ints.

    Checks the form only; :func:`resolve_boundaries` checks it against a model.
    """
    if spec is None:
        return "all"
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text in ("", "all", "every"):
            return "all"
        if text in (SUBLAYER, "sublayers"):
            return SUBLAYER
        if text.startswith("every:"):
            step = text.split(":", 1)[1].strip()
            if not step.isdigit() or int(step) < 1:
                raise InvalidRequestError(
                    f"boundary spec {spec!r}: 'every:K' needs an integer K >= 1"
                )
            return f"every:{int(step)}"
        parts = [part.strip() for part in text.split(",")]
        if not all(p.lstrip("+-").isdigit() for p in parts):
            raise InvalidRequestError(f"boundary spec {spec!r} is not {_EXAMPLE}")
        return tuple(int(p) for p in parts)
    if isinstance(spec, (bytes, bytearray)) or not isinstance(spec, (Sequence, np.ndarray)):
        raise InvalidRequestError(
            f"boundaries must be {_EXAMPLE}, or a list of ints; not {type(spec).__name__}"
        )
    if isinstance(spec, np.ndarray) and spec.ndim != 1:
        raise InvalidRequestError(
            f"boundaries must be a 1-D list of ints (block indices); got "
            f"an array of shape {spec.shape}"
        )
    return _int_list(np.asarray(spec, dtype=object) if isinstance(spec, np.ndarray) else spec, spec)


def resolve_boundaries(spec: str | tuple[int, ...], n: int) -> list[float]:
    """Depths ``[0, …, n]`` of a normalised spec, validated for ``n`` blocks.

    Block boundaries are ints; ``"sublayer"`` adds the half depths L − ½ (floats).
    """
    if spec == "all":
        return list(range(n + 1))
    if spec == SUBLAYER:
        return [x / 2 if x % 2 else x // 2 for x in range(2 * n + 1)]
    if isinstance(spec, str):  # "every:K"
        step = int(spec.split(":", 1)[1])
        return sorted({*range(0, n, step), n})
    out: list[float] = list(spec)
    if len(out) < 2 or out[0] != 0 or out[-1] != n:
        raise InvalidRequestError(
            f"boundaries must start at 0 and end at n={n} (the model's "
            f"number of blocks), e.g. [0, {n // 2}, {n}]; got {out}"
        )
    if any(b >= c for b, c in zip(out, out[1:])):
        raise InvalidRequestError(f"boundaries must be strictly increasing; got {out}")
    return out


def parse_boundaries(spec: BoundarySpec, n: int) -> list[float]:
    """Validated depths ``[0, …, n]`` of any boundary spec (None: every block)."""
    return resolve_boundaries(normalize_boundaries(spec), n)


def is_sublayer(boundaries: Iterable[float]) -> bool:
    """Whether a boundary list has half depths (h_L.attn states)."""
    return any(float(b) % 1 for b in boundaries)


def block_of_depth(depth: float) -> int:
    """The 1-based block a segment ending at ``depth`` lies in (block L ends at depth L and
    its attention half at L − ½); 0 for depth 0."""
    return math.ceil(depth)


def segment_label(start: float, end: float) -> str:
    """The label of the segment from boundary ``start`` to ``end``: its blocks ``start+1 …
    end``, written ``"12"`` for one block and ``"11–15"`` for several (blocks count from 1);
    a half block reads ``"12.attn"`` (depth 11 → 11.5) or ``"12.mlp"`` (11.5 → 12)."""
    if end - start == 0.5:
        return f"{block_of_depth(end)}.{'mlp' if float(end).is_integer() else 'attn'}"
    return str(end) if end - start == 1 else f"{start + 1}\u2013{end}"


def segment_labels(boundaries: Iterable[float]) -> list[str]:
    """:func:`segment_label` of every segment of a boundary list."""
    b = depth_list(boundaries)
    return [segment_label(lo, hi) for lo, hi in zip(b[:-1], b[1:])]


def segment_parts(boundaries: Sequence[float]) -> list[tuple[SegmentPart, tuple[int, ...]]]:
    """What each segment of a boundary list covers, as an ablation removes it:
    ``("block", (a+1, …, b))`` for the blocks of a segment between block depths a → b,
    ``("attn", (L,))`` for L − 1 → L − ½ and ``("mlp", (L,))`` for L − ½ → L
    (``boundaries="sublayer"``). The one mapping from segments to ablated parts: the causal
    check, :func:`~iglens_viz.causal.validate_onset` and ``AblationResult.plot_vs`` read it."""
    out: list[tuple[SegmentPart, tuple[int, ...]]] = []
    for lo, hi in zip(boundaries[:-1], boundaries[1:]):
        lo, hi = float(lo), float(hi)
        if lo.is_integer() and hi.is_integer():
            out.append(("block", tuple(range(int(lo) + 1, int(hi) + 1))))
        elif hi - lo == 0.5:
            out.append(("mlp" if hi.is_integer() else "attn", (block_of_depth(hi),)))
        else:
            raise InvalidRequestError(
                f"the segment from depth {lo:g} to {hi:g} holds part of a "
                f"block and whole blocks: it cannot be ablated as one "
                f"(use whole-block or 'sublayer' boundaries)"
            )
    return out


def depth_list(boundaries: Iterable[float]) -> list[float]:
    """Boundaries as plain Python numbers: ints for block depths, floats for half depths
    (so JSON and labels write ``12`` and ``11.5``)."""
    return [int(x) if float(x).is_integer() else float(x) for x in boundaries]
