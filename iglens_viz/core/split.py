"""A result's positions looked at closely: each segment's contribution split over the
blocks' heads, MLPs and remainders (:func:`component_split`), and f along the inside of each
segment (:func:`interior_path`). Both reuse the engine's cached forward pass (the first split
of a prompt runs it once more to keep the head outputs) and read out only the positions asked
about, so one position answers a click in the widget.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch

from ..errors import InvalidRequestError
from .boundaries import is_sublayer
from .components import component_names, component_shares
from .coordinates import Lens
from .estimators import midpoints, path_along, path_or_ends, segment_gradients, segment_pairs
from .question import Question
from .request import AttributionRequest

if TYPE_CHECKING:
    from .lens import IGLens
    from .result import AttributionResult

__all__ = [
    "component_split",
    "interior_path",
    "question_shares",
    "split_names",
    "with_component_split",
]


def question_shares(engine: IGLens, question: Question, path: torch.Tensor) -> torch.Tensor:
    """Component shares ``[P, n, C]`` of the question's positions (``path``: f along their
    segments, ``[P, k, m+1]``)."""
    return component_shares(
        engine.readout, engine.adapter, question, path=path, budget=engine.memory_budget
    )


def split_names(engine: IGLens, lens: Lens) -> list[str]:
    """The component axis under ``lens`` (``coordinate`` last under a fitted lens)."""
    return component_names(engine.adapter, coordinate=not lens.is_identity)


def component_split(
    engine: IGLens,
    result: AttributionResult,
    positions: npt.ArrayLike | None = None,
    steps: int | None = None,
) -> np.ndarray:
    """Split ``result``'s contributions at ``positions`` over heads, MLPs and remainders.

    Returns ``(P, n, C)`` shares (NaN at a position without a target), indexed like
    ``result.component_shares``: blocks, then :func:`~iglens_viz.core.components.
    component_names`. Costs m readout gradients per (position, segment) and reuses the
    cached forward pass (the first call on a prompt may run it once more to keep the head
    outputs), so one position answers a click in the widget.

    ``steps`` (default: the result's) sets m for the split alone: a result attributed at
    m = 1 can be split at m = 8 for a few positions without paying for every position's
    interior path.
    """
    request = result.request
    if not isinstance(request, AttributionRequest):
        raise InvalidRequestError("components() needs a result produced by an IGLens")
    T = len(result.input_ids)
    picked = np.arange(T) if positions is None else np.atleast_1d(np.asarray(positions))
    if picked.dtype.kind not in "iu" or picked.ndim != 1 or ((picked < -T) | (picked >= T)).any():
        raise InvalidRequestError(f"positions must be integers in [-{T}, {T}), got {positions!r}")
    picked = picked % T
    trace = engine.trace(
        result.input_ids,
        sublayers=is_sublayer(result.boundaries),
        components=True,
        lens=engine.resolve_lens(request.lens),
    )
    if trace.input_ids.tolist() != list(result.input_ids):  # pragma: no cover - guard
        raise InvalidRequestError("the result is of another prompt than this engine saw")

    def ids_at(ids: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.where(np.asarray(ids)[picked] < 0, 0, np.asarray(ids)[picked]))

    steps = request.steps if steps is None else request.replace(steps=steps).steps
    f = torch.as_tensor(result.lens_probs[picked], device=engine.readout.device)
    y = ids_at(result.target_ids)
    c = None if result.contrast_ids is None else ids_at(result.contrast_ids)
    path: torch.Tensor | None
    if steps == request.steps and result.path_probs is not None:
        path = torch.as_tensor(result.path_probs[picked])
    else:
        pairs = segment_pairs(trace, result.boundaries, y, c, picked)
        path = path_along(engine.readout, pairs, torch.nan_to_num(f), steps, engine.memory_budget)
    question = Question(
        trace, result.boundaries, torch.as_tensor(picked), y, c, request.estimator, steps
    )
    shares = question_shares(engine, question, path_or_ends(path, f))
    out = shares.detach().cpu().numpy().astype(np.float64)
    out[np.asarray(result.target_ids)[picked] < 0] = np.nan
    return out


def with_component_split(
    engine: IGLens,
    result: AttributionResult,
    positions: npt.ArrayLike | None = None,
    steps: int | None = None,
) -> AttributionResult:
    """A copy of ``result`` whose component split holds :func:`component_split` at
    ``positions`` (NaN elsewhere), so ``.components``, ``plot_components`` and the
    exported page show it."""
    picked = np.arange(len(result.input_ids)) if positions is None else positions
    shares = component_split(engine, result, picked, steps)
    dense = np.full((len(result.input_ids), *shares.shape[1:]), np.nan)
    dense[np.atleast_1d(picked)] = shares
    names = split_names(engine, engine.resolve_lens(result.request.lens))
    return dataclasses.replace(result, component_shares=dense, component_names=names)


def interior_path(
    engine: IGLens,
    result: AttributionResult,
    position: int,
    steps: int | None = None,
    terms: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """f along every segment of ``result`` at one ``position``: ``(k, m+1)`` float64,
    at α = 0, 1/m, …, 1 (the ends are ``result.lens_probs[position]``).

    The same values as ``engine.run(result.request.replace(steps=m)).path_probs[position]``
    for a few milliseconds: only this position's k·(m−1) interior points go through the
    readout (no model run; the cached forward pass is reused). ``steps`` defaults to the
    result's m (at least 2 — with m = 1 there is no interior).

    With ``terms=True`` it returns ``(path, terms)``: ``terms`` ``(k, m)`` are the
    midpoint Riemann terms (1/m) ∇f(h_a + ((s − ½)/m)(h_b − h_a)) · (h_b − h_a), whose
    row sums are the Riemann estimator's segment contributions at m steps.
    """
    request = result.request
    if not isinstance(request, AttributionRequest):
        raise InvalidRequestError("interior_path() needs a result produced by an IGLens")
    T = len(result.input_ids)
    if (
        isinstance(position, bool)
        or not isinstance(position, (int, np.integer))
        or not -T <= int(position) < T
    ):
        raise InvalidRequestError(f"position must be an integer in [-{T}, {T}), got {position!r}")
    position = int(position) % T
    if result.target_ids[position] < 0:
        raise InvalidRequestError(
            f"position {position} has no target (with target 'next', the last position has none)"
        )
    steps = max(2, request.steps) if steps is None else request.replace(steps=steps).steps
    trace = engine.trace(
        result.input_ids,
        sublayers=is_sublayer(result.boundaries),
        lens=engine.resolve_lens(request.lens),
    )
    picked = np.asarray([position])
    y = torch.as_tensor(np.asarray(result.target_ids)[picked])
    c = (
        None
        if result.contrast_ids is None
        else torch.as_tensor(np.asarray(result.contrast_ids)[picked])
    )
    pairs = segment_pairs(trace, result.boundaries, y, c, picked)
    f = torch.as_tensor(result.lens_probs[picked], dtype=torch.float64)
    k = f.shape[1] - 1
    interior = path_along(engine.readout, pairs, f, steps, engine.memory_budget)
    path = path_or_ends(interior, f)[0].detach().cpu().numpy().astype(np.float64)
    if not terms:
        return path
    out = torch.zeros(k * steps, dtype=torch.float64)
    for pair, step, grad, direction in segment_gradients(
        engine.readout, pairs, midpoints(steps, engine.readout), engine.memory_budget
    ):
        values = (grad * direction).sum(-1).double().cpu() / steps
        out.index_put_((pair.cpu() * steps + step.cpu(),), values)
    return path, out.reshape(k, steps).numpy()
