"""Component shares: each segment's contribution split over attention heads and MLPs.

Along the straight segment from h_a to h_b, the displacement ``d = h_b − h_a`` is a sum of
the writes of the blocks the segment spans: per block, one write per attention head
(``W_o[:, head] z_head``, z the head's output before the output projection), the attention's
remainder (its output bias; ``rest``) and the MLP's write. A family whose attention write is
not linear in its heads (a norm after the output projection: Gemma-2/3, post-norm OPT) splits
into ``attn`` and ``mlp`` only. Since IG is linear in the direction, the segment's
contribution splits exactly::

    IG_seg = ∫₀¹ ∇f(h_a + t d)·d dt = Σ_c ∫₀¹ ∇f(h_a + t d)·d_c dt

* ``riemann``: per-component midpoint-rule IG, ``(1/m) Σ_s ∇f(x_s)·d_c`` at
  ``x_s = h_a + ((s − ½)/m) d``; the shares sum to the Riemann contribution.
* ``prediction_aware``: the observed change of each step, ``Δf_s = f(h_a + (s/m) d) − f(h_a
  + ((s−1)/m) d)``, is distributed over components in proportion to ``∇f(x_s)·d_c`` at the
  step's midpoint (each step's observed change split in proportion to its first-order terms;
  not IDGI's rule, which weights by the squared gradient), so the shares sum to the segment's
  contribution exactly at any m, and converge to per-component IG as m grows. When ``Σ_c
  ∇f·d_c`` is indistinguishable from rounding (``|Σ| ≤ d·ε·Σ|∇f·d_c|``: the components
  cancel), the proportions are undefined; the step's change is then shared in proportion to
  ``|∇f·d_c|`` (with the sign of Δf_s), and equally over the segment's components when every
  ``∇f·d_c`` is exactly zero.

Under a fitted lens the path runs from h̃_a = T_a(h_a) to h̃_b = T_b(h_b), and its
displacement is ``Δh̃ = A_b·(h_b − h_a) + [(A_b − A_a)·h_a + (c_b − c_a)]``: the blocks' writes
seen through the end's translator, ``A_b·d_c`` (the split contracts ``A_bᵀ∇f`` with the writes,
one matmul per row instead of one per write), plus the change of coordinates between the two
ends. That last term is the component ``coordinate``, a column present only under a lens that
is not the identity (so the logit lens's split is exactly what it was). A segment's
coordinate share sits at the segment's last block (the segment ending at depth b holds it at
block b). Under ``"sublayer"`` boundaries an attention half L − 1 → L − ½ is read with T_{L−1}
at both ends (no coordinate change); its MLP half L − ½ → L holds the change from T_{L−1} to
T_L.

Gradients flow through the readout (final norm and head) only: nothing runs the model
again. Head outputs are stored before the output projection (``[n, T, H·d_head]``) and
contracted with ``W_oᵀ ∇f``, never expanded into per-head writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import torch

from ..adapters import ModelAdapter
from .coordinates import Lens
from .estimators import SegmentPairs, midpoints, segment_gradients
from .readout import Readout, _materialized
from .trace import Trace

if TYPE_CHECKING:
    from .question import Question

__all__ = ["component_names", "component_segments", "component_shares"]

# Columns of the component axis besides the heads.
ATTN, MLP, REST, COORDINATE = "attn", "mlp", "rest", "coordinate"


def component_names(adapter: ModelAdapter, *, coordinate: bool = False) -> list[str]:
    """The component axis: ``head:0 … head:H−1, mlp, rest`` where the attention's write is
    linear in its heads, else ``attn, mlp``; then ``coordinate`` under a fitted lens
    (``coordinate=True``)."""
    names = (
        [f"head:{i}" for i in range(adapter.n_heads)] + [MLP, REST]
        if adapter.heads_split
        else [ATTN, MLP]
    )
    return names + [COORDINATE] if coordinate else names


def _half_segments(boundaries: Sequence[float], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n,)`` twice: the segment holding block L's attention half (depth L − 1 → L − ½)
    and the one holding its MLP half (L − ½ → L)."""
    b = [float(x) for x in boundaries]
    quarter = np.arange(n) + 0.25  # a depth inside each attention half
    return np.searchsorted(b, quarter) - 1, np.searchsorted(b, quarter + 0.5) - 1


def component_segments(boundaries: Sequence[float], names: list[str], n: int) -> np.ndarray:
    """``(n, C)`` the segment index j that holds each (block, component).

    A block's attention components (its heads, ``rest``, ``attn``) lie in the segment that
    spans depth L − 1 → L − ½, its MLP in the one that spans L − ½ → L (the same segment
    unless the boundaries are ``"sublayer"``), and so does its ``coordinate`` (zero unless
    block L ends that segment).
    """
    attn_half, mlp_half = _half_segments(boundaries, n)
    return np.stack([attn_half if _in_attn_half(name) else mlp_half for name in names], axis=1)


def _in_attn_half(name: str) -> bool:
    return name not in (MLP, COORDINATE)


