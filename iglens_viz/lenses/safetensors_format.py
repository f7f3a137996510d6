"""Tensors to and from the bytes of a safetensors file, with its metadata map.

A thin layer over the ``safetensors`` package: :func:`dump` is its ``save`` and
:func:`load` its ``load`` plus the file's ``__metadata__`` (strings), with every way a
damaged or foreign file fails turned into one :class:`SafetensorsFormatError`.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping

import torch
from safetensors import SafetensorError
from safetensors.torch import load as _load
from safetensors.torch import save as _save

__all__ = ["SafetensorsFormatError", "dump", "is_safetensors", "load"]


class SafetensorsFormatError(ValueError):
    """The bytes are not a safetensors file."""


def dump(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None) -> bytes:
    """The safetensors bytes of ``tensors`` (contiguous CPU tensors) and ``metadata``."""
    return _save(dict(tensors), metadata=None if metadata is None else dict(metadata))


def load(data: bytes) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and the metadata map of safetensors ``data``."""
    try:
        tensors = _load(data)
        (size,) = struct.unpack("<Q", data[:8])  # the header: its length, then its JSON
        header = json.loads(data[8 : 8 + size])
    except (SafetensorError, ValueError, struct.error, OverflowError) as err:
        raise SafetensorsFormatError(f"not a safetensors file: {err}") from None
    metadata = header.get("__metadata__") or {}
    return tensors, {str(k): str(v) for k, v in metadata.items()}


def is_safetensors(head: bytes, size: int) -> bool:
    """Whether a file of ``size`` bytes starting with ``head`` (its first 9 bytes or more)
    is laid out as a safetensors file: a header length that fits in the file, then the
    header's ``{``. (A pickle also starts with byte 0x80, as a header of 128 + 256·k bytes
    does: the first byte alone does not tell them apart.)"""
    if len(head) < 9:
        return False
    (length,) = struct.unpack("<Q", head[:8])
    return head[8:9] == b"{" and length <= size - 8
