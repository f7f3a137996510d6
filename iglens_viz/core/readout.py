"""The readout f: final norm, optional projection, head and post-head transform.

``f(h) = softmax(post(head(project_out(norm(h)))))`` evaluated pointwise on residual states.
The parameters are copied out of the model once (in the readout dtype, on the head's execution
device), so the readout runs the same whether the model is on CPU, CUDA, in bf16 or offloaded
by accelerate, and in float64 when asked. The norm formulas are written out here rather than
calling the model's modules, because the model's own RMSNorm casts to float32 internally and
would silently drop a float64 readout to float32.
"""

from __future__ import annotations

import contextlib

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


def _copy_param(module: nn.Module | None, name: str, device, dtype) -> torch.Tensor | None:
    if module is None:
        return None
    with _materialized(module):
        tensor = getattr(module, name, None)
        if tensor is None:
            return None
        # .to() returns the same storage when nothing changes: no copy for float32 models.
        return tensor.detach().to(device=device, dtype=dtype)


def _norm_eps(norm: nn.Module) -> float:
    for name in ("variance_epsilon", "eps", "epsilon"):
        value = getattr(norm, name, None)
        if value is not None:
            return float(value)
    raise TypeError(f"cannot find the epsilon of final norm {type(norm).__name__}")


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
        self.head_weight = _copy_param(adapter.head, "weight", self.device, dtype)
        self.head_bias = _copy_param(adapter.head, "bias", self.device, dtype)
        self.softcap = adapter.softcap

    @property
    def vocab_size(self) -> int:
        """Number of head outputs (may exceed the tokenizer's vocabulary)."""
        return self.head_weight.shape[0]

    def features(self, h: torch.Tensor) -> torch.Tensor:
        """Final norm (and OPT's projection) of states ``h[..., d]`` in the readout dtype."""
        x = h.to(device=self.device, dtype=self.dtype)
        if self.has_norm:
            if self.norm_kind == NORM_LAYERNORM:
                x = F.layer_norm(x, x.shape[-1:], self.norm_weight, self.norm_bias, self.norm_eps)
            else:
                x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.norm_eps)
                if self.norm_kind == NORM_RMS:
                    x = x * self.norm_weight
                elif self.norm_kind == NORM_RMS_PLUS_ONE:
                    x = x * (1.0 + self.norm_weight)
                else:  # pragma: no cover - guarded by the family table
                    raise ValueError(f"unknown norm kind {self.norm_kind!r}")
        if self.proj_weight is not None:
            x = F.linear(x, self.proj_weight)
        return x

    def post(self, logits: torch.Tensor) -> torch.Tensor:
        """What the model does to logits after the head (Gemma-2/3 soft-capping)."""
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def logits_from_features(self, z: torch.Tensor, columns: slice = slice(None)
                             ) -> torch.Tensor:
        """Post-processed logits ``[..., V]`` from features ``[..., d']`` (or some columns)."""
        bias = None if self.head_bias is None else self.head_bias[columns]
        return self.post(F.linear(z, self.head_weight[columns], bias))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Full post-processed logits of states ``h``."""
        return self.logits_from_features(self.features(h))

    def target_logits(self, z: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Logits of one token per row: ``z[..., d']`` with ``ids`` broadcastable to ``z[..., 0]``."""
        ids = ids.to(self.device)
        rows = self.head_weight[ids]
        out = (z * rows).sum(-1)
        if self.head_bias is not None:
            out = out + self.head_bias[ids]
        return self.post(out)

    def probability(self, h: torch.Tensor, ids: torch.Tensor,
                    contrast: torch.Tensor | None = None) -> torch.Tensor:
        """f(h): probability of ``ids`` (minus that of ``contrast``) at states ``h[..., d]``.

        Differentiable; used for interior path points and the Riemann gradients.
        """
        logits = self.logits(h)
        logp = torch.log_softmax(logits, dim=-1)
        ids = ids.to(self.device)
        p = logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1).exp()
        if contrast is not None:
            p = p - logp.gather(-1, contrast.to(self.device).unsqueeze(-1)).squeeze(-1).exp()
        return p
