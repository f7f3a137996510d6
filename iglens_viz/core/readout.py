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
import functools
import math
import os
from typing import NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..adapters import ModelAdapter, execution_device
from ..adapters.families import NORM_LAYERNORM, NORM_RMS, NORM_RMS_PLUS_ONE
from ..errors import InvalidRequestError
from .memory import rows_within

FALLBACK_L2 = 512 * 2**10
FALLBACK_L3 = 8 * 2**20
# A vocabulary block narrower than this wastes the matmul and pays the per-block operations
# too often; rows give way first.
_MIN_TILE_COLUMNS = 512
_MIN_TILE_BYTES = 2**20
# Wider than this, a tile of few rows gains nothing and its first (unfiltered) top-k costs.
_MAX_TILE_COLUMNS = 4096
MAX_TILE_BYTES = 32 * 2**20
# Column counts are rounded down to a multiple of this (a few cache lines of float32).
_TILE_COLUMN_STEP = 64
_LOG2_E = 1.0 / math.log(2.0)


def _parse_size(text: str) -> int:
    """``"512K"``, ``"16384K"``, ``"1M"`` or plain bytes → bytes."""
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


@functools.lru_cache(maxsize=1)
def cache_sizes() -> tuple[int, int]:
    """(L2 bytes of one core, L3 bytes) of this machine's CPU.

    Read from ``/sys/devices/system/cpu/cpu0/cache`` (Linux), else ``os.sysconf`` (glibc's
    ``SC_LEVEL2_CACHE_SIZE``/``SC_LEVEL3_CACHE_SIZE``); where neither answers, 512 KiB and
    8 MiB, a mid-range x86-64 server core. A machine without an L3 gets its L2 as L3.
    """
    sizes: dict[int, int] = {}
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(root):
            if not entry.startswith("index"):
                continue
            path = os.path.join(root, entry)
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(os.path.join(path, "level")) as f:
                level = int(f.read())
            with open(os.path.join(path, "size")) as f:
                sizes[level] = max(sizes.get(level, 0), _parse_size(f.read()))
    except (OSError, ValueError):
        sizes = {}
    for level, name in ((2, "SC_LEVEL2_CACHE_SIZE"), (3, "SC_LEVEL3_CACHE_SIZE")):
        if sizes.get(level, 0) <= 0:
            try:
                value = os.sysconf(name)
            except (ValueError, OSError, AttributeError):
                value = 0
            if value > 0:
                sizes[level] = int(value)
    l2 = sizes.get(2) or FALLBACK_L2
    l3 = sizes.get(3) or (l2 if 2 in sizes else FALLBACK_L3)
    return l2, l3


