"""Segment boundaries: validation, and the short specs the CLI and widget accept."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def parse_boundaries(boundaries, n: int) -> list[int]:
    """Validate a boundary list: strictly increasing block indices from 0 to ``n``.

    ``None`` means every block, ``[0, 1, …, n]``.
    """
    if boundaries is None:
        return list(range(n + 1))
    if isinstance(boundaries, (str, bytes)) or not isinstance(boundaries, (Sequence, np.ndarray)):
        raise TypeError(f"boundaries must be a list of ints such as [0, {n // 2}, {n}], "
                        f"not {type(boundaries).__name__}")
    out = [int(b) for b in boundaries]
    if len(out) < 2 or out[0] != 0 or out[-1] != n:
        raise ValueError(f"boundaries must start at 0 and end at n={n} (the model's number of "
                         f"blocks), e.g. [0, {n // 2}, {n}]; got {out}")
    if any(b >= c for b, c in zip(out, out[1:])):
        raise ValueError(f"boundaries must be strictly increasing; got {out}")
    return out


def boundaries_from_spec(spec: str, n: int) -> list[int]:
    """Boundaries from a short text spec, validated for a model with ``n`` blocks.

    ``"all"`` (every block), ``"every:K"`` (every K blocks, n always included) or an explicit
    comma list such as ``"0,10,20,30"``.
    """
    text = spec.strip().lower()
    if text in ("all", "every", ""):
        return parse_boundaries(None, n)
    if text.startswith("every:"):
        try:
            step = int(text.split(":", 1)[1])
        except ValueError:
            step = 0
        if step < 1:
            raise ValueError(f"boundary spec {spec!r}: 'every:K' needs an integer K >= 1")
        return sorted({*range(0, n, step), n})
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"boundary spec {spec!r} is not 'all', 'every:K' or a comma list of "
                         f"block indices such as '0,{n // 2},{n}'") from None
    return parse_boundaries(values, n)
