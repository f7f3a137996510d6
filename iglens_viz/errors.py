"""The errors a user can cause, under one base class.

Catch :class:`IGLensError` to handle every problem with the inputs, the model or the
environment that iglens_viz reports on purpose; anything else is a bug. Each subclass also
derives from the built-in exception callers would expect (``ValueError`` for a bad argument,
``TypeError`` for an unsupported model, ``RuntimeError`` for a model or file that misbehaves),
so ``except ValueError`` keeps working.

>>> try:                                                            # doctest: +SKIP
...     iglens_viz.attribute(model, tokenizer, "", target=" Paris")
... except iglens_viz.IGLensError as err:
...     print(err)
the prompt is empty: pass a non-empty string or a list of token ids
"""

from __future__ import annotations

__all__ = [
    "IGLensError",
    "InvalidRequestError",
    "MissingPackageError",
    "ModelLoadError",
    "ModelOutputError",
    "ReadoutMismatchError",
    "UnsupportedModelError",
]


class IGLensError(Exception):
    """Base of every error iglens_viz raises for something the user can fix."""


class InvalidRequestError(IGLensError, ValueError):
    """An argument of an attribution, ablation or command is invalid: an empty prompt, a
    target that is not one token, boundaries out of order, a step count out of range, …
    The message names the problem and what would work."""


class UnsupportedModelError(IGLensError, TypeError):
    """The model is not a decoder-only causal LM of a family in the adapter table."""


class ReadoutMismatchError(IGLensError, RuntimeError):
    """The readout does not reproduce the model's own output probabilities."""


class ModelOutputError(IGLensError, RuntimeError):
    """The model's own forward pass produced NaN or Inf (its weights or its dtype, not the
    readout, are at fault)."""


class ModelLoadError(IGLensError, RuntimeError):
    """A model or tokenizer could not be loaded; the message says what to do about it."""


class MissingPackageError(IGLensError, ImportError):
    """A feature needs a package that is not installed (the studies: iglens_study; the site's
    ONNX graphs: onnx, onnxscript, onnxruntime); the message names the package and how to
    install it."""
