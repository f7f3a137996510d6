"""The readout's numeric self-check against the model's own output, and output sanity.

Ground truth for every architecture: the readout of the last state, ``post(head(norm(h_n)))``,
must reproduce the model's own logits at every position, up to rounding. The forward pass
(:func:`~iglens_viz.core.capture.capture_states`) keeps the model's own head input z̃_t at
every position and its own logits at a few :func:`~iglens_viz.core.capture.checked_positions`
(post-processed by the model's code). The check has two parts:

* **Every position, in feature space.** The readout's features z_t of h_n (final norm and
  projection, as the map computed them) against z̃_t. The logits differ through them by
  δl_tv = W_v · (z_t − z̃_t) (the head is linear and a soft-cap is 1-Lipschitz), so their
  spread is at most ``2 max_v ‖W_v‖₂ ‖z_t − z̃_t‖₂``. Where that bound is within the
  feature part of the tolerance below, the position passes; elsewhere it is compared in
  logit space, as the checked positions are.
* **Logit space**, at the checked positions and where the bound did not pass: on the spread
  of the logit differences δl_tv = l_tv(readout) − l_tv(model),

      gap_t = max_v δl_tv − min_v δl_tv

  against the model's own logits at the checked positions (which also checks the head and
  the post-head transform: the same functions at every position), and against
  ``post(head(z̃_t))`` elsewhere. gap_t bounds the log-probability gap max_v |Δ log p_tv|
  (the logsumexp moves by an amount between min_v δl_tv and max_v δl_tv) and is at most
  twice it; a constant shift of every logit, which changes no probability, counts zero. (A
  failing row's exact log-probability and probability gaps are computed for the message.)

So no ``[T × V]`` logits are held and the model's head runs on a few rows: the check costs
a few rows of the map, where comparing whole logits cost a forward pass's head matmul and
``T × V`` logits in memory.

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
gets float32's u for its norm and head input. The readout side uses u_r throughout. Each
side's logits lie within E_t of the exact ones, so

    gap_t ≤ 2 (E_t(model) + E_t(readout)) = tol_t,     λ = 4.

The feature bound is held to the terms of E_t that come before the head (the inputs'
rounding and the norm's mean, ``λ u m_t + √d u_a S_t`` per side): the head and the
post-head transform are the same functions on both sides, checked in logit space.

Measured on the test models (14 families in float32, bf16 and fp16, read out in float32
and float64) and on SmolLM2-135M (a 28-token prompt): a float32 model read out in float32
reproduces its own head input and logits exactly (gap 0); read out in float64 the feature
bound stays under 1/12 of its tolerance at every position, and the logit gap under 1/8 of
tol_t (SmolLM2: 5.6e-5 against 1.7e-3); bf16/fp16 models stay under 1/5 of tol_t (SmolLM2 in
bf16: 0.24 against 1.8–3.6), and their feature bound, loose by the rounding of the head
input to bf16, sends a few positions to the logit comparison (SmolLM2 in bf16: 1 of 28, at
1.06 times the bound's tolerance). An adapter bug (a norm skipped, a soft-cap missing, a wrong
bias or projection) moves logits by O(0.1–10); a float32 model's tol_t is 1.5e-5 (tiny test
models) to 3.4e-3 (SmolLM2).

A float32/float64 model over tolerance raises :class:`ReadoutMismatchError`; a bf16/fp16 model
gets a warning with the measured gap. NaN or Inf in the model's own states, head input or
logits is not the readout's fault and raises :class:`ModelOutputError` instead; so do states
too large for the final norm to square (:func:`norm_limit`: the model's own norm overflows
to inf there) and a readout map whose logits are inf/NaN or so large that the readout dtype
rounds them by more than 1 (a weight of 1e30, say): no probability means anything there.
The tolerance's magnitudes are taken in float64, so a large but finite model never gets an
infinite (vacuous) or NaN tolerance.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import torch

from ..adapters.families import NORM_RMS, NORM_RMS_PLUS_ONE
from ..errors import IGLensError, ModelOutputError, ReadoutMismatchError
from .readout import Readout

if TYPE_CHECKING:
    from .capture import Capture

LAMBDA = 4.0
"""Confidence multiplier of the probabilistic rounding terms (see the module docstring)."""

HALF_DTYPES = (torch.float16, torch.bfloat16)

# The self-check's logit comparison streams the vocabulary at least this many columns at a
# time where the budget allows (fewer rows per block instead); the engine's smallest budget
# (memory.min_memory_budget) fits one row of this width.
_SPREAD_COLUMNS = 512


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = eps / 2: the largest relative error of rounding one value to ``dtype``."""
    return torch.finfo(dtype).eps / 2


