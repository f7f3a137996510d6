"""Where an intervention acts: the positions of a prompt whose update is replaced.

Shared by :func:`~iglens_viz.causal.patch` and :func:`~iglens_viz.causal.ablate`:

- ``"target"``: the last position, where the answer is read (the metric's position);
- ``"all"``: every position;
- ``"all_but_first"``: every position but the first, whose states (a BOS or the first word)
  are often large and unlike the rest;
- a list of 0-based positions (negative counts from the end, as in Python).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

from ..errors import InvalidRequestError

__all__ = ["POSITION_KEYWORDS", "PositionKeyword", "PositionSpec", "resolve_positions"]

PositionKeyword = Literal["target", "all", "all_but_first"]
"""The named position sets; see :func:`resolve_positions`."""
POSITION_KEYWORDS: tuple[PositionKeyword, ...] = get_args(PositionKeyword)

PositionSpec = PositionKeyword | Sequence[int]
"""``positions=`` of :func:`~iglens_viz.causal.patch` and :func:`~iglens_viz.causal.ablate`."""


def resolve_positions(spec: PositionSpec, T: int) -> list[int]:
    """The sorted, distinct 0-based positions ``spec`` names in a prompt of ``T`` tokens.

    ``"target"`` → ``[T − 1]``; ``"all"`` → ``0 … T − 1``; ``"all_but_first"`` →
    ``1 … T − 1`` (an error for a one-token prompt: nothing would be replaced); a list of
    ints in ``[−T, T)``, negative ones counted from the end. An empty list is an error.
    """
    if isinstance(spec, str):
        if spec == "target":
            return [T - 1]
        if spec == "all":
            return list(range(T))
        if spec == "all_but_first":
            if T < 2:
                raise InvalidRequestError(
                    "positions='all_but_first' leaves no position of a one-token prompt"
                )
            return list(range(1, T))
        raise InvalidRequestError(
            f"unknown positions {spec!r}; choose one of {', '.join(POSITION_KEYWORDS)} "
            f"or pass a list of 0-based positions"
        )
    if not isinstance(spec, (Sequence, np.ndarray)):
        raise InvalidRequestError(
            f"positions must be one of {', '.join(POSITION_KEYWORDS)} or a list of 0-based "
            f"positions, not {type(spec).__name__}"
        )
    out = set()
    for item in spec:
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise InvalidRequestError(f"each position must be an integer, got {item!r}")
        p = int(item)
        if not -T <= p < T:
            raise InvalidRequestError(
                f"position {p} is outside the prompt: it has {T} tokens (positions 0 … {T - 1}, "
                f"or −{T} … −1 from the end)"
            )
        out.add(p % T)
    if not out:
        raise InvalidRequestError("positions is an empty list: name at least one position")
    return sorted(out)
