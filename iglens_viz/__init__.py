"""iglens_viz: in which block does each predicted token's probability become readable?

IG-Lens decomposes a decoder-only language model's target probability exactly across its
blocks: the per-segment contributions sum to Δp = f(h_n) − f(h_0).

This top level is the façade above the packages: the core (:mod:`iglens_viz.core`), the
causal checks (:mod:`iglens_viz.causal`), the static views (:mod:`iglens_viz.views`), the
widget (:mod:`iglens_viz.widget`) and the export (:mod:`iglens_viz.export`). It registers
where the views live, so ``result.widget()`` and ``result.to_html()`` work while the core
never imports them.
"""

from typing import TYPE_CHECKING

from ._version import __version__ as __version__
from .adapters import supported_families
from .causal import (
    GateLedger,
    PatchResult,
    ablate,
    attribution_patch,
    gate_ledger,
    patch,
    validate_onset,
)
from .core import AttributeOptions, AttributionRequest, AttributionResult, IGLens, attribute
from .core.extensions import register
from .errors import (
    IGLensError,
    InvalidRequestError,
    ModelLoadError,
    ModelOutputError,
    ReadoutMismatchError,
    UnsupportedModelError,
)
from .lenses import Lens, evaluate_lens, fit_lens, load_lens, save_lens
from .loading import load_model

if TYPE_CHECKING:  # at run time these are imported on first use (see __getattr__ below)
    from .export.site import export_site
    from .widget.compare import compare

for _name, _target in {
    "plot_heatmap": "iglens_viz.views.static:plot_heatmap",
    "plot_token": "iglens_viz.views.static:plot_token",
    "plot_components": "iglens_viz.views.static:plot_components",
    "to_dataframe": "iglens_viz.views.static:to_dataframe",
    "widget": "iglens_viz.widget.widget:IGLensWidget",
    "show": "iglens_viz.widget.widget:show",
    "to_html": "iglens_viz.export.html:to_html",
    "check_segments": "iglens_viz.causal.check:check_segments",  # its total, direct, patching
    "gate_ledger": "iglens_viz.causal.gates:ledger_for",  # IGLens.gate_ledger
    "plot_gate_ledger": "iglens_viz.views.causal:plot_gate_ledger",
    "resolve_lens": "iglens_viz.lenses:resolve_lens",  # lens= names a Lens (the core's)
    "save_lens": "iglens_viz.lenses:save_lens",  # Lens.save
    "evaluate_lens": "iglens_viz.lenses:evaluate_lens",  # Lens.evaluate
}.items():
    register(_name, _target)

__all__ = [
    "AttributeOptions",
    "AttributionRequest",
    "AttributionResult",
    "GateLedger",
    "IGLens",
    "IGLensError",
    "InvalidRequestError",
    "Lens",
    "ModelLoadError",
    "ModelOutputError",
    "PatchResult",
    "ReadoutMismatchError",
    "UnsupportedModelError",
    "ablate",
    "attribute",
    "attribution_patch",
    "compare",
    "evaluate_lens",
    "export_site",
    "fit_lens",
    "gate_ledger",
    "load_lens",
    "load_model",
    "patch",
    "save_lens",
    "supported_families",
    "validate_onset",
]


_MOVED_TO_IGLENS_STUDY = frozenset(
    {"PairStudy", "Study", "capital_pairs", "load_pairs", "pair_study", "study"}
)
"""The study names this façade exported until the studies became their own package."""

if not TYPE_CHECKING:  # hidden from type checkers, which would type every unknown name by it

    def __getattr__(name: str) -> object:
        if name == "compare":  # it builds a widget: imported on first use, like the widget
            from .widget.compare import compare

            return compare
        if name == "export_site":  # the export sits above the core: imported on first use
            from .export.site import export_site

            return export_site
        if name in _MOVED_TO_IGLENS_STUDY:
            raise AttributeError(
                f"iglens_viz.{name} moved to the iglens_study package: `from iglens_study "
                f"import {name}` (install it with `pip install ./iglens_study` from a checkout)"
            )
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
