"""The readout's coordinates: a :class:`Lens` maps a residual state at depth L to the point
where the one readout f reads it.

IG-Lens walks the path h̃_0, h̃_1, …, h̃_n with h̃_L = T_L(h_L) and T_n the identity, so the
segments telescope to f(h_n) − f(h̃_0) under any lens. The raw logit lens is T_L = identity
at every depth (:data:`LOGIT`, the default). The fitted lenses are affine,
T_L(h) = h·A_Lᵀ + b_L:

* ``"shortcut"`` — least squares from h_L to h_n (Din et al. 2023);
* ``"tuned"`` — a translator trained by KL to the final distribution (Belrose et al. 2023),
  A_L = I + W_L;
* ``"jacobian"`` — the mean Jacobian ∂h_n/∂h_L (``jlens``), no bias.

This module holds the lens as the core reads it; fitting, saving and loading, and quality
figures live in :mod:`iglens_viz.lenses`, above the core.

Depths: 0 is the embedding output, L the output of block L, n the last block's output
(before the final norm). A half-block state h_L.attn (depth L − ½, ``"sublayer"``
boundaries) is read with the translator of its block's input, T_{L−1}: the state is h_{L−1}
plus the attention's write, and no translator is fitted between blocks.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

import torch
from torch import nn

from ..errors import InvalidRequestError
from .extensions import provider

__all__ = [
    "FIT_REPORT_SETTINGS",
    "LENS_KINDS",
    "LENS_LABELS",
    "LOGIT",
    "Lens",
    "LensKind",
    "defining_settings",
    "model_fingerprint",
    "nonfinite_count",
]

LensKind = Literal["logit", "shortcut", "tuned", "jacobian"]
"""How a lens was made; see :data:`LENS_KINDS`."""
LENS_KINDS: tuple[LensKind, ...] = get_args(LensKind)
"""The lens kinds: the identity (raw logit lens) and the three fitted affine lenses."""

LENS_LABELS: dict[LensKind, str] = {
    "logit": "logit lens (raw)",
    "shortcut": "linear shortcut (fitted)",
    "tuned": "tuned lens (fitted)",
    "jacobian": "Jacobian lens (fitted)",
}
"""Each lens kind in words, as the widget's lens select offers it (``js/model/protocol.js``)."""


