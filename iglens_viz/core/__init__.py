"""The attribution core: capture, readout, estimators and the result object (no widget code)."""

from .lens import IGLens, ReadoutMismatchError, attribute, parse_boundaries
from .result import AttributionResult

__all__ = ["AttributionResult", "IGLens", "ReadoutMismatchError", "attribute", "parse_boundaries"]
