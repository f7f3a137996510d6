"""``fit_lens``: fit a shortcut, tuned or Jacobian lens on a model; ``resolve_lens``: what a
``lens=`` argument names, as a :class:`~iglens_viz.core.coordinates.Lens` for the model."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import torch
from torch import nn

from ..core.coordinates import LENS_KINDS, LOGIT, Lens, LensKind, model_fingerprint
from ..errors import InvalidRequestError
from .cache import (
    cache_path,
    cached_corpus,
    cached_lens,
    drop_partial,
    partial_path,
    read_partial,
    store_corpus,
    store_lens,
    store_partial,
)
from .corpus import CORPUS_VERSION, NEW_TOKENS, Split, corpus_digest, default_corpus
from .jacobian import JLENS_SKIP_FIRST, fit_jacobian
from .shortcut import fit_shortcut
from .states import DEFAULT_MAX_LENGTH, encode_texts, model_shape
from .tuned import TUNED_DEFAULTS, fit_tuned

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "FITTED_KINDS",
    "FitProgress",
    "cached_fitted_lens",
    "fit_lens",
    "model_corpus",
    "resolve_lens",
]

FITTED_KINDS = ("shortcut", "tuned", "jacobian")
"""The lens kinds :func:`fit_lens` fits."""

JACOBIAN_DEFAULT_TEXTS = 8
"""Texts of the default corpus the Jacobian lens averages over (each costs d backward
passes through the model; pass ``texts=`` for more)."""


class FitProgress(NamedTuple):
    """One progress report of a fit."""

    kind: str
    done: int
    total: int
    unit: str
    """``"texts"`` or ``"steps"``."""
    loss: float | None = None
    """The tuned lens's mean KL over depths at this step."""
    resumed_at: int = 0
    """The step (tuned) or text count (Jacobian) a checkpoint resumed this fit at; 0 for a
    fit from the start."""


def _printer(report: FitProgress) -> None:
    loss = "" if report.loss is None else f"  KL {report.loss:.4f}"
    unit = "step" if report.unit == "steps" else "text"
    resumed = f"  (resumed at {unit} {report.resumed_at})" if report.resumed_at else ""
    end = "\n" if report.done >= report.total else ""
    print(
        f"\riglens: fitting the {report.kind} lens: {report.done}/{report.total} "
        f"{report.unit}{loss}{resumed}",
        end=end,
        file=sys.stderr,
        flush=True,
    )


def model_corpus(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    split: Split,
    fingerprint: str | None = None,
) -> list[torch.Tensor]:
    """The default corpus ``split`` of ``model`` (:func:`~.corpus.default_corpus`), sampled
    once per model and kept in the cache."""
    fingerprint = fingerprint or model_fingerprint(model)
    name = f"{CORPUS_VERSION}-{NEW_TOKENS}-{split}"
    found = cached_corpus(fingerprint, name)
    if found is None:
        found = default_corpus(model, tokenizer, split)
        store_corpus(fingerprint, name, found)
    return found


def _default_corpus_key(kind: str, max_length: int) -> str:
    """The default corpus's name in a fit's cache key."""
    corpus = f"{CORPUS_VERSION}:{NEW_TOKENS}:{max_length}"
    return corpus + (f":first{JACOBIAN_DEFAULT_TEXTS}" if kind == "jacobian" else "")


def _fit_key(kind: str, options: dict[str, Any], corpus: str) -> dict[str, Any]:
    return {"kind": kind, "corpus": corpus, **options}


def cached_fitted_lens(
    model: nn.Module, kind: str, *, max_length: int = DEFAULT_MAX_LENGTH, **options: Any
) -> Lens | None:
    """The lens :func:`fit_lens` would return for ``kind`` on the default corpus with these
    settings, if it is in the cache already — or None. Never fits: a cheap way to show a
    tuned or Jacobian lens only where one has been fitted."""
    if kind not in FITTED_KINDS:
        raise InvalidRequestError(f"lens kind {kind!r} is not fitted: choose one of {FITTED_KINDS}")
    fingerprint = model_fingerprint(model)
    key = _fit_key(kind, _options(kind, options), _default_corpus_key(kind, max_length))
    found = cached_lens(cache_path(kind, fingerprint, key))
    return found if found is not None and found.fingerprint == fingerprint else None


