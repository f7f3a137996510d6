"""The IG-Lens notebook widget (anywidget) and the serializers it shares with the export.

``IGLensWidget`` and ``show`` need ``anywidget`` and are imported on first use; the payload
and serializer helpers (used by the static HTML export) do not.

>>> from iglens_viz.widget import show
>>> w = show(model, tokenizer, "What is the capital of Vietnam?", chat=True,
...          max_new_tokens=12)                          # doctest: +SKIP
>>> w.selected                                           # doctest: +SKIP
"""

from .payload import result_payload
from .serializers import array_from_payload, array_to_payload, to_base64_state

__all__ = ["IGLensWidget", "array_from_payload", "array_to_payload", "parse_request",
           "result_payload", "show", "to_base64_state"]

_LAZY = {"IGLensWidget", "show", "parse_request"}


def __getattr__(name):
    if name in _LAZY:
        from . import widget

        return getattr(widget, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
