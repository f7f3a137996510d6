"""The attribution core: request, capture, readout, estimators and the result object.

Nothing here imports the views, the widget or the export: they sit on top of the result
object, reachable from it through :mod:`iglens_viz.core.extensions`.
"""

from .boundaries import BoundarySpec, parse_boundaries, segment_label, segment_labels
from .lens import IGLens, attribute
from .request import AttributionRequest, ChatMode, Estimator, TargetSpec
from .result import AttributionResult, onset_segments

__all__ = [
    "AttributionRequest",
    "AttributionResult",
    "BoundarySpec",
    "ChatMode",
    "Estimator",
    "IGLens",
    "TargetSpec",
    "attribute",
    "onset_segments",
    "parse_boundaries",
    "segment_label",
    "segment_labels",
]
