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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..core.coordinates import LENS_KINDS, Lens, LensKind, nonfinite_count
from ..errors import InvalidRequestError
from ..files import write_atomic
from .safetensors_format import SafetensorsFormatError, dump, is_safetensors, load

if TYPE_CHECKING:
    from torch import nn

__all__ = ["FORMAT_VERSION", "LensFileError", "load_lens", "save_lens"]

FORMAT_VERSION = 1
_META_KEY = "iglens_lens"


class LensFileError(InvalidRequestError):
    """A lens file (or folder) that cannot be read: missing, unreadable, of an unknown
    format, damaged, or holding values no lens has (a wrong shape, a size that is not the
    tensors', NaN). The one-line message names the file, the field and the formats that
    load. A lens file is untrusted input: nothing is allocated from a size it declares
    before that size is checked against its own tensors (and the model, when given)."""


_FORMATS = (
    "an iglens_viz lens (.safetensors, from save_lens or `iglens fit-lens`), a jlens file "
    "(JacobianLens.save: a torch.save dict with 'J', 'n_prompts', 'd_model', "
    "'source_layers') or a tuned-lens folder (params.pt and config.json)"
)


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: a value read from a file, quoted in a
    message on one line (repr escapes newlines, terminal escapes and bidi controls)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class FileContents:
    """Checks on what one lens file holds; each failure is a one-line :class:`LensFileError`
    naming the file and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, problem: str) -> LensFileError:
        """The error for ``problem`` (a phrase about one field) in this file."""
        return LensFileError(f"{self.path}: {problem}")

    def mapping(self, value: object, field: str) -> Mapping[Any, Any]:
        """``value`` (the file's ``field``) if it is a mapping."""
        if not isinstance(value, Mapping):
            raise self.error(f"{field} is {type(value).__name__}, not a mapping (a JSON object)")
        return value

    def integer(self, table: Mapping[str, Any], key: str, low: int = 0) -> int:
        """``table[key]``, an integer ``>= low`` (not a bool, a float or a string)."""
        if key not in table:
            raise self.error(f"{key} is missing")
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.error(f"{key} is {shown(value)}, not an integer >= {low}")
        return value

    def tensor(self, value: object, field: str, shape: tuple[int, ...], sizes: str) -> torch.Tensor:
        """``value`` (the file's ``field``) in float32, if it is a finite floating-point
        tensor of ``shape`` (checked before it is converted), the shape the file's declared
        ``sizes`` give."""
        if not isinstance(value, torch.Tensor):
            raise self.error(f"{field} is {type(value).__name__}, not a tensor")
        if not value.is_floating_point():
            raise self.error(f"{field} holds {value.dtype}, not floating-point numbers")
        if tuple(value.shape) != shape:
            raise self.error(f"{field} has shape {tuple(value.shape)}, not {shape} ({sizes})")
        bad = nonfinite_count(value)
        if bad:
            raise self.error(
                f"{field} holds {bad} NaN or infinite values (of {value.numel()}): the file "
                f"is damaged or was written from a fit that diverged; a lens is finite"
            )
        return value.to(torch.float32)

    def lens(self, kind: LensKind, **fields: Any) -> Lens:
        """The :class:`Lens` of these fields, with a problem :class:`Lens` finds in them (a
        depth out of range, …) named as this file's; a fitted lens with no translator is
        refused (it would be the raw logit lens under a fitted lens's name)."""
        if kind != "logit" and not fields.get("matrices") and not fields.get("biases"):
            raise self.error(
                f"the {kind} lens holds no matrix or bias at any depth: it would read every "
                f"state as the raw logit lens does, under the {kind} lens's name"
            )
        try:
            return Lens(kind, **fields)
        except InvalidRequestError as err:
            raise self.error(str(err)) from None


def lens_path(path: str | os.PathLike[str]) -> Path:
    """``path`` with a leading ``~`` expanded (as a shell would), for reading or writing."""
    return Path(path).expanduser()


def save_lens(lens: Lens, path: str | os.PathLike[str]) -> Path:
    """Write ``lens`` to ``path`` (a ``.safetensors`` file; ``~`` is the home folder)
    atomically; returns the path."""
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
    return write_atomic(lens_path(path), dump(tensors, {_META_KEY: text}))


def read_bytes(path: Path, size: int = -1) -> bytes:
    """The bytes of ``path`` (its first ``size`` when given), or a :class:`LensFileError`
    saying why it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError as err:
        raise LensFileError(f"{path} cannot be read: {err.strerror or err}") from None


def read_own(path: Path) -> Lens:
    """The lens in an iglens_viz lens file at ``path`` (safetensors with our metadata); a
    damaged or foreign file raises a :class:`LensFileError` naming it."""
    contents = FileContents(path)
    try:
        tensors, metadata = load(read_bytes(path))
    except SafetensorsFormatError as err:
        raise LensFileError(
            f"{path} is not an iglens_viz lens file ({err}); a lens loads from {_FORMATS}"
        ) from None
    if _META_KEY not in metadata:
        raise contents.error(
            f"a safetensors file without the {_META_KEY!r} metadata save_lens writes: not an "
            f"iglens_viz lens; a lens loads from {_FORMATS}"
        )
    try:
        parsed = json.loads(metadata[_META_KEY])
    except ValueError as err:  # JSONDecodeError
        raise contents.error(f"the {_META_KEY!r} metadata is not JSON ({err})") from None
    meta = contents.mapping(parsed, f"the {_META_KEY!r} metadata")
    if meta.get("format") != FORMAT_VERSION or meta.get("kind") not in LENS_KINDS:
        raise contents.error(
            f"lens format {shown(meta.get('format'))} of kind {shown(meta.get('kind'))} is "
            f"not one this iglens_viz reads (format {FORMAT_VERSION}, kinds "
            f"{', '.join(LENS_KINDS)})"
        )
    fitted = meta["kind"] != "logit"
    n, d = contents.integer(meta, "n_blocks", int(fitted)), contents.integer(meta, "width", 0)
    fingerprint = meta.get("fingerprint", "")
    if not isinstance(fingerprint, str):
        raise contents.error(f"fingerprint is {type(fingerprint).__name__}, not a string")
    settings = contents.mapping(meta.get("settings", {}), "settings")
    tables: dict[str, dict[int, torch.Tensor]] = {"matrix": {}, "bias": {}}
    for name, tensor in tensors.items():
        what, _, depth = name.partition(".")
        if what not in tables or not depth.isascii() or not depth.isdigit():
            raise contents.error(f"unexpected tensor {shown(name)} (a lens holds matrix.L, bias.L)")
        if str(int(depth)) != depth:  # "matrix.01" would be a second matrix.1
            raise contents.error(f"unexpected tensor {shown(name)} (a depth without zeros)")
        shape = (d, d) if what == "matrix" else (d,)
        tables[what][int(depth)] = contents.tensor(
            tensor, f"tensor {name!r}", shape, f"its metadata's width {d}"
        )
    return contents.lens(
        meta["kind"],
        n_blocks=n,
        width=d,
        matrices=tables["matrix"],
        biases=tables["bias"],
        fingerprint=fingerprint,
        settings=settings,
    )


def load_lens(path: str | os.PathLike[str], model: nn.Module | None = None) -> Lens:
    """The lens saved at ``path`` (``~`` is the home folder): an iglens_viz ``.safetensors``
    lens, a ``jlens`` file or a tuned-lens folder (see :mod:`iglens_viz.lenses.foreign`).
    ``model`` (the model it is for) is needed for a ``jlens`` file, which does not record the
    model's depth, and checks the lens against it when given (a tuned-lens folder's declared
    sizes before its parameters are read).

    Raises :class:`LensFileError` (one line, naming the file and the field) for a missing,
    unreadable, damaged or malformed file and for a lens fitted on another model; nothing
    is unpickled beyond tensors and plain data.
    """
    from .foreign import is_tuned_lens_folder, read_jlens, read_tuned_lens

    path = lens_path(path)
    shape = None
    if model is not None:
        from .states import model_shape

        _, n, d = model_shape(model)
        shape = (n, d)
    if path.is_dir():
        if not is_tuned_lens_folder(path):
            raise LensFileError(
                f"{path} is a folder without a tuned lens's params.pt and config.json; "
                f"a lens loads from {_FORMATS}"
            )
        lens = read_tuned_lens(path, shape)
    elif not path.exists():
        raise LensFileError(f"no lens file at {path}; a lens loads from {_FORMATS}")
    elif not path.is_file():
        raise LensFileError(f"{path} is not a regular file; a lens loads from {_FORMATS}")
    else:
        head = read_bytes(path, 16)
        saved_by_torch = head[:2] == b"PK" or head[:1] == b"\x80"  # a zip, or a legacy pickle
        if saved_by_torch and not is_safetensors(head, path.stat().st_size):
            lens = read_jlens(path, shape)
        else:
            lens = read_own(path)
    if model is not None and shape is not None:
        try:
            lens.check(model, *shape)
        except InvalidRequestError as err:
            raise LensFileError(f"{path}: {err}") from None
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
