"""The readout's numeric self-check against the model's own output, and output sanity.

Ground truth for every architecture: the readout of the last state, ``post(head(norm(h_n)))``,
must reproduce the model's own logits at every position, up to rounding. The comparison runs
while :func:`~iglens_viz.core.trace.readout_map` streams the last layer's logits (no second
matmul), row by row, on the spread of the logit differences δl_tv = l_tv(readout) − l_tv(model):

    gap_t = max_v δl_tv − min_v δl_tv

It bounds the log-probability gap max_v |Δ log p_tv| (the logsumexp moves by an amount
between min_v δl_tv and max_v δl_tv) and is at most twice it; a constant shift of every
logit, which changes no probability, counts zero. (A failing row's exact log-probability and
probability gaps are computed for the message.)

Tolerance (first-order rounding-error analysis; Higham, *Accuracy and Stability of Numerical
Algorithms*, §3.1 and §4; Higham & Mary 2019 for the probabilistic form). Notation, for a
position t: u is a unit roundoff (``finfo(dtype).eps / 2``); z_t the head's input (the normed
state, d' wide; d is the residual width); W the head, b its bias; V the vocabulary;
L_t = max_v |l_tv| the largest logit; S_t = ‖z_t‖₂ · max_v ‖W_v‖₂ + max|b|, a bound on
Σ_i |z_ti W_vi| + |b_v| (Cauchy–Schwarz); m_t = min(‖z_t‖₂ · max|W|, ‖z_t‖_∞ · max_v ‖W_v‖₂),
a bound on ‖z_t ∘ W_v‖₂. A side that computes in unit roundoff u and accumulates in u_a gets
each logit within

    E_t(u, u_a) = 2 u L_t              the logit and the soft-cap are each rounded once
                + λ u m_t              the head's d' inputs rounded to that dtype (independent
                                       errors; Hoeffding, λ standard bounds)
                + (√d + √d') u_a S_t   the norm's mean over d terms and the head's dot products
                                       of d' terms (Wilkinson's √n growth of rounding in a sum,
                                       on the cancellation-free magnitude S_t)

The model side uses its dtype's u_m, and accumulates in float32 if it is bf16/fp16 (their
matmuls and norms do), else in u_m; an RMS norm in transformers computes in float32 whatever
the model's dtype (it casts its input to float32), so a float64 model of an RMS-norm family
gets float32's u for its norm and head input. The readout side uses u_r throughout. Each side's logits
lie within E_t of the exact ones, so

    gap_t ≤ 2 (E_t(model) + E_t(readout)) = tol_t,     λ = 4.

Measured on the test models (14 families in float32, bf16 and fp16, read out in float32
and float64) and on SmolLM2-135M: a float32 model read out in float32 reproduces its own
logits exactly (gap 0); read out in float64 the gap stays under 1/8 of tol_t (SmolLM2: 5.6e-5
against 1.7e-3); bf16/fp16 models stay under 1/5 of it (SmolLM2 in bf16: 0.24 against 2.7).
An adapter bug (a norm skipped, a soft-cap missing, a wrong bias or projection) moves logits
by O(0.1–10); a float32 model's tol_t is 1.5e-5 (tiny test models) to 3.4e-3 (SmolLM2).

A float32/float64 model over tolerance raises :class:`ReadoutMismatchError`; a bf16/fp16 model
gets a warning with the measured gap. NaN or Inf in the model's own states or logits is not
the readout's fault and raises :class:`ModelOutputError` instead.
"""

from __future__ import annotations

import math
import warnings

import torch

from ..adapters.families import NORM_RMS, NORM_RMS_PLUS_ONE
from ..errors import ModelOutputError, ReadoutMismatchError
from .readout import Readout

LAMBDA = 4.0
"""Confidence multiplier of the probabilistic rounding terms (see the module docstring)."""