def tile_plan(
    n_rows: int,
    vocab_size: int,
    width: int,
    dtype: torch.dtype,
    device: torch.device | str = "cpu",
    max_rows: int | None = None,
    max_columns: int | None = None,
) -> tuple[int, int]:
    """(rows, columns) of one logits tile of the streamed readout.

    On a CPU the tile is sized from the machine's caches, not from the memory budget: its
    logits (rows × columns) take half the last-level cache (L3, or L2 where there is none;
    at least 1 MiB, at most 32 MiB), and the rows' features (rows × ``width``) at most as
    much, so the passes that follow the matmul (top-k, max, subtract, exp, sum, the
    gradient's second matmul) read the tile from cache and every vocabulary block of the
    head meets the same features there. Rows come first (the head is read once per row
    tile); columns shrink to 512 (``_MIN_TILE_COLUMNS``) before rows do. The tile is one
    buffer, reused for every block of a call. ``max_rows``/``max_columns`` (a memory plan's, see
    :func:`~iglens_viz.core.memory.block_plan`) are upper bounds the tile never exceeds.
    Elsewhere (CUDA, MPS) the bounds are the tile, as before.

    Measured on a 2-core AMD EPYC (Zen 2: 512 KiB L2 per core, 16 MiB L3) with SmolLM2's
    head (d' = 576, V = 49,152, 3,968 rows): 8 MiB tiles (1,984 × 1,024 or 3,968 × 512) ran
    the readout 5–10% faster than L2-sized ones (1–2 MiB), whose extra blocks each pay a few
    dozen small operations, with the matmuls alone equally fast (115–130 GFLOP/s) for all.
    """
    max_rows = n_rows if max_rows is None else max(1, min(n_rows, int(max_rows)))
    max_columns = vocab_size if max_columns is None else max(1, min(vocab_size, int(max_columns)))
    if torch.device(device).type != "cpu":
        return max(1, max_rows), max_columns
    itemsize = torch.finfo(dtype).bits // 8
    tile_bytes = min(MAX_TILE_BYTES, max(_MIN_TILE_BYTES, cache_sizes()[1] // 2))
    tile = tile_bytes // itemsize
    min_cols = min(max_columns, _MIN_TILE_COLUMNS)
    rows = rows_within(tile, max(min_cols, width), max_rows)
    rows = -(-n_rows // -(-n_rows // rows)) if n_rows > rows else rows  # even row tiles
    cols = min(max_columns, max(min_cols, rows_within(tile, rows, _MAX_TILE_COLUMNS)))
    if _TILE_COLUMN_STEP < cols < vocab_size:
        cols -= cols % _TILE_COLUMN_STEP
    return rows, cols


READOUT_DTYPES = {"float32": torch.float32, "float64": torch.float64}
"""The readout precisions, by name (``"float"`` and ``"double"`` are accepted too)."""
_DTYPE_ALIASES = {"float": "float32", "fp32": "float32", "double": "float64", "fp64": "float64"}
_DIGITS = {torch.float16: 3, torch.bfloat16: 2}


def readout_dtype(dtype: object) -> torch.dtype:
    """``torch.float32`` or ``torch.float64`` from a torch dtype, a numpy dtype or a name
    (``"float32"``, ``"torch.float64"``, ``"double"``, …).

    Raises :class:`~iglens_viz.errors.InvalidRequestError` for anything else; for float16 /
    bfloat16 it says why: the readout's logsumexp over the vocabulary and its differences of
    probabilities need float32 at least (a bf16/fp16 model is read out in float32, its
    states upcast, without being asked).
    """
    given = dtype
    if isinstance(dtype, str):
        name = dtype.strip().lower().removeprefix("torch.")
        name = _DTYPE_ALIASES.get(name, name)
        dtype = READOUT_DTYPES.get(name, getattr(torch, name, None))
    elif not isinstance(dtype, torch.dtype):
        name = str(getattr(dtype, "name", None) or getattr(dtype, "__name__", ""))
        dtype = READOUT_DTYPES.get(name, getattr(torch, name, None) if name else None)
    if isinstance(dtype, torch.dtype) and dtype in (torch.float32, torch.float64):
        return dtype
    if isinstance(dtype, torch.dtype) and dtype in (torch.float16, torch.bfloat16):
        raise InvalidRequestError(
            f"the readout dtype must be float32 or float64, not {dtype}: the readout is "
            f"computed in float32 at least ({dtype} keeps {_DIGITS[dtype]} significant digits, "
            f"too few for a logsumexp over the vocabulary and the small differences of "
            f"probabilities that are the contributions); a {dtype} model's states are upcast "
            f"to float32 anyway, so leave dtype at its default"
        )
    raise InvalidRequestError(
        f"the readout dtype must be torch.float32 or torch.float64 "
        f"(or the text 'float32' / 'float64'), not {given!r}"
    )


class Scan(NamedTuple):
    """What one streamed pass over the vocabulary gives per row (see :meth:`Readout.scan`)."""

    log_normalizer: torch.Tensor
    """``[R]`` logsumexp of the post-processed logits."""
    top_values: torch.Tensor | None
    """``[R, K]`` the K largest logits (descending), or None without top-k."""
    top_ids: torch.Tensor | None
    """``[R, K]`` their vocabulary ids."""
    weighted: torch.Tensor | None
    """``[R, d']`` ``Σ_v softmax_v · post'_v · W_v`` (with ``gradient``), else None."""


def _materialized(module: nn.Module) -> contextlib.AbstractContextManager[object]:
    """Context in which an accelerate-offloaded module's weights are real tensors."""
    if getattr(module, "_hf_hook", None) is None:
        return contextlib.nullcontext()
    from accelerate.utils import align_module_device

    return align_module_device(module)


def _copy_param(
    module: nn.Module | None, name: str, device: torch.device, dtype: torch.dtype | None = None
) -> torch.Tensor | None:
    """``module.name`` on ``device`` (in ``dtype``, or its own dtype when None).

    ``.to()`` returns the same storage when nothing changes: no copy for a parameter that
    already has the device and dtype. A copy is made outside inference mode (a normal
    tensor, even when the engine is built inside ``torch.inference_mode()``), so the Riemann
    gradients can use it in autograd.
    """
    if module is None:
        return None
    with _materialized(module), torch.inference_mode(False):
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

    def __init__(self, adapter: ModelAdapter, dtype: torch.dtype | str = torch.float32):
        dtype = readout_dtype(dtype)
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
        head_weight = _copy_param(adapter.head, "weight", self.device)
        if head_weight is None:
            raise TypeError(f"the head {type(adapter.head).__name__} has no weight")
        self.head_weight: torch.Tensor = head_weight
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
        """Largest row norm, entry and bias of the head (computed once, at most
        ``block_columns`` head rows at a time, and no more than one cache-sized tile's worth
        on a CPU; reductions only, no temporary the size of the block)."""
        if getattr(self, "_head_stats", None) is None:
            row_norm = abs_max = 0.0
            cols = self.vocab_size if block_columns is None else max(1, int(block_columns))
            cols = tile_plan(
                cols, self.vocab_size, self.feature_size, self.dtype, self.device, max_rows=cols
            )[0]
            for c0 in range(0, self.vocab_size, cols):
                block = self.head_block(slice(c0, c0 + cols))
                # (accumulated in float64 where the device has it: the squares of a
                # weight beyond 1.8e19 overflow float32, and the bound would be inf)
                wide = self.dtype if self.device.type == "mps" else torch.float64
                row_norm = max(
                    row_norm, float(torch.linalg.vector_norm(block, dim=-1, dtype=wide).max())
                )
                low, high = torch.aminmax(block)  # max |W| without a |W| temporary
                abs_max = max(abs_max, float(-low), float(high))
            bias = 0.0 if self.head_bias is None else float(self.head_bias.abs().max())
            self._head_stats = HeadStats(row_norm, abs_max, bias)
        return self._head_stats

    def features(self, h: torch.Tensor, frozen_scale: torch.Tensor | None = None) -> torch.Tensor:
        """Final norm (and OPT's projection) of states ``h[..., d]`` in the readout dtype.

        ``frozen_scale`` (``[..., 1]``, broadcastable) replaces the norm's own scale
        1/rms(h) (1/std(h) for LayerNorm), e.g. by the last state's: the norm is then linear
        in h — the reading a linearised method makes. See :meth:`norm_scale`.
        """
        x = h.to(device=self.device, dtype=self.dtype)
        if self.has_norm:
            if self.norm_kind == NORM_LAYERNORM:
                if frozen_scale is None:
                    x = F.layer_norm(
                        x, x.shape[-1:], self.norm_weight, self.norm_bias, self.norm_eps
                    )
                else:  # (the affine part as F.layer_norm applies it: w, b where present)
                    x = (x - x.mean(-1, keepdim=True)) * frozen_scale
                    if self.norm_weight is not None:
                        x = x * self.norm_weight
                    if self.norm_bias is not None:
                        x = x + self.norm_bias
            else:
                x = x * (self.norm_scale(x) if frozen_scale is None else frozen_scale)
                # (an RMS final norm always has its weight: every family's does)
                weight = cast(torch.Tensor, self.norm_weight)
                if self.norm_kind == NORM_RMS:
                    x = x * weight
                elif self.norm_kind == NORM_RMS_PLUS_ONE:
                    x = x * (1.0 + weight)
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

    def post(self, logits: torch.Tensor, *, inplace: bool = False) -> torch.Tensor:
        """What the model does to logits after the head (Gemma-2/3 soft-capping); with
        ``inplace``, in ``logits``' own storage (the same operations, the same rounding)."""
        if self.softcap is not None:
            if inplace:
                return logits.div_(self.softcap).tanh_().mul_(self.softcap)
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def post_slope(self, logits: torch.Tensor) -> torch.Tensor | None:
        """d post / d head-output at post-processed ``logits`` (None: the identity)."""
        if self.softcap is None:
            return None
        return 1.0 - (logits / self.softcap).square()

    def logits_from_features(
        self,
        z: torch.Tensor,
        columns: slice = slice(None),
        head: torch.Tensor | None = None,
        *,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Post-processed logits ``[..., V]`` from features ``[..., d']`` (or some columns).

        Every full-vocabulary readout streams through here one block of columns at a time;
        callers pick ``columns`` so the block fits their memory budget. ``head`` is
        ``head_block(columns)`` when the caller already holds it. ``out`` (``[R, C]``, for
        features ``[R, d']``) receives the block: the same kernel as ``F.linear`` (``mm``,
        or ``addmm`` with a bias), written into a buffer the caller reuses, so a stream of
        blocks allocates nothing.
        """
        if head is None:
            head = self.head_block(columns)
        bias = None if self.head_bias is None else self.head_bias[columns]
        if out is None:
            return self.post(F.linear(z, head, bias))
        if bias is None:
            torch.mm(z, head.t(), out=out)
        else:
            torch.addmm(bias, z, head.t(), out=out)
        return self.post(out, inplace=True)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Full post-processed logits of states ``h`` (all V columns at once: small inputs only)."""
        return self.logits_from_features(self.features(h))

    def target_logits(self, z: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Logits of one token per row: ``z[..., d']`` with ``ids`` broadcastable to
        ``z[..., 0]``."""
        ids = ids.to(self.device)
        rows = self.head_weight[ids].to(self.dtype)
        out = (z * rows).sum(-1)
        if self.head_bias is not None:
            out = out + self.head_bias[ids]
        return self.post(out)

    def log_normalizer(self, z: torch.Tensor, block_columns: int | None = None) -> torch.Tensor:
        """logsumexp of the post-processed logits of features ``z[..., d']``, streamed."""
        flat = z.reshape(-1, z.shape[-1])
        return self.scan(flat, max_columns=block_columns).log_normalizer.reshape(z.shape[:-1])

    def probability(
        self,
        h: torch.Tensor,
        ids: torch.Tensor,
        contrast: torch.Tensor | None = None,
        *,
        block_columns: int | None = None,
        log: bool = False,
    ) -> torch.Tensor:
        """f(h): probability of ``ids`` (minus that of ``contrast``) at states ``h[..., d]``;
        with ``log``, log p(ids) instead (no contrast), whose gradient stays finite where
        the probability underflows.

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
        if log and contrast is not None:
            raise ValueError("log=True reads one token's log-probability: no contrast")
        if not (torch.is_grad_enabled() and z.requires_grad):
            return self.probability_and_gradient(z, ids, contrast, block_columns, log=log)[0]
        return _Probability.apply(z, self, ids, contrast, block_columns, log)

    def probability_and_gradient(
        self,
        z: torch.Tensor,
        ids: torch.Tensor,
        contrast: torch.Tensor | None = None,
        block_columns: int | None = None,
        *,
        gradient: bool = False,
        log: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``f = p_ids − p_contrast`` at features ``z[..., d']`` and, if asked, ``∂f/∂z``;
        with ``log``, ``f = log p_ids`` and ``∂f/∂z = post'(u_y) W_y − Σ_v p_v post'(u_v) W_v``.

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
            if log:
                value = l_y - lse
                if not gradient:
                    return value.reshape(lead), None
                grad = cast(torch.Tensor, weighted)
                torch.sub(self._row_gradient(ids, l_y, torch.ones_like(l_y)), grad, out=grad)
                return value.reshape(lead), grad.reshape(*lead, -1)
            p_y = target_probability(l_y, lse)
            value = p_y
            if contrast is not None:
                contrast = contrast.to(self.device).reshape(-1)
                l_c = self.target_logits(flat, contrast)
                p_c = target_probability(l_c, lse)
                value = p_y - p_c
            if not gradient:
                return value.reshape(lead), None
            # row_y − value · weighted (− row_c), in weighted's storage (set: gradient)
            grad = cast(torch.Tensor, weighted).mul_(value[:, None])
            torch.sub(self._row_gradient(ids, l_y, p_y), grad, out=grad)
            if contrast is not None:
                grad.sub_(self._row_gradient(contrast, l_c, p_c))
            return value.reshape(lead), grad.reshape(*lead, -1)

    def _row_gradient(
        self, ids: torch.Tensor, logits: torch.Tensor, p: torch.Tensor
    ) -> torch.Tensor:
        """``p post'(u) W_ids``: one head row per row of features."""
        slope = self.post_slope(logits)
        scale = p if slope is None else p * slope
        rows = self.head_weight[ids].to(self.dtype)  # a gathered copy: scaled in place
        return rows.mul_(scale[:, None])

    def _stream(
        self, z: torch.Tensor, block_columns: int | None, gradient: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """logsumexp of the logits of ``z[R, d']`` over vocabulary blocks of at most
        ``block_columns`` (and, with ``gradient``, ``Σ_v softmax_v · post'_v · W_v``,
        ``[R, d']``)."""
        done = self.scan(z, gradient=gradient, max_columns=block_columns)
        return done.log_normalizer, done.weighted

    def scan(
        self,
        z: torch.Tensor,
        top_k: int = 0,
        *,
        gradient: bool = False,
        online: bool = True,
        max_rows: int | None = None,
        max_columns: int | None = None,
    ) -> Scan:
        """One streamed pass over the vocabulary for features ``z[R, d']``.

        The ``[R × V]`` logits are never held: they are made one tile of rows × vocabulary
        columns at a time (:func:`tile_plan`: cache-sized on a CPU, never over
        ``max_rows × max_columns``), into one buffer allocated for the call, and everything
        else is done on the tile while it is in cache: the running top-``top_k``, then the
        logsumexp, in place (max, subtract, exp as :func:`_exp_shifted_` takes it, sum), and
        with ``gradient`` the sum ``Σ_v softmax_v · post'_v · W_v`` (one more matmul of the
        tile by its head rows).

        The logsumexp is the same arithmetic whatever the tile: with ``online`` (the
        gradient needs it), one running maximum per row and a sum rescaled to it (as in
        online softmax); without, ``torch.logsumexp``'s steps on each tile (shift by the
        tile's maximum, exp, sum, log) merged across tiles with ``logaddexp``. Rows whose
        logits are all −inf so far keep a finite shift (no inf − inf), as ``torch.logsumexp``
        does. The top-k of a tile is looked at only in the rows where the tile's maximum
        reaches the k-th value found so far (on a CPU; elsewhere every tile is merged), so
        after the first tile almost no row pays for it.
        """
        n, width = z.shape
        k = min(max(0, int(top_k)), self.vocab_size)
        rows, cols = tile_plan(
            n, self.vocab_size, width, self.dtype, self.device, max_rows, max_columns
        )
        scanner = _VocabularyScan(self, z, k, (rows, cols), gradient=gradient)
        for r0 in range(0, n, rows):
            scanner.row_block(z[r0 : r0 + rows], r0, online=online)
        return scanner.result()


class _RowVectors(NamedTuple):
    """The running per-row vectors of one row block of a scan (views of one buffer)."""

    block_max: torch.Tensor
    """The tile's row maxima (then scratch for its row sums)."""
    shift: torch.Tensor
    """The running shift: the maximum so far (online), the tile's finite maximum (not)."""
    new_shift: torch.Tensor
    """The shift after this tile (online), scratch for the tile's sum (not)."""
    total: torch.Tensor
    """The sum of exp(logit − shift) so far (online), the logsumexp so far (not)."""


class _VocabularyScan:
    """One call of :meth:`Readout.scan`: its outputs, the work buffers allocated once for
    the call (the logits tile, the soft-cap slopes, the per-row vectors), and the steps
    each tile of logits goes through."""

    def __init__(
        self,
        readout: Readout,
        z: torch.Tensor,
        k: int,
        tile: tuple[int, int],
        *,
        gradient: bool,
    ) -> None:
        """The scan of features ``z[R, d']`` for the top ``k``, in tiles of ``tile`` rows
        and columns (:func:`tile_plan`)."""
        (n, width), (rows, cols) = z.shape, tile
        device, dtype, vocab = readout.device, readout.dtype, readout.vocab_size
        self.readout, self.k, self.cols = readout, k, cols
        self.filtered = device.type == "cpu"
        self.lse = torch.empty(n, device=device, dtype=dtype)
        self.top_values = torch.empty(n, k, device=device, dtype=dtype) if k else None
        self.top_ids = torch.empty(n, k, device=device, dtype=torch.long) if k else None
        self.weighted = torch.empty(n, width, device=device, dtype=dtype) if gradient else None
        self.tile = torch.empty(min(rows, n) * min(cols, vocab), device=device, dtype=dtype)
        softcapped = gradient and readout.softcap is not None
        self.slopes = torch.empty_like(self.tile) if softcapped else None
        self.softcap = cast(float, readout.softcap)  # (read only with slopes: there is a cap)
        self.vectors = torch.empty(4, min(rows, n), device=device, dtype=dtype)

    def result(self) -> Scan:
        """The scan's outputs, once every row block is done."""
        return Scan(self.lse, self.top_values, self.top_ids, self.weighted)

    def row_block(self, z_rows: torch.Tensor, r0: int, *, online: bool) -> None:
        """Scan the whole vocabulary for the features ``z_rows`` (rows ``r0 …``), one tile of
        columns at a time, and write their outputs."""
        readout, vocab, m = self.readout, self.readout.vocab_size, z_rows.shape[0]
        v = _RowVectors(*(vector[:m] for vector in self.vectors))
        acc = None if self.weighted is None else self.weighted[r0 : r0 + m]
        run: tuple[torch.Tensor, torch.Tensor] | None = None  # top-k values and ids so far
        for c0 in range(0, vocab, self.cols):
            columns = slice(c0, min(vocab, c0 + self.cols))
            w = columns.stop - c0
            head = readout.head_block(columns)
            logits = readout.logits_from_features(
                z_rows, columns, head, out=self.tile[: m * w].view(m, w)
            )
            torch.amax(logits, -1, out=v.block_max)
            if self.k:
                run = fold_top(logits, v.block_max, c0, self.k, run, self.filtered)
            if online:
                self._online_tile(logits, head, v, acc, first=c0 == 0)
            else:
                _logaddexp_tile(logits, v, first=c0 == 0)
        if online:
            if acc is not None:
                acc.div_(v.total[:, None])
            torch.add(v.shift, v.total.log_(), out=self.lse[r0 : r0 + m])
        else:
            self.lse[r0 : r0 + m] = v.total
        if self.top_values is not None and self.top_ids is not None and run is not None:
            self.top_values[r0 : r0 + m], self.top_ids[r0 : r0 + m] = run

    def _online_tile(
        self,
        logits: torch.Tensor,
        head: torch.Tensor,
        v: _RowVectors,
        acc: torch.Tensor | None,
        *,
        first: bool,
    ) -> None:
        """Online softmax: the tile's exponentials, shifted by the running maximum, added
        to the sum rescaled to it, and (with ``acc``) ``Σ_v e_v · post'_v · W_v`` too."""
        new_max = v.block_max if first else torch.maximum(v.shift, v.block_max, out=v.new_shift)
        torch.nan_to_num(new_max, 0.0, 0.0, 0.0, out=v.new_shift)
        slope = None
        if self.slopes is not None:  # post'(u) = 1 − (l / cap)², from the logits
            slope = self.slopes[: logits.numel()].view(logits.shape)
            torch.div(logits, self.softcap, out=slope).square_().neg_().add_(1.0)
        e = _exp_shifted_(logits, v.new_shift)
        if first:
            torch.sum(e, -1, out=v.total)
        else:
            rescale = torch.sub(v.shift, v.new_shift, out=v.shift).exp_()
            v.total.mul_(rescale).add_(torch.sum(e, -1, out=v.block_max))
            if acc is not None:
                acc.mul_(rescale[:, None])
        v.shift.copy_(v.new_shift)
        if acc is not None:
            if slope is not None:
                e.mul_(slope)
            if first:
                torch.mm(e, head, out=acc)
            else:
                acc.addmm_(e, head)


def _logaddexp_tile(logits: torch.Tensor, v: _RowVectors, *, first: bool) -> None:
    """``torch.logsumexp``'s steps on the tile (shift by its finite maximum, exp, sum, log),
    merged into the logsumexp so far with ``logaddexp``."""
    torch.nan_to_num(v.block_max, 0.0, 0.0, 0.0, out=v.shift)
    _exp_shifted_(logits, v.shift)
    part = torch.sum(logits, -1, out=v.new_shift).log_().add_(v.shift)
    if first:
        v.total.copy_(part)
    else:
        torch.logaddexp(v.total, part, out=v.total)


def _exp_shifted_(logits: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """``logits ← exp(logits − shift[:, None])`` in place, computed as ``2^((l − s)·log₂e)``.

    On a CPU, torch's ``exp`` is about 1.8× slower than its ``exp2`` on the same tile, and
    where the results are subnormal (arguments below −87, as in the rows of early layers,
    whose logits spread over hundreds) about 15× slower; ``exp2`` slows down only below −126
    of its own argument, and 3× at worst. The shift is subtracted first (exactly, for the
    logits that matter), then scaled: each term gains a relative error of about u·|l − s|,
    which over the softmax weights adds at most u·(ln V + 1) to the logsumexp (the mean of
    s − l under softmax is at most its entropy, ≤ ln V).
    """
    return logits.sub_(shift[:, None]).mul_(_LOG2_E).exp2_()


def fold_top(
    logits: torch.Tensor,
    block_max: torch.Tensor,
    c0: int,
    k: int,
    running: tuple[torch.Tensor, torch.Tensor] | None,
    filtered: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The running top-k (``running``: values and ids, ``[R, k]`` each, or None before the
    first tile) merged with the tile ``logits[R, C]`` of columns ``c0 …`` (``block_max`` its
    row maxima).

    With ``filtered``, once every row holds k values, only the rows where the tile's maximum
    is not below the k-th value so far (NaN included) can change: their tile rows alone are
    ranked and merged, in place. A tile's elements equal to the k-th value are merged as
    an unfiltered merge would see them, so the result is the same.
    """
    if running is not None and filtered and running[0].shape[-1] == k:
        values, ids = running
        hot = torch.nonzero(torch.lt(block_max, values[:, -1]).logical_not_())[:, 0]
        n_hot = hot.numel()
        if n_hot == 0:
            return values, ids
        if n_hot < logits.shape[0]:
            top, where = logits.index_select(0, hot).topk(min(k, logits.shape[-1]), dim=-1)
            where += c0
            top, where = _merge_top(
                values.index_select(0, hot), ids.index_select(0, hot), top, where, k
            )
            values.index_copy_(0, hot, top)
            ids.index_copy_(0, hot, where)
            return values, ids
    top, where = logits.topk(min(k, logits.shape[-1]), dim=-1)
    where += c0
    if running is None:
        return top, where
    return _merge_top(*running, top, where, k)


def _merge_top(
    values_a: torch.Tensor,
    ids_a: torch.Tensor,
    values_b: torch.Tensor,
    ids_b: torch.Tensor,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest of two (values, ids) candidate sets, per row."""
    values = torch.cat([values_a, values_b], dim=-1)
    ids = torch.cat([ids_a, ids_b], dim=-1)
    values, order = values.topk(min(k, values.shape[-1]), dim=-1)
    return values, ids.gather(-1, order)


class _Probability(torch.autograd.Function):
    """f at features z with the analytic ∂f/∂z computed in the forward pass (no head graph)."""

    @staticmethod
    def forward(ctx, z, readout, ids, contrast, block_columns, log=False):
        value, grad = readout.probability_and_gradient(
            z, ids, contrast, block_columns, gradient=True, log=log
        )
        ctx.save_for_backward(grad)
        return value

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        return grad_output[..., None] * grad, None, None, None, None, None
