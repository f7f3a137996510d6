"""Scoring the study: do IG-Lens onsets predict the block whose ablation hurts most?

Pure numpy/pandas, no model. The input is the study *table*, one row per (prompt, position,
segment), where segment j covers block j+1 (k segments = k blocks); see :data:`TABLE_COLUMNS`.
For every token (a (prompt, position) pair) and every ablation mode (a ``drop_<mode>``
column: the fall of the model's own target probability when that block is ablated; positive
means the block helps), each *method* names one segment, and optionally scores every segment:

========================== ==================================================== ===========
method                     predicted segment                                    scores
========================== ==================================================== ===========
``ig_lens``                argmax of the signed IG-Lens contribution (the onset) contribution
``logit_lens_first_top1``  first segment after which the target is the logit     none
                           lens's top-1 (``top1_end``); -1 (a miss) if never
``logit_jump``             argmax of the lens-logit increase                    the increase
                           ``lens_logit_end − lens_logit_start``
``frozen_norm``            argmax of ``|Δ frozen_prob|`` (lens probability with  signed Δ
                           the final norm's scale frozen: a linearised reading)
``random``                 a uniformly random segment (seeded)                  a random
                                                                                permutation
``shuffled``               argmax of the contributions shuffled within the      the shuffled
                           token (seeded)                                       values
``block_<L>``, L = 1..k    the constant L−1 (always name block L)               none
========================== ==================================================== ===========

Ties go to the lowest index, as :func:`numpy.argmax` (and
:func:`iglens_viz.core.result.onset_segments`, the onset rule every view uses).

Why these metrics, and why the baselines. The former validation asked whether the onset's
drop beats the median drop of the low-contribution half: a question that a constant block
answers better than IG-Lens does. The metrics here ask the sharp question instead:

- ``agreement``: the predicted segment *is* the one whose ablation hurts most
  (``predicted == argmax(drop)``);
- ``hit_at_3``: the predicted segment is among the three largest drops;
- ``rho``: Spearman rank correlation over blocks between the method's scores and the drops.

And every metric is computed, the same way, for trivial predictors (every constant block, a
random block, contributions shuffled within the token) beside IG-Lens and the other methods,
so the protocol can fail: if naming block 1 always agrees better than the onset, the summary
says so. Tokens whose onset is the last block are reported separately (``onset_last``): for
them the zero-ablation drop equals the contribution by construction (nothing after the last
block can compensate), which would flatter IG-Lens. Intervals are percentile bootstrap
intervals over *prompts* (tokens of one prompt are not independent): :func:`summarize`,
:func:`bootstrap_interval`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from iglens_viz.core.result import onset_segments
from iglens_viz.core.stats import argmax_rows as _argmax_rows
from iglens_viz.core.stats import spearman_rows
from iglens_viz.core.trajectory import NONMONOTONE_THRESHOLD, is_monotone
from iglens_viz.errors import InvalidRequestError

from .bootstrap import bootstrap_interval, bootstrap_means, check_level
from .schemas import (
    CLUSTER_COLUMN,
    DIFFERENCE_COLUMNS,
    SCORE_COLUMNS,
    SUMMARY_COLUMNS,
    TABLE_COLUMNS,
)

if TYPE_CHECKING:
    from pandas import DataFrame

__all__ = [
    "CLASSES",
    "CLUSTER_COLUMN",
    "CONSTANT_PREFIX",
    "DIFFERENCE_COLUMNS",
    "DROP_PREFIX",
    "METRICS",
    "PREDICTORS",
    "Predictor",
    "SCORE_COLUMNS",
    "SUMMARY_COLUMNS",
    "TABLE_COLUMNS",
    "TokenClass",
    "best_constant",
    "bootstrap_interval",
    "constant_name",
    "headline",
    "method_names",
    "paired_differences",
    "predict",
    "score",
    "spearman_rows",
    "summarize",
]

CONSTANT_PREFIX = "block_"
"""Prefix of the constant predictors: ``block_<L>`` always names block L (segment L−1)."""

DROP_PREFIX = "drop_"
"""Prefix of the ablation-drop columns of the table: ``drop_<mode>``."""

METRICS = ("agreement", "hit_at_3", "rho")
"""The per-token metrics, in the order of the summary's columns."""

