"""Load a model by Hugging Face Hub id, local folder, or ``.gguf`` file, with clear errors.

Every failure becomes a :class:`ModelLoadError` that says what the folder holds, what it
needs, or how to use a Hub model offline, and keeps the library's original message.
"""

from __future__ import annotations

import importlib.util
import stat
from pathlib import Path
from typing import Any, Literal

from ..errors import InvalidRequestError, ModelLoadError
from .arguments import _gguf_dequantize_config, _require_gguf, _tokenizer_kwargs

# What a model folder needs, said the same way by every error about one.
_FOLDER_NEEDS = (
    "A model folder needs config.json, the weights (model.safetensors or "
    "pytorch_model.bin, or shards with their index .json) and the tokenizer files "
    "(tokenizer.json or tokenizer.model, and tokenizer_config.json), as written by "
    "model.save_pretrained() and tokenizer.save_pretrained()."
)
# Files whose presence means "there are weights here" (transformers' formats, sharded or not).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".index", ".gguf")
# What is at a path (:func:`_path_kind`; None: nothing).
_PathKind = Literal["dir", "file"]


# --------------------------------------------------------------------------- errors


def _original(err: BaseException, max_lines: int = 6) -> str:
    """``"Type: message"`` of an exception from a library, cut to ``max_lines`` lines."""
    lines = str(err).strip().splitlines() or [""]
    text = "\n".join(lines[:max_lines]) + ("\n..." if len(lines) > max_lines else "")
    return f"{type(err).__name__}: {text}".rstrip(": ")


def _path_kind(path: Path, name: str) -> _PathKind | None:
    """``"dir"``, ``"file"`` or ``None`` (nothing there); a path the OS refuses is an error.

    Unlike :meth:`Path.exists`, a name too long for the file system or an unreadable parent
    folder gives a :class:`ModelLoadError` that names the path instead of an ``OSError``.
    """
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL byte
        return None
    except OSError as err:
        raise ModelLoadError(
            f"The path {name!r} cannot be read: {err.strerror or err}. Pass a "
            "model folder, a .gguf file, or a Hugging Face model id such as "
            "'gpt2'."
        ) from err
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
        f"Original error ({type(err).__name__}): {first_line}"
    )


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
        return ModelLoadError(
            f"The folder {name!r} has no weights (it holds {found[:10]}). "
            f"{_FOLDER_NEEDS}\n(transformers said: {_original(err, 2)})"
        )
    return ModelLoadError(f"Could not load the model {name!r}: {_original(err)}")


def _tokenizer_error(name: str, local: Path | None, err: Exception) -> ModelLoadError:
    """A :class:`ModelLoadError` for ``AutoTokenizer.from_pretrained`` failing."""
    if local is None and isinstance(err, OSError):
        return _not_found_error(name, err)
    what = f"The model in the folder {name!r}" if local is not None else f"The model {name!r}"
    return ModelLoadError(
        f"{what} loaded, but its tokenizer did not: {_original(err)}\n{_FOLDER_NEEDS}"
    )


# --------------------------------------------------------------------------- loading


def _looks_like_path(name: str) -> bool:
    """True when ``name`` can only be a filesystem path, never a Hub id like ``org/model``."""
    return (
        name.startswith((".", "~", "/", "\\"))
        or "\\" in name
        or (len(name) > 1 and name[1] == ":")
        or name.count("/") > 1
        or name.endswith(".gguf")
    )


def _check_local_folder(name: str, path: Path, gguf_file: str | None) -> None:
    """Raise a clear error when the local folder ``name`` (at ``path``) cannot hold a model."""
    kind = _path_kind(path, name)
    if kind is None:
        raise ModelLoadError(
            f"{name!r} is not an existing folder. Pass a folder that holds "
            "config.json and the weights (*.safetensors or pytorch_model.bin), "
            "or a Hugging Face model id such as 'gpt2'."
        )
    if kind == "file":
        raise ModelLoadError(
            f"{name!r} is a file, not a model folder. Pass the folder that "
            "holds config.json and the weights, or a .gguf file."
        )
    if gguf_file is not None and _path_kind(path / gguf_file, gguf_file) != "file":
        raise ModelLoadError(f"The folder {name!r} has no file {gguf_file!r}.")
    if gguf_file is None and _path_kind(path / "config.json", "config.json") != "file":
        try:
            found = sorted(p.name for p in path.iterdir())[:10]
        except OSError as err:
            raise ModelLoadError(
                f"The folder {name!r} cannot be read: {err.strerror or err}."
            ) from err
        raise ModelLoadError(
            f"The folder {name!r} has no config.json (it holds {found}). "
            "A model folder needs config.json plus the weights, as written by "
            "model.save_pretrained(); for a single .gguf file pass gguf_file=."
        )