def _options(kind: str, given: dict[str, Any]) -> dict[str, Any]:
    """The fitting options of ``kind``, defaults filled in; an unknown one is an error."""
    table: dict[str, dict[str, Any]] = {
        "shortcut": {"ridge": 0.0, "skip_first": 1},
        "jacobian": {"skip_first": JLENS_SKIP_FIRST, "dim_batch": 8},
        "tuned": {**TUNED_DEFAULTS, "skip_first": 1},
    }
    defaults = table[kind]
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise InvalidRequestError(
            f"fit_lens(kind={kind!r}) takes {', '.join(sorted(defaults))}, not {', '.join(unknown)}"
        )
    out = {**defaults, **given}
    for name, value in out.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidRequestError(f"{name} must be a number, got {value!r}")
    return out


def fit_lens(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    kind: str,
    texts: Sequence[str | Sequence[int] | torch.Tensor] | None = None,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    cache: bool = True,
    progress: Callable[[FitProgress], None] | bool | None = None,
    checkpoint_every: int = 10,
    **options: Any,
) -> Lens:
    """Fit a lens of ``kind`` (``"shortcut"``, ``"tuned"`` or ``"jacobian"``) on ``model``.

    ``texts``: strings or token-id sequences (each cut to ``max_length`` tokens); default
    the model's own samples from the shipped openings (:mod:`iglens_viz.lenses.corpus`;
    the Jacobian lens takes the first :data:`JACOBIAN_DEFAULT_TEXTS` of them).
    ``options`` per kind (defaults in brackets):

    * shortcut: ``ridge`` [0], ``skip_first`` [1] — see :mod:`.shortcut`;
    * jacobian: ``skip_first`` [16, as jlens], ``dim_batch`` [8] — see :mod:`.jacobian`;
    * tuned: ``steps`` [250], ``batch_rows`` [64], ``lr`` [1.0], ``momentum`` [0.9],
      ``weight_decay`` [1e-3], ``clip`` [1.0], ``seed`` [0], ``skip_first`` [1] — see
      :mod:`.tuned`.

    With ``cache`` (default), a lens fitted on the default corpus is kept in the iglens_viz
    cache (:mod:`.cache`) and the next call with the same model and settings reads it.
    Such a tuned or Jacobian fit is resumable: it keeps a checkpoint beside the cache file
    (every ``checkpoint_every`` steps of the tuned lens, after every text of the Jacobian
    lens; not a fitting setting, so not part of the cache key), a call with the same model
    and settings continues from it (the same lens as a fit never stopped; its progress
    reports say where it resumed), and the checkpoint is removed once the lens is stored.
    An interrupted fit (KeyboardInterrupt included) leaves its latest checkpoint.
    ``progress``: a callable receiving :class:`FitProgress` reports, or True to print
    them on stderr. The lens records its settings and the model's fingerprint.
    """
    if kind not in FITTED_KINDS:
        raise InvalidRequestError(
            f"lens kind {kind!r} is not fitted: choose one of {', '.join(FITTED_KINDS)} "
            f"('logit', the raw logit lens, needs no fit)"
        )
    opts = _options(kind, options)
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int):
        raise InvalidRequestError(f"checkpoint_every must be an integer, got {checkpoint_every!r}")
    if checkpoint_every < 1:
        raise InvalidRequestError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    report = _printer if progress is True else (progress or None)
    adapter, n, d = model_shape(model)
    fingerprint = model_fingerprint(model)
    if texts is None:
        corpus = _default_corpus_key(kind, max_length)
        key = _fit_key(kind, opts, corpus)
        where = cache_path(kind, fingerprint, key)
        if cache:
            found = cached_lens(where)
            if found is not None and found.fingerprint == fingerprint:
                return found
        sequences = encode_texts(
            None, model_corpus(model, tokenizer, "fit", fingerprint), max_length=max_length
        )
        if kind == "jacobian":
            sequences = sequences[:JACOBIAN_DEFAULT_TEXTS]
    else:
        sequences = encode_texts(tokenizer, texts, max_length=max_length)
        corpus = "texts"
        where = None
    started = time.perf_counter()
    digest = corpus_digest(sequences)
    partial = partial_path(where) if cache and where is not None and kind != "shortcut" else None
    identity: dict[str, Any] = {}
    resume: dict[str, Any] | None = None
    if partial is not None:
        identity = {"key": key, "fingerprint": fingerprint, "corpus_sha256": digest}
        resume = read_partial(partial, identity)
    resumed_at = 0 if resume is None else int(resume["step" if kind == "tuned" else "texts_done"])

    def keep(state: dict[str, Any]) -> None:
        if partial is not None:
            store_partial(partial, state, identity)

    def per_text(done: int, total: int) -> None:
        if report is not None:
            report(FitProgress(kind, done, total, "texts", resumed_at=resumed_at))

    matrices: dict[int, torch.Tensor]
    biases: dict[int, torch.Tensor] = {}
    extra: dict[str, Any] = {}
    if kind == "shortcut":
        matrices, biases, rows = fit_shortcut(
            model,
            sequences,
            ridge=float(opts["ridge"]),
            skip_first=int(opts["skip_first"]),
            progress=per_text,
        )
        extra["positions"] = rows
    elif kind == "jacobian":
        fitted = fit_jacobian(
            model,
            adapter,
            sequences,
            skip_first=int(opts["skip_first"]),
            dim_batch=int(opts["dim_batch"]),
            progress=per_text,
            checkpoint=keep if partial is not None else None,
            resume=resume,
        )
        matrices = fitted.matrices
        extra["texts_used"] = fitted.texts
        extra["split_half_rel_error"] = fitted.split_half_rel_error
    else:

        def per_step(step: int, steps: int, loss: float) -> None:
            if report is not None:
                report(FitProgress(kind, step, steps, "steps", loss, resumed_at))

        matrices, biases, rows, losses = fit_tuned(
            adapter,
            model,
            sequences,
            steps=int(opts["steps"]),
            batch_rows=int(opts["batch_rows"]),
            lr=float(opts["lr"]),
            momentum=float(opts["momentum"]),
            weight_decay=float(opts["weight_decay"]),
            clip=float(opts["clip"]),
            seed=int(opts["seed"]),
            skip_first=int(opts["skip_first"]),
            progress=per_step,
            checkpoint=keep if partial is not None else None,
            checkpoint_every=checkpoint_every,
            resume=resume,
        )
        extra.update(positions=rows, final_kl=losses[-1] if losses else None)
    if resumed_at:
        extra["resumed_at"] = resumed_at
    settings = {
        **opts,
        "corpus": corpus,
        "corpus_sha256": digest,
        "texts": len(sequences),
        "max_length": max_length,
        "seconds": round(time.perf_counter() - started, 2),
        "model": str(getattr(getattr(model, "config", None), "name_or_path", "")),
        **extra,
    }
    lens = Lens(
        cast(LensKind, kind),
        n_blocks=n,
        width=d,
        matrices=matrices,
        biases=biases,
        fingerprint=fingerprint,
        settings=settings,
    )
    if cache and where is not None and store_lens(lens, where) is not None and partial is not None:
        drop_partial(partial)
    return lens


