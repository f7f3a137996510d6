"""The IG-Lens notebook widget (anywidget): linked token strip, layer heatmap, detail panel.

``IGLensWidget`` and ``show`` live in :mod:`iglens_viz.widget.widget` and are imported on
first use, so importing this package does not import anywidget. What the widget sends to the
browser is defined in :mod:`iglens_viz.protocol`, which the static export shares.

>>> from iglens_viz.widget import show
>>> w = show(model, tokenizer, "What is the capital of Vietnam?", chat=True,
...          max_new_tokens=12)                          # doctest: +SKIP
>>> w.selected                                           # doctest: +SKIP
"""

from typing import Any

# The lazily imported names are documented in iglens_viz.widget.widget.
__all__ = ["IGLensWidget", "show"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import widget

        return getattr(widget, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
