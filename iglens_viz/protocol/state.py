"""The front-end model's state: its defaults, once, for the widget's traits and the page."""

from __future__ import annotations

from ..errors import InvalidRequestError

COLOR_BY: tuple[str, ...] = ("p_final", "delta_p", "onset")
"""Token-strip colourings: final target probability, net change Δp, onset block."""

DEFAULT_STATE: dict = {
    "selected": -1,       # no position selected
    "hovered": -1,        # nothing hovered
    "color_by": "p_final",
    "interactive": False,  # no kernel to recompute (an exported page, or a plain result)
    "request": {},        # the controls' last wish (JS → Python)
    "busy": False,
    "error": "",
}
"""Every synced value but ``result``, as a new widget or an exported page starts."""


def initial_state(payload: dict, *, selected: int | None = None,
                  color_by: str | None = None, interactive: bool = False) -> dict:
    """The model state that shows ``payload``: :data:`DEFAULT_STATE` with the given values.

    ``selected`` defaults to the first answer position (``payload["answer_start"]``) or, with
    no answer, the last position — where a reader looks first.
    """
    T = len(payload["tokens"])
    if selected is None:
        selected = min(int(payload["answer_start"]), T - 1)
    if isinstance(selected, bool) or not isinstance(selected, int) or not -1 <= selected < T:
        raise InvalidRequestError(f"selected={selected!r} must be -1 (none) or a position "
                                  f"0 … {T - 1}")
    color_by = DEFAULT_STATE["color_by"] if color_by is None else color_by
    if color_by not in COLOR_BY:
        raise InvalidRequestError(f"color_by={color_by!r}: choose one of {', '.join(COLOR_BY)}")
    return {**DEFAULT_STATE, "result": payload, "selected": selected, "color_by": color_by,
            "interactive": bool(interactive)}
