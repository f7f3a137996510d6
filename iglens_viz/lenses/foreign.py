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
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..core.coordinates import Lens
from .io import FileContents, LensFileError, read_bytes, shown

__all__ = ["is_tuned_lens_folder", "read_jlens", "read_tuned_lens"]

_CONFIG_LIMIT = 1 << 20
"""The largest tuned-lens ``config.json`` read (TunedLensConfig's is under 1 kB)."""


def _torch_load(path: Path, what: str) -> Any:
    """``torch.load`` of a downloaded file: tensors and plain data only (``weights_only``),
    each failure one line without torch's advice to unpickle it (never given for a file
    from someone else)."""
    try:
        with warnings.catch_warnings():  # torch's notes on a foreign pickle: not for the user
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a damaged or foreign pickle
        raise LensFileError(f"{path} cannot be read as {what}: {_load_problem(err)}") from None


def _load_problem(err: Exception) -> str:
    """What made ``torch.load`` fail, in one line."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    text = str(err)
    refused = re.search(r"WeightsUnpickler error: (.*?)(?: was not an allowed global|\n|$)", text)
    if refused or "Weights only load failed" in text:
        found = f" ({shown(refused.group(1), 80)[1:-1]})" if refused else ""
        return (
            f"it holds Python objects other than tensors and plain data{found}, and "
            f"iglens_viz never runs code from a lens file"
        )
    first = (text.strip().splitlines() or [type(err).__name__])[0]
    first = first.split(". ")[0]  # torch's first sentence says what; the rest, what to try
    if "weights_only" in first:
        return (
            "a format torch reads only by running code from the file, which iglens_viz never does"
        )
    return shown(first, 160)[1:-1]


def read_jlens(path: Path, shape: tuple[int, int] | None = None) -> Lens:
    """A ``jlens`` file as a ``"jacobian"`` lens (see the module's text), for a model of
    ``shape`` (blocks, width) when given."""
    contents = FileContents(path)
    data: Any = _torch_load(path, "a jlens file")
    if not isinstance(data, dict) or "J" not in data or not isinstance(data["J"], dict):
        keys = sorted(map(str, data))[:8] if isinstance(data, dict) else type(data).__name__
        raise contents.error(
            f"not a jlens file (JacobianLens.save writes a dict with 'J', 'n_prompts', "
            f"'d_model' and 'source_layers'; found {shown(keys)})"
        )
    for layer in data["J"]:
        if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
            raise contents.error(f"J's key {shown(layer)} is not a layer (an integer >= 0)")
    jacobians: dict[int, Any] = data["J"]
    if not jacobians:
        raise contents.error("the jlens file holds no Jacobian")
    first = next(iter(jacobians.values()))
    if "d_model" in data:
        d, sizes = contents.integer(data, "d_model", 1), f"d_model {data['d_model']}"
    else:  # the width of the first Jacobian, checked with every other below
        d = first.shape[-1] if isinstance(first, torch.Tensor) and first.dim() else 1
        sizes = f"the width of J[{next(iter(jacobians))}]"
    if shape is not None and shape[1] != d:
        raise contents.error(
            f"this jlens lens is for a model of width {d}, not {shape[1]}; fit one for this "
            f"model with iglens_viz.fit_lens(model, tokenizer, 'jacobian')"
        )
    n = max(jacobians) + 2 if shape is None else shape[0]
    if max(jacobians) >= n - 1:
        raise contents.error(
            f"the jlens file has a Jacobian at layer {max(jacobians)}, but this model's last "
            f"block (layer {n - 1}) is the lens's target: it was fitted on a deeper model"
        )
    prompts = contents.integer(data, "n_prompts") if "n_prompts" in data else 0
    return contents.lens(
        "jacobian",
        n_blocks=n,
        width=d,
        matrices={
            layer + 1: contents.tensor(J, f"J[{layer}]", (d, d), sizes)
            for layer, J in jacobians.items()
        },
        settings={
            "source": "jlens",
            "file": str(path),
            "n_prompts": prompts,
            "source_layers": sorted(jacobians),
        },
    )


def is_tuned_lens_folder(path: Path) -> bool:
    """Whether ``path`` is a folder as ``TunedLens.save`` writes it."""
    return (path / "config.json").is_file() and (path / "params.pt").is_file()


def read_tuned_lens(path: Path, shape: tuple[int, int] | None = None) -> Lens:
    """A tuned-lens folder as a ``"tuned"`` lens (see the module's text), for a model of
    ``shape`` (blocks, width) when given. Its ``config.json``'s sizes are checked against
    the model before ``params.pt`` is read, and against ``params.pt``'s tensors before
    anything is made from them."""
    config = _tuned_config(path / "config.json")
    checked = FileContents(path / "config.json")
    d, n = checked.integer(config, "d_model", 1), checked.integer(config, "num_hidden_layers", 1)
    if shape is not None and shape != (n, d):
        raise checked.error(
            f"a tuned lens for a model of {n} blocks of width {d}, not this one ({shape[0]} "
            f"blocks of width {shape[1]}); fit one for this model with "
            f"iglens_viz.fit_lens(model, tokenizer, 'tuned')"
        )
    params = FileContents(path / "params.pt")
    state = _torch_load(params.path, "a tuned lens's translators")
    if not isinstance(state, Mapping):
        raise params.error(
            f"holds a {type(state).__name__}, not the translators' state dict ('0.weight', "
            f"'0.bias', …)"
        )
    names = {f"{i}.{part}" for i in range(min(n, len(state))) for part in ("weight", "bias")}
    for key in state:
        if key not in names:
            raise params.error(
                f"unexpected entry {shown(key)}: config.json's {n} layers have translators "
                f"'0.weight', '0.bias' … '{n - 1}.weight', '{n - 1}.bias'"
            )
    matrices, biases = {}, {}
    for i in range(n):
        if f"{i}.weight" not in state:
            raise params.error(f"no translator {i} ('{i}.weight'), but config.json says {n} layers")
        sizes = f"config.json's d_model {d}"
        matrix = params.tensor(state[f"{i}.weight"], f"'{i}.weight'", (d, d), sizes).clone()
        matrix.diagonal().add_(1.0)  # A = I + W, without a d × d identity
        matrices[i] = matrix
        if f"{i}.bias" in state:
            biases[i] = params.tensor(state[f"{i}.bias"], f"'{i}.bias'", (d,), sizes)
    return params.lens(
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


def _tuned_config(path: Path) -> Mapping[str, Any]:
    """A tuned-lens folder's ``config.json``: a JSON object of a linear tuned lens."""
    contents = FileContents(path)
    data = read_bytes(path, _CONFIG_LIMIT + 1)
    if len(data) > _CONFIG_LIMIT:
        raise contents.error(f"over {_CONFIG_LIMIT} bytes; a tuned-lens config.json is < 1 kB")
    try:
        config = json.loads(data.decode("utf-8"))
    except ValueError as err:  # not UTF-8, not JSON
        raise contents.error(f"not JSON ({shown(str(err), 120)[1:-1]})") from None
    config = contents.mapping(config, "the config")
    kind = config.get("lens_type", "linear_tuned_lens")
    if kind != "linear_tuned_lens":
        raise contents.error(
            f"a tuned lens of type {shown(kind)}; only 'linear_tuned_lens' (affine "
            f"translators) is an affine lens iglens_viz can read"
        )
    return config