@dataclass(frozen=True, eq=False)
class Lens:
    """Affine translators T_L(h) = h·A_Lᵀ + b_L, one per depth L < n (T_n is the identity).

    ``matrices[L]`` is A_L (``[d, d]``) and ``biases[L]`` b_L (``[d]``); a depth absent from
    both is read as it is (identity). The logit lens has neither (:data:`LOGIT`).

    Built only when every translator is a finite floating-point tensor of its shape at a
    depth 0 … n − 1 (an :class:`~iglens_viz.errors.InvalidRequestError` names the first
    that is not), so a NaN in a lens is found where it is made, not in the readout.
    """

    kind: LensKind
    n_blocks: int
    """n, the depth of the model's last block (states run h_0 … h_n)."""
    width: int
    """d, the residual width."""
    matrices: Mapping[int, torch.Tensor] = field(default_factory=dict, repr=False)
    biases: Mapping[int, torch.Tensor] = field(default_factory=dict, repr=False)
    fingerprint: str = ""
    """:func:`model_fingerprint` of the model it was fitted on ("" for the logit lens,
    which fits every model)."""
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """How it was fitted (corpus, sizes, optimiser, …), JSON-serialisable; saved with it."""

    def __post_init__(self) -> None:
        if self.kind not in LENS_KINDS:
            raise InvalidRequestError(
                f"lens kind {self.kind!r}: choose one of {', '.join(LENS_KINDS)}"
            )
        for what, size in (("n_blocks", self.n_blocks), ("width", self.width)):
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise InvalidRequestError(f"a lens's {what} is an integer >= 0, not {size!r}")
        if not isinstance(self.fingerprint, str) or not isinstance(self.settings, Mapping):
            raise InvalidRequestError(
                f"a lens's fingerprint is a string and its settings a mapping, not "
                f"{type(self.fingerprint).__name__} and {type(self.settings).__name__}"
            )
        if self.kind == "logit" and not self.is_identity:
            raise InvalidRequestError(
                "a lens of kind 'logit' reads every state as it is: it holds no matrix or bias"
            )
        for what, table, shape in (
            ("matrix", self.matrices, (self.width, self.width)),
            ("bias", self.biases, (self.width,)),
        ):
            for depth, tensor in table.items():
                _check_translator(what, depth, tensor, self.n_blocks, shape)

    @property
    def is_identity(self) -> bool:
        """True for the raw logit lens (no translator at any depth)."""
        return not self.matrices and not self.biases

    @property
    def name(self) -> str:
        """The name shown in titles, the JSON and the page: ``"logit"``, ``"shortcut"`` …"""
        return str(self.settings.get("name", self.kind))

    @staticmethod
    def translator_depth(depth: float) -> int:
        """The depth whose translator reads a state at ``depth`` (L − ½ → L − 1)."""
        return math.floor(depth)

    def transform(self, hidden: torch.Tensor, depth: float) -> torch.Tensor:
        """T_L(hidden) for ``hidden`` ``[..., d]`` at ``depth`` (differentiable; in the
        dtype and on the device of ``hidden``)."""
        return self._apply(hidden, depth, bias=True)

    def linear(self, hidden: torch.Tensor, depth: float) -> torch.Tensor:
        """A_L·hidden, the linear part of T_L (for splitting a segment's change into the
        blocks' writes and the change of coordinates)."""
        return self._apply(hidden, depth, bias=False)

    def pullback(self, grad: torch.Tensor, depth: float) -> torch.Tensor:
        """A_Lᵀ·grad for row vectors ``grad`` ``[..., d]``: a gradient with respect to T_L(h)
        as one with respect to h, so ``pullback(g, L)·w == g·linear(w, L)`` (the component
        split contracts it with the blocks' writes)."""
        matrix = self.matrices.get(self.translator_depth(depth))
        return grad if matrix is None else grad @ matrix.to(grad)

    def _apply(self, hidden: torch.Tensor, depth: float, *, bias: bool) -> torch.Tensor:
        L = self.translator_depth(depth)
        matrix = self.matrices.get(L)
        out = hidden if matrix is None else hidden @ matrix.to(hidden).T
        offset = self.biases.get(L) if bias else None
        return out if offset is None else out + offset.to(hidden)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write this lens to ``path`` (one ``.safetensors`` file, atomically); see
        :func:`iglens_viz.lenses.save_lens`. Read it back with :func:`iglens_viz.load_lens`."""
        return cast("Path", provider("save_lens")(self, path))

    def evaluate(self, model: nn.Module, tokenizer: Any, texts: Any = None, **kwargs: Any) -> Any:
        """Per depth, the KL from ``model``'s final distribution to this lens's and the top-1
        agreement with the final output, on held-out text (default: the evaluation corpus),
        beside the logit lens; see :func:`iglens_viz.lenses.evaluate_lens`."""
        return provider("evaluate_lens")(self, model, tokenizer, texts, **kwargs)

    def check(self, model: nn.Module, n_blocks: int, width: int) -> None:
        """Raise an :class:`InvalidRequestError` unless this lens was fitted on ``model``
        (its depth, width and :func:`model_fingerprint`). Only the ``"logit"`` kind fits every
        model: a fitted kind is checked even without a translator."""
        if self.kind == "logit":
            return
        if (n_blocks, width) != (self.n_blocks, self.width):
            raise InvalidRequestError(
                f"this {self.name} lens was fitted on a model with {self.n_blocks} blocks of "
                f"width {self.width}, not on this one ({n_blocks} blocks of width {width}): "
                f"fit one for this model with iglens_viz.fit_lens(model, tokenizer, "
                f"{self.kind!r})"
            )
        if self.fingerprint and self.fingerprint != model_fingerprint(model):
            raise InvalidRequestError(
                f"this {self.name} lens was fitted on another model of the same shape "
                f"(fingerprint {self.fingerprint[:12]}, this model's is "
                f"{model_fingerprint(model)[:12]}): fit one for this model with "
                f"iglens_viz.fit_lens(model, tokenizer, {self.kind!r})"
            )


LOGIT = Lens("logit", n_blocks=0, width=0)
"""The raw logit lens: every state read as it is (fits every model)."""


def _check_translator(
    what: str, depth: object, tensor: object, n_blocks: int, shape: tuple[int, ...]
) -> None:
    """InvalidRequestError unless ``tensor`` is a finite floating ``shape`` tensor at a
    depth 0 … n − 1 (a matrix or a bias of a lens)."""
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth < n_blocks:
        raise InvalidRequestError(
            f"a lens {what} at depth {depth!r}: depths are integers 0 … {n_blocks - 1} "
            f"(depth {n_blocks}, the last block, is always read as it is)"
        )
    if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
        kind = tensor.dtype if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise InvalidRequestError(
            f"the lens {what} at depth {depth} is {kind}, not a floating-point tensor"
        )
    if tuple(tensor.shape) != shape:
        raise InvalidRequestError(
            f"the lens {what} at depth {depth} has shape {tuple(tensor.shape)}, "
            f"expected {shape} for a model of width {shape[0]}"
        )
    bad = nonfinite_count(tensor)
    if bad:
        raise InvalidRequestError(
            f"the lens {what} at depth {depth} holds {bad} NaN or infinite values (of "
            f"{tensor.numel()}): no state read through it would be finite; a lens is finite"
        )


def nonfinite_count(tensor: torch.Tensor) -> int:
    """How many NaN or infinite values ``tensor`` holds (0 for a tensor on the meta
    device, which holds none)."""
    if tensor.is_meta:
        return 0
    return int(tensor.numel() - torch.isfinite(tensor).sum())


FIT_REPORT_SETTINGS = frozenset({"seconds", "resumed_at", "final_kl", "split_half_rel_error"})
"""The keys of a fitted lens's :attr:`Lens.settings` that report on its fit (its wall time,
the checkpoint it resumed from, its final loss, its split-half error) instead of choosing
the lens: two fits that differ only in them are the same lens (:func:`defining_settings`)."""


def defining_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` without the fit's report (:data:`FIT_REPORT_SETTINGS`): what defines a
    lens, so a study can resume after its lens is fitted again."""
    return {k: v for k, v in settings.items() if k not in FIT_REPORT_SETTINGS}


def model_fingerprint(model: nn.Module) -> str:
    """A short digest of a model's identity: its type, shapes and a few of its weights.

    The weights are rounded to bfloat16 first, so a model and its bf16 copy share a
    fingerprint (a lens fitted in float32 reads the bf16 model), while another checkpoint of
    the same shape does not.
    """
    digest = hashlib.sha256(type(model).__name__.encode())
    hf: Any = model  # a transformers PreTrainedModel
    embeddings = hf.get_input_embeddings()
    output = hf.get_output_embeddings()
    for module in (embeddings, output):
        weight = getattr(module, "weight", None)
        if weight is None or weight.device.type == "meta":
            continue
        digest.update(str(tuple(weight.shape)).encode())
        rows = weight.detach()[:16].to("cpu", torch.bfloat16).view(torch.int16)
        digest.update(rows.numpy().tobytes())
    config = getattr(model, "config", None)
    for attribute in ("num_hidden_layers", "hidden_size", "vocab_size"):
        digest.update(f"{attribute}={getattr(config, attribute, None)}".encode())
    return digest.hexdigest()
