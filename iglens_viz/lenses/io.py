"""Saving and loading a :class:`~iglens_viz.core.coordinates.Lens`: one safetensors file.

The file holds A_L as ``"matrix.L"`` and b_L as ``"bias.L"`` (float32), and in its JSON
metadata (key ``"iglens_lens"``) the format version, kind, depth, width, model fingerprint
and fitting settings. It is written through a temporary file and renamed into place
(:func:`~iglens_viz.files.write_atomic`), so a reader never sees half a lens.
:func:`load_lens` also reads the formats of ``jlens`` and of the tuned-lens package (see
:mod:`.foreign`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..core.coordinates import LENS_KINDS, Lens
from ..errors import InvalidRequestError
from ..files import write_atomic
from .safetensors_format import SafetensorsFormatError, dump, load

if TYPE_CHECKING:
    from torch import nn

__all__ = ["FORMAT_VERSION", "LensFileError", "load_lens", "save_lens"]

FORMAT_VERSION = 1
_META_KEY = "iglens_lens"


class LensFileError(InvalidRequestError):
    """A lens file (or folder) that cannot be read: missing, of an unknown format, or
    damaged. The message names the file and the formats that load."""


_FORMATS = (
    "an iglens_viz lens (.safetensors, from save_lens or `iglens fit-lens`), a jlens file "
    "(JacobianLens.save: a torch.save dict with 'J', 'n_prompts', 'd_model', "
    "'source_layers') or a tuned-lens folder (params.pt and config.json)"
)


def save_lens(lens: Lens, path: str | os.PathLike[str]) -> Path:
    """Write ``lens`` to ``path`` (a ``.safetensors`` file) atomically; returns the path."""
    tensors = {
        f"matrix.{L}": m.detach().float().cpu().contiguous() for L, m in lens.matrices.items()
    }
    tensors.update(
        {f"bias.{L}": b.detach().float().cpu().contiguous() for L, b in lens.biases.items()}
    )
    meta = {
        "format": FORMAT_VERSION,
        "kind": lens.kind,
        "n_blocks": lens.n_blocks,
        "width": lens.width,
        "fingerprint": lens.fingerprint,
        "settings": dict(lens.settings),
    }
    try:
        text = json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidRequestError(f"the lens's settings are not JSON-serialisable: {err}") from None
    return write_atomic(path, dump(tensors, {_META_KEY: text}))


def _read_own(path: Path) -> Lens:
    data = path.read_bytes()
    try:
        tensors, metadata = load(data)
        meta = json.loads(metadata[_META_KEY])
    except (SafetensorsFormatError, ValueError, KeyError, TypeError) as err:
        raise LensFileError(
            f"{path} is not an iglens_viz lens file ({err}); a lens loads from {_FORMATS}"
        ) from None
    if meta.get("format") != FORMAT_VERSION or meta.get("kind") not in LENS_KINDS:
        raise LensFileError(
            f"{path}: lens format {meta.get('format')!r} of kind {meta.get('kind')!r} is not "
            f"one this iglens_viz reads (format {FORMAT_VERSION}, kinds {', '.join(LENS_KINDS)})"
        )
    matrices: dict[int, torch.Tensor] = {}
    biases: dict[int, torch.Tensor] = {}
    for name, tensor in tensors.items():
        what, _, depth = name.partition(".")
        table = {"matrix": matrices, "bias": biases}.get(what)
        if table is None or not depth.isdigit():
            raise LensFileError(f"{path}: unexpected tensor {name!r} in a lens file")
        table[int(depth)] = tensor
    return Lens(
        meta["kind"],
        n_blocks=int(meta["n_blocks"]),
        width=int(meta["width"]),
        matrices=matrices,
        biases=biases,
        fingerprint=str(meta.get("fingerprint", "")),
        settings=meta.get("settings", {}),
    )


def load_lens(path: str | os.PathLike[str], model: nn.Module | None = None) -> Lens:
    """The lens saved at ``path``: an iglens_viz ``.safetensors`` lens, a ``jlens`` file or
    a tuned-lens folder (see :mod:`iglens_viz.lenses.foreign`). ``model`` (the model it is
    for) is needed for a ``jlens`` file, which does not record the model's depth, and
    checks the lens against it when given.

    Raises :class:`LensFileError` for a missing or unreadable file, and
    :class:`~iglens_viz.errors.InvalidRequestError` for a lens fitted on another model.
    """
    from .foreign import is_tuned_lens_folder, read_jlens, read_tuned_lens

    path = Path(path)
    if path.is_dir():
        if not is_tuned_lens_folder(path):
            raise LensFileError(
                f"{path} is a folder without a tuned lens's params.pt and config.json; "
                f"a lens loads from {_FORMATS}"
            )
        lens = read_tuned_lens(path)
    elif not path.is_file():
        raise LensFileError(f"no lens file at {path}; a lens loads from {_FORMATS}")
    else:
        with open(path, "rb") as f:
            head = f.read(16)
        if head[:2] == b"PK" or head[:1] == b"\x80":  # torch.save: a zip (or legacy pickle)
            lens = read_jlens(path, model)
        else:
            lens = _read_own(path)
    if model is not None:
        from .states import model_shape

        _, n, d = model_shape(model)
        lens.check(model, n, d)
    return lens


def lens_summary(lens: Lens) -> dict[str, Any]:
    """A small description of a lens (kind, depth, width, fitted depths, settings)."""
    return {
        "kind": lens.kind,
        "name": lens.name,
        "n_blocks": lens.n_blocks,
        "width": lens.width,
        "depths": sorted(set(lens.matrices) | set(lens.biases)),
        "settings": dict(lens.settings),
    }
