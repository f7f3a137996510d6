"""The safetensors file format, written and read here for float32 and int64 tensors.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON (each
tensor's ``dtype``, ``shape`` and ``data_offsets`` into the data that follows, and a
``__metadata__`` map of strings), then the tensors' little-endian bytes. The format is small
enough to write here without the ``safetensors`` package (which iglens_viz does not declare),
and the files these functions write are read by that package, and the reverse, for these
two dtypes. Reading checks every offset against the file's size, so a damaged or foreign
file is an error, never a wrong tensor.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["SafetensorsFormatError", "dump", "load"]

_DTYPES: dict[str, tuple[torch.dtype, np.dtype[Any]]] = {
    "F32": (torch.float32, np.dtype("<f4")),
    "I64": (torch.int64, np.dtype("<i8")),
}
_NAMES = {torch.float32: "F32", torch.int64: "I64"}
_MAX_HEADER = 100 * 2**20


class SafetensorsFormatError(ValueError):
    """The bytes are not a safetensors file this module reads."""


def dump(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None) -> bytes:
    """The safetensors bytes of ``tensors`` (float32 or int64, any device) and
    ``metadata``."""
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    chunks = []
    offset = 0
    for name, tensor in tensors.items():
        if tensor.dtype not in _NAMES:
            raise TypeError(f"{name}: dtype {tensor.dtype} (float32 or int64 only)")
        data = (
            tensor.detach()
            .cpu()
            .contiguous()
            .numpy()
            .astype(_DTYPES[_NAMES[tensor.dtype]][1], copy=False)
            .tobytes()
        )
        header[name] = {
            "dtype": _NAMES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def load(data: bytes) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """``(tensors, metadata)`` of safetensors ``data``; :class:`SafetensorsFormatError` for
    anything else (or a dtype other than float32 and int64)."""
    if len(data) < 8:
        raise SafetensorsFormatError("shorter than a safetensors header")
    (size,) = struct.unpack("<Q", data[:8])
    if size > min(_MAX_HEADER, len(data) - 8):
        raise SafetensorsFormatError("the header length runs past the end of the file")
    try:
        header = json.loads(data[8 : 8 + size])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise SafetensorsFormatError("the header is not JSON") from None
    if not isinstance(header, dict):
        raise SafetensorsFormatError("the header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise SafetensorsFormatError("the metadata is not a map of strings")
    body = memoryview(data)[8 + size :]
    tensors = {}
    for name, info in header.items():
        try:
            torch_dtype, np_dtype = _DTYPES[info["dtype"]]
            shape = [int(s) for s in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsFormatError(
                f"tensor {name!r}: a dtype other than F32/I64, or a bad entry"
            ) from None
        count = int(np.prod(shape)) if shape else 1
        if not 0 <= begin <= end <= len(body) or end - begin != count * np_dtype.itemsize:
            raise SafetensorsFormatError(f"tensor {name!r}: its data lies outside the file")
        array = np.frombuffer(body[begin:end], dtype=np_dtype).reshape(shape)
        tensors[name] = torch.from_numpy(array.astype(np_dtype.newbyteorder("="), copy=True))
        if tensors[name].dtype != torch_dtype:  # pragma: no cover - numpy maps them so
            tensors[name] = tensors[name].to(torch_dtype)
    return tensors, metadata
