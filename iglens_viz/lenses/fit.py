"""``fit_lens``: fit a shortcut, tuned or Jacobian lens on a model; ``resolve_lens``: what a
``lens=`` argument names, as a :class:`~iglens_viz.core.coordinates.Lens` for the model.

Progress and stopping: a fit reports every phase — sampling its corpus (per generated
token, when the corpus is neither shipped nor cached), reading the corpus's states (per
batch of texts), and the fit proper (per step of the tuned lens, per backward pass of the
Jacobian lens) — as :class:`FitProgress` reports, with the phase's elapsed time and so an
estimate of what is left. The report callback is where a fit stops: whatever it raises
(the widget's Cancel, a KeyboardInterrupt) ends the fit within one step, keeping the
tuned lens's state at that step as a checkpoint (the Jacobian lens's after its last whole
text); the exception goes on, carrying that checkpoint (:func:`kept_checkpoint`). A fit
started through ``lens=`` (:func:`resolve_lens`) reports to the callback of the
:func:`fit_progress` block around it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import torch
from torch import nn

from ..adapters import adapter_for
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
from .jacobian import JLENS_SKIP_FIRST, backward_passes, fit_jacobian, passes_done
from .shipped import shipped_corpus
from .shortcut import fit_shortcut
from .states import DEFAULT_MAX_LENGTH, encode_texts, model_shape
from .tuned import TUNED_DEFAULTS, fit_tuned

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "FITTED_KINDS",
    "FitCheckpoint",
    "FitProgress",
    "ProgressPrinter",
    "cached_fitted_kinds",
    "cached_fitted_lens",
    "describe_progress",
    "fit_lens",
    "fit_progress",
    "kept_checkpoint",
    "model_corpus",
    "resolve_lens",
]

FITTED_KINDS = ("shortcut", "tuned", "jacobian")
"""The lens kinds :func:`fit_lens` fits."""

JACOBIAN_DEFAULT_TEXTS = 8
"""Texts of the default corpus the Jacobian lens averages over (each costs d backward
passes through the model; pass ``texts=`` for more)."""


Report = Callable[["FitProgress"], None]
"""What receives a fit's progress reports (and may raise to stop it)."""

PHASES = {
    "corpus": "sampling its fit corpus",
    "states": "reading the corpus's states",
    "fit": "fitting",
}
"""A fit's phases, in order, and how a progress line names each."""


class FitProgress(NamedTuple):
    """One progress report of a fit."""

    kind: str
    done: int
    total: int
    unit: str
    """``"tokens"`` (each of the corpus's texts is that long so far), ``"texts"``,
    ``"steps"`` or ``"backward passes"``."""
    loss: float | None = None
    """The tuned lens's mean KL over depths at this step."""
    resumed_at: int = 0
    """Where a checkpoint resumed this phase (in its ``unit``: the tuned lens's step, the
    Jacobian lens's backward passes); 0 for a fit from the start."""
    phase: str = "fit"
    """A key of :data:`PHASES`."""
    seconds: float = 0.0
    """Seconds since the phase started (in this call)."""

    @property
    def remaining_seconds(self) -> float | None:
        """The phase's time left at the pace so far; None before its first unit."""
        ran = self.done - self.resumed_at
        if ran <= 0 or self.seconds <= 0:
            return None
        return self.seconds / ran * max(0, self.total - self.done)


class FitCheckpoint(NamedTuple):
    """The checkpoint a stopped fit left: ``done`` of ``total`` ``unit``s at ``path``."""

    kind: str
    done: int
    total: int
    unit: str
    """``"step"`` (the tuned lens) or ``"text"`` (the Jacobian lens)."""
    path: Path

    def __str__(self) -> str:
        return f"the {self.kind} lens's checkpoint at {self.unit} {self.done}/{self.total}"


_CHECKPOINT_ATTRIBUTE = "iglens_fit_checkpoint"


def kept_checkpoint(error: BaseException) -> FitCheckpoint | None:
    """The checkpoint a fit stopped by ``error`` left in the cache (a second call with the
    same model and settings resumes from it), or None when it left none."""
    found = getattr(error, _CHECKPOINT_ATTRIBUTE, None)
    return found if isinstance(found, FitCheckpoint) else None


_OBSERVER: contextvars.ContextVar[Report | None] = contextvars.ContextVar(
    "iglens_fit_progress", default=None
)


