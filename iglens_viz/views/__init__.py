"""Views of an :class:`~iglens_viz.AttributionResult`.

* :mod:`.token_format` — readable token labels (visible whitespace, escapes, truncation).
* non-monotone stretches (:mod:`iglens_viz.core.trajectory`, re-exported here).
* :mod:`.static` — matplotlib figures (:func:`plot_heatmap`, :func:`plot_token`,
  :func:`plot_components`) and a tidy
  pandas table (:func:`to_dataframe`). matplotlib and pandas are imported only when one of
  these is first used, so the rest of the package works without them.
* :mod:`.causal` — the figures of the causal checks (:func:`~.causal.plot_ablation_vs`,
  :func:`~.causal.plot_validation`), behind ``AblationResult.plot_vs`` and
  ``ValidationResult.plot``.
"""

from __future__ import annotations

from typing import Any

from ..core.trajectory import NonMonotone, against_segments, against_steps, non_monotone
from .token_format import escape_mathtext, format_token

_STATIC = ("plot_components", "plot_heatmap", "plot_token", "to_dataframe")

# The lazily imported plotting names are documented in iglens_viz.views.static.
__all__ = [
    "NonMonotone",
    "against_segments",
    "against_steps",
    "escape_mathtext",
    "format_token",
    "non_monotone",
]


def __getattr__(name: str) -> Any:
    if name in _STATIC:
        from . import static

        return getattr(static, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
