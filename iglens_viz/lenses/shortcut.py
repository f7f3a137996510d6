"""The linear shortcut (Din et al. 2023): an affine least-squares map h_L → h_n per depth.

For every depth L < n, with X = [h_L, 1] (one row per corpus position) and Y = h_n,
[A_Lᵀ; b_L] = argmin ‖X·W − Y‖² + ridge·‖A_L‖² (the bias is not penalised). The normal
equations XᵀX and XᵀY are accumulated in float64 over batches of texts, so the fit never
holds the corpus's states, and solved in float64; the maps are stored in float32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..errors import InvalidRequestError
from .states import STATE_BATCH, state_batches

__all__ = ["fit_shortcut", "solve_normal_equations"]


def solve_normal_equations(gram: torch.Tensor, cross: torch.Tensor, ridge: float) -> torch.Tensor:
    """``W`` ``[d+1, d]`` solving ``(G + ridge·I₀)·W = C`` in float64 (I₀: the identity
    without its last, the bias's, entry). A singular system (fewer positions than d+1, or
    collinear states) without a ridge is an :class:`InvalidRequestError`."""
    system = gram.clone()
    if ridge:
        k = system.shape[0] - 1
        system[range(k), range(k)] += ridge
    factor, info = torch.linalg.cholesky_ex(system)
    if int(info) == 0:
        return torch.cholesky_solve(cross, factor)
    raise InvalidRequestError(
        f"the shortcut's least-squares system is singular (its {system.shape[0]}×"
        f"{system.shape[0]} Gram matrix is not positive definite): fit on more text (at least "
        f"{system.shape[0]} positions, the width plus one), or pass a ridge, e.g. ridge=1e-3"
    )


def fit_shortcut(
    model: torch.nn.Module,
    sequences: Sequence[torch.Tensor],
    *,
    ridge: float = 0.0,
    batch_size: int = STATE_BATCH,
    skip_first: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor], int]:
    """``(matrices, biases, positions)``: A_L ``[d, d]`` and b_L ``[d]`` (float32) of every
    depth L < n, and the number of positions they were fitted on. ``progress(done, total)``
    is called after each batch of texts (it may raise to stop the fit)."""
    if ridge < 0:
        raise InvalidRequestError(f"ridge must be >= 0, got {ridge}")
    gram: torch.Tensor | None = None
    cross: torch.Tensor | None = None
    rows = 0
    total = len(sequences)
    for i, states in enumerate(
        state_batches(
            model, sequences, batch_size=batch_size, skip_first=skip_first, dtype=torch.float64
        )
    ):
        x = states.double()  # [n+1, R, d]
        n, R = x.shape[0] - 1, x.shape[1]
        ones = torch.ones(n, R, 1, dtype=torch.float64, device=x.device)
        X = torch.cat([x[:-1], ones], dim=-1)  # [n, R, d+1]
        Y = x[-1]  # [R, d]
        g = X.transpose(1, 2) @ X
        c = X.transpose(1, 2) @ Y
        gram = g if gram is None else gram + g
        cross = c if cross is None else cross + c
        rows += R
        if progress is not None:
            progress(min(total, (i + 1) * batch_size), total)
    if gram is None or cross is None:
        raise InvalidRequestError(
            f"no text is longer than {skip_first + 1} tokens: nothing to fit the shortcut on"
        )
    matrices, biases = {}, {}
    for L in range(gram.shape[0]):
        W = solve_normal_equations(gram[L], cross[L], ridge)
        matrices[L] = W[:-1].T.contiguous().float().cpu()
        biases[L] = W[-1].contiguous().float().cpu()
    return matrices, biases, rows
