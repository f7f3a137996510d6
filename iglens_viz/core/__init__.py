"""The attribution core: request, capture, readout, estimators and the result object.

Nothing here imports the views, the widget or the export: they sit on top of the result
object, reachable from it through :mod:`iglens_viz.core.extensions`.
"""

from .boundaries import BoundarySpec, parse_boundaries, segment_label, segment_labels
from .coordinates import LOGIT, Lens
from .lens import IGLens, attribute
from .request import AttributeOptions, AttributionRequest, ChatMode, Estimator, LensSpec, TargetSpec
from .result import AttributionResult, onset_segments

__all__ = [
    "LOGIT",
    "AttributeOptions",
    "AttributionRequest",
    "AttributionResult",
    "BoundarySpec",
    "ChatMode",
    "Estimator",
    "IGLens",
    "Lens",
    "LensSpec",
    "TargetSpec",
    "attribute",
    "onset_segments",
    "parse_boundaries",
    "segment_label",
    "segment_labels",
]
