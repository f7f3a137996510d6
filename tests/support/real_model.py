"""The embedded default model (SmolLM2-135M-Instruct), loaded once per test run, and the
lenses the gallery's notebooks fit, fitted once per test run before any notebook runs.

Both live in the iglens_viz cache (:func:`iglens_viz.loading.cache_dir`: ``$IGLENS_CACHE`` or
the user cache folder), which a notebook's kernel reads too: the first load converts the
model there, a fitted lens is stored there, and a kernel started with the same
``IGLENS_CACHE`` finds both and neither converts nor fits.
"""

from __future__ import annotations

import functools
from pathlib import Path

GALLERY_LENSES = ("shortcut",)
"""The fitted lens kinds the gallery's notebooks fit with the defaults (``lens="shortcut"``,
``resolve_lens("shortcut", ...)``); tests/gallery checks that no notebook names another
without only reading it from the cache (``cached_fitted_lens``)."""


@functools.cache
def default_model():
    """``iglens_viz.load_model()``: the embedded default (converted into the cache on first use)."""
    from iglens_viz import load_model

    return load_model()


def fit_gallery_lenses() -> Path:
    """Fit every kind of :data:`GALLERY_LENSES` on the default model into the cache (a file
    read when fitted before); the cache folder."""
    from iglens_viz.lenses import cached_fitted_lens, resolve_lens
    from iglens_viz.loading import cache_dir

    model, tokenizer = default_model()
    for kind in GALLERY_LENSES:
        resolve_lens(kind, model, tokenizer)
        assert cached_fitted_lens(model, kind) is not None, f"the {kind} lens was not cached"
    return cache_dir()
