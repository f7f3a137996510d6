"""Points inside segments: the interior path (``steps > 1``) and the Riemann estimator.

Both evaluate the readout at ``h_a + α (h_b − h_a)`` for every (position, segment) pair and
every α. The (pair, α) points are flattened into one row axis and produced chunk by chunk,
so a chunk can hold less than one pair's α's: the logits block of one chunk (rows × a
vocabulary block, see :func:`~iglens_viz.core.memory.block_plan`) stays under the memory
budget for any number of steps. Neither runs the model: the readout (norm + head) is the
whole function, and the Riemann gradients are taken analytically through the head and by
autograd through the final norm and projection only.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple, overload

import torch

from .memory import block_plan
from .readout import Readout, tile_plan

if TYPE_CHECKING:
    import numpy.typing as npt

    from .trace import Trace


class SegmentPairs(NamedTuple):
    """One row per (position, segment): its ends ``h_a``, ``h_b`` ``[P·k, d]``, the target
    ids and the contrast ids (or None) ``[P·k]``."""

    h_a: torch.Tensor
    h_b: torch.Tensor
    ids: torch.Tensor
    contrast: torch.Tensor | None


# Logits-sized temporaries alive in one block: the logits, their exponentials, and (for the
# gradient) the exponentials times post'.
_PATH_COPIES = 3
_GRADIENT_COPIES = 4


_PROGRESS: contextvars.ContextVar[Callable[[int, int], None] | None] = contextvars.ContextVar(
    "iglens_progress", default=None
)


@contextlib.contextmanager
def progress_hook(report: Callable[[int, int], None]) -> Iterator[None]:
    """Call ``report(done, total)`` after every chunk of interior points (the path and the
    Riemann gradients) computed inside the ``with`` block, in this thread or task.

    ``done`` of ``total`` points of the current pass are finished. ``report`` may raise
    (an :class:`~iglens_viz.errors.IGLensError`, say) to stop the computation between
    chunks: the widget cancels a recompute that way.
    """
    token = _PROGRESS.set(report)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def progress_reporter() -> Callable[[int, int], None] | None:
    """The ``report`` of the :func:`progress_hook` around the caller, or None: long
    computations outside this module (the block-gate game) report through it too."""
    return _PROGRESS.get()


def _point_chunks(
    h_a: torch.Tensor, n_alphas: int, readout: Readout, budget: int, copies: int
) -> Iterator[tuple[slice, int]]:
    """Chunks of the flattened (pair, α) rows and the vocabulary block width to use."""
    n_points = h_a.shape[0] * n_alphas
    # Per row: start, direction, point, features and their gradient: ~5 vectors of width d.
    width = max(h_a.shape[-1], readout.feature_size)
    rows, cols = block_plan(
        n_points,
        readout.vocab_size,
        readout.dtype,
        budget,
        copies,
        head_width=readout.head_block_width,
        row_width=5 * width,
    )
    # ... and no more rows than one cache-sized tile of the readout's scan, so a chunk's
    # points, features and logits tile stay in cache (and are the same buffers every chunk)
    tile_rows, _ = tile_plan(
        n_points, readout.vocab_size, width, readout.dtype, readout.device, rows, cols
    )
    rows = min(rows, tile_rows)
    # (the chunks are the memory plan's, hook or not: the same sums in the same order)
    report = _PROGRESS.get()
    for start in range(0, n_points, rows):
        stop = min(n_points, start + rows)
        yield slice(start, stop), cols
        if report is not None:
            report(stop, n_points)


class _PointBuffers:
    """Start, direction and point rows of a chunk (``[rows, d]`` each, on the states' device
    in the readout dtype), allocated once per call and reused by every chunk."""

    def __init__(self, h_a: torch.Tensor, rows: int, dtype: torch.dtype) -> None:
        self.rows = torch.empty(3, rows, h_a.shape[-1], device=h_a.device, dtype=dtype)

    def segment_rows(
        self,
        h_a: torch.Tensor,
        h_b: torch.Tensor,
        alphas: torch.Tensor,
        n_alphas: int,
        flat: slice,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Start ``h_a[p]``, direction ``h_b[p] − h_a[p]``, point ``h_a[p] + α_s · direction``,
        pair ``p`` and step ``s`` of the flat rows ``p · S + s`` in ``flat`` (the same
        operations as ``a + α · (b − a)`` written out, so the same rounding)."""
        index = torch.arange(flat.start, flat.stop, device=h_a.device)
        pair, step = index // n_alphas, index % n_alphas
        a, direction, points = self.rows[:, : index.numel()]
        _gather(h_a, pair, a)
        torch.sub(_gather(h_b, pair, direction), a, out=direction)
        torch.mul(
            direction, alphas[step.to(alphas.device)][:, None].to(points.device), out=points
        ).add_(a)
        return a, direction, points, pair, step


