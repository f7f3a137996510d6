"""The IG-Lens notebook widget (anywidget) and the serializers it shares with the export.

``IGLensWidget``, ``show`` and ``parse_request`` live in :mod:`iglens_viz.widget.widget` and
are imported from there on first use, so the payload and serializer helpers (which the static
HTML export uses) work without anywidget installed.

>>> from iglens_viz.widget import show
>>> w = show(model, tokenizer, "What is the capital of Vietnam?", chat=True,
...          max_new_tokens=12)                          # doctest: +SKIP
>>> w.selected                                           # doctest: +SKIP
"""

from .payload import result_payload
from .serializers import array_from_payload, array_to_payload, to_base64_state

# The lazily imported names are documented in iglens_viz.widget.widget.
__all__ = ["array_from_payload", "array_to_payload", "result_payload", "to_base64_state"]

_LAZY = {"IGLensWidget", "show", "parse_request"}


def __getattr__(name):
    if name in _LAZY:
        from . import widget

        return getattr(widget, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