def resolve_lens(
    spec: object, model: nn.Module, tokenizer: PreTrainedTokenizerBase | None = None
) -> Lens:
    """The lens a ``lens=`` argument names, for ``model``.

    ``None`` or ``"logit"``: the raw logit lens; a :class:`Lens`: checked against the model
    and returned; ``"shortcut"``, ``"tuned"``, ``"jacobian"``: fitted with the defaults on
    first use and cached (see :func:`fit_lens`); a path: a lens file or folder, loaded
    (:func:`~iglens_viz.lenses.io.load_lens`) and checked.
    """
    from .io import load_lens

    if spec is None or spec == "logit":
        return LOGIT
    if isinstance(spec, Lens):
        _, n, d = model_shape(model)
        spec.check(model, n, d)
        return spec
    if isinstance(spec, str) and spec in FITTED_KINDS:
        return fit_lens(model, tokenizer, spec)
    if isinstance(spec, (str, os.PathLike)):
        path = Path(spec).expanduser()
        if path.exists():
            return load_lens(path, model)
        raise InvalidRequestError(
            f"lens={str(spec)!r}: choose one of {', '.join(LENS_KINDS)}, a Lens, or the path "
            f"of a lens file (none at {path})"
        )
    raise InvalidRequestError(
        f"lens must be one of {', '.join(LENS_KINDS)}, a Lens or a path, not {type(spec).__name__}"
    )
