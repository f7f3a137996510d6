"""Turn :func:`load_model`'s arguments into ``from_pretrained`` keyword arguments.

``dtype`` and ``device`` are checked and mapped to what transformers takes, the location
keyword arguments are shared with the tokenizer, and ``.gguf`` files get the ``gguf`` package
check and the dequantizing configuration.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch

from ..errors import InvalidRequestError, ModelLoadError

GGUF_PIP = "pip install gguf"

# from_pretrained arguments that concern *where the files are*; the tokenizer needs them too.
_SHARED_KWARGS = (
    "revision",
    "subfolder",
    "cache_dir",
    "local_files_only",
    "token",
    "trust_remote_code",
    "force_download",
    "proxies",
)

_DTYPE_ALIASES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float64": torch.float64,
    "fp64": torch.float64,
    "double": torch.float64,
}


# --------------------------------------------------------------------------- argument handling


def resolve_dtype(dtype: Any) -> torch.dtype | str | None:
    """Map ``None``, ``"auto"``, a torch dtype, or a name like ``"bfloat16"`` to what
    transformers takes."""
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise InvalidRequestError(
                f"dtype={dtype} is not a floating-point dtype; a model's "
                "weights need one, e.g. torch.float32 or torch.bfloat16."
            )
        return dtype
    if dtype is None:
        return dtype
    if isinstance(dtype, str):
        key = dtype.lower().removeprefix("torch.")
        if key == "auto":
            return "auto"
        if key in _DTYPE_ALIASES:
            return _DTYPE_ALIASES[key]
    raise InvalidRequestError(
        f"dtype={dtype!r} is not understood; use a torch dtype, 'auto', "
        f"or one of {sorted(_DTYPE_ALIASES)}."
    )


def _resolve_device(device: Any) -> str | None:
    """Validate ``device`` ("cpu", "cuda", "cuda:0", "mps", "auto", a torch.device) for
    ``device_map``."""
    if device is None:
        return None
    if isinstance(device, str) and device == "auto":
        return "auto"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise InvalidRequestError(
            f"device={device!r} is not understood; use 'cpu', 'cuda', 'cuda:0', 'mps' or 'auto'."
        ) from err
    if dev.type == "meta":
        raise InvalidRequestError(
            f"device={device!r} cannot hold a usable model: meta tensors "
            "have no data. Use 'cpu', 'cuda' or 'auto'."
        )
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(
                f"device={device!r} was asked for, but this torch build "
                f"({torch.__version__}) sees no CUDA device. Use device='cpu'."
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"device={device!r} was asked for, but torch sees only "
                f"{torch.cuda.device_count()} CUDA device(s), numbered from 0."
            )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError(
            f"device={device!r} was asked for, but this torch build "
            f"({torch.__version__}) on this machine has no MPS (Apple GPU) "
            "support. Use device='cpu'."
        )
    return str(dev)


def _dtype_kwarg_name() -> str:
    """``dtype`` on transformers >= 4.56, ``torch_dtype`` before."""
    import transformers

    major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _model_kwargs(dtype: Any, device: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """from_pretrained keyword arguments for the model: user kwargs plus dtype and device_map."""
    out = dict(kwargs)
    resolved = resolve_dtype(dtype)
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
        raise ModelLoadError(
            f"Loading a .gguf file needs the gguf package. Install it with:\n    {GGUF_PIP}"
        )


def _gguf_dequantize_config() -> Any:
    """``GgufConfig(dequantize=True)`` where transformers has it (5.x), else ``None``.

    Transformers 5 can keep GGUF weights packed in custom modules when a kernel is installed;
    IG-Lens reads the head and norm weights directly, so we always ask for plain dense weights.
    """
    try:
        from transformers import GgufConfig
    except ImportError:  # transformers 4.x always dequantizes GGUF files
        return None
    return GgufConfig(dequantize=True)