def norm_limit(dtype: torch.dtype, width: int) -> float:
    """The largest |h_i| a final norm can square and average over ``width`` entries in
    ``dtype`` without overflow: sqrt(finfo.max / width)."""
    return math.sqrt(torch.finfo(dtype).max / max(1, width))


def check_model_states(
    states: torch.Tensor,
    what: str,
    readout: Readout | None = None,
    model_dtype: torch.dtype | None = None,
    *,
    model_name: str | None = None,
) -> None:
    """ModelOutputError when the captured states ``[n+1, T, d]`` hold NaN or Inf, or (given
    the ``readout``) values so large that the final norm's mean of squares overflows: in
    the readout dtype for every state, and for h_n also in the dtype the model's own norm
    computes in (float32, unless a float64 model with a LayerNorm), whose output is then
    degenerate (an overflowed RMS is inf, its scale 0: every logit 0). ``model_name`` (the
    model's ``config.name_or_path``) tells the embedded default model, whose NaN/Inf error
    also says how to check its cached copy."""
    n_states = states.shape[0]
    for layer in range(n_states):
        finite = torch.isfinite(states[layer])
        if not bool(finite.all()):
            position = int((~finite).any(-1).nonzero()[0])
            raise ModelOutputError(
                f"{what}'s forward pass produced NaN/Inf in the output of {_where(layer)}, "
                f"first at position {position}: its weights hold NaN/Inf or its dtype "
                f"overflowed (try float32 or bfloat16). This is the model's own output, not "
                f"the adapter or the readout{_cached_default_hint(model_name)}"
            )
    if readout is None or not readout.has_norm:
        return
    width = states.shape[-1]
    model_norm = (
        torch.float64
        if model_dtype == torch.float64 and readout.norm_kind not in (NORM_RMS, NORM_RMS_PLUS_ONE)
        else torch.float32
    )
    for layer in range(n_states):
        last = layer == n_states - 1
        dtypes = [readout.dtype] + ([model_norm] if last else [])
        dtype = min(dtypes, key=lambda d: torch.finfo(d).max)
        limit = norm_limit(dtype, width)
        low, high = torch.aminmax(states[layer], dim=-1)  # max |h| without an |h| copy
        largest = torch.maximum(-low, high)
        over = largest > limit
        if bool(over.any()):
            position = int(over.nonzero()[0])
            wider = (
                ""
                if last or readout.dtype == torch.float64
                else ", or read out in float64: dtype=torch.float64"
            )
            raise ModelOutputError(
                f"{what}'s residual stream reaches |h| = "
                f"{float(largest[position]):.1e} in the output of {_where(layer)}, "
                f"position {position}, beyond {limit:.1e}, where the final norm's mean of "
                f"squares overflows {dtype} to inf: the model produces inf/NaN there and no "
                f"probability can be read; its weights hold extreme values (check them{wider})"
            )


def _cached_default_hint(model_name: str | None) -> str:
    """For the embedded default model (loaded from its converted copy in the cache): how to
    check that copy; else nothing. Only on the error path (it imports the loading package)."""
    from ..loading import DEFAULT_MODEL_NAME, default_model_dir

    if model_name != DEFAULT_MODEL_NAME:
        return ""
    try:
        folder = f"its folder, {default_model_dir()}"
    except IGLensError:  # (the default model's package is gone since it was loaded)
        folder = "its cache folder"
    return (
        f". This is the default model, read from its converted copy in the cache: check it "
        f"with iglens_viz.loading.verify_default_model(), or delete {folder} (the next "
        f"load_model() converts it again)"
    )


def _where(layer: int) -> str:
    return "the embeddings (h_0)" if layer == 0 else f"block {layer} (h_{layer})"


