"""Points inside segments: the interior path (``steps > 1``) and the Riemann estimator.

Both evaluate the readout at ``h_a + α (h_b − h_a)`` for every (position, segment) pair and
a few α, chunked so the logits block stays under the memory budget. Neither runs the model:
the readout (norm + head) is the whole function, and the Riemann gradients are taken through
it alone.
"""

from __future__ import annotations

import torch

from .readout import Readout
from .trace import rows_per_chunk

ESTIMATORS = ("prediction_aware", "riemann")


def _chunks(n_pairs: int, n_alphas: int, readout: Readout, budget: int, copies: int):
    per_chunk = max(1, rows_per_chunk(readout.vocab_size, readout.dtype, budget, copies)
                    // max(1, n_alphas))
    for start in range(0, n_pairs, per_chunk):
        yield slice(start, min(n_pairs, start + per_chunk))


def path_values(readout: Readout, h_a: torch.Tensor, h_b: torch.Tensor, ids: torch.Tensor,
                contrast: torch.Tensor | None, alphas: torch.Tensor, budget: int
                ) -> torch.Tensor:
    """f at ``h_a + α (h_b − h_a)``: ``h_a, h_b`` are ``[P, d]``, ids ``[P]``; returns ``[P, S]``."""
    out = torch.empty(h_a.shape[0], alphas.numel(), device=readout.device, dtype=readout.dtype)
    alphas = alphas.to(device=readout.device, dtype=readout.dtype)[None, :, None]
    with torch.no_grad():
        for rows in _chunks(h_a.shape[0], alphas.numel(), readout, budget, copies=3):
            a = h_a[rows].to(readout.dtype)
            points = a[:, None] + alphas * (h_b[rows].to(readout.dtype) - a)[:, None]
            out[rows] = _probability(readout, points, ids[rows], _rows(contrast, rows))
    return out


def riemann_totals(readout: Readout, h_a: torch.Tensor, h_b: torch.Tensor, ids: torch.Tensor,
                   contrast: torch.Tensor | None, steps: int, budget: int) -> torch.Tensor:
    """Midpoint-rule Integrated Gradients of f along each segment: ``[P]``.

    ``(1/m) Σ_s ∇f(h_a + ((s − ½)/m)(h_b − h_a)) · (h_b − h_a)``; gradients flow through the
    readout only.
    """
    alphas = ((torch.arange(steps, dtype=readout.dtype) + 0.5) / steps).to(readout.device)
    out = torch.empty(h_a.shape[0], device=readout.device, dtype=readout.dtype)
    # The backward pass keeps the softmax and its gradient too: budget for more copies.
    for rows in _chunks(h_a.shape[0], steps, readout, budget, copies=6):
        a = h_a[rows].to(readout.dtype)
        direction = h_b[rows].to(readout.dtype) - a
        points = (a[:, None] + alphas[None, :, None] * direction[:, None]).detach()
        points.requires_grad_(True)
        with torch.enable_grad():
            values = _probability(readout, points, ids[rows], _rows(contrast, rows))
            (grad,) = torch.autograd.grad(values.sum(), points)
        out[rows] = (grad * direction[:, None]).sum(-1).mean(-1)
    return out


def _rows(tensor, rows):
    return None if tensor is None else tensor[rows]


def _probability(readout, points, ids, contrast):
    """f at ``points[P, S, d]`` for one target (and contrast) per pair."""
    steps = points.shape[1]
    ids = ids[:, None].expand(-1, steps)
    if contrast is not None:
        contrast = contrast[:, None].expand(-1, steps)
    return readout.probability(points, ids, contrast)
