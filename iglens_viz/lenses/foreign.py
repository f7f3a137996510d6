"""Lenses made by other packages, read from a local path (never from a hub).

* ``jlens`` (``JacobianLens.save``): ``torch.save`` of a dict ``{"J": {layer: [d, d]},
  "n_prompts": int, "source_layers": [int], "d_model": int}``, the matrices in float16 by
  default. Its layer l is the output of block l (0-based; the last block, n − 1, is the
  target), so J of layer l is our A at depth l + 1; its transport is ``h @ J.T``, ours too.
  A ``jlens`` lens has no matrix at depth 0 (the embeddings) unless it was fitted there:
  depth 0 is then read as it is. The file does not record the model's depth, so it is
  read for a given model (or taken as ``max(source_layers) + 2``, ``jlens``'s default of
  every layer below the last).
* tuned-lens (``TunedLens.save``): a folder with ``config.json`` (``TunedLensConfig``:
  ``d_model``, ``num_hidden_layers``, ``bias``, ``lens_type``, …) and ``params.pt``, the
  state dict of its ``layer_translators`` (one ``nn.Linear(d, d)`` per hidden state
  0 … n − 1: keys ``"i.weight"`` and ``"i.bias"``). Its translator i reads the i-th of
  Hugging Face's hidden states (0: the embeddings, i: the output of block i), our depth i,
  and adds its output to its input, ``h + W h + b``: A = I + W.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..core.coordinates import Lens

if TYPE_CHECKING:
    from torch import nn

__all__ = ["is_tuned_lens_folder", "read_jlens", "read_tuned_lens"]


def _error(message: str) -> Exception:
    from .io import LensFileError

    return LensFileError(message)


def read_jlens(path: Path, model: nn.Module | None = None) -> Lens:
    """A ``jlens`` file as a ``"jacobian"`` lens (see the module's text)."""
    try:
        data: Any = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a damaged or foreign pickle
        raise _error(f"{path} cannot be read as a jlens file: {err}") from None
    if not isinstance(data, dict) or "J" not in data or not isinstance(data["J"], dict):
        keys = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
        raise _error(
            f"{path} is not a jlens file (JacobianLens.save writes a dict with 'J', "
            f"'n_prompts', 'd_model' and 'source_layers'; found {keys})"
        )
    jacobians = {int(layer): J for layer, J in data["J"].items()}
    if not jacobians:
        raise _error(f"{path}: the jlens file holds no Jacobian")
    d = int(data.get("d_model", next(iter(jacobians.values())).shape[-1]))
    if model is not None:
        from .states import model_shape

        _, n, width = model_shape(model)
        if width != d:
            raise _error(
                f"{path}: this jlens lens is for a model of width {d}, not {width}; "
                f"fit one for this model with iglens_viz.fit_lens(model, tokenizer, 'jacobian')"
            )
    else:
        n = max(jacobians) + 2
    if max(jacobians) >= n - 1:
        raise _error(
            f"{path}: the jlens file has a Jacobian at layer {max(jacobians)}, but this "
            f"model's last block (layer {n - 1}) is the lens's target: it was fitted on a "
            f"deeper model"
        )
    return Lens(
        "jacobian",
        n_blocks=n,
        width=d,
        matrices={layer + 1: J.float() for layer, J in jacobians.items()},
        settings={
            "source": "jlens",
            "file": str(path),
            "n_prompts": int(data.get("n_prompts", 0)),
            "source_layers": sorted(jacobians),
        },
    )


def is_tuned_lens_folder(path: Path) -> bool:
    """Whether ``path`` is a folder as ``TunedLens.save`` writes it."""
    return (path / "config.json").is_file() and (path / "params.pt").is_file()


def read_tuned_lens(path: Path) -> Lens:
    """A tuned-lens folder as a ``"tuned"`` lens (see the module's text)."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        state: Any = torch.load(path / "params.pt", map_location="cpu", weights_only=True)
    except Exception as err:
        raise _error(f"{path} cannot be read as a tuned-lens folder: {err}") from None
    kind = config.get("lens_type", "linear_tuned_lens")
    if kind != "linear_tuned_lens":
        raise _error(
            f"{path}: a tuned lens of type {kind!r}; only 'linear_tuned_lens' (affine "
            f"translators) is an affine lens iglens_viz can read"
        )
    try:
        d, n = int(config["d_model"]), int(config["num_hidden_layers"])
    except (KeyError, TypeError, ValueError):
        raise _error(f"{path}/config.json lacks d_model or num_hidden_layers") from None
    matrices, biases = {}, {}
    eye = torch.eye(d)
    for i in range(n):
        weight = state.get(f"{i}.weight")
        if weight is None:
            raise _error(
                f"{path}/params.pt has no translator {i} ('{i}.weight'), but config.json "
                f"says {n} layers"
            )
        matrices[i] = eye + weight.float()
        bias = state.get(f"{i}.bias")
        if bias is not None:
            biases[i] = bias.float()
    return Lens(
        "tuned",
        n_blocks=n,
        width=d,
        matrices=matrices,
        biases=biases,
        settings={
            "source": "tuned-lens",
            "folder": str(path),
            "base_model_name_or_path": config.get("base_model_name_or_path"),
        },
    )