def _gather(states: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``states[index].to(out.dtype)`` written into ``out``."""
    if states.dtype == out.dtype:
        return torch.index_select(states, 0, index, out=out)
    return out.copy_(states[index])


def path_values(
    readout: Readout, pairs: SegmentPairs, alphas: torch.Tensor, budget: int
) -> torch.Tensor:
    """f at ``h_a + α (h_b − h_a)`` for every pair (``[P, d]`` ends, ``[P]`` ids) and α in
    ``alphas`` ``[S]``; returns ``[P, S]``."""
    h_a, h_b, ids, contrast = pairs
    n_pairs, n_alphas = h_a.shape[0], alphas.numel()
    out = torch.empty(n_pairs * n_alphas, device=readout.device, dtype=readout.dtype)
    alphas = alphas.to(device=readout.device, dtype=readout.dtype)
    buffers = None
    with torch.no_grad():
        for flat, cols in _point_chunks(h_a, n_alphas, readout, budget, _PATH_COPIES):
            if buffers is None:
                buffers = _PointBuffers(h_a, flat.stop - flat.start, readout.dtype)
            _, _, points, pair, _ = buffers.segment_rows(h_a, h_b, alphas, n_alphas, flat)
            out[flat] = readout.probability(
                points, _at(ids, pair), _at(contrast, pair), block_columns=cols
            )
    return out.reshape(n_pairs, n_alphas)


def midpoints(steps: int, readout: Readout) -> torch.Tensor:
    """The midpoint rule's α's ``(s − ½)/m``, s = 1 … m."""
    return ((torch.arange(steps, dtype=readout.dtype) + 0.5) / steps).to(readout.device)


def segment_gradients(
    readout: Readout,
    pairs: SegmentPairs,
    alphas: torch.Tensor,
    budget: int,
    copies: int = _GRADIENT_COPIES,
    *,
    log: bool = False,
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """∇f at ``h_a + α (h_b − h_a)`` for every (pair, α), chunk by chunk (∇ log p(ids)
    with ``log``: see :meth:`Readout.probability`).

    Yields ``(pair, step, gradient, direction)`` for the chunk's rows: the pair and α index
    of each row, ``∇f [rows, d]`` and ``h_b − h_a`` of its pair. ∂f/∂features is computed
    analytically in the same streamed pass as f (no autograd graph through the head, no
    upcast head block kept for a backward pass); autograd runs through the norm only.
    ``direction`` lives in a buffer the next chunk overwrites: use it (or copy it) before
    asking for the next chunk.
    """
    h_a, h_b, ids, contrast = pairs
    n_alphas = alphas.numel()
    alphas = alphas.to(device=readout.device, dtype=readout.dtype)
    buffers = None
    for flat, cols in _point_chunks(h_a, n_alphas, readout, budget, copies):
        if buffers is None:
            buffers = _PointBuffers(h_a, flat.stop - flat.start, readout.dtype)
        with torch.no_grad():
            _, direction, points, pair, step = buffers.segment_rows(
                h_a, h_b, alphas, n_alphas, flat
            )
        # Autograd runs even inside the caller's torch.inference_mode(): there, new tensors
        # are inference tensors, which cannot require grad or be saved for backward, so
        # the chunk's points are cloned out of inference mode (a [rows, d] copy).
        with torch.inference_mode(False), torch.enable_grad():
            points = points.clone() if points.is_inference() else points.detach()
            points.requires_grad_(True)
            # Readout.probability's analytic head gradient; autograd through the norm
            values = readout.probability(
                points, _at(ids, pair), _at(contrast, pair), block_columns=cols, log=log
            )
            (grad,) = torch.autograd.grad(values.sum(), points)
        yield pair, step, grad, direction


def riemann_totals(readout: Readout, pairs: SegmentPairs, steps: int, budget: int) -> torch.Tensor:
    """Midpoint-rule Integrated Gradients of f along each segment: ``[P]``.

    ``(1/m) Σ_s ∇f(h_a + ((s − ½)/m)(h_b − h_a)) · (h_b − h_a)``, with the gradients of
    :func:`segment_gradients`.
    """
    out = torch.zeros(pairs.h_a.shape[0], device=readout.device, dtype=readout.dtype)
    for pair, _, grad, direction in segment_gradients(
        readout, pairs, midpoints(steps, readout), budget
    ):
        out.index_add_(0, pair.to(out.device), (grad * direction).sum(-1))
    return out / steps


@overload
def _at(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor: ...
@overload
def _at(tensor: None, index: torch.Tensor) -> None: ...
@overload
def _at(tensor: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor | None: ...
def _at(tensor: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor | None:
    """``tensor[index]`` on the index's device (None stays None)."""
    return None if tensor is None else tensor.to(index.device)[index]


def segment_pairs(
    trace: Trace,
    bounds: list[float],
    y: torch.Tensor,
    c: torch.Tensor | None,
    positions: npt.ArrayLike | None = None,
) -> SegmentPairs:
    """Segment endpoints and ids, one row per (position, segment): ``h_a, h_b [P·k, d]``
    (every position, or ``positions``; ``y``, ``c`` are theirs)."""
    rows = trace.rows(bounds)
    states = trace.states if positions is None else trace.states[:, torch.as_tensor(positions)]
    h_a = states[rows[:-1]].transpose(0, 1)  # [P, k, d]
    h_b = states[rows[1:]].transpose(0, 1)
    T, k = h_a.shape[:2]

    def per_pair(ids: torch.Tensor) -> torch.Tensor:
        return ids[:, None].expand(T, k).reshape(-1)

    return SegmentPairs(
        h_a.reshape(T * k, -1),
        h_b.reshape(T * k, -1),
        per_pair(y),
        None if c is None else per_pair(c),
    )


def path_along(
    readout: Readout, pairs: SegmentPairs | None, ends: torch.Tensor, steps: int, budget: int
) -> torch.Tensor | None:
    """f along every (position, segment) at α = 0, 1/m, …, 1, ``[P, k, m+1]`` float64: the
    ends from ``ends`` (``[P, k+1]``, f at the boundaries), the interior from the readout
    (None for m = 1; ``pairs`` are needed for m > 1)."""
    if steps == 1:
        return None
    if pairs is None:
        raise ValueError("the interior path needs the segment pairs")
    P, k = ends.shape[0], ends.shape[1] - 1
    alphas = torch.arange(1, steps, dtype=readout.dtype) / steps
    interior = path_values(readout, pairs, alphas, budget)
    return torch.cat(
        [ends[:, :-1, None], interior.reshape(P, k, -1).double(), ends[:, 1:, None]], dim=-1
    )


def path_or_ends(path: torch.Tensor | None, ends: torch.Tensor) -> torch.Tensor:
    """f along every segment ``[P, k, m+1]``: the interior path, or its two ends (m = 1)."""
    return path if path is not None else torch.stack([ends[:, :-1], ends[:, 1:]], dim=-1)
