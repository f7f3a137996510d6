"""The attribution core: capture, readout, estimators and the result object (no widget code)."""

from .boundaries import boundaries_from_spec, parse_boundaries
from .lens import IGLens, ReadoutMismatchError, attribute
from .result import AttributionResult

__all__ = ["AttributionResult", "IGLens", "ReadoutMismatchError", "attribute",
           "boundaries_from_spec", "parse_boundaries"]