@contextlib.contextmanager
def fit_progress(report: Report) -> Iterator[None]:
    """Inside the block, a fit started without ``progress=`` in this thread or task — the
    one ``lens="tuned"`` starts on first use — sends its :class:`FitProgress` reports to
    ``report``, which may raise to stop it (see the module's text)."""
    token = _OBSERVER.set(report)
    try:
        yield
    finally:
        _OBSERVER.reset(token)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def describe_progress(report: FitProgress) -> str:
    """A report as one line of text: "the tuned lens: fitting 20/250 steps, KL 0.3182,
    about 4 min left"."""
    parts = [f"{PHASES.get(report.phase, report.phase)} {report.done}/{report.total} {report.unit}"]
    if report.loss is not None:
        parts.append(f"KL {report.loss:.4f}")
    left = report.remaining_seconds
    if left is not None and report.done < report.total:
        parts.append(f"about {_duration(left)} left")
    if report.resumed_at:
        parts.append(f"resumed after {report.resumed_at}")
    return f"the {report.kind} lens: " + ", ".join(parts)


class ProgressPrinter:
    """Prints reports on ``stream`` (stderr): on a terminal one line rewritten in place at
    most every half second, elsewhere (a log, a pipe) one line every ``every`` seconds; and
    always the first and the last report of each phase. What ``progress=True`` and the
    ``iglens`` command use."""

    def __init__(self, stream: Any = None, every: float = 10.0) -> None:
        self.stream = stream
        self.every = every
        self._open = False
        self._last = (0.0, "")

    def __call__(self, report: FitProgress) -> None:
        stream = self.stream or sys.stderr
        tty = bool(getattr(stream, "isatty", lambda: False)())
        now, phase = time.monotonic(), f"{report.kind}:{report.phase}"
        finished = report.done >= report.total
        wait = 0.5 if tty else self.every
        if not finished and phase == self._last[1] and now - self._last[0] < wait:
            return
        self._last = (now, phase)
        line = f"iglens: {describe_progress(report)}"
        if tty:
            print(f"\r{line}\x1b[K", end="\n" if finished else "", file=stream, flush=True)
            self._open = not finished
        else:
            print(line, file=stream, flush=True)

    def end_line(self) -> None:
        """End a progress line left open on a terminal (before another message)."""
        if self._open:
            print(file=self.stream or sys.stderr, flush=True)
            self._open = False


class _Phases:
    """Sends a fit's reports, timing each phase; a no-op without a callback."""

    def __init__(self, kind: str, report: Report | None) -> None:
        self.kind, self.report = kind, report

    def start(
        self, phase: str, unit: str, total: int, resumed_at: int = 0
    ) -> Callable[[int, float | None], None]:
        """Announce ``phase`` (a report at ``resumed_at``) and return its ``tick(done,
        loss)``."""
        started = time.perf_counter()

        def tick(done: int, loss: float | None = None) -> None:
            if self.report is not None:
                self.report(
                    FitProgress(
                        self.kind,
                        done,
                        total,
                        unit,
                        loss,
                        resumed_at,
                        phase,
                        time.perf_counter() - started,
                    )
                )

        tick(resumed_at)
        return tick