def check_readout_map(
    readout: Readout, features: torch.Tensor, log_normalizer: torch.Tensor, what: str
) -> None:
    """ModelOutputError where the readout map (``[S, T, d']`` features and ``[S, T]``
    log-normalisers of finite states) is NaN/Inf: the final norm's or the head's weights
    make logits beyond the readout dtype's range."""
    finite = torch.isfinite(features).all(-1) & torch.isfinite(log_normalizer)
    wider = (
        ", or read out in float64 (dtype=torch.float64)" if readout.dtype != torch.float64 else ""
    )
    if not bool(finite.all()):
        row, position = (int(i) for i in (~finite).nonzero()[0])
        raise ModelOutputError(
            f"the readout of {what}'s states is inf/NaN in {readout.dtype} at row {row} of "
            f"{features.shape[0]}, position {position}: the model produces logits beyond "
            f"that range there; its final norm or head weights hold extreme values (check "
            f"them{wider})"
        )
    # Logits of magnitude L are rounded by about eps·L: beyond 1/eps, log p carries an error
    # above 1 (a factor e in p), and no probability is meaningful (nor the model's own).
    eps = torch.finfo(readout.dtype).eps
    size = log_normalizer.abs()
    coarse = size * eps > 1
    if bool(coarse.any()):
        row, position = (int(i) for i in coarse.nonzero()[0])
        raise ModelOutputError(
            f"{what}'s logits reach {float(size[row, position]):.1e} (row {row} of "
            f"{features.shape[0]}, position {position}), where {readout.dtype} rounds them by "
            f"~{float(size[row, position]) * eps:.0e}: the model produces inf/NaN-scale "
            f"values and no probability can be read from them; its final norm or head "
            f"weights hold extreme values (check them)"
        )


def check_readout(
    readout: Readout,
    features: torch.Tensor,
    captured: Capture,
    *,
    what: str,
    adapter_name: str,
    width: int,
    budget_bytes: int,
) -> None:
    """Raise, warn or return: the readout's features of h_n (``[T, d']``) against the
    model's own head input (``captured.unembed_input``, ``[T, d']``) and its logits
    (``captured.logits``, ``[k, V]``) at positions ``captured.checked`` (``[k]``), as the
    module docstring describes. ``width`` is d."""
    model_logits = captured.logits
    if model_logits.shape[-1] != readout.vocab_size:
        raise ReadoutMismatchError(
            f"readout self-check: the readout gives {readout.vocab_size} logits but the "
            f"model gives {model_logits.shape[-1]}; the {adapter_name} adapter does not fit "
            f"{what}"
        )
    _Check(
        readout,
        features,
        captured,
        what=what,
        adapter_name=adapter_name,
        width=width,
        budget_bytes=budget_bytes,
    ).run()


