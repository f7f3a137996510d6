"""Arrays and numbers as JSON-ready values (what ``to_dict`` of every result writes)."""

from __future__ import annotations

import numpy as np


def json_ready(value: object) -> object:
    """An array, numpy scalar or float as JSON-ready values (lists; NaN and ±inf become
    None); anything else as it is."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            out = value.astype(object)
            out[~np.isfinite(value)] = None
            return out.tolist()
        return value.tolist()
    if isinstance(value, (np.integer, np.floating)):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
