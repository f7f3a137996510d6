"""Segment boundaries: the forms a user may write, their validation, and segment labels.

A boundary spec is ``"all"`` (every block), ``"every:K"`` (every K blocks, n always
included), a comma list such as ``"0,10,20,30"``, or a sequence of ints. The same forms are
accepted everywhere — the API, the CLI, the widget's boundary box — because they all go
through :func:`normalize_boundaries` (no model needed) and :func:`resolve_boundaries` (the
model's number of blocks n).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import numpy as np

from ..errors import InvalidRequestError

__all__ = ["BoundarySpec", "normalize_boundaries", "parse_boundaries", "resolve_boundaries",
           "segment_label", "segment_labels"]

BoundarySpec = Union[str, Sequence[int], None]
"""``"all"`` / None, ``"every:K"``, ``"0,10,20,30"``, or a sequence of block indices."""

_EXAMPLE = "'all', 'every:5' or a comma list such as '0,10,20,30'"


def _int_list(values, spec) -> tuple[int, ...]:
    out = []
    for value in values:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise InvalidRequestError(f"boundaries must be integers (block indices); got "
                                      f"{value!r} in {spec!r}")
        out.append(int(value))
    return tuple(out)


def normalize_boundaries(spec: BoundarySpec) -> str | tuple[int, ...]:
    """The canonical form of a boundary spec: ``"all"``, ``"every:K"`` or a tuple of ints.

    Checks the form only; :func:`resolve_boundaries` checks it against a model.
    """
    if spec is None:
        return "all"
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text in ("", "all", "every"):
            return "all"
        if text.startswith("every:"):
            step = text.split(":", 1)[1].strip()
            if not step.isdigit() or int(step) < 1:
                raise InvalidRequestError(f"boundary spec {spec!r}: 'every:K' needs an integer "
                                          f"K >= 1")
            return f"every:{int(step)}"
        parts = [part.strip() for part in text.split(",")]
        if not all(p.lstrip("+-").isdigit() for p in parts):
            raise InvalidRequestError(f"boundary spec {spec!r} is not {_EXAMPLE}")
        return tuple(int(p) for p in parts)
    if isinstance(spec, (bytes, bytearray)) or not isinstance(spec, (Sequence, np.ndarray)):
        raise InvalidRequestError(f"boundaries must be {_EXAMPLE}, or a list of ints; not "
                                  f"{type(spec).__name__}")
    return _int_list(np.asarray(spec, dtype=object).reshape(-1) if isinstance(spec, np.ndarray)
                     else spec, spec)


def resolve_boundaries(spec: str | tuple[int, ...], n: int) -> list[int]:
    """Block indices ``[0, …, n]`` of a normalised spec, validated for ``n`` blocks."""
    if spec == "all":
        return list(range(n + 1))
    if isinstance(spec, str):  # "every:K"
        step = int(spec.split(":", 1)[1])
        return sorted({*range(0, n, step), n})
    out = list(spec)
    if len(out) < 2 or out[0] != 0 or out[-1] != n:
        raise InvalidRequestError(f"boundaries must start at 0 and end at n={n} (the model's "
                                  f"number of blocks), e.g. [0, {n // 2}, {n}]; got {out}")
    if any(b >= c for b, c in zip(out, out[1:])):
        raise InvalidRequestError(f"boundaries must be strictly increasing; got {out}")
    return out


def parse_boundaries(spec: BoundarySpec, n: int) -> list[int]:
    """Validated block indices ``[0, …, n]`` of any boundary spec (None: every block)."""
    return resolve_boundaries(normalize_boundaries(spec), n)


def segment_label(start: int, end: int) -> str:
    """The label of the segment from boundary ``start`` to ``end``: its blocks ``start+1 …
    end``, written ``"12"`` for one block and ``"11–15"`` for several (blocks count from 1)."""
    return str(end) if end - start == 1 else f"{start + 1}\u2013{end}"


def segment_labels(boundaries) -> list[str]:
    """:func:`segment_label` of every segment of a boundary list."""
    b = [int(x) for x in boundaries]
    return [segment_label(lo, hi) for lo, hi in zip(b[:-1], b[1:])]
