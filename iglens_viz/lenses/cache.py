"""Fitted lenses cached beside the converted default model, keyed on model and settings.

``<cache>/lenses/<kind>-<model fingerprint, 16 hex>-<settings digest, 12 hex>.safetensors``
(``<cache>``: :func:`iglens_viz.loading.cache.cache_dir`, ``$IGLENS_CACHE`` or the user
cache folder, where the default model's conversion lives). The settings digest covers
everything that decides the fit (kind, corpus and its size, hyper-parameters), so another
setting is another file, and a second ``fit_lens`` or ``lens="shortcut"`` is a file read.
The sampled default corpus is kept there too (``corpus-<version>-<split>-<model>``): every
kind, and the evaluation, sample it once per model.

A tuned or Jacobian fit in progress keeps its checkpoint beside the file it will write:
``<kind>-<fingerprint>-<digest>.partial.pt`` (:func:`partial_path`), a ``torch.save`` of a
dict of tensors, numbers, lists and strings only (read back with ``weights_only=True``):
``"format"`` (:data:`PARTIAL_FORMAT`), ``"key"`` (the fit's settings, the same mapping the
digest is made of), ``"fingerprint"`` (the model's), ``"corpus_sha256"`` (the token ids',
:func:`~.corpus.corpus_digest`) and the fit's own state (:mod:`.tuned` and :mod:`.jacobian`
say what it holds). A checkpoint is used only when all four match the new call; it is
written atomically, and removed once the finished lens is stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..core.coordinates import Lens
from ..loading.cache import cache_dir

__all__ = [
    "PARTIAL_FORMAT",
    "cache_path",
    "cached_corpus",
    "cached_lens",
    "drop_partial",
    "lens_cache_dir",
    "partial_path",
    "read_partial",
    "store_corpus",
    "store_lens",
    "store_partial",
]

PARTIAL_FORMAT = 1
"""The version of the checkpoint layout (see the module's text)."""


def lens_cache_dir() -> Path:
    """The folder of cached lenses (not created here)."""
    return cache_dir() / "lenses"


def cache_path(kind: str, fingerprint: str, key: Mapping[str, Any]) -> Path:
    """Where the lens of ``kind`` for the model ``fingerprint`` fitted with ``key`` lives."""
    digest = hashlib.sha256(json.dumps(dict(key), sort_keys=True).encode()).hexdigest()
    return lens_cache_dir() / f"{kind}-{fingerprint[:16]}-{digest[:12]}.safetensors"


def cached_lens(path: Path) -> Lens | None:
    """The lens cached at ``path``, or None when there is none or it cannot be read (a
    damaged file is refitted and replaced)."""
    from .io import LensFileError, _read_own

    if not path.is_file():
        return None
    try:
        return _read_own(path)
    except (LensFileError, OSError):
        return None


def store_lens(lens: Lens, path: Path) -> Path | None:
    """Write ``lens`` to the cache at ``path``; None (and no error) when the cache folder
    cannot be written: the lens is still returned to its caller, only not kept."""
    from ..files import OutputFileError
    from .io import save_lens

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return save_lens(lens, path)
    except (OSError, OutputFileError):
        return None


def cached_corpus(fingerprint: str, name: str) -> list[torch.Tensor] | None:
    """The default corpus ``name`` (version and split) sampled for the model ``fingerprint``,
    when cached (sampling it costs more than a shortcut fit on a CPU)."""
    from .safetensors_format import load

    path = lens_cache_dir() / f"corpus-{name}-{fingerprint[:16]}.safetensors"
    if not path.is_file():
        return None
    try:
        tensors = load(path.read_bytes())[0]
        return [tensors[f"text.{i}"] for i in range(len(tensors))]
    except Exception:  # a damaged file: sampled again and replaced
        return None


def store_corpus(fingerprint: str, name: str, sequences: list[torch.Tensor]) -> None:
    """Keep a sampled default corpus (nothing happens when the cache cannot be written)."""
    from ..files import OutputFileError, write_atomic
    from .safetensors_format import dump

    path = lens_cache_dir() / f"corpus-{name}-{fingerprint[:16]}.safetensors"
    tensors = {f"text.{i}": s.to(torch.int64).contiguous() for i, s in enumerate(sequences)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, dump(tensors))
    except (OSError, OutputFileError):
        pass


def partial_path(final: Path) -> Path:
    """The checkpoint file of the fit whose finished lens goes to ``final``."""
    return final.with_suffix(".partial.pt")


def read_partial(path: Path, identity: Mapping[str, Any]) -> dict[str, Any] | None:
    """The checkpoint at ``path`` when it is readable and its ``format`` and ``identity``
    entries (``key``, ``fingerprint``, ``corpus_sha256``, …) equal the given ones; else None
    (the fit starts afresh and overwrites it)."""
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # a damaged or foreign file: not resumed from
        return None
    if not isinstance(state, dict) or state.get("format") != PARTIAL_FORMAT:
        return None
    if any(state.get(name) != value for name, value in identity.items()):
        return None
    return state


def store_partial(path: Path, state: Mapping[str, Any], identity: Mapping[str, Any]) -> bool:
    """Write the checkpoint ``state`` with ``identity`` to ``path``, atomically; False (and
    no error) when the cache cannot be written."""
    from ..files import OutputFileError, write_atomic

    buffer = io.BytesIO()
    torch.save({**state, **identity, "format": PARTIAL_FORMAT}, buffer)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, buffer.getvalue())
    except (OSError, OutputFileError):
        return False
    return True


def drop_partial(path: Path) -> None:
    """Remove the checkpoint at ``path``, if any."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
