"""Deprecated: the studies moved to the ``iglens_study`` package (this shim stays one release).

``import iglens_viz.studies`` warns (:class:`DeprecationWarning`) and re-exports
:mod:`iglens_study`; its submodules (``iglens_viz.studies.scoring`` …) are iglens_study's.
Without iglens_study installed it raises :class:`~iglens_viz.errors.MissingPackageError`
saying how to install it (``pip install ./iglens_study`` from a checkout). Import
``iglens_study`` instead.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from types import ModuleType

from ..errors import MissingPackageError

SUBMODULES = (
    "cli",
    "counterfactual",
    "gate_study",
    "pair_report",
    "pair_scoring",
    "pairs",
    "prompts",
    "report",
    "run",
    "scoring",
)
"""iglens_study's modules, reachable under their old names for this release."""

warnings.warn(
    "iglens_viz.studies is deprecated: the studies moved to the iglens_study package "
    "(import iglens_study instead)",
    DeprecationWarning,
    stacklevel=2,
)

_study: ModuleType | None
try:
    _study = importlib.import_module("iglens_study")
except ModuleNotFoundError as err:
    if err.name != "iglens_study":
        raise
    _study = None
if getattr(_study, "__file__", None) is None:  # absent, or a checkout's bare folder on the path
    raise MissingPackageError(
        "iglens_viz.studies moved to the iglens_study package, which is not installed: "
        "install it with `pip install ./iglens_study` from a checkout of this repository, "
        "then import iglens_study"
    )

for _name in SUBMODULES:
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"iglens_study.{_name}")
    globals()[_name] = sys.modules[f"{__name__}.{_name}"]

assert _study is not None
__all__ = list(_study.__all__)
globals().update({name: getattr(_study, name) for name in __all__})