TokenClass = Literal["all", "monotone", "non_monotone", "onset_last", "onset_not_last"]
"""A token class of the summary; see :data:`CLASSES`."""
CLASSES: tuple[TokenClass, ...] = get_args(TokenClass)
"""Token classes of the summary: every token; tokens whose trajectory is (non-)monotone
(:func:`iglens_viz.core.trajectory.is_monotone`); tokens whose IG-Lens onset is (not) the last
block."""

_TOKEN = ("prompt", "position")

Arrays = Mapping[str, np.ndarray]
Prediction = tuple[np.ndarray, "np.ndarray | None"]


# --------------------------------------------------------------------------- predictors


def _ig_lens(a: Arrays, rng: np.random.Generator) -> Prediction:
    c = a["contribution"]
    return onset_segments(c), c


def _first_top1(a: Arrays, rng: np.random.Generator) -> Prediction:
    top1 = np.asarray(a["top1_end"], dtype=bool)
    first = np.argmax(top1, axis=1)
    return np.where(top1.any(axis=1), first, -1).astype(np.int64), None


def _logit_jump(a: Arrays, rng: np.random.Generator) -> Prediction:
    jump = a["lens_logit_end"] - a["lens_logit_start"]
    return _argmax_rows(jump), jump


def _frozen_norm(a: Arrays, rng: np.random.Generator) -> Prediction:
    delta = a["frozen_prob_end"] - a["frozen_prob_start"]
    return _argmax_rows(np.abs(delta)), delta


def _random(a: Arrays, rng: np.random.Generator) -> Prediction:
    n, k = a["contribution"].shape
    perm = rng.permuted(np.broadcast_to(np.arange(k, dtype=np.float64), (n, k)), axis=1)
    return _argmax_rows(perm), perm


def _shuffled(a: Arrays, rng: np.random.Generator) -> Prediction:
    shuffled = rng.permuted(np.asarray(a["contribution"], dtype=np.float64), axis=1)
    return _argmax_rows(shuffled), shuffled


@dataclass(frozen=True)
class Predictor:
    """One method of the study: a rule naming a segment per token, and scores per segment.

    ``fn(arrays, rng)`` takes ``arrays``, a mapping from table column names (``columns``) to
    ``(N, k)`` arrays (N tokens, their k segments in order) and a seeded
    :class:`numpy.random.Generator`; it returns ``(predicted, scores)``: ``predicted`` ``(N,)``
    int segments (-1 = no prediction, a miss) and ``scores`` ``(N, k)`` (for the rank
    correlation) or None (then ρ is NaN).
    """

    name: str
    """The method's name (the ``method`` column of the scores)."""
    columns: tuple[str, ...]
    """The table columns the rule reads."""
    fn: Callable[[Arrays, np.random.Generator], Prediction]
    """The rule (see the class docstring)."""
    description: str
    """One line for reports."""
    random: bool = False
    """Whether the rule draws from the generator (its results depend on the seed)."""


PREDICTORS: dict[str, Predictor] = {
    p.name: p
    for p in (
        Predictor(
            "ig_lens",
            ("contribution",),
            _ig_lens,
            "IG-Lens onset: the segment with the largest signed contribution",
        ),
        Predictor(
            "logit_lens_first_top1",
            ("top1_end",),
            _first_top1,
            "logit lens: the first block after which the target is top-1",
        ),
        Predictor(
            "logit_jump",
            ("lens_logit_start", "lens_logit_end"),
            _logit_jump,
            "logit lens: the largest increase of the target's lens logit",
        ),
        Predictor(
            "frozen_norm",
            ("frozen_prob_start", "frozen_prob_end"),
            _frozen_norm,
            "linearised: the largest |Δ lens probability| with the final norm frozen",
        ),
        Predictor(
            "random",
            ("contribution",),
            _random,
            "a uniformly random block (scores: a random permutation)",
            random=True,
        ),
        Predictor(
            "shuffled",
            ("contribution",),
            _shuffled,
            "IG-Lens contributions shuffled within the token",
            random=True,
        ),
    )
}
"""The non-constant methods, by name, in report order. The constants ``block_<L>`` (one per
block, L = 1..k) depend on k and are made by :func:`method_names` / :func:`predict`."""