class _Check:
    """One self-check (see :func:`check_readout`)."""

    def __init__(
        self,
        readout: Readout,
        features: torch.Tensor,
        captured: Capture,
        *,
        what: str,
        adapter_name: str,
        width: int,
        budget_bytes: int,
    ) -> None:
        unembed_input, checked, model_logits = (
            captured.unembed_input,
            captured.checked,
            captured.logits,
        )
        self.readout = readout
        self.what = what
        self.adapter_name = adapter_name
        self.width = width
        self.budget_bytes = int(budget_bytes)
        self.model_dtype = model_logits.dtype
        self.ours = features.to(device=readout.device, dtype=readout.dtype)
        self.theirs = unembed_input.to(device=readout.device, dtype=readout.dtype)
        self.checked = checked.to(readout.device)
        self.model_logits = model_logits.to(readout.device)
        # Head rows per block when the check reads the head itself (its magnitudes): one
        # upcast block within the memory budget.
        itemsize = torch.finfo(readout.dtype).bits // 8
        self.block_columns = max(1, self.budget_bytes // (itemsize * 2 * readout.feature_size))

    def run(self) -> None:
        T = self.ours.shape[0]
        self._require_finite(
            self.theirs,
            torch.arange(T),
            "in its head's input (the final norm's output)",
            "the final norm's weights",
        )
        self._require_finite(
            self.model_logits, self.checked, "logits", "its weights (the head or the final norm)"
        )
        self._require_finite_readout()
        stats = self.readout.head_stats(self.block_columns)
        bound = 2 * stats.row_norm * (self.ours - self.theirs).norm(dim=-1)
        in_logits = ~(bound <= self.tolerance(features_only=True))  # NaN: compare logits
        in_logits[self.checked] = True
        rows = in_logits.nonzero()[:, 0]
        spread, largest = self._logit_spread(rows)
        tol = self.tolerance(largest, rows)
        self._require_finite_bounds(rows, spread, largest, tol)
        # spread <= tol passes (0 <= 0 too); the ratio (inf where tol is 0) orders failures.
        fails = spread > tol
        if not bool(fails.any()):
            return
        ratio = torch.where(fails, spread / tol, torch.zeros_like(spread))
        worst = int(ratio.argmax())
        t = int(rows[worst])
        log_gap, prob_gap = self._gaps(t)
        bad = int(fails.sum())
        message = (
            f"readout self-check: f(h_n) differs from {self.what}'s own output at "
            f"{bad} of {T} positions; worst at position {t}: log-probabilities "
            f"differ by up to {log_gap:.2e} (the logit differences spread over "
            f"{float(spread[worst]):.2e}, tolerance {float(tol[worst]):.1e} for a "
            f"{self.model_dtype} model read out in {self.readout.dtype}), probabilities "
            f"by up to {prob_gap:.2e} ({self.adapter_name} adapter)"
        )
        if self.model_dtype not in HALF_DTYPES:
            raise ReadoutMismatchError(message + "; the adapter does not match this model")
        warnings.warn(
            message + f"; some gap is expected for a {self.model_dtype} model, but not this much",
            stacklevel=5,
        )

    def _require_finite(
        self, values: torch.Tensor, positions: torch.Tensor, output: str, weights: str
    ) -> None:
        """ModelOutputError unless every row of the model's own ``values`` is finite."""
        finite = torch.isfinite(values).all(-1)
        if not bool(finite.all()):
            raise ModelOutputError(
                f"{self.what}'s forward pass produced NaN/Inf {output}, first at position "
                f"{int(positions.cpu()[~finite.cpu()][0])}: {weights} hold NaN/Inf or its dtype "
                f"({self.model_dtype}) overflowed. This is the model's own output, not the "
                f"{self.adapter_name} adapter or the readout"
            )

    def _require_finite_readout(self) -> None:
        """ModelOutputError unless the readout's own features of h_n are finite (the model's
        are, as checked before): its final norm or projection weights are too large for
        the readout dtype."""
        finite = torch.isfinite(self.ours).all(-1)
        if not bool(finite.all()):
            position = int(torch.arange(finite.numel())[~finite.cpu()][0])
            raise ModelOutputError(
                f"readout self-check: the final norm of {self.what}'s last state is inf/NaN "
                f"in {self.readout.dtype} at position {position}: the model produces values "
                f"beyond that range there (its final norm weights hold extreme values: "
                f"check them, or read out in float64)"
            )

    def _require_finite_bounds(
        self, rows: torch.Tensor, spread: torch.Tensor, largest: torch.Tensor, tol: torch.Tensor
    ) -> None:
        """ModelOutputError where the logits' spread or their rounding bound is not finite:
        the logits are too large for the readout dtype (a weight of 1e30, say), and no
        comparison means anything there."""
        bad = ~(torch.isfinite(spread) & torch.isfinite(tol) & torch.isfinite(largest))
        if not bool(bad.any()):
            return
        i = int(bad.nonzero()[0])
        raise ModelOutputError(
            f"readout self-check: {self.what}'s logits at position {int(rows[i])} are too "
            f"large to compare in {self.readout.dtype} (largest |logit| "
            f"{float(largest[i]):.1e}): the model produces inf/NaN-sized values there; its "
            f"weights (head or final norm) hold extreme values: check them"
        )

    def _reference(
        self, rows: torch.Tensor, columns: slice, head: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The model's logits at ``rows`` (positions), in the readout dtype: its own where it
        computed them (checked positions), else ``post(head(z̃))`` of its head input.
        ``head`` is ``head_block(columns)`` when the caller holds it."""
        out = self.readout.logits_from_features(self.theirs[rows], columns, head)
        hit = rows[:, None] == self.checked[None, :]
        where, which = hit.nonzero(as_tuple=True)
        out[where] = self.model_logits[which, columns].to(out.dtype)
        return out

    def _logit_spread(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """gap_t and L_t (the model's largest |logit|) at positions ``rows``, streamed over
        vocabulary blocks within the memory budget (our logits, the reference, their
        difference and the head rows, per block). Rows go in chunks small enough for blocks
        of ``_SPREAD_COLUMNS`` columns (where the budget allows), so a small budget and many
        rows never stream the vocabulary a few columns at a time."""
        itemsize = torch.finfo(self.readout.dtype).bits // 8
        cells = max(1, self.budget_bytes // itemsize)
        head_width = self.readout.head_block_width  # an upcast head block, per column
        min_cols = min(self.readout.vocab_size, _SPREAD_COLUMNS)
        chunk = max(1, (cells - min_cols * head_width) // (3 * min_cols))
        parts = [
            self._logit_spread_rows(rows[r0 : r0 + chunk], cells)
            for r0 in range(0, rows.numel(), chunk)
        ]
        if not parts:
            empty = torch.empty(0, device=self.readout.device, dtype=self.readout.dtype)
            return empty, empty
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

    def _logit_spread_rows(
        self, rows: torch.Tensor, cells: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`_logit_spread` of one chunk of rows, in blocks of ``cells`` elements."""
        device, dtype = self.readout.device, self.readout.dtype
        low = torch.full((rows.numel(),), math.inf, device=device, dtype=dtype)
        high = torch.full((rows.numel(),), -math.inf, device=device, dtype=dtype)
        largest = torch.zeros(rows.numel(), device=device, dtype=dtype)
        per_column = 3 * rows.numel() + self.readout.head_block_width  # + an upcast head block
        cols = max(1, cells // per_column)
        ours = self.ours[rows]
        for c0 in range(0, self.readout.vocab_size, cols):
            columns = slice(c0, c0 + cols)
            head = self.readout.head_block(columns)
            theirs = self._reference(rows, columns, head)
            diff = self.readout.logits_from_features(ours, columns, head).sub_(theirs)
            block_low, block_high = diff.aminmax(dim=-1)
            low = torch.minimum(low, block_low)  # NaN propagates: a broken row
            high = torch.maximum(high, block_high)
            block_low, block_high = theirs.aminmax(dim=-1)
            largest = torch.maximum(largest, torch.maximum(-block_low, block_high))
        return high - low, largest

    def tolerance(
        self,
        largest: torch.Tensor | None = None,
        rows: torch.Tensor | None = None,
        *,
        features_only: bool = False,
    ) -> torch.Tensor:
        """tol_t of the module docstring at positions ``rows`` (all when None), given L_t
        (``largest``); with ``features_only``, its terms before the head (no L_t)."""
        readout = self.readout
        stats = readout.head_stats(self.block_columns)
        z = self.ours if rows is None else self.ours[rows]
        # Magnitudes in float64 (where the device has it): ‖z‖ of features beyond 1e19
        # overflows float32, which would make the bound inf and the check vacuous.
        wide = readout.dtype if readout.device.type == "mps" else torch.float64
        z = z.to(wide)
        largest = None if largest is None else largest.to(wide)
        z_norm = z.norm(dim=-1)
        sum_bound = z_norm * stats.row_norm + stats.bias
        input_bound = torch.minimum(z_norm * stats.abs_max, z.abs().amax(-1) * stats.row_norm)
        d, d_head = math.sqrt(self.width), math.sqrt(z.shape[-1])

        def side(u, u_acc):
            if features_only:
                return LAMBDA * u * input_bound + d * u_acc * sum_bound
            return 2 * u * largest + LAMBDA * u * input_bound + (d + d_head) * u_acc * sum_bound

        u_model = unit_roundoff(self.model_dtype)
        u_model_acc = unit_roundoff(torch.float32) if self.model_dtype in HALF_DTYPES else u_model
        if readout.norm_kind in (NORM_RMS, NORM_RMS_PLUS_ONE):  # the model's norm: float32
            u_model = max(u_model, unit_roundoff(torch.float32))
            u_model_acc = max(u_model_acc, unit_roundoff(torch.float32))
        return 2 * (
            side(u_model, u_model_acc)
            + side(unit_roundoff(readout.dtype), unit_roundoff(readout.dtype))
        )

    def _gaps(self, t: int) -> tuple[float, float]:
        """max_v |Δ log p_tv| and max_v |Δp_tv| at one position (only when reporting)."""
        dtype = self.readout.dtype
        cols = self.block_columns
        row = torch.tensor([t], device=self.readout.device)
        z = self.ours[t]
        ours_lse = float(self.readout.log_normalizer(z, cols))
        theirs_all = torch.cat(
            [
                self._reference(row, slice(c0, c0 + cols))[0]
                for c0 in range(0, self.readout.vocab_size, cols)
            ]
        )
        theirs_lse = float(torch.logsumexp(theirs_all.to(dtype), -1))
        log_gap = prob_gap = 0.0
        for c0 in range(0, self.readout.vocab_size, cols):
            columns = slice(c0, c0 + cols)
            ours = self.readout.logits_from_features(z, columns) - ours_lse
            theirs = theirs_all[columns] - theirs_lse
            log_gap = max(log_gap, float((ours - theirs).abs().max()))
            prob_gap = max(prob_gap, float((ours.exp() - theirs.exp()).abs().max()))
        return log_gap, prob_gap