def model_corpus(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    split: Split,
    fingerprint: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[torch.Tensor]:
    """The default corpus ``split`` of ``model`` (:func:`~.corpus.default_corpus`): the
    shipped one for the default model (:mod:`.shipped`), else sampled once per model and
    kept in the cache. ``progress(done, total)`` follows the sampling, token by token."""
    fingerprint = fingerprint or model_fingerprint(model)
    found = shipped_corpus(fingerprint, split, tokenizer)
    if found is not None:
        return found
    name = f"{CORPUS_VERSION}-{NEW_TOKENS}-{split}"
    found = cached_corpus(fingerprint, name)
    if found is None:
        found = default_corpus(model, tokenizer, split, progress=progress)
        store_corpus(fingerprint, name, found)
    return found


def _default_corpus_key(kind: str, max_length: int) -> str:
    """The default corpus's name in a fit's cache key."""
    corpus = f"{CORPUS_VERSION}:{NEW_TOKENS}:{max_length}"
    return corpus + (f":first{JACOBIAN_DEFAULT_TEXTS}" if kind == "jacobian" else "")


def fit_key(kind: str, options: dict[str, Any], corpus: str) -> dict[str, Any]:
    """The settings that decide a fit (its cache key): ``kind``, the corpus's name, the options."""
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
    key = fit_key(kind, fit_options(kind, options), _default_corpus_key(kind, max_length))
    found = cached_lens(cache_path(kind, fingerprint, key))
    return found if found is not None and found.fingerprint == fingerprint else None


def cached_fitted_kinds(model: nn.Module, *, max_length: int = DEFAULT_MAX_LENGTH) -> list[str]:
    """The fitted kinds whose lens with the default settings is in the cache for ``model``
    (a ``stat`` each: the files are not read, so a damaged one is still listed)."""
    fingerprint = model_fingerprint(model)
    return [
        kind
        for kind in FITTED_KINDS
        if cache_path(
            kind,
            fingerprint,
            fit_key(kind, fit_options(kind, {}), _default_corpus_key(kind, max_length)),
        ).is_file()
    ]


def fit_options(kind: str, given: dict[str, Any]) -> dict[str, Any]:
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
    progress: Report | bool | None = None,
    checkpoint_every: int = 10,
    **options: Any,
) -> Lens:
    """Fit a lens of ``kind`` (``"shortcut"``, ``"tuned"`` or ``"jacobian"``) on ``model``.

    ``texts``: strings or token-id sequences (each cut to ``max_length`` tokens); default
    the model's own samples from the shipped openings (:mod:`iglens_viz.lenses.corpus`;
    shipped for the default model, :mod:`.shipped`; the Jacobian lens takes the first
    :data:`JACOBIAN_DEFAULT_TEXTS` of them). ``options`` per kind (defaults in brackets):

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
    ``progress``: a callable receiving :class:`FitProgress` reports, or True to print them
    on stderr (:class:`ProgressPrinter`); None: the callback of the :func:`fit_progress`
    block around the call, if any. Whatever the callback raises stops the fit within one
    step (see the module's text); an interrupted fit (KeyboardInterrupt included) leaves
    its latest checkpoint, named by :func:`kept_checkpoint` of the exception. The lens
    records its settings and the model's fingerprint.
    """
    if kind not in FITTED_KINDS:
        raise InvalidRequestError(
            f"lens kind {kind!r} is not fitted: choose one of {', '.join(FITTED_KINDS)} "
            f"('logit', the raw logit lens, needs no fit)"
        )
    opts = fit_options(kind, options)
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int):
        raise InvalidRequestError(f"checkpoint_every must be an integer, got {checkpoint_every!r}")
    if checkpoint_every < 1:
        raise InvalidRequestError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    report = ProgressPrinter() if progress is True else (progress or _OBSERVER.get())
    phases = _Phases(kind, report)
    _, n, d = model_shape(model)
    fingerprint = model_fingerprint(model)
    where: Path | None = None
    key: dict[str, Any] = {}
    if texts is None:
        corpus = _default_corpus_key(kind, max_length)
        key = fit_key(kind, opts, corpus)
        where = cache_path(kind, fingerprint, key)
        if cache:
            found = cached_lens(where)
            if found is not None and found.fingerprint == fingerprint:
                return found
        # a shipped or cached corpus: no report; one sampled: the corpus phase
        sampled = model_corpus(model, tokenizer, "fit", fingerprint, _Sampling(phases).tick)
        sequences = encode_texts(None, sampled, max_length=max_length)
        if kind == "jacobian":
            sequences = sequences[:JACOBIAN_DEFAULT_TEXTS]
    else:
        sequences = encode_texts(tokenizer, texts, max_length=max_length)
        corpus = "texts"
    started = time.perf_counter()
    digest = corpus_digest(sequences)
    fit = _Fit(kind, opts, sequences, phases, checkpoint_every)
    if cache and where is not None and kind != "shortcut":
        fit.resumable(
            partial_path(where), {"key": key, "fingerprint": fingerprint, "corpus_sha256": digest}
        )
    try:
        matrices, biases, extra = fit.run(model)
    except BaseException as err:
        if fit.kept is not None:
            setattr(err, _CHECKPOINT_ATTRIBUTE, fit.kept)
        raise
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
    if cache and where is not None and store_lens(lens, where) is not None and fit.partial:
        drop_partial(fit.partial)
    return lens


_Fitted = tuple[dict[int, torch.Tensor], dict[int, torch.Tensor], dict[str, Any]]
"""A fit's matrices, biases and the settings it adds."""


class _Sampling:
    """The corpus phase's reports, started by the first sampled token (a shipped or cached
    corpus reports nothing)."""

    def __init__(self, phases: _Phases) -> None:
        self.phases = phases
        self._tick: Callable[[int, float | None], None] | None = None

    def tick(self, done: int, total: int) -> None:
        if self._tick is None:
            self._tick = self.phases.start("corpus", "tokens", total)
        self._tick(done, None)