def constant_name(block: int) -> str:
    """The name of the constant predictor that always names ``block`` (1-based)."""
    return f"{CONSTANT_PREFIX}{int(block)}"


def _constant_block(name: str) -> int | None:
    if not name.startswith(CONSTANT_PREFIX):
        return None
    tail = name[len(CONSTANT_PREFIX) :]
    return int(tail) if tail.isdigit() else None


def method_names(k: int) -> list[str]:
    """Every method for k segments: :data:`PREDICTORS` then ``block_1`` … ``block_<k>``."""
    return list(PREDICTORS) + [constant_name(b) for b in range(1, int(k) + 1)]


def _rng(seed: int, method: str) -> np.random.Generator:
    """The generator of one random method: independent streams per method, so each
    method's draws depend only on the seed and the tokens, not on which others ran."""
    index = list(PREDICTORS).index(method) if method in PREDICTORS else 0
    return np.random.default_rng([int(seed), index])


def predict(
    method: str, arrays: Arrays, seed: int = 0
) -> tuple[np.ndarray | int, np.ndarray | None]:
    """Run one method on tokens given as arrays over their segments.

    Parameters
    ----------
    method:
        A name of :data:`PREDICTORS` or ``block_<L>``.
    arrays:
        Column name → ``(N, k)`` (or ``(k,)`` for one token) values, rows in segment order;
        the method's :attr:`Predictor.columns` must be present.
    seed:
        Seed of the random methods (``random``, ``shuffled``): the same seed and tokens give
        the same draws.

    Returns
    -------
    ``(predicted, scores)``: ``(N,)`` int segments (-1: no prediction, which every metric
    counts as a miss) and ``(N, k)`` float scores or None (``(k,)``-shaped input gives a scalar
    prediction and ``(k,)`` scores).
    """
    single = all(np.ndim(v) == 1 for v in arrays.values())
    predicted, scores = _predict_rows(method, arrays, seed)
    if single:
        return int(predicted[0]), (None if scores is None else scores[0])
    return predicted, scores


def _predict_rows(method: str, arrays: Arrays, seed: int) -> Prediction:
    """:func:`predict` of ``(N, k)`` (or ``(k,)``: one row) arrays: ``(N,)`` predictions."""
    a = {name: np.atleast_2d(np.asarray(v)) for name, v in arrays.items()}
    if not a:
        raise InvalidRequestError("predict needs the token's arrays")
    n, k = next(iter(a.values())).shape
    block = _constant_block(method)
    if block is not None:
        if not 1 <= block <= k:
            raise InvalidRequestError(f"{method}: there are only {k} blocks")
        predicted, scores = np.full(n, block - 1, dtype=np.int64), None
    elif method in PREDICTORS:
        p = PREDICTORS[method]
        missing = [c for c in p.columns if c not in a]
        if missing:
            raise InvalidRequestError(f"method {method!r} needs the columns {missing}")
        cast = {
            c: (
                np.asarray(a[c], dtype=bool)
                if c == "top1_end"
                else np.asarray(a[c], dtype=np.float64)
            )
            for c in p.columns
        }
        predicted, scores = p.fn(cast, _rng(seed, method))
    else:
        raise InvalidRequestError(
            f"unknown method {method!r}: use one of {list(PREDICTORS)} or {CONSTANT_PREFIX}<L>"
        )
    return predicted, scores


