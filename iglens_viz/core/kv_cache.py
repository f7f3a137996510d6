"""The model's own key/value cache, so that a second answer after the same prompt runs the
model on the answer's tokens only (``versus=``: the shared prefix is computed once).

Hugging Face models return their cache as ``past_key_values`` in transformers 4 and as
``cache`` in recent 5.x releases (the old name still works there, with a deprecation warning),
and take it under the same names; this module is the one place that knows both.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

from torch import nn


def cache_keyword(model: nn.Module) -> str:
    """The name of the forward argument that takes a key/value cache."""
    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def returned_cache(output: Any) -> Any:
    """The key/value cache in a model's output (``use_cache=True``), or None."""
    cache = output.get("cache") if hasattr(output, "get") else None
    return cache if cache is not None else getattr(output, "past_key_values", None)


def prefix_cache(cache: Any, length: int) -> Any:
    """A copy of ``cache`` holding its first ``length`` positions only.

    A copy, because the forward pass that continues from it appends to it. ``crop`` with a
    negative count removes that many positions from the end in transformers 4 and 5 alike
    (a positive argument means "keep" in 4 and is refused in 5).
    """
    kept = copy.deepcopy(cache)
    excess = kept.get_seq_length() - length
    if excess < 0:
        raise ValueError(f"the cache holds {kept.get_seq_length()} positions, not {length}")
    if excess:
        kept.crop(-excess)
    return kept
