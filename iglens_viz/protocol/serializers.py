"""numpy arrays ↔ the protocol's *ndarray payloads* ``{"dtype", "shape", "buffer"}``.

The front end rebuilds a typed array from the payload (``Float32Array`` / ``Int32Array`` over
the buffer), so only the two dtypes JavaScript reads directly travel: floats are sent as
float32 and integers as int32 (like jupyter-scatter's ndarray serializer). In Jupyter the
``bytes`` go out as binary widget buffers (anywidget hands the front end a ``DataView``); a
static export cannot carry binary buffers, so :func:`to_base64_state` turns every buffer into
a base64 string, which the page's model shim decodes back into the same ``DataView``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["array_from_payload", "array_to_payload", "to_base64_state"]

_INT32 = np.iinfo(np.int32)


def array_to_payload(array: ArrayLike) -> dict[str, Any]:
    """``{"dtype": "float32"|"int32", "shape": [...], "buffer": bytes}`` of an array.

    Float arrays (any width) become little-endian float32, NaN kept; integer and boolean
    arrays become int32 (values outside the int32 range are an error, never wrapped).
    """
    arr = np.asarray(array)
    if arr.dtype.kind == "f":
        out = arr.astype("<f4", copy=False)
    elif arr.dtype.kind in "iub":
        if (
            arr.size
            and arr.dtype.kind != "b"
            and (arr.min() < _INT32.min or arr.max() > _INT32.max)
        ):
            raise ValueError(
                f"integer array of dtype {arr.dtype} has values outside the "
                f"int32 range; it cannot be sent to the front end"
            )
        out = arr.astype("<i4", copy=False)
    else:
        raise TypeError(
            f"cannot send an array of dtype {arr.dtype} to the front end "
            f"(only float and integer arrays)"
        )
    return {
        "dtype": "float32" if out.dtype.kind == "f" else "int32",
        "shape": [int(s) for s in out.shape],
        "buffer": out.tobytes(order="C"),
    }


def array_from_payload(payload: Mapping[str, Any]) -> np.ndarray:
    """The numpy array of an ndarray payload (``buffer`` as bytes, memoryview or base64)."""
    dtype = {"float32": "<f4", "int32": "<i4", "float64": "<f8", "int64": "<i8"}.get(
        payload["dtype"]
    )
    if dtype is None:
        raise ValueError(f"unknown payload dtype {payload['dtype']!r}")
    buffer = payload["buffer"]
    if isinstance(buffer, str):
        buffer = base64.b64decode(buffer)
    shape = tuple(int(s) for s in payload["shape"])
    return np.frombuffer(bytes(buffer), dtype=dtype).reshape(shape)


def to_base64_state(value: Any) -> Any:
    """A copy of a (nested) state with every ``bytes``/``memoryview`` as a base64 string.

    For static export, where the state travels as JSON text instead of binary buffers.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        return {k: to_base64_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_base64_state(v) for v in value]
    return value