def _from_pretrained(
    name: str, model_kwargs: dict, tok_kwargs: dict, local: Path | None = None
) -> tuple[Any, Any]:
    """AutoModelForCausalLM + AutoTokenizer ``from_pretrained``, in eval mode.

    ``local`` is the folder holding the files when ``name`` is a local path (``None`` for a
    Hub id); it only serves to explain errors. Any failure becomes a :class:`ModelLoadError`
    that keeps the original message and chains the original error.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(name, **model_kwargs)
    except Exception as err:  # noqa: BLE001 - any library failure is a load failure
        raise _model_error(name, local, err) from err
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **tok_kwargs)
    except Exception as err:  # noqa: BLE001
        raise _tokenizer_error(name, local, err) from err
    _check_chat_template(tokenizer, name, local)
    return model.eval(), tokenizer


def _chat_template_file(name: str, local: Path | None) -> str:
    """Where a tokenizer's chat template was read from, as the error messages name it."""
    if local is not None:
        for file in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json"):
            if (local / file).is_file():
                return str(local / file)
    return f"the tokenizer of {name!r}"


def _check_chat_template(tokenizer: Any, name: str, local: Path | None) -> None:
    """Compile the tokenizer's chat template(s) now, so a broken one is named at load time.

    Compiled as ``apply_chat_template`` does (transformers caches the result, so nothing is
    done twice); without transformers' compiler (another version) nothing is checked.
    """
    templates = getattr(tokenizer, "chat_template", None)
    if not templates:
        return
    try:
        import jinja2
        from transformers.utils.chat_template_utils import _compile_jinja_template
    except ImportError:
        return
    for template in templates.values() if isinstance(templates, dict) else [templates]:
        try:
            _compile_jinja_template(template)
        except jinja2.TemplateError as err:
            line = ""
            if isinstance(err, jinja2.TemplateSyntaxError) and err.lineno:  # the one with a line
                line = f" (line {err.lineno})"
            raise ModelLoadError(
                f"The chat template in {_chat_template_file(name, local)} is not a valid Jinja "
                f"template: {_original(err, 2)}{line}. Fix that file, or delete it to load the "
                "model without a chat template."
            ) from err


def _split_gguf(name_or_path: str | None, gguf_file: str | None) -> tuple[str | None, str | None]:
    """Accept ``gguf_file`` as a full path, or ``name_or_path`` pointing at a .gguf file."""
    if gguf_file is not None and name_or_path is None:
        p = Path(gguf_file).expanduser()
        return str(p.parent), p.name
    if (
        gguf_file is None
        and name_or_path
        and name_or_path.endswith(".gguf")
        and _path_kind(Path(name_or_path).expanduser(), name_or_path) == "file"
    ):
        p = Path(name_or_path).expanduser()
        return str(p.parent), p.name
    return name_or_path, gguf_file


def _named_gguf_path(
    name: str, local: Path | None, gguf_file: str, kwargs: dict[str, Any]
) -> Path | None:
    """The local path of the ``.gguf`` file just loaded (Hub files: from the HF cache), or None."""
    subfolder = kwargs.get("subfolder") or ""
    if local is not None:
        return local / subfolder / gguf_file
    try:
        from transformers.utils import cached_file

        where = {k: kwargs[k] for k in ("revision", "cache_dir", "token") if k in kwargs}
        found = cached_file(name, gguf_file, subfolder=subfolder, local_files_only=True, **where)
    except Exception:  # noqa: BLE001 - only the chat template is at stake
        return None
    return Path(found) if found else None


def _load_named(
    name: str, gguf_file: str | None, model_kwargs: dict[str, Any], kwargs: dict[str, Any]
) -> tuple[Any, Any]:
    """Load any causal LM by Hub id, local folder, or folder + ``gguf_file``."""
    if not name.strip():
        raise InvalidRequestError(
            "The model name is empty: give a Hugging Face model id such "
            "as 'gpt2', a local folder or a .gguf file, or leave it out "
            "(None) for the default model."
        )
    tok_kwargs = _tokenizer_kwargs(kwargs)
    if gguf_file is not None:
        _require_gguf()
        model_kwargs = {"gguf_file": gguf_file, **model_kwargs}
        tok_kwargs["gguf_file"] = gguf_file
        if "quantization_config" not in model_kwargs and _gguf_dequantize_config() is not None:
            model_kwargs["quantization_config"] = _gguf_dequantize_config()
    path = Path(name).expanduser()
    local: Path | None = None
    if _path_kind(path, name) is not None or _looks_like_path(name):
        _check_local_folder(name, path, gguf_file)
        local = path
        files = path / (kwargs.get("subfolder") or "")
        model, tokenizer = _from_pretrained(str(path), model_kwargs, tok_kwargs, files)
    else:
        model, tokenizer = _from_pretrained(name, model_kwargs, tok_kwargs)
    if gguf_file is not None and not getattr(tokenizer, "chat_template", None):
        gguf_path = _named_gguf_path(name, local, gguf_file, kwargs)
        if gguf_path is not None:
            restore_chat_template(tokenizer, gguf_path)
    return model, tokenizer


# --------------------------------------------------------------------------- GGUF chat template


def restore_chat_template(tokenizer: Any, gguf_path: Path) -> None:
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
