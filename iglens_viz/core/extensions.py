"""Views that sit above the core, reachable from core objects without the core importing them.

``result.widget()``, ``result.to_html()``, ``result.plot_heatmap()`` … are conveniences on
core objects, but the widget, the export and the plots are built on the core, not the other
way round. The package's top level (``iglens_viz/__init__.py``, above both) registers where
each one lives as a ``"module:attribute"`` path; the core looks the name up here and imports
it on first use. So ``import iglens_viz.core`` never imports a view, and no import cycle
joins the core to the packages above it.
"""

from __future__ import annotations

import importlib
from typing import Any

_PROVIDERS: dict[str, str] = {}


def register(name: str, target: str) -> None:
    """Say that ``name`` is provided by ``target``, a ``"package.module:attribute"`` path."""
    if ":" not in target:
        raise ValueError(f"provider target must be 'module:attribute', got {target!r}")
    _PROVIDERS[name] = target


def provider(name: str) -> Any:
    """The object registered as ``name``, imported now."""
    try:
        module, attribute = _PROVIDERS[name].split(":")
    except KeyError:
        raise LookupError(
            f"nothing provides {name!r}: import iglens_viz (its top level "
            f"registers the views) before using it"
        ) from None
    return getattr(importlib.import_module(module), attribute)
