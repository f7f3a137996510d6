"""iglens_viz: in which layer is each predicted token's probability decided?

IG-Lens decomposes a decoder-only language model's target probability exactly across its
blocks: the per-segment contributions sum to Δp = f(h_n) − f(h_0).
"""

from .adapters import UnsupportedModelError, supported_families
from .core import AttributionResult, IGLens, ReadoutMismatchError, attribute
from .loading import ModelLoadError, load_model

__all__ = ["AttributionResult", "IGLens", "ModelLoadError", "ReadoutMismatchError",
           "UnsupportedModelError", "attribute", "load_model", "supported_families"]
__version__ = "0.1.0"