class _Writes:
    """Each block's component writes at one position, contracted with gradients."""

    def __init__(self, readout: Readout, adapter: ModelAdapter, trace: Trace) -> None:
        self.readout, self.adapter, self.trace = readout, adapter, trace
        n = adapter.n_blocks
        self.parallel = adapter.mid_modules is None
        rows = trace.rows
        self.before = trace.hidden[rows(range(n))]  # h_{L−1}
        self.after = trace.hidden[rows(range(1, n + 1))]  # h_L
        # h_L.attn: kept by the trace for sequential blocks, h_{L−1} + the attention's write
        # for parallel ones (whose MLP write is then the rest of the block's update).
        self.mid = (
            self.before + _kept(trace.attn_writes, "attention writes")
            if self.parallel
            else _kept(trace.mid_states, "h_L.attn states")
        )
        self._projections: dict[int, torch.Tensor] = {}
        self.width = len(component_names(adapter))
        """C of :meth:`dots` (the components besides ``coordinate``)."""

    def projection(self, block: int) -> torch.Tensor:
        """W_o of a 0-based block, ``[d, H·d_head]`` in the readout dtype (cached)."""
        if block not in self._projections:
            module = self.adapter.attn_out_modules[block]
            with _materialized(module):
                weight = self.adapter.output_projection(block).detach()
                self._projections[block] = weight.to(self.readout.device, self.readout.dtype)
        return self._projections[block]

    def dots(self, block: int, positions: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """``[R, C]`` ∇f·d_c for the components of 0-based ``block`` at rows' positions."""
        dtype = grad.dtype
        attn = self.mid[block, positions].to(dtype) - self.before[block, positions].to(dtype)
        mlp = self.after[block, positions].to(dtype) - self.mid[block, positions].to(dtype)
        attn_dot = (grad * attn).sum(-1)
        mlp_dot = (grad * mlp).sum(-1)
        if not self.adapter.heads_split:
            return torch.stack([attn_dot, mlp_dot], dim=-1)
        heads = self.adapter.n_heads
        z = cast(torch.Tensor, self.trace.head_inputs)[block, positions].to(dtype)  # (split)
        u = grad @ self.projection(block)  # W_oᵀ ∇f, [R, H·d_head]
        head_dots = (u * z).reshape(len(z), heads, -1).sum(-1)
        rest = attn_dot - head_dots.sum(-1)
        return torch.cat([head_dots, mlp_dot[:, None], rest[:, None]], dim=-1)


def component_shares(
    readout: Readout,
    adapter: ModelAdapter,
    question: Question,
    *,
    path: torch.Tensor | None,
    budget: int,
) -> torch.Tensor:
    """``[P, n, C]`` each (position, block, component)'s share of its segment's contribution,
    for the question's positions and targets at its boundaries, estimator and steps.

    ``path`` ``[P, k, m+1]`` is f along every segment at α = 0, 1/m, …, 1 (needed by
    ``prediction_aware``). The components are those of :func:`component_names` (with
    ``coordinate`` when the trace's lens is not the identity); the segment of each is
    :func:`component_segments`.
    """
    trace, boundaries, positions = question.trace, list(question.bounds), question.positions
    estimator, steps = question.estimator, question.steps
    n = adapter.n_blocks
    k = len(boundaries) - 1
    lens = trace.lens
    names = component_names(adapter, coordinate=not lens.is_identity)
    C = len(names)
    # [k, n]: does segment j hold block L's attention half / its MLP half?
    attn_mask, mlp_mask = (
        torch.as_tensor(half[None, :] == np.arange(k)[:, None], device=readout.device)
        for half in _half_segments(boundaries, n)
    )
    writes = _Writes(readout, adapter, trace)
    rows = trace.rows(boundaries)
    where = positions.to(trace.states.device)

    def ends(states: torch.Tensor) -> list[torch.Tensor]:
        h = states[:, where]  # [S, P, d]; pair = p·k + j
        return [h[r].transpose(0, 1).reshape(-1, h.shape[-1]) for r in (rows[:-1], rows[1:])]

    h_a, h_b = ends(trace.states)  # the path's ends: h̃_a, h̃_b
    coordinates = (
        None if lens.is_identity else _Coordinates(lens, boundaries, n, *ends(trace.hidden))
    )

    def per_pair(x):
        return None if x is None else x.to(readout.device)[:, None].expand(-1, k).reshape(-1)

    position_of_pair = per_pair(positions)
    segment_of_pair = torch.arange(k, device=readout.device).repeat(len(positions))
    prediction_aware = estimator == "prediction_aware"
    # Shares add up in float64 (where the device has it): each step's change is a float64
    # difference of the lens, and rounding it to float32 would cost completeness eps32 · Δf.
    wide = readout.dtype if readout.device.type == "mps" else torch.float64
    if prediction_aware:
        path = _kept(path, "path values (prediction_aware needs f along each segment)")
        step_change = path.to(readout.device, wide).diff(dim=-1).reshape(-1, steps)
    in_attn_half = torch.tensor([_in_attn_half(name) for name in names], device=readout.device)
    # Each (block, component) lies in one segment: a position's shares fit in one [n, C].
    shares = torch.zeros(len(positions), n, C, device=readout.device, dtype=wide)
    eps = torch.finfo(readout.dtype).eps * h_a.shape[-1]
    pairs = SegmentPairs(h_a, h_b, per_pair(question.ids), per_pair(question.contrast))
    for pair, step, grad, direction in segment_gradients(
        readout, pairs, midpoints(steps, readout), budget
    ):
        pair = pair.to(readout.device)
        seg, pos = segment_of_pair[pair], position_of_pair[pair]
        in_attn, in_mlp = attn_mask[seg], mlp_mask[seg]  # [R, n]
        dots = torch.zeros(len(pair), n, C, device=readout.device, dtype=readout.dtype)
        # ∇f·(A_b d_c) = (A_bᵀ∇f)·d_c: the gradient pulled back through the end's translator
        pulled = grad if coordinates is None else coordinates.pullback(grad, seg)
        for block in range(n):
            rows_here = torch.nonzero(in_attn[:, block] | in_mlp[:, block]).flatten()
            if rows_here.numel():
                dots[rows_here, block, : writes.width] = writes.dots(
                    block, pos[rows_here], pulled[rows_here]
                )
        # Which (block, component) this row's segment holds: attention parts or the MLP.
        present = torch.where(in_attn_half, in_attn[..., None], in_mlp[..., None])
        if coordinates is not None:
            coordinates.add(dots, present, pair, seg, grad, pulled, direction)
        dots = torch.where(present, dots, torch.zeros_like(dots))
        if prediction_aware:
            dots = (
                _proportional_weights(dots.to(wide), present, eps)
                * step_change[pair, step][:, None, None]
            )
        shares.index_add_(0, pair // k, dots.to(wide))
    return shares if prediction_aware else shares / steps


class _Coordinates:
    """The change of coordinates along each segment under a fitted lens (see the module
    docstring): pulls gradients back through the segments' end translators, and writes each
    row's coordinate term into the last column at the segment's last block."""

    def __init__(
        self,
        lens: Lens,
        boundaries: Sequence[float],
        n: int,
        residual_a: torch.Tensor,
        residual_b: torch.Tensor,
    ) -> None:
        self.lens = lens
        self.ends = [float(b) for b in boundaries[1:]]
        self.residual_change = residual_b - residual_a  # [pairs, d]: h_b − h_a
        # [k, n]: segment j ends at block L's output (its coordinate cell); a half depth
        # L − ½ ends an attention half, read with T_{L−1} at both ends: no cell.
        whole = [b.is_integer() for b in self.ends]
        self.cell = torch.zeros(len(self.ends), n, dtype=torch.bool, device=residual_a.device)
        for j, b in enumerate(self.ends):
            if whole[j]:
                self.cell[j, int(b) - 1] = True

    def pullback(self, grad: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
        """``[R, d]`` A_bᵀ∇f of each row, b its segment's end (one matmul per segment)."""
        out = grad.clone()
        for j in torch.unique(seg).tolist():
            rows = seg == j
            out[rows] = self.lens.pullback(grad[rows], self.ends[j])
        return out

    def add(
        self,
        dots: torch.Tensor,
        present: torch.Tensor,
        pair: torch.Tensor,
        seg: torch.Tensor,
        grad: torch.Tensor,
        pulled: torch.Tensor,
        direction: torch.Tensor,
    ) -> None:
        """Write ∇f·Δh̃ − (A_bᵀ∇f)·(h_b − h_a), the rows' coordinate terms, into ``dots``
        ``[R, n, C]`` and mark their cells ``present``."""
        change = self.residual_change[pair.to(self.residual_change.device)].to(grad)
        term = (grad * direction).sum(-1) - (pulled * change).sum(-1)
        cell = self.cell[seg]  # [R, n]
        dots[..., -1] = torch.where(cell, term[:, None], torch.zeros_like(dots[..., -1]))
        present[..., -1] = cell


def _kept(tensor: torch.Tensor | None, what: str) -> torch.Tensor:
    """``tensor``, which the trace captured for the split (ValueError if it did not)."""
    if tensor is None:
        raise ValueError(f"the component split needs the trace's {what}, which it does not hold")
    return tensor


def _proportional_weights(dots: torch.Tensor, present: torch.Tensor, eps: float) -> torch.Tensor:
    """Each row's ∇f·d_c as fractions of their sum (the proportional split), with the
    fallbacks for a sum that is only rounding (see the module docstring). Rows sum to 1."""
    total = dots.sum((1, 2))
    size = dots.abs().sum((1, 2))
    cancelled = total.abs() <= eps * size
    safe_total = torch.where(cancelled, torch.ones_like(total), total)
    weights = dots / safe_total[:, None, None]
    by_size = dots.abs() / torch.where(size > 0, size, torch.ones_like(size))[:, None, None]
    equal = present / present.sum((1, 2)).clamp(min=1)[:, None, None]
    fallback = torch.where((size > 0)[:, None, None], by_size, equal.to(dots.dtype))
    return torch.where(cancelled[:, None, None], fallback, weights)
