"""Fitted lenses: the coordinates IG-Lens can read every state in.

A :class:`~iglens_viz.core.coordinates.Lens` maps the state at depth L to
T_L(h) = h·A_Lᵀ + b_L before the one readout f; the ledger stays exact under any of them.
This package, above the core, makes and keeps them:

* :func:`fit_lens` — the linear shortcut (:mod:`.shortcut`), the tuned lens
  (:mod:`.tuned`) and the Jacobian lens (:mod:`.jacobian`), on the model's own text by
  default (:mod:`.corpus`), cached (:mod:`.cache`);
* :func:`save_lens` / :func:`load_lens` — one safetensors file (:mod:`.io`), and the files
  of ``jlens`` and the tuned-lens package (:mod:`.foreign`);
* :func:`resolve_lens` — what a ``lens=`` argument names; :func:`cached_fitted_lens` — a
  default fit if the cache has it, without fitting;
* :func:`evaluate_lens` — per-depth KL and top-1 agreement on held-out text (:mod:`.evaluate`).

See ``docs/lenses.md``.
"""

from ..core.coordinates import LOGIT, Lens
from .evaluate import LensEvaluation, evaluate_lens
from .fit import FITTED_KINDS, FitProgress, cached_fitted_lens, fit_lens, resolve_lens
from .io import LensFileError, load_lens, save_lens

__all__ = [
    "FITTED_KINDS",
    "LOGIT",
    "FitProgress",
    "Lens",
    "LensEvaluation",
    "LensFileError",
    "cached_fitted_lens",
    "evaluate_lens",
    "fit_lens",
    "load_lens",
    "resolve_lens",
    "save_lens",
]
