"""The front-end model's state: its defaults, once, for the widget's traits and the page."""

from __future__ import annotations

from typing import Any, Literal, get_args

from ..errors import InvalidRequestError

__all__ = ["COLOR_BY", "DEFAULT_STATE", "VIEWS", "ColorBy", "View", "initial_state"]

ColorBy = Literal["p_final", "delta_p", "onset", "nonmonotone"]
"""A token-strip colouring; see :data:`COLOR_BY`."""
COLOR_BY: tuple[ColorBy, ...] = get_args(ColorBy)
"""Token-strip colourings: final target probability, net change Δp, onset block, and how
much of the trajectory moves against Δp (the largest opposing segment as a share of the
token's largest |contribution|; 0 for a monotone token)."""

DEFAULT_STATE: dict[str, Any] = {
    "selected": -1,  # no position selected
    "hovered": -1,  # nothing hovered
    "color_by": "p_final",
    "interactive": False,  # no kernel to recompute (an exported page, or a plain result)
    "request": {},  # the controls' last wish (JS → Python)
    "busy": False,
    "error": "",
    "view": "heatmap",  # the main view's tab: "heatmap", "grid" or "compare"
    "pinned": [],  # [result, position] pairs the compare view overlays
}
"""Every synced value but ``result``, as a new widget or an exported page starts."""

View = Literal["heatmap", "grid", "compare"]
"""A tab of the main view; see :data:`VIEWS`."""
VIEWS: tuple[View, ...] = get_args(View)
"""The main view's tabs: the layer heatmap, the logit-lens grid, the compare view."""


def initial_state(
    payload: dict[str, Any],
    *,
    selected: int | None = None,
    color_by: ColorBy | None = None,
    interactive: bool = False,
) -> dict[str, Any]:
    """The model state that shows ``payload``: :data:`DEFAULT_STATE` with the given values.

    ``selected`` defaults to the first answer token (position ``prompt_length``, where the
    answer is read) or, with no answer, the last prompt token — where a reader looks first.
    """
    T = len(payload["tokens"])
    if selected is None:
        selected = min(int(payload["prompt_length"]), T - 1)
    if isinstance(selected, bool) or not isinstance(selected, int) or not -1 <= selected < T:
        raise InvalidRequestError(
            f"selected={selected!r} must be -1 (none) or a position 0 … {T - 1}"
        )
    color_by = DEFAULT_STATE["color_by"] if color_by is None else color_by
    if color_by not in COLOR_BY:
        raise InvalidRequestError(f"color_by={color_by!r}: choose one of {', '.join(COLOR_BY)}")
    return {
        **DEFAULT_STATE,
        "result": payload,
        "selected": selected,
        "color_by": color_by,
        "interactive": bool(interactive),
    }
