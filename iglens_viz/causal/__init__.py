"""Causal validation of IG-Lens: block ablation, counterfactual activation patching and the
onset-vs-ablation check.

>>> from iglens_viz.causal import ablate, patch, validate_onset, load_prompts  # doctest: +SKIP
>>> res = ablate(model, tokenizer, "The capital of France is")          # doctest: +SKIP
>>> pat = patch(model, tokenizer, "The capital of France is", "The capital of Italy is",
...             target=" Paris", contrast=" Rome")                       # doctest: +SKIP
>>> val = validate_onset(model, tokenizer, load_prompts())              # doctest: +SKIP
>>> val.summary()                                                       # doctest: +SKIP

``validate_onset`` and its result need pandas; the plots need matplotlib.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ..core.trajectory import is_monotone
from ..errors import InvalidRequestError
from .ablation import (
    ABLATION_MODES,
    ABLATION_PARTS,
    AblationMode,
    AblationPart,
    AblationResult,
    ablate,
)
from .gates import GATE_BASELINES, GATE_PATHS, GateLedger, gate_ledger
from .patching import (
    PATCH_DIRECTIONS,
    PATCH_EFFECTS,
    PATCH_METHODS,
    PATCH_METRICS,
    PATCH_PARTS,
    PatchResult,
    attribution_patch,
    patch,
)
from .positions import POSITION_KEYWORDS, PositionSpec, resolve_positions
from .validation import COLUMNS, ValidationResult, spearman, validate_onset

__all__ = [
    "ABLATION_MODES",
    "ABLATION_PARTS",
    "COLUMNS",
    "GATE_BASELINES",
    "GATE_PATHS",
    "PATCH_DIRECTIONS",
    "PATCH_EFFECTS",
    "PATCH_METHODS",
    "PATCH_METRICS",
    "PATCH_PARTS",
    "POSITION_KEYWORDS",
    "AblationMode",
    "AblationPart",
    "AblationResult",
    "GateLedger",
    "PatchResult",
    "PositionSpec",
    "ValidationResult",
    "ablate",
    "attribution_patch",
    "gate_ledger",
    "is_monotone",
    "load_prompts",
    "patch",
    "prompt_categories",
    "resolve_positions",
    "spearman",
    "validate_onset",
]


@lru_cache(maxsize=1)
def _prompt_data() -> dict[str, tuple[str, ...]]:
    text = (
        resources.files("iglens_viz").joinpath("data").joinpath("prompts.json").read_text("utf-8")
    )
    return {name: tuple(items) for name, items in json.loads(text)["categories"].items()}


def prompt_categories() -> list[str]:
    """Names of the categories of the shipped prompt set."""
    return list(_prompt_data())


def load_prompts(category: str | None = None) -> list[str]:
    """The shipped validation prompts: all of them (in category order) or one category.

    Categories: ``factual_recall``, ``agreement``, ``induction``, ``sequences``, ``syntax``,
    ``common_sense`` (see :func:`prompt_categories`).
    """
    data = _prompt_data()
    if category is None:
        return [p for items in data.values() for p in items]
    if category not in data:
        raise InvalidRequestError(
            f"unknown prompt category {category!r}; choose one of {list(data)}"
        )
    return list(data[category])
