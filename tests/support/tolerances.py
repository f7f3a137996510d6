"""Numeric tolerances of the test suite, each a function of the dtype and the size of the
computation it covers, so the suite passes on any x86-64 CPU (AVX2 or AVX-512, any BLAS
blocking) without hiding a real error.

Rounding-error model (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3–4):
rounding one value to ``dtype`` moves it by at most u = eps/2 relative; the rounding errors
of a length-n dot product (BLAS: blocked, sequential) grow like √n·u times its
cancellation-free magnitude Σ|terms| (Wilkinson's rule; Higham & Mary 2019 make it a
probabilistic bound); a pairwise (cascade) sum, as PyTorch's reductions are, is within
⌈log2 n⌉·u of exact relative to Σ|terms| (Higham §4.2). Writing eps = 2u below leaves a
factor of 2 for second-order terms.

* :func:`softmax_tol`: ``exp(l_y − logsumexp l)`` of the same V logits, in ``dtype``,
  against float64. The logsumexp sums V exponentials ≤ 1 pairwise (⌈log2 V⌉ u), each exp and
  the log are within an ulp (the log of a sum ≤ V: ln V · u absolute), each exp is taken
  as ``exp2((l − s) · log₂e)``, whose scaled argument adds (ln V + 1) · u (the softmax
  mean of s − l is at most ln V), and its result |lse| ≤ L is rounded once; streamed in b
  vocabulary blocks, the b partial results are combined in sequence (√b · L · u). A bound on
  |Δ log p|, so on |Δp| (p ≤ 1).
* :func:`readout_tol`: softmax(post(head(norm(h)))) recomputed on the same states (the
  library against the model's own modules). Each side's logit carries at most ``3 √w u S``
  (the norm's mean over ≤ w terms, OPT's projection and the head's dot product of ≤ w
  terms), S = max_v Σ_i |z_i W_vi| + |b_v| (measured by :func:`readout_size`); both sides
  ``3 √w eps S``. A probability moves by at most a quarter of the range of its logits'
  changes, ``|Δp| ≤ ¼ (max δl − min δl) ≤ ½ ‖δl‖∞`` (p(1 − p) ≤ ¼): ``1.5 √w eps S``, plus
  the softmax.
* :func:`half_readout_tol`: against a bf16/fp16 model's own logits, whose head inputs z (d'
  values) and logits are rounded to the half dtype (its matmuls accumulate in float32):
  ``|δl_v| ≤ u |l_v| + λ u ‖z ∘ W_v‖₂`` (output rounding; independent input roundings,
  Hoeffding at λ = 4), so ``|Δp| ≤ ½ ‖δl‖∞ ≤ (eps / 4)(L + 4R)``, R = max_v ‖z ∘ W_v‖₂.
* :func:`sum_tol`: n numbers in [−1, 1], each rounded once (worst case): ``n · eps``.
* :func:`forward_tol`: two forward passes of the same model that may use different kernels
  (another batch size), at the precision the model really rounds in (:func:`forward_dtype`).
  Each of the ``depth`` blocks re-rounds the stream at most as much as one readout of the
  same width and magnitude, and the errors add to first order:
  ``depth · readout_tol``. It ignores how later blocks amplify an error, so the suite uses it
  only in float64, where it keeps orders of magnitude of slack.
* :func:`midpoint_tol`: the m-step midpoint rule for ∫₀¹ g has ``|error| ≤ max|g''| / (24 m²)``;
  here g = f' along a segment, and g'' = f''' comes from third differences of a float64 path.
* The same arithmetic on the same inputs: exact equality, no tolerance.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from .tiny_models import reference_readout_logits


def eps(dtype: torch.dtype) -> float:
    """Machine epsilon of ``dtype`` (2u)."""
    return torch.finfo(dtype).eps


class ReadoutSize(NamedTuple):
    """The sizes a readout tolerance depends on, measured on one model and prompt."""

    width: int
    """w: the widest reduction of the readout (residual width d, or the head's input d')."""
    vocab: int
    """V: the number of head outputs."""
    scale: float
    """S: max over rows and vocabulary of Σ_i |z_i W_vi| + |b_v| (z the head's input)."""
    logit_max: float
    """L: the largest |logit|."""
    rounding: float
    """R: max over rows and vocabulary of ‖z ∘ W_v‖₂ (how much rounding z can move a logit)."""


@torch.no_grad()
def readout_size(model, ids: torch.Tensor, extra_states: torch.Tensor | None = None) -> ReadoutSize:
    """Width, vocabulary, S, L and R of ``model``'s readout over every layer's states of
    ``ids`` (and over ``extra_states [..., T, d]``, e.g. sub-layer states), measured with the
    model's own modules."""
    head = model.get_output_embeddings()
    inputs = []
    handle = head.register_forward_pre_hook(lambda module, args: inputs.append(args[0]))
    try:
        out = model(input_ids=ids[None], output_hidden_states=True)
        for hidden in out.hidden_states[:-1]:  # the last one is already normed in HF
            reference_readout_logits(model, hidden[0])
        if extra_states is not None:
            reference_readout_logits(model, extra_states.reshape(-1, extra_states.shape[-1]))
    finally:
        handle.remove()
    z = torch.cat([x.reshape(-1, x.shape[-1]) for x in inputs]).double()
    weight = head.weight.double()
    magnitude = z.abs() @ weight.abs().T
    if getattr(head, "bias", None) is not None:
        magnitude = magnitude + head.bias.double().abs()
    logits = z @ weight.T
    rounding = (z.square() @ weight.square().T).sqrt()
    width = max(out.hidden_states[0].shape[-1], z.shape[-1])
    return ReadoutSize(
        width,
        weight.shape[0],
        float(magnitude.max()),
        float(logits.abs().max()),
        float(rounding.max()),
    )


def softmax_tol(dtype: torch.dtype, vocab: int, logit_max: float, blocks: int = 1) -> float:
    """|Δ log p| (so |Δp|) of ``exp(l_y − logsumexp(l))`` over V logits ≤ L, in ``dtype``,
    the logsumexp streamed in ``blocks`` vocabulary blocks."""
    return eps(dtype) * (
        math.ceil(math.log2(vocab)) + 1.5 * math.log(vocab) + 2.5 + math.sqrt(blocks) * logit_max
    )


def readout_tol(size: ReadoutSize, dtype: torch.dtype = torch.float32, blocks: int = 1) -> float:
    """|Δp| between two computations of softmax(post(head(norm(h)))) on the same states."""
    return 1.5 * math.sqrt(size.width) * eps(dtype) * size.scale + softmax_tol(
        dtype, size.vocab, size.logit_max, blocks
    )


def half_readout_tol(size: ReadoutSize, model_dtype: torch.dtype) -> float:
    """|Δp| between a float32 readout and a bf16/fp16 model's own output."""
    return eps(model_dtype) / 4 * (size.logit_max + 4 * size.rounding)


def sum_tol(dtype: torch.dtype, n_terms: int) -> float:
    """Sum of ``n_terms`` values in [−1, 1], each rounded once to ``dtype`` (worst case)."""
    return n_terms * eps(dtype)


def forward_tol(size: ReadoutSize, depth: int, dtype: torch.dtype) -> float:
    """|Δp| between two forward passes that may round differently (use in float64, or with
    :func:`forward_dtype` of a float64 model)."""
    return depth * readout_tol(size, dtype)


def forward_dtype(model) -> torch.dtype:
    """The precision a model's forward pass rounds in: its dtype, except that transformers
    computes RMS norms (cast to float32 whatever the model's dtype) and GPT-Neo's attention
    (query and key cast to float32) in float32, so a float64 model of those families rounds
    like a float32 one there. Two forward passes of such a model that differ in float64 by
    one ulp can round a float32 intermediate apart: its rounding is the one to budget for
    (forward_tol in float32 then keeps about three orders of magnitude of slack on the test
    models)."""
    dtype = next(model.parameters()).dtype
    casts = model.config.model_type == "gpt_neo" or any(
        "RMSNorm" in type(m).__name__ for m in model.modules()
    )
    return torch.float32 if casts and dtype == torch.float64 else dtype


def midpoint_tol(path: np.ndarray, steps: int) -> np.ndarray:
    """Error bound of the ``steps``-point midpoint rule for the integral of f' over [0, 1],
    per segment.

    ``path[..., M + 1]`` is f at alpha = j/M in float64; f''' is about M^3 times the third
    difference, its maximum taken over each segment (the last axis). Doubled, because the
    sampled maximum can miss the true one between samples.
    """
    M = path.shape[-1] - 1
    third = np.abs(np.diff(path, n=3, axis=-1)).max(axis=-1) * M**3
    return 2 * third / (24 * steps**2)


def logprob_tol(size: ReadoutSize, dtype: torch.dtype, n_tokens: int = 1) -> float:
    """|Δ log p| of an ``n_tokens``-token answer between two computations of the readout on
    the same states: log p_y = l_y − logsumexp(l) moves by at most 2‖δl‖∞ (the logit and the
    logsumexp each by ‖δl‖∞), and each side's logits carry ``3 √w u S`` (see
    :func:`readout_tol`), so ``2 · 3 √w eps S`` per token plus the softmax's own rounding
    (:func:`softmax_tol`, a bound on |Δ log p|); the tokens' errors add."""
    per_token = 6 * math.sqrt(size.width) * eps(dtype) * size.scale + softmax_tol(
        dtype, size.vocab, size.logit_max
    )
    return n_tokens * per_token
