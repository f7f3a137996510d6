"""The readout f: final norm, optional projection, head and post-head transform.

``f(h) = softmax(post(head(project_out(norm(h)))))`` evaluated pointwise on residual states.
The small parameters (norm, projection, head bias) are copied out of the model once, in the
readout dtype, on the head's execution device, so the readout runs the same whether the model
is on CPU, CUDA, in bf16 or offloaded by accelerate, and in float64 when asked. The head
weight, the one large parameter (vocab × d), is kept in the model's dtype and is not copied
when it already lives on the execution device; every readout streams it in blocks of
vocabulary rows, upcast one block at a time, so a bf16 model never holds a float32 copy of
its head. The norm formulas are written out here rather than calling the model's modules,
because the model's own RMSNorm casts to float32 internally and would silently drop a float64
readout to float32.

Probabilities are always formed as ``exp(logit − logsumexp)``, never with
``torch.softmax``/``torch.log_softmax``: on some CPUs (AVX2) their float32 kernels use a
lower-accuracy exponential and carry ~2e-5 error in log space, ~100× float32's rounding.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..adapters import ModelAdapter, execution_device
from ..adapters.families import NORM_LAYERNORM, NORM_RMS, NORM_RMS_PLUS_ONE


def _materialized(module: nn.Module):
    """Context in which an accelerate-offloaded module's weights are real tensors."""
    if getattr(module, "_hf_hook", None) is None:
        return contextlib.nullcontext()
    from accelerate.utils import align_module_device

    return align_module_device(module)


def _copy_param(module: nn.Module | None, name: str, device, dtype=None) -> torch.Tensor | None:
    """``module.name`` on ``device`` (in ``dtype``, or its own dtype when None).

    ``.to()`` returns the same storage when nothing changes: no copy for a parameter that
    already has the device and dtype.
    """
    if module is None:
        return None
    with _materialized(module):
        tensor = getattr(module, name, None)
        if tensor is None:
            return None
        return tensor.detach().to(device=device, dtype=dtype)


def _norm_eps(norm: nn.Module) -> float:
    for name in ("variance_epsilon", "eps", "epsilon"):
        value = getattr(norm, name, None)
        if value is not None:
            return float(value)
    raise TypeError(f"cannot find the epsilon of final norm {type(norm).__name__}")


def target_probability(logit: torch.Tensor, log_normalizer: torch.Tensor) -> torch.Tensor:
    """``exp(logit − logsumexp)`` with the subtraction and the exp in float64 (where the
    device has it), returned in ``logit``'s dtype.

    A float32 subtraction of two numbers as large as the logits (tens) would round log p by
    up to u·|logit|; in float64 the result carries only the logsumexp's own error.
    """
    wide = logit.dtype if logit.device.type == "mps" else torch.float64
    return torch.exp(logit.to(wide) - log_normalizer.to(wide)).to(logit.dtype)


class HeadStats(NamedTuple):
    """Magnitudes of the head, for rounding-error bounds (see :mod:`.selfcheck`)."""

    row_norm: float
    """max_v ‖W_v‖₂"""
    abs_max: float
    """max |W_vi|"""
    bias: float
    """max |b_v| (0 without a bias)"""