class _Fit:
    """One fit of ``kind`` on ``sequences``: its checkpoint (when resumable), its reports,
    and the fitting function of its kind."""

    def __init__(
        self,
        kind: str,
        opts: dict[str, Any],
        sequences: list[torch.Tensor],
        phases: _Phases,
        checkpoint_every: int,
    ) -> None:
        self.kind, self.opts, self.sequences, self.phases = kind, opts, sequences, phases
        self.checkpoint_every = checkpoint_every
        self.partial: Path | None = None
        self.identity: dict[str, Any] = {}
        self.resume: dict[str, Any] | None = None
        self.kept: FitCheckpoint | None = None
        """The checkpoint on disk now (the one resumed from, then each one written)."""

    def resumable(self, partial: Path, identity: dict[str, Any]) -> None:
        """Keep checkpoints at ``partial``, and resume from the one there if it matches."""
        self.partial, self.identity = partial, identity
        self.resume = read_partial(partial, identity)
        if self.resume is not None:
            self.kept = self._checkpoint(self.resume)

    def _checkpoint(self, state: dict[str, Any]) -> FitCheckpoint:
        assert self.partial is not None
        if self.kind == "tuned":
            return FitCheckpoint(
                "tuned", int(state["step"]), int(self.opts["steps"]), "step", self.partial
            )
        return FitCheckpoint(
            "jacobian", int(state["texts_done"]), len(self.sequences), "text", self.partial
        )

    def keep(self, state: dict[str, Any]) -> None:
        if self.partial is not None and store_partial(self.partial, state, self.identity):
            self.kept = self._checkpoint(state)

    def run(self, model: nn.Module) -> _Fitted:
        """``(matrices, biases, extra settings)``."""
        fitter = {"shortcut": self._shortcut, "jacobian": self._jacobian, "tuned": self._tuned}
        return fitter[self.kind](model)

    def _shortcut(self, model: nn.Module) -> _Fitted:
        tick = self.phases.start("states", "texts", len(self.sequences))
        matrices, biases, rows = fit_shortcut(
            model,
            self.sequences,
            ridge=float(self.opts["ridge"]),
            skip_first=int(self.opts["skip_first"]),
            progress=lambda done, total: tick(done, None),
        )
        return matrices, biases, {"positions": rows}

    def _jacobian(self, model: nn.Module) -> _Fitted:
        skip, dim_batch = int(self.opts["skip_first"]), int(self.opts["dim_batch"])
        per_text = backward_passes(model, dim_batch)
        texts_done = 0 if self.resume is None else int(self.resume["texts_done"])
        tick = self.phases.start(
            "fit",
            "backward passes",
            passes_done(self.sequences, len(self.sequences), skip, per_text),
            passes_done(self.sequences, texts_done, skip, per_text),
        )
        fitted = fit_jacobian(
            model,
            adapter_for(model),
            self.sequences,
            skip_first=skip,
            dim_batch=dim_batch,
            progress=lambda done, total: tick(done, None),
            checkpoint=self.keep if self.partial is not None else None,
            resume=self.resume,
        )
        extra: dict[str, Any] = {
            "texts_used": fitted.texts,
            "split_half_rel_error": fitted.split_half_rel_error,
        }
        if texts_done:
            extra["resumed_at"] = texts_done
        return fitted.matrices, {}, extra

    def _tuned(self, model: nn.Module) -> _Fitted:
        opts = self.opts
        resumed_at = 0 if self.resume is None else int(self.resume["step"])
        states = self.phases.start("states", "texts", len(self.sequences))
        steps: list[Callable[[int, float | None], None]] = []

        def per_step(step: int, total: int, loss: float) -> None:
            if not steps:
                steps.append(self.phases.start("fit", "steps", total, resumed_at))
            steps[0](step, loss)

        matrices, biases, rows, losses = fit_tuned(
            adapter_for(model),
            model,
            self.sequences,
            steps=int(opts["steps"]),
            batch_rows=int(opts["batch_rows"]),
            lr=float(opts["lr"]),
            momentum=float(opts["momentum"]),
            weight_decay=float(opts["weight_decay"]),
            clip=float(opts["clip"]),
            seed=int(opts["seed"]),
            skip_first=int(opts["skip_first"]),
            progress=per_step,
            checkpoint=self.keep if self.partial is not None else None,
            checkpoint_every=self.checkpoint_every,
            resume=self.resume,
            states_progress=lambda done, total: states(done, None),
        )
        extra: dict[str, Any] = {"positions": rows, "final_kl": losses[-1] if losses else None}
        if resumed_at:
            extra["resumed_at"] = resumed_at
        return matrices, biases, extra


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