HALF_DTYPES = (torch.float16, torch.bfloat16)


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = eps / 2: the largest relative error of rounding one value to ``dtype``."""
    return torch.finfo(dtype).eps / 2


def check_model_states(states: torch.Tensor, what: str) -> None:
    """ModelOutputError when the captured states ``[n+1, T, d]`` hold NaN or Inf."""
    for layer in range(states.shape[0]):
        finite = torch.isfinite(states[layer])
        if not bool(finite.all()):
            position = int((~finite).any(-1).nonzero()[0])
            where = "the embeddings (h_0)" if layer == 0 else f"block {layer} (h_{layer})"
            raise ModelOutputError(
                f"{what}'s forward pass produced NaN/Inf in the output of {where}, first at "
                f"position {position}: its weights hold NaN/Inf or its dtype overflowed "
                f"(try float32 or bfloat16). This is the model's own output, not the adapter "
                f"or the readout")


class SelfCheck:
    """Compares streamed readout logits of h_n with the model's own logits ``[T, V]``.

    Pass :meth:`observe` to :func:`readout_map` as ``observe``; the rows of h_n in the
    flattened map are ``first_row … first_row + T − 1``. Then call :meth:`finish`.
    """

    def __init__(self, readout: Readout, model_logits: torch.Tensor, first_row: int, *,
                 what: str, adapter_name: str, width: int, budget_bytes: int):
        self.readout = readout
        # Head rows per block when the check reads the head itself (its magnitudes, and the
        # probability gap of a failing row): one upcast block within the memory budget.
        itemsize = torch.finfo(readout.dtype).bits // 8
        self.block_columns = max(1, int(budget_bytes) // (itemsize * 2 * readout.feature_size))
        self.what = what
        self.adapter_name = adapter_name
        self.width = width
        self.model_dtype = model_logits.dtype
        T, vocab = model_logits.shape
        if vocab != readout.vocab_size:
            raise ReadoutMismatchError(
                f"readout self-check: the readout gives {readout.vocab_size} logits but the "
                f"model gives {vocab}; the {adapter_name} adapter does not fit {what}")
        self.model_logits = model_logits.to(readout.device)
        self.first_row = int(first_row)
        self.seen = 0
        options = dict(device=readout.device, dtype=readout.dtype)
        self.diff_max = torch.full((T,), -math.inf, **options)
        self.diff_min = torch.full((T,), math.inf, **options)
        self.largest = torch.zeros(T, **options)

    def observe(self, rows: slice, columns: slice, logits: torch.Tensor) -> None:
        """Fold one ``[rows × columns]`` block of readout logits into the comparison."""
        T = self.model_logits.shape[0]
        start = max(rows.start, self.first_row)
        stop = min(rows.stop, self.first_row + T)
        if start >= stop:
            return
        ours = logits[start - rows.start:stop - rows.start]
        t = slice(start - self.first_row, stop - self.first_row)
        theirs = self.model_logits[t, columns].to(self.readout.dtype)
        low, high = (ours - theirs).aminmax(dim=-1)
        self.diff_min[t] = torch.minimum(self.diff_min[t], low)  # NaN propagates: see finish
        self.diff_max[t] = torch.maximum(self.diff_max[t], high)
        low, high = theirs.aminmax(dim=-1)
        self.largest[t] = torch.maximum(self.largest[t], torch.maximum(-low, high))
        self.seen += (stop - start) * theirs.shape[-1]

    def tolerance(self, features: torch.Tensor) -> torch.Tensor:
        """``[T]`` tol_t of the module docstring, for the features z_t of h_n."""
        readout = self.readout
        stats = readout.head_stats(self.block_columns)
        z = features.to(readout.dtype)
        z_norm = z.norm(dim=-1)
        sum_bound = z_norm * stats.row_norm + stats.bias
        input_bound = torch.minimum(z_norm * stats.abs_max, z.abs().amax(-1) * stats.row_norm)
        widths = math.sqrt(self.width) + math.sqrt(z.shape[-1])

        def side(u, u_acc):
            return (2 * u * self.largest + LAMBDA * u * input_bound
                    + widths * u_acc * sum_bound)

        u_model = unit_roundoff(self.model_dtype)
        u_model_acc = unit_roundoff(torch.float32) if self.model_dtype in HALF_DTYPES \
            else u_model
        if readout.norm_kind in (NORM_RMS, NORM_RMS_PLUS_ONE):  # the model's norm: float32
            u_model = max(u_model, unit_roundoff(torch.float32))
            u_model_acc = max(u_model_acc, unit_roundoff(torch.float32))
        return 2 * (side(u_model, u_model_acc) + side(unit_roundoff(readout.dtype),
                                                      unit_roundoff(readout.dtype)))

    def finish(self, features: torch.Tensor) -> None:
        """Raise, warn or return, given h_n's features ``[T, d']``."""
        T, vocab = self.model_logits.shape
        if self.seen != T * vocab:  # pragma: no cover - readout_map visits every block
            raise RuntimeError("readout self-check: not every logit of h_n was compared")
        spread = self.diff_max - self.diff_min
        broken = ~torch.isfinite(spread)
        if bool(broken.any()):
            rows = broken.nonzero()[:, 0]
            finite = torch.isfinite(self.model_logits[rows]).all(-1)
            if not bool(finite.all()):
                position = int(rows[~finite][0])
                raise ModelOutputError(
                    f"{self.what}'s forward pass produced NaN/Inf logits, first at position "
                    f"{position}: its weights (the head or the final norm) hold NaN/Inf or "
                    f"its dtype ({self.model_dtype}) overflowed. This is the model's own "
                    f"output, not the {self.adapter_name} adapter or the readout")
        tol = self.tolerance(features)
        ratio = torch.where(broken, torch.full_like(spread, math.inf), spread / tol)
        worst = int(ratio.argmax())
        if ratio[worst] <= 1:
            return
        log_gap, prob_gap = self._gaps(features[worst], worst)
        bad = int((ratio > 1).sum())
        message = (f"readout self-check: f(h_n) differs from {self.what}'s own output at "
                   f"{bad} of {T} positions; worst at position {worst}: log-probabilities "
                   f"differ by up to {log_gap:.2e} (the logit differences spread over "
                   f"{float(spread[worst]):.2e}, tolerance {float(tol[worst]):.1e} for a "
                   f"{self.model_dtype} model read out in {self.readout.dtype}), probabilities "
                   f"by up to {prob_gap:.2e} ({self.adapter_name} adapter)")
        if self.model_dtype not in HALF_DTYPES:
            raise ReadoutMismatchError(message + "; the adapter does not match this model")
        warnings.warn(message + f"; some gap is expected for a {self.model_dtype} model, but "
                      f"not this much", stacklevel=4)

    def _gaps(self, z: torch.Tensor, t: int) -> tuple[float, float]:
        """max_v |Δ log p_tv| and max_v |Δp_tv| at one position (only when reporting)."""
        dtype = self.readout.dtype
        cols = self.block_columns
        blocks = range(0, self.readout.vocab_size, cols)
        ours_lse = float(self.readout.log_normalizer(z, cols))
        theirs_lse = float(torch.logsumexp(self.model_logits[t].to(dtype), -1))
        log_gap = prob_gap = 0.0
        for c0 in blocks:
            columns = slice(c0, c0 + cols)
            ours = self.readout.logits_from_features(z, columns) - ours_lse
            theirs = self.model_logits[t, columns].to(dtype) - theirs_lse
            log_gap = max(log_gap, float((ours - theirs).abs().max()))
            prob_gap = max(prob_gap, float((ours.exp() - theirs.exp()).abs().max()))
        return log_gap, prob_gap