class Readout:
    """Pointwise readout of residual states into (post-processed) vocabulary logits.

    ``features(h)`` applies the final norm and projection, ``logits_from_features(z)`` the
    head and post-head transform. Splitting the two lets a cached map answer a new target
    with a dot product per row instead of a full vocabulary matmul.
    """

    def __init__(self, adapter: ModelAdapter, dtype: torch.dtype = torch.float32):
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"readout dtype must be torch.float32 or torch.float64, not {dtype}")
        self.dtype = dtype
        self.device = execution_device(adapter.head)
        self.norm_kind = adapter.family.norm_kind
        norm = adapter.final_norm
        self.norm_weight = _copy_param(norm, "weight", self.device, dtype)
        self.norm_bias = _copy_param(norm, "bias", self.device, dtype)
        self.norm_eps = _norm_eps(norm) if norm is not None else 0.0
        self.has_norm = norm is not None
        self.proj_weight = _copy_param(adapter.project_out, "weight", self.device, dtype)
        # The head stays in the model's dtype (and storage); blocks are upcast on use.
        self.head_weight = _copy_param(adapter.head, "weight", self.device)
        self.head_bias = _copy_param(adapter.head, "bias", self.device, dtype)
        self.softcap = adapter.softcap

    @property
    def vocab_size(self) -> int:
        """Number of head outputs (may exceed the tokenizer's vocabulary)."""
        return self.head_weight.shape[0]

    @property
    def feature_size(self) -> int:
        """d', the width of the head's input (d, or OPT's projected width)."""
        return self.head_weight.shape[1]

    @property
    def head_block_width(self) -> int:
        """Readout-dtype elements one vocabulary column costs beyond its logits.

        d' when the head is stored in another dtype (each block is upcast to a temporary),
        0 when it is read in place. Memory plans add it per column.
        """
        return 0 if self.head_weight.dtype == self.dtype else self.feature_size

    def head_block(self, columns: slice = slice(None)) -> torch.Tensor:
        """Head rows ``columns`` in the readout dtype (a view when no upcast is needed)."""
        return self.head_weight[columns].to(self.dtype)

    def head_stats(self, block_columns: int | None = None) -> HeadStats:
        """Largest row norm, entry and bias of the head (computed once, ``block_columns``
        head rows at a time)."""
        if getattr(self, "_head_stats", None) is None:
            row_norm = abs_max = 0.0
            cols = self.vocab_size if block_columns is None else max(1, int(block_columns))
            for c0 in range(0, self.vocab_size, cols):
                block = self.head_block(slice(c0, c0 + cols))
                row_norm = max(row_norm, float(block.norm(dim=-1).max()))
                abs_max = max(abs_max, float(block.abs().max()))
            bias = 0.0 if self.head_bias is None else float(self.head_bias.abs().max())
            self._head_stats = HeadStats(row_norm, abs_max, bias)
        return self._head_stats

    def features(self, h: torch.Tensor, frozen_scale: torch.Tensor | None = None
                 ) -> torch.Tensor:
        """Final norm (and OPT's projection) of states ``h[..., d]`` in the readout dtype.

        ``frozen_scale`` (``[..., 1]``, broadcastable) replaces the norm's own scale
        1/rms(h) (1/std(h) for LayerNorm), e.g. by the last state's: the norm is then linear
        in h — the reading a linearised method makes. See :meth:`norm_scale`.
        """
        x = h.to(device=self.device, dtype=self.dtype)
        if self.has_norm:
            if self.norm_kind == NORM_LAYERNORM:
                if frozen_scale is None:
                    x = F.layer_norm(x, x.shape[-1:], self.norm_weight, self.norm_bias,
                                     self.norm_eps)
                else:
                    x = (x - x.mean(-1, keepdim=True)) * frozen_scale
                    x = x * self.norm_weight + self.norm_bias if self.norm_bias is not None \
                        else x * self.norm_weight
            else:
                x = x * (self.norm_scale(x) if frozen_scale is None else frozen_scale)
                if self.norm_kind == NORM_RMS:
                    x = x * self.norm_weight
                elif self.norm_kind == NORM_RMS_PLUS_ONE:
                    x = x * (1.0 + self.norm_weight)
                else:  # pragma: no cover - guarded by the family table
                    raise ValueError(f"unknown norm kind {self.norm_kind!r}")
        if self.proj_weight is not None:
            x = F.linear(x, self.proj_weight)
        return x

    def norm_scale(self, h: torch.Tensor) -> torch.Tensor:
        """``[..., 1]`` the final norm's scale at states ``h``: 1/rms(h), or 1/std(h) for a
        LayerNorm (1 without a final norm)."""
        x = h.to(device=self.device, dtype=self.dtype)
        if not self.has_norm:
            return torch.ones_like(x[..., :1])
        if self.norm_kind == NORM_LAYERNORM:
            return torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + self.norm_eps)
        return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.norm_eps)

    def post(self, logits: torch.Tensor) -> torch.Tensor:
        """What the model does to logits after the head (Gemma-2/3 soft-capping)."""
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def post_slope(self, logits: torch.Tensor) -> torch.Tensor | None:
        """d post / d head-output at post-processed ``logits`` (None: the identity)."""
        if self.softcap is None:
            return None
        return 1.0 - (logits / self.softcap).square()

    def logits_from_features(self, z: torch.Tensor, columns: slice = slice(None),
                             head: torch.Tensor | None = None) -> torch.Tensor:
        """Post-processed logits ``[..., V]`` from features ``[..., d']`` (or some columns).

        Every full-vocabulary readout streams through here one block of columns at a time;
        callers pick ``columns`` so the block fits their memory budget. ``head`` is
        ``head_block(columns)`` when the caller already holds it.
        """
        if head is None:
            head = self.head_block(columns)
        bias = None if self.head_bias is None else self.head_bias[columns]
        return self.post(F.linear(z, head, bias))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Full post-processed logits of states ``h`` (all V columns at once: small inputs only)."""
        return self.logits_from_features(self.features(h))

    def target_logits(self, z: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Logits of one token per row: ``z[..., d']`` with ``ids`` broadcastable to ``z[..., 0]``."""
        ids = ids.to(self.device)
        rows = self.head_weight[ids].to(self.dtype)
        out = (z * rows).sum(-1)
        if self.head_bias is not None:
            out = out + self.head_bias[ids]
        return self.post(out)

    def log_normalizer(self, z: torch.Tensor, block_columns: int | None = None) -> torch.Tensor:
        """logsumexp of the post-processed logits of features ``z[..., d']``, streamed."""
        return self._stream(z.reshape(-1, z.shape[-1]), block_columns)[0].reshape(z.shape[:-1])

    def probability(self, h: torch.Tensor, ids: torch.Tensor,
                    contrast: torch.Tensor | None = None, *,
                    block_columns: int | None = None) -> torch.Tensor:
        """f(h): probability of ``ids`` (minus that of ``contrast``) at states ``h[..., d]``.

        Streams the vocabulary in blocks of ``block_columns`` columns (all at once when None)
        with a running logsumexp, so no full-vocabulary logits or upcast head are held.
        Differentiable in ``h``: the gradient with respect to the features is computed in
        the same pass, analytically (see :meth:`probability_and_gradient`), and autograd
        runs through the final norm and projection only.
        """
        z = self.features(h)
        ids = torch.as_tensor(ids, device=self.device).expand(z.shape[:-1])
        if contrast is not None:
            contrast = torch.as_tensor(contrast, device=self.device).expand(z.shape[:-1])
        if not (torch.is_grad_enabled() and z.requires_grad):
            return self.probability_and_gradient(z, ids, contrast, block_columns)[0]
        return _Probability.apply(z, self, ids, contrast, block_columns)

    def probability_and_gradient(self, z: torch.Tensor, ids: torch.Tensor,
                                 contrast: torch.Tensor | None = None,
                                 block_columns: int | None = None, *, gradient: bool = False
                                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``f = p_ids − p_contrast`` at features ``z[..., d']`` and, if asked, ``∂f/∂z``.

        One pass over vocabulary blocks. With ``l = post(u)``, ``u = W z + b`` and
        ``p = softmax(l)``::

            ∂f/∂l_v = p_y δ_vy − p_c δ_vc − (p_y − p_c) p_v
            ∂f/∂z   = p_y post'(u_y) W_y − p_c post'(u_c) W_c − (p_y − p_c) Σ_v p_v post'(u_v) W_v

        The sum ``Σ_v p_v post'(u_v) W_v`` streams like the logsumexp, rescaled to a running
        maximum (as in online softmax), so each upcast head block is used once and dropped.
        """
        with torch.no_grad():
            lead = z.shape[:-1]
            flat = z.detach().reshape(-1, z.shape[-1])
            ids = ids.to(self.device).reshape(-1)
            lse, weighted = self._stream(flat, block_columns, gradient=gradient)
            l_y = self.target_logits(flat, ids)
            p_y = target_probability(l_y, lse)
            value = p_y
            if contrast is not None:
                contrast = contrast.to(self.device).reshape(-1)
                l_c = self.target_logits(flat, contrast)
                p_c = target_probability(l_c, lse)
                value = p_y - p_c
            if not gradient:
                return value.reshape(lead), None
            grad = self._row_gradient(ids, l_y, p_y) - value[:, None] * weighted
            if contrast is not None:
                grad = grad - self._row_gradient(contrast, l_c, p_c)
            return value.reshape(lead), grad.reshape(*lead, -1)

    def _row_gradient(self, ids, logits, p):
        """``p post'(u) W_ids``: one head row per row of features."""
        slope = self.post_slope(logits)
        scale = p if slope is None else p * slope
        return scale[:, None] * self.head_weight[ids].to(self.dtype)

    def _stream(self, z: torch.Tensor, block_columns: int | None, gradient: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """logsumexp of the logits of ``z[R, d']`` over vocabulary blocks of ``block_columns``
        (and, with ``gradient``, ``Σ_v softmax_v · post'_v · W_v``, ``[R, d']``)."""
        vocab = self.vocab_size
        cols = vocab if block_columns is None else max(1, int(block_columns))
        run_sum = weighted = shift = None
        for c0 in range(0, vocab, cols):
            columns = slice(c0, c0 + cols)
            head = self.head_block(columns)
            logits = self.logits_from_features(z, columns, head)
            block_max = logits.amax(-1)
            new_max = block_max if shift is None else torch.maximum(shift, block_max)
            # A row whose logits are all -inf so far keeps a finite shift (no inf − inf).
            new_shift = torch.where(torch.isfinite(new_max), new_max, torch.zeros_like(new_max))
            e = torch.exp(logits - new_shift[:, None])
            if gradient:
                slope = self.post_slope(logits)
                del logits
                part = (e if slope is None else e * slope) @ head
            if run_sum is None:
                run_sum = e.sum(-1)
                weighted = part if gradient else None
            else:
                rescale = torch.exp(shift - new_shift)
                run_sum = run_sum * rescale + e.sum(-1)
                if gradient:
                    weighted = weighted * rescale[:, None] + part
            shift = new_shift
            del e, head
        lse = shift + torch.log(run_sum)
        if gradient:
            weighted = weighted / run_sum[:, None]
        return lse, weighted


class _Probability(torch.autograd.Function):
    """f at features z with the analytic ∂f/∂z computed in the forward pass (no head graph)."""

    @staticmethod
    def forward(ctx, z, readout, ids, contrast, block_columns):
        value, grad = readout.probability_and_gradient(z, ids, contrast, block_columns,
                                                       gradient=True)
        ctx.save_for_backward(grad)
        return value

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        return grad_output[..., None] * grad, None, None, None, None
