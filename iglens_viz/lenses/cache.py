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

Integrity: every file written here (lens, corpus, checkpoint) gets a checksum record beside
it, ``<file>.sha256`` (JSON: ``{"file", "sha256"}``), and every read compares the file with
it the way the converted model is checked (:func:`iglens_viz.files.checksum_problem`: the
SHA-256 is computed again whenever the file's size, modification time, change time or
inode differs from when it last matched, so an unchanged file costs one ``stat``). A file
that does not match — damaged in place, or without a record (written by an older
iglens_viz, or its writer stopped between the file and its record) — is not used: a lens is
fitted again, a corpus sampled again, a fit starts afresh, and each is written anew; a
one-line :class:`RuntimeWarning` names the file and says so. Nothing damaged is ever read
into a lens.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..core.coordinates import Lens
from ..files import (
    OutputFileError,
    checksum_problem,
    record_verified,
    sha256_file,
    stat_key,
    write_atomic,
)
from ..loading.cache import cache_dir

__all__ = [
    "CHECKSUM_SUFFIX",
    "PARTIAL_FORMAT",
    "cache_path",
    "cache_problem",
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

CHECKSUM_SUFFIX = ".sha256"
"""The checksum record of a cached file is the file's name plus this (see the module's
text)."""


def _record_path(path: Path) -> Path:
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def _seal(path: Path, digest: str) -> None:
    """Record ``digest`` as the checksum of the cached file ``path`` (just written), beside
    it and in its folder's record of proven checksums."""
    write_atomic(_record_path(path), json.dumps({"file": path.name, "sha256": digest}))
    record_verified(path.parent, {path.name: {"stat": stat_key(path.stat()), "sha256": digest}})


def _write_cached(path: Path, data: bytes) -> bool:
    """Write ``data`` to the cached file ``path`` atomically, with its checksum record; False
    (and no error) when the cache cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
        _seal(path, hashlib.sha256(data).hexdigest())
    except (OSError, OutputFileError):
        return False
    return True


def cache_problem(path: Path) -> str | None:
    """Why the cached file ``path`` is not the one written there, or None when it is (see
    the module's text): no readable checksum record, or bytes that do not match it."""
    try:
        record = json.loads(_record_path(path).read_text())
    except FileNotFoundError:
        return (
            f"it has no checksum record ({_record_path(path).name}: written by an older "
            f"iglens_viz, or its writer stopped)"
        )
    except (OSError, ValueError) as err:
        return f"its checksum record cannot be read ({err})"
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        return "its checksum record is malformed"
    return checksum_problem(path.parent, {path.name: record})


def _intact(path: Path, what: str, instead: str) -> bool:
    """Whether the cached file ``path`` (a ``what``) is as written; when not, a one-line
    warning names it and says what happens ``instead``."""
    problem = cache_problem(path)
    if problem is not None:
        warnings.warn(
            f"the cached {what} {path} is not used: {problem}; {instead}",
            RuntimeWarning,
            stacklevel=3,
        )
    return problem is None


def lens_cache_dir() -> Path:
    """The folder of cached lenses (not created here)."""
    return cache_dir() / "lenses"


def cache_path(kind: str, fingerprint: str, key: Mapping[str, Any]) -> Path:
    """Where the lens of ``kind`` for the model ``fingerprint`` fitted with ``key`` lives."""
    digest = hashlib.sha256(json.dumps(dict(key), sort_keys=True).encode()).hexdigest()
    return lens_cache_dir() / f"{kind}-{fingerprint[:16]}-{digest[:12]}.safetensors"


def cached_lens(path: Path) -> Lens | None:
    """The lens cached at ``path``, or None when there is none, or it is damaged or cannot
    be read (then it is fitted again and replaced; a warning says so)."""
    from .io import LensFileError, read_own

    if not path.is_file() or not _intact(path, "lens", "fitting the lens again replaces it"):
        return None
    try:
        return read_own(path)
    except (LensFileError, OSError):
        return None


def store_lens(lens: Lens, path: Path) -> Path | None:
    """Write ``lens`` to the cache at ``path``, with its checksum record; None (and no
    error) when the cache folder cannot be written: the lens is still returned to its
    caller, only not kept."""
    from .io import save_lens

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_lens(lens, path)
        _seal(path, sha256_file(path))
    except (OSError, OutputFileError):
        return None
    return path


def cached_corpus(fingerprint: str, name: str) -> list[torch.Tensor] | None:
    """The default corpus ``name`` (version and split) sampled for the model ``fingerprint``,
    when cached (sampling it costs more than a shortcut fit on a CPU)."""
    from .safetensors_format import load

    path = lens_cache_dir() / f"corpus-{name}-{fingerprint[:16]}.safetensors"
    if not path.is_file() or not _intact(path, "corpus", "it is sampled again"):
        return None
    try:
        tensors = load(path.read_bytes())[0]
        return [tensors[f"text.{i}"] for i in range(len(tensors))]
    except Exception:  # a damaged file: sampled again and replaced
        return None


def store_corpus(fingerprint: str, name: str, sequences: list[torch.Tensor]) -> None:
    """Keep a sampled default corpus (nothing happens when the cache cannot be written)."""
    from .safetensors_format import dump

    path = lens_cache_dir() / f"corpus-{name}-{fingerprint[:16]}.safetensors"
    tensors = {f"text.{i}": s.to(torch.int64).contiguous() for i, s in enumerate(sequences)}
    _write_cached(path, dump(tensors))


def partial_path(final: Path) -> Path:
    """The checkpoint file of the fit whose finished lens goes to ``final``."""
    return final.with_suffix(".partial.pt")


def read_partial(path: Path, identity: Mapping[str, Any]) -> dict[str, Any] | None:
    """The checkpoint at ``path`` when it is readable and its ``format`` and ``identity``
    entries (``key``, ``fingerprint``, ``corpus_sha256``, …) equal the given ones; else None
    (the fit starts afresh and overwrites it; a damaged one is named in a warning)."""
    if not path.is_file() or not _intact(path, "checkpoint", "the fit starts afresh"):
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
    """Write the checkpoint ``state`` with ``identity`` to ``path``, atomically, with its
    checksum record; False (and no error) when the cache cannot be written."""
    buffer = io.BytesIO()
    torch.save({**state, **identity, "format": PARTIAL_FORMAT}, buffer)
    return _write_cached(path, buffer.getvalue())


def drop_partial(path: Path) -> None:
    """Remove the checkpoint at ``path`` and its checksum record, if any."""
    for each in (path, _record_path(path)):
        with contextlib.suppress(OSError):
            each.unlink(missing_ok=True)