# --------------------------------------------------------------------------- metrics


def _token_metrics(
    predicted: np.ndarray, scores: np.ndarray | None, drops: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(agreement, hit_at_3, rho)`` per token; see :func:`score`."""
    finite = np.isfinite(drops)
    # descending drops, NaN last, ties in index order: order[:, 0] is np.argmax's answer
    order = np.argsort(np.where(finite, -drops, np.inf), axis=1, kind="stable")
    top = order[:, :3]
    top_ok = np.take_along_axis(finite, top, axis=1)
    hits = (top == predicted[:, None]) & top_ok & (predicted[:, None] >= 0)
    agreement = hits[:, 0]
    hit3 = hits.any(axis=1)
    rho = np.full(len(predicted), np.nan) if scores is None else spearman_rows(scores, drops)
    return agreement, hit3, rho


# --------------------------------------------------------------------------- score


def _modes(table: DataFrame, modes: str | Iterable[str] | None) -> list[str]:
    present = [
        c[len(DROP_PREFIX) :]
        for c in table.columns
        if isinstance(c, str) and c.startswith(DROP_PREFIX)
    ]
    if modes is None:
        if not present:
            raise InvalidRequestError("the table has no drop_<mode> column to score against")
        return present
    modes = [modes] if isinstance(modes, str) else list(modes)
    out = []
    for m in modes:
        m = m[len(DROP_PREFIX) :] if m.startswith(DROP_PREFIX) else m
        if m not in present:
            raise InvalidRequestError(
                f"no column {DROP_PREFIX}{m} in the table "
                f"(present: {[DROP_PREFIX + p for p in present]})"
            )
        out.append(m)
    return out


def _token_arrays(
    table: DataFrame, columns: Iterable[str]
) -> tuple[DataFrame, int, dict[str, np.ndarray]]:
    """Sort the table by token and segment, check every token has segments 0..k−1, and
    reshape the requested columns to ``(N, k)``. Returns (tokens frame, k, arrays)."""
    t = table.sort_values([*_TOKEN, "segment"], kind="stable")
    seg = t["segment"].to_numpy(dtype=np.int64)
    if not len(t):
        raise InvalidRequestError("the table is empty")
    k = int(seg.max()) + 1
    if k < 2:
        raise InvalidRequestError("the study needs at least two segments (blocks) to compare")
    key = t[list(_TOKEN)].to_numpy(dtype=np.int64)
    complete = len(t) % k == 0
    if complete:
        n = len(t) // k
        complete = np.array_equal(
            seg.reshape(n, k), np.broadcast_to(np.arange(k), (n, k))
        ) and bool((key.reshape(n, k, 2) == key.reshape(n, k, 2)[:, :1]).all())
    if not complete:
        raise InvalidRequestError(
            f"every (prompt, position) needs exactly one row per segment 0..{k - 1}"
        )
    tokens = t.iloc[::k][list(_TOKEN)].reset_index(drop=True)
    firsts = t.iloc[::k]
    clusters = firsts[CLUSTER_COLUMN] if CLUSTER_COLUMN in t.columns else firsts["prompt"]
    tokens[CLUSTER_COLUMN] = clusters.astype(str).to_numpy()
    arrays = {}
    for c in columns:
        v = t[c].to_numpy()
        if c == "top1_end":
            import pandas as pd

            v = np.where(pd.isna(v), False, v).astype(bool)
        else:
            v = v.astype(np.float64)
        arrays[c] = v.reshape(n, k)
    return tokens, k, arrays


def score(
    table: DataFrame,
    modes: str | Iterable[str] | None = None,
    seed: int = 0,
    *,
    methods: Iterable[str] | None = None,
    nonmonotone_threshold: float = NONMONOTONE_THRESHOLD,
) -> DataFrame:
    """Score every method on every token against every ablation mode's drops.

    For each token (a (prompt, position) with all its k segments), each method names a
    segment (see the module docstring and :data:`PREDICTORS`; ``block_<L>`` for every
    block) and is scored against the drops ``d`` of the mode (``drop_<mode>``, ``(k,)``):

    - ``agreement``: the predicted segment is ``argmax(d)`` — the block whose ablation hurts
      the prediction most (ties: the lowest index, as :func:`numpy.argmax`). This is the sharp
      question; the old "beats the median of the low half" was answered better by constants.
    - ``hit_at_3``: the predicted segment is among the three largest drops (same ordering,
      so ``agreement`` implies ``hit_at_3``).
    - ``rho``: Spearman rank correlation over the blocks between the method's scores and
      ``d`` (NaN for methods without scores, e.g. constants and first-top-1, or where either
      side is constant).

    A prediction of -1 (``logit_lens_first_top1`` when the target never becomes top-1)
    counts as a miss. NaN drops are never the largest and are left out of ρ; tokens whose
    drops are all NaN for a mode are skipped for that mode.

    Token classes, the same for every method: ``monotone`` is
    :func:`iglens_viz.core.trajectory.is_monotone` of the token's contributions with
    Δp = their sum; ``onset_last`` marks tokens whose IG-Lens onset is the last block, where
    the zero-ablation drop equals the contribution by construction (reported apart).

    Parameters
    ----------
    table:
        The study table (see :data:`TABLE_COLUMNS`), a ``pandas.DataFrame``.
    modes:
        Ablation modes to score against, as ``"zero"`` or ``"drop_zero"``; None: every
        ``drop_*`` column present.
    seed:
        Seed of the random methods. Their draws are made once over all tokens of the table
        (sorted by prompt, position), so the same seed and table give the same draws, and a
        token's random prediction is the same under every mode.
    methods:
        Names to score (default: :func:`method_names` of k, i.e. every method).
    nonmonotone_threshold:
        Threshold of :func:`~iglens_viz.core.trajectory.is_monotone`.

    Returns
    -------
    ``pandas.DataFrame`` with :data:`SCORE_COLUMNS`, one row per (mode, prompt, position,
    method): ``mode`` (without the ``drop_`` prefix), ``prompt``, ``position``, ``method``,
    ``predicted`` (segment; -1 none), ``agreement`` (bool), ``hit_at_3`` (bool), ``rho``
    (float), ``monotone`` (bool), ``onset_last`` (bool), ``cluster`` (str: the table's
    :data:`CLUSTER_COLUMN`, or the prompt when the table has none).
    """
    import pandas as pd

    modes = _modes(table, modes)
    base = ["prompt", "position", "segment", "contribution"]
    missing = [c for c in base if c not in table.columns]
    if missing:
        raise InvalidRequestError(f"the table lacks the columns {missing}")
    k_guess = int(pd.to_numeric(table["segment"]).max()) + 1 if len(table) else 0
    methods = method_names(k_guess) if methods is None else list(methods)
    needed = {"contribution"}
    for m in methods:
        if m in PREDICTORS:
            needed.update(PREDICTORS[m].columns)
    missing = sorted(c for c in needed if c not in table.columns)
    if missing:
        users = [
            m for m in methods if m in PREDICTORS and set(PREDICTORS[m].columns) & set(missing)
        ]
        raise InvalidRequestError(
            f"the table lacks the columns {missing}, needed by the "
            f"methods {users} (pass methods=... to score fewer)"
        )
    drop_cols = [DROP_PREFIX + m for m in modes]
    tokens, k, arrays = _token_arrays(table, sorted(needed) + drop_cols)

    contributions = arrays["contribution"]
    delta_p = np.nansum(contributions, axis=1)
    monotone = np.asarray(is_monotone(contributions, delta_p, nonmonotone_threshold), dtype=bool)
    onset_last = onset_segments(contributions) == k - 1
    predictions = {m: _predict_rows(m, arrays, seed) for m in methods}

    cluster = tokens[CLUSTER_COLUMN].to_numpy(dtype=object)
    frames = []
    for mode in modes:
        drops = arrays[DROP_PREFIX + mode]
        keep = np.isfinite(drops).any(axis=1)
        d = drops[keep]
        prompt = tokens["prompt"].to_numpy(dtype=np.int64)[keep]
        position = tokens["position"].to_numpy(dtype=np.int64)[keep]
        for m in methods:
            predicted, scores = predictions[m]
            predicted = predicted[keep]
            scores = None if scores is None else scores[keep]
            agreement, hit3, rho = _token_metrics(predicted, scores, d)
            frames.append(
                pd.DataFrame(
                    {
                        "mode": mode,
                        "prompt": prompt,
                        "position": position,
                        "method": m,
                        "predicted": predicted.astype(np.int64),
                        "agreement": agreement,
                        "hit_at_3": hit3,
                        "rho": rho.astype(np.float64),
                        "monotone": monotone[keep],
                        "onset_last": onset_last[keep],
                        "cluster": cluster[keep],
                    }
                )
            )
    if not frames:
        return pd.DataFrame({c: [] for c in SCORE_COLUMNS})
    out = pd.concat(frames, ignore_index=True)
    return out.astype(
        {
            "prompt": "int64",
            "position": "int64",
            "predicted": "int64",
            "agreement": "bool",
            "hit_at_3": "bool",
            "rho": "float64",
            "monotone": "bool",
            "onset_last": "bool",
        }
    )[list(SCORE_COLUMNS)]


# --------------------------------------------------------------------------- summary


def _class_masks(tokens: DataFrame) -> dict[TokenClass, np.ndarray]:
    mono = tokens["monotone"].to_numpy(dtype=bool)
    last = tokens["onset_last"].to_numpy(dtype=bool)
    return {
        "all": np.ones(len(tokens), dtype=bool),
        "monotone": mono,
        "non_monotone": ~mono,
        "onset_last": last,
        "onset_not_last": ~last,
    }


def _check_scores(scores: DataFrame) -> None:
    missing = [c for c in SCORE_COLUMNS if c not in scores.columns]
    if missing:
        raise InvalidRequestError(f"scores lack the columns {missing}: pass score()'s output")


def _wide(s: DataFrame, methods: list[str]) -> tuple[DataFrame, dict[str, np.ndarray]]:
    """One mode's scores as its tokens (sorted, with their classes and cluster) and, per
    metric, a ``(tokens, methods)`` matrix in the order of ``methods``."""
    import pandas as pd

    tokens = (
        s.drop_duplicates(list(_TOKEN))[[*_TOKEN, "monotone", "onset_last", CLUSTER_COLUMN]]
        .sort_values(list(_TOKEN))
        .reset_index(drop=True)
    )
    index = pd.MultiIndex.from_frame(tokens[list(_TOKEN)])
    wide = {}
    for metric in METRICS:
        w = s.pivot(index=list(_TOKEN), columns="method", values=metric)
        wide[metric] = w.reindex(index=index, columns=methods).to_numpy(dtype=np.float64)
    return tokens, wide


def _means(
    values: np.ndarray, clusters: np.ndarray, n_boot: int, seed: int, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nan-means of the columns of ``values`` and their cluster-bootstrap bounds, every
    column from the same resamples (``seed``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mean of an all-NaN column
        point = np.nanmean(values, axis=0) if len(values) else np.full(values.shape[1], np.nan)
    lo, hi = bootstrap_means(
        values, clusters, int(n_boot), np.random.default_rng(seed), level, center=point
    )
    return point, lo, hi


def summarize(
    scores: DataFrame, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> DataFrame:
    """Per (mode, method, token class): mean metrics with cluster-bootstrap intervals.

    Parameters
    ----------
    scores:
        The output of :func:`score`.
    n_boot:
        Bootstrap replicates (0: no intervals, all NaN).
    seed:
        Seed of the resampling. Each (mode, class) draws its replicates from this seed, and
        all methods share them (paired: a difference between methods is not blurred by
        different resamples).
    level:
        Coverage of the intervals.

    Returns
    -------
    ``pandas.DataFrame`` with :data:`SUMMARY_COLUMNS`, one row per (mode, method,
    ``token_class``), classes :data:`CLASSES`: ``all``, ``monotone``, ``non_monotone``,
    ``onset_last`` (the IG-Lens onset is the last block: drop = contribution by construction
    under zero ablation, so reported apart) and ``onset_not_last``. ``agreement`` and
    ``hit_at_3`` are the fractions of tokens, ``rho`` the mean over tokens with a defined ρ
    (``n_rho`` of them); ``_lo``/``_hi`` are percentile bootstrap bounds over *clusters*
    (:data:`CLUSTER_COLUMN`: a capital's country, else the prompt; :func:`bootstrap_interval`;
    NaN with fewer than two clusters). ``n_tokens``, ``n_prompts`` and ``n_clusters`` count
    the class. ``best_constant`` marks, per (mode, class), the
    ``block_<L>`` with the highest agreement (ties: the lowest L), so a report can show the
    best constant beside IG-Lens (:func:`best_constant`, :func:`headline`); empty classes
    keep their rows, with NaN metrics.
    """
    import pandas as pd

    level = check_level(level)
    _check_scores(scores)
    rows = []
    for mode in pd.unique(scores["mode"]):
        s = scores[scores["mode"] == mode]
        methods = list(pd.unique(s["method"]))
        tokens, wide = _wide(s, methods)
        # (N, M * 3): every metric of every method, resampled together
        values = np.concatenate([wide[metric] for metric in METRICS], axis=1)
        prompts = tokens["prompt"].to_numpy(dtype=np.int64)
        clusters = pd.factorize(tokens[CLUSTER_COLUMN])[0]
        for cls, mask in _class_masks(tokens).items():
            point, lo, hi = _means(values[mask], clusters[mask], n_boot, seed, level)
            n_tokens = int(mask.sum())
            n_prompts = int(len(np.unique(prompts[mask])))
            n_clusters = int(len(np.unique(clusters[mask])))
            n_rho = np.isfinite(wide["rho"][mask]).sum(axis=0)
            mm = len(methods)
            for j, method in enumerate(methods):
                row = {"mode": mode, "method": method, "token_class": cls}
                for i, metric in enumerate(METRICS):
                    c = i * mm + j
                    row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"] = point[c], lo[c], hi[c]
                row.update(
                    n_tokens=n_tokens,
                    n_prompts=n_prompts,
                    n_clusters=n_clusters,
                    n_rho=int(n_rho[j]),
                )
                rows.append(row)
    out = pd.DataFrame(rows, columns=[c for c in SUMMARY_COLUMNS if c != "best_constant"])
    out["best_constant"] = False
    constants = out["method"].map(lambda m: _constant_block(m) is not None)
    if constants.any():
        c = out[constants & out["agreement"].notna()].copy()
        if len(c):
            c["_block"] = c["method"].map(_constant_block)
            c = c.sort_values(["agreement", "_block"], ascending=[False, True], kind="stable")
            best = c.drop_duplicates(["mode", "token_class"]).index
            out.loc[best, "best_constant"] = True
    return out.astype(
        {
            "n_tokens": "int64",
            "n_prompts": "int64",
            "n_clusters": "int64",
            "n_rho": "int64",
            "best_constant": "bool",
        }
    )[list(SUMMARY_COLUMNS)]


def paired_differences(
    scores: DataFrame,
    against: str = "ig_lens",
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> DataFrame:
    """Per (mode, token class, method, metric): how much better ``against`` does than the
    method on the same tokens, with a cluster-bootstrap interval.

    ``difference`` is the mean over tokens of ``metric(against) − metric(method)`` (for
    ``rho``, over the tokens where both are defined), so a positive value favours
    ``against``; ``lo``/``hi`` are percentile bounds from resampling clusters
    (:data:`CLUSTER_COLUMN`), every method's differences drawn from the same resamples.
    This, not whether two marginal intervals overlap, is how the report compares methods: two
    methods scored on the same tokens are correlated, and their marginal intervals can
    overlap while the paired difference excludes 0 (or the reverse).

    Parameters
    ----------
    scores:
        The output of :func:`score`; it must hold ``against``.
    against:
        The method every other one is compared with (default IG-Lens's onset).
    n_boot, seed, level:
        As :func:`summarize` (the same seed draws the same resamples there).

    Returns
    -------
    ``pandas.DataFrame`` with :data:`DIFFERENCE_COLUMNS`; ``against`` itself is left out.
    """
    import pandas as pd

    level = check_level(level)
    _check_scores(scores)
    if against not in set(scores["method"]):
        raise InvalidRequestError(
            f"no method {against!r} in the scores to compare against "
            f"(present: {sorted(pd.unique(scores['method']))[:8]} ...)"
        )
    rows = []
    for mode in pd.unique(scores["mode"]):
        s = scores[scores["mode"] == mode]
        methods = [m for m in pd.unique(s["method"]) if m != against]
        tokens, wide = _wide(s, [against, *methods])
        # (N, M * 3): against − method for every metric, resampled together
        diffs = np.concatenate([wide[m][:, :1] - wide[m][:, 1:] for m in METRICS], axis=1)
        clusters = pd.factorize(tokens[CLUSTER_COLUMN])[0]
        for cls, mask in _class_masks(tokens).items():
            point, lo, hi = _means(diffs[mask], clusters[mask], n_boot, seed, level)
            n_tokens = int(mask.sum())
            n_clusters = int(len(np.unique(clusters[mask])))
            for i, metric in enumerate(METRICS):
                for j, method in enumerate(methods):
                    c = i * len(methods) + j
                    rows.append(
                        (mode, cls, method, metric, point[c], lo[c], hi[c], n_tokens, n_clusters)
                    )
    return pd.DataFrame(rows, columns=list(DIFFERENCE_COLUMNS))


def best_constant(summary: DataFrame) -> DataFrame:
    """The best constant predictor per (mode, token class): the ``block_<L>`` rows of
    :func:`summarize`'s output flagged ``best_constant`` (highest agreement; ties: lowest L),
    with the same columns. The bar any method must clear: a block named without looking at
    the token. It is chosen on the same tokens it is scored on, so its agreement is
    optimistic (a selection over k constants): a demanding bar, not an unbiased estimate."""
    return summary[summary["best_constant"]].reset_index(drop=True)


def headline(summary: DataFrame) -> DataFrame:
    """The rows a report shows: every non-constant method, then the first block, the last
    block and the best constant, per (mode, token class), instead of all k constants.

    Returns the summary's rows with a ``label`` column prepended: the method name, or
    ``first block (block_1)``, ``last block (block_<k>)``, ``best constant (block_<L>)``.
    """
    import pandas as pd

    blocks = summary["method"].map(_constant_block)
    is_const = blocks.notna()
    parts = []
    for _, g in summary.groupby(["mode", "token_class"], sort=False):
        gb = blocks.loc[g.index]
        named = g[~is_const.loc[g.index]].copy()
        named.insert(0, "label", named["method"])
        parts.append(named)
        if gb.notna().any():
            first = g.loc[[gb.idxmin()]].copy()
            first.insert(0, "label", f"first block ({first['method'].iloc[0]})")
            last = g.loc[[gb.idxmax()]].copy()
            last.insert(0, "label", f"last block ({last['method'].iloc[0]})")
            parts += [first, last]
            best = g[g["best_constant"]].copy()
            if len(best):
                best.insert(0, "label", f"best constant ({best['method'].iloc[0]})")
                parts.append(best)
    if not parts:
        return summary.iloc[:0].assign(label=pd.Series(dtype=object))
    return pd.concat(parts, ignore_index=True)
