"""Scoring the counterfactual study: which block carries the answer-specific computation?

Pure numpy/pandas, no model. The input is the counterfactual *table*, one row per
(pair, block) with blocks 1 … n; see :data:`PAIR_TABLE_COLUMNS` and the pre-registration in
``docs/study.md`` ("Counterfactual mode: pre-registered hypotheses"), whose statistics and
decision rules this module implements. The criteria are the patching effects
(:data:`CRITERIA`: ``patch_total``, ``patch_total_all``, ``patch_direct``; larger = the block
carries more of the logit difference) and ``restore_state`` (denoising sufficiency).

Each *method* names one block per pair — its signed argmax — and scores every block:

=================== =============================================================== =========
method              named block                                                     scores
=================== =============================================================== =========
``ig_<lens>``       the onset: the largest signed IG-Lens contribution              the column
``attribution``     the largest attribution-patching estimate                       the column
``dla``             the largest frozen-norm direct logit attribution                the column
``ld_jump``         the largest logit-lens logit-difference jump                    the column
``random``          a uniformly random block (seeded)                               a random
                                                                                    permutation
``best_constant``   for naming, the one block with the most hits on the same data   see left
                    (chosen per metric and criterion: an optimistic baseline); for
                    ranking, the leave-one-country-out mean of the criterion
=================== =============================================================== =========

Ties go to the lowest block (:func:`iglens_viz.core.stats.argmax_rows`, the onset rule).
Metrics per pair and method: ``strict_<criterion>`` (the named block attains the
criterion's maximum), ``tol_<criterion>`` (its effect is ≥ max − 0.1·|max|), ``window``
(within ±2 blocks of the ``patch_total`` argmax), ``rho_<criterion>`` and
``rho_<criterion>_nolast`` (Spearman ρ over blocks, with and without the last block, where a
direct reading and the effect coincide by construction) and ``restore`` (``restore_state``
at the named block). Intervals are percentile cluster-bootstrap intervals over the clean
prompt's country (``cluster``), drawn with the same resamples for every method
(:func:`iglens_study.bootstrap.bootstrap_interval`), and every comparison is a paired
difference IG-Lens (logit lens) − method on the same pairs; the words of a comparison come
from its interval (:func:`comparison`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from iglens_viz.core.coordinates import LENS_KINDS
from iglens_viz.core.stats import argmax_rows, spearman_rows
from iglens_viz.errors import InvalidRequestError

from .bootstrap import bootstrap_interval, check_level, median_interval
from .schemas import (
    CRITERIA,
    HYPOTHESIS_COLUMNS,
    PAIR_META,
    PAIR_METRICS,
    PAIR_SCORE_COLUMNS,
    PAIR_SUMMARY_COLUMNS,
    PAIR_TABLE_COLUMNS,
)

if TYPE_CHECKING:
    from pandas import DataFrame

__all__ = [
    "CRITERIA",
    "HYPOTHESIS_COLUMNS",
    "Evidence",
    "LENSES",
    "PAIR_SCORE_COLUMNS",
    "PAIR_SUMMARY_COLUMNS",
    "PAIR_TABLE_COLUMNS",
    "PairSummary",
    "comparison",
    "h1_direct",
    "h2_total",
    "h3_sufficiency",
    "h4_lenses",
    "hypotheses",
    "method_label",
    "pair_scores",
    "pair_summary",
    "source_kind",
]

LENSES: tuple[str, ...] = LENS_KINDS
"""The lenses whose ``ig_<lens>`` column may be present, in report order (the core's kinds:
:data:`iglens_viz.core.coordinates.LENS_KINDS`)."""

IG = "ig_logit"
"""The reference method of every paired difference: IG-Lens under the logit lens."""

RANDOM = "random"
BEST_CONSTANT = "best_constant"
_COLUMN_METHODS = ("attribution", "dla", "ld_jump")

TOLERANCE = 0.1
"""A tolerance hit: the named block's effect is ≥ max − TOLERANCE·|max|."""
WINDOW = 2
"""A window hit: the named block is within ±WINDOW blocks of the ``patch_total`` argmax."""
SATURATION = 0.9
"""A pair is saturated when two or more blocks have ``patch_total`` ≥ SATURATION."""
SUFFICIENT = 0.5
"""H3's bar, and the sufficiency depth's: ``restore_state`` ≥ SUFFICIENT."""
LATE_FROM = 3
"""Agreement is also reported over the pairs whose named block is ≥ LATE_FROM."""

_LABELS = {
    "ig_logit": "IG-Lens (logit lens)",
    "ig_shortcut": "IG-Lens (shortcut lens)",
    "ig_tuned": "IG-Lens (tuned lens)",
    "ig_jacobian": "IG-Lens (Jacobian lens)",
    "attribution": "attribution patching",
    "dla": "frozen-norm DLA",
    "ld_jump": "the logit-difference jump",
    RANDOM: "a random block",
    BEST_CONSTANT: "the best constant",
}


def method_label(method: str) -> str:
    """The words a report uses for a method (``ig_logit`` → ``IG-Lens (logit lens)``)."""
    if method in _LABELS:
        return _LABELS[method]
    if method.startswith("ig_"):
        return f"IG-Lens ({method[3:]} lens)"
    return method


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class _Pairs:
    """The table reshaped: kept pairs sorted by id, ``(P, n)`` arrays per value column."""

    meta: DataFrame
    arrays: dict[str, np.ndarray]
    random: np.ndarray
    n_blocks: int
    dropped: tuple[int, ...]
    methods: tuple[str, ...]

    def subset(self, mask: np.ndarray) -> _Pairs:
        return _Pairs(
            self.meta[mask].reset_index(drop=True),
            {k: v[mask] for k, v in self.arrays.items()},
            self.random[mask],
            self.n_blocks,
            self.dropped,
            self.methods,
        )


def _prepare(table: DataFrame, seed: int) -> _Pairs:
    import pandas as pd

    missing = [c for c in PAIR_TABLE_COLUMNS if c not in table.columns]
    if missing:
        raise InvalidRequestError(f"the pair table lacks the columns {missing}")
    if not len(table):
        raise InvalidRequestError("the pair table is empty")
    t = table.sort_values(["pair", "block"], kind="stable").reset_index(drop=True)
    block = t["block"].to_numpy(dtype=np.int64)
    pair = t["pair"].to_numpy(dtype=np.int64)
    n = int(block.max())
    ok = n >= 2 and len(t) % n == 0
    if ok:
        p = len(t) // n
        ok = np.array_equal(block.reshape(p, n), np.broadcast_to(np.arange(1, n + 1), (p, n)))
        ok = ok and bool((pair.reshape(p, n) == pair.reshape(p, n)[:, :1]).all())
        ok = ok and len(np.unique(pair.reshape(p, n)[:, 0])) == p
    if not ok:
        raise InvalidRequestError(
            f"every pair needs exactly one row per block 1..{n} (and at least two blocks)"
        )
    lenses = [f"ig_{lens}" for lens in LENSES]
    lenses += sorted(
        c for c in t.columns if isinstance(c, str) and c.startswith("ig_") and c not in lenses
    )
    present = [
        c
        for c in (*lenses, *_COLUMN_METHODS)
        if c in t.columns and pd.to_numeric(t[c], errors="coerce").notna().any()
    ]
    values = [*CRITERIA, "restore_state", *present]
    arrays = {c: t[c].to_numpy(dtype=np.float64).reshape(p, n) for c in values}
    # one permutation per pair, drawn over every pair of the table (sorted by id), so a
    # pair's draw does not depend on which other pairs are dropped
    rng = np.random.default_rng([int(seed), 1])
    perm = rng.permuted(np.broadcast_to(np.arange(n, dtype=np.float64), (p, n)), axis=1)
    keep = np.ones(p, dtype=bool)
    for v in arrays.values():
        keep &= np.isfinite(v).all(axis=1)
    meta = t.iloc[::n][[c for c in PAIR_META if c in t.columns]].reset_index(drop=True)
    dropped = tuple(int(x) for x in meta["pair"].to_numpy()[~keep])
    if not keep.any():
        raise InvalidRequestError(
            f"every pair of the table has a NaN effect or score ({len(dropped)} pairs)"
        )
    return _Pairs(
        meta[keep].reset_index(drop=True),
        {k: v[keep] for k, v in arrays.items()},
        perm[keep],
        n,
        dropped,
        tuple(present),
    )


# --------------------------------------------------------------------------- per pair


def _at(x: np.ndarray, named: np.ndarray) -> np.ndarray:
    return np.take_along_axis(x, named[:, None], axis=1)[:, 0]


def _hit_matrices(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``(P, n)`` bools per hit metric: would naming block b be a hit for this pair?"""
    out = {}
    for c in CRITERIA:
        e = a[c]
        mx = e.max(axis=1, keepdims=True)
        out[f"strict_{c}"] = e >= mx
        out[f"tol_{c}"] = e >= mx - TOLERANCE * np.abs(mx)
    am = argmax_rows(a["patch_total"])
    n = a["patch_total"].shape[1]
    out["window"] = np.abs(np.arange(n)[None, :] - am[:, None]) <= WINDOW
    return out


def _loo_means(x: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """Per pair, the mean over the pairs of the *other* clusters of ``x`` ``(P, n)``."""
    _, inverse = np.unique(clusters, return_inverse=True)
    sums = np.zeros((int(inverse.max()) + 1, x.shape[1]))
    np.add.at(sums, inverse, x)
    counts = np.bincount(inverse).astype(np.float64)
    rest = len(x) - counts[inverse]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (x.sum(axis=0)[None, :] - sums[inverse]) / rest[:, None]
    return np.where(rest[:, None] > 0, out, np.nan)


def _score(pairs: _Pairs) -> tuple[DataFrame, dict[str, int]]:
    """The per-(pair, method) scores of ``pairs`` and the best constant's block per metric
    (1-based), chosen on these pairs."""
    import pandas as pd

    a = pairs.arrays
    meta = pairs.meta
    hits = _hit_matrices(a)
    clusters = meta["cluster"].astype(str).to_numpy()
    patch_argmax = argmax_rows(a["patch_total"]) + 1
    saturated = (a["patch_total"] >= SATURATION).sum(axis=1) >= 2
    sufficient = a["restore_state"] >= SUFFICIENT
    depth = np.where(sufficient.any(axis=1), np.argmax(sufficient, axis=1) + 1.0, np.nan)
    constants = {k: int(np.argmax(h.sum(axis=0))) for k, h in hits.items()}

    def rows(method: str, named: np.ndarray, scores: dict[str, np.ndarray]) -> DataFrame:
        cols: dict[str, object] = {
            "pair": meta["pair"].to_numpy(dtype=np.int64),
            "cluster": clusters,
            "source": meta["source"].astype(str).to_numpy() if "source" in meta else "",
            "target_top1": (
                meta["target_top1"].fillna(False).to_numpy(dtype=bool)
                if "target_top1" in meta
                else False
            ),
            "method": method,
            "named": named + 1,
        }
        for key, h in hits.items():
            if method == BEST_CONSTANT:
                cols[key] = h[:, constants[key]]
            else:
                cols[key] = _at(h, named)
        for c in CRITERIA:
            s = scores[c]
            cols[f"rho_{c}"] = spearman_rows(s, a[c])
            cols[f"rho_{c}_nolast"] = spearman_rows(s[:, :-1], a[c][:, :-1])
        cols["restore"] = _at(a["restore_state"], named)
        cols.update(patch_argmax=patch_argmax, saturated=saturated, sufficiency_depth=depth)
        return pd.DataFrame(cols)

    frames = []
    for m in pairs.methods:
        frames.append(rows(m, argmax_rows(a[m]), dict.fromkeys(CRITERIA, a[m])))
    frames.append(rows(RANDOM, argmax_rows(pairs.random), dict.fromkeys(CRITERIA, pairs.random)))
    loo = {c: _loo_means(a[c], clusters) for c in CRITERIA}
    const = np.full(len(meta), constants["window"], dtype=np.int64)
    frames.append(rows(BEST_CONSTANT, const, loo))
    out = pd.concat(frames, ignore_index=True)[list(PAIR_SCORE_COLUMNS)]
    return out, {k: v + 1 for k, v in constants.items()}


def pair_scores(table: DataFrame, seed: int = 0) -> DataFrame:
    """Score every method on every pair of the counterfactual table.

    Parameters
    ----------
    table:
        The runner's table, one row per (pair, block); see :data:`PAIR_TABLE_COLUMNS`.
        Pairs with a NaN effect or method score (an undefined normalisation) are dropped and
        counted.
    seed:
        Seed of the random block: the same seed and table give the same draws.

    Returns
    -------
    ``pandas.DataFrame`` with :data:`PAIR_SCORE_COLUMNS`, one row per (pair, method), methods
    in the order: the ``ig_<lens>`` present, ``attribution``, ``dla``, ``ld_jump`` (where
    present), ``random``, ``best_constant``. The best constant's hits are those of the block
    chosen for each metric on these pairs (its ``named`` and ``restore`` are the ±2-window
    choice, H2's); its ρ ranks the leave-one-country-out mean of the criterion. ``attrs``
    holds ``best_constant`` (metric → block), ``n_dropped`` and ``dropped`` (pair ids) and
    ``n_blocks``.
    """
    pairs = _prepare(table, seed)
    out, constants = _score(pairs)
    out.attrs.update(
        best_constant=constants,
        n_dropped=len(pairs.dropped),
        dropped=list(pairs.dropped),
        n_blocks=pairs.n_blocks,
    )
    return out


# --------------------------------------------------------------------------- bootstrap


def _wide(scores: DataFrame, methods: Sequence[str], column: str) -> np.ndarray:
    """``(P, M)`` floats of one score column, pairs in ``scores``'s order, per method.

    :func:`_score` writes the methods as consecutive blocks of the same pairs: a reshape,
    checked."""
    mm = len(methods)
    names = scores["method"].to_numpy()
    if len(names) % mm or not (names.reshape(mm, -1) == np.asarray(methods)[:, None]).all():
        raise AssertionError("scores are not in blocks of methods")  # _score's layout
    return scores[column].to_numpy(dtype=np.float64).reshape(mm, -1).T


def _nanmean(v: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column
        return np.nanmean(v, axis=0) if len(v) else np.full(v.shape[1], np.nan)


def _mean_intervals(
    values: np.ndarray, clusters: np.ndarray, n_boot: int, seed: int, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nan-means of the columns of ``values`` with their cluster-bootstrap bounds (one set of
    resamples for every column)."""
    point = _nanmean(values)
    if not len(values):
        return point, point.copy(), point.copy()
    lo, hi = bootstrap_interval(values, clusters, n_boot=n_boot, seed=seed, level=level)
    return point, np.asarray(lo), np.asarray(hi)


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class PairSummary:
    """The counterfactual study's scores summarised (:func:`pair_summary`)."""

    methods: DataFrame
    """Per (token class, method, criterion, metric), :data:`PAIR_SUMMARY_COLUMNS`: the mean
    over pairs (hit rates, mean ρ, mean ``restore``) with its 95% cluster-bootstrap interval,
    and the paired difference IG-Lens (logit) − method with its interval."""
    saturated: DataFrame
    """Per token class: ``share`` of saturated pairs (≥ 2 blocks with ``patch_total`` ≥ 0.9)
    with ``lo``/``hi``, ``n_pairs``."""
    named_blocks: DataFrame
    """Per (method, block 1 … n): ``count`` and ``share`` of the pairs (class ``all``) for which
    the method names the block (the best constant: its ±2-window block)."""
    late: DataFrame
    """Per (token class, method, metric): the agreement over the pairs whose named block is ≥ 3
    (``value``, ``lo``, ``hi``, ``n_named``): strict and tolerance top-1 against
    ``patch_total``, and the ±2 window."""
    best_constant: DataFrame
    """Per (token class, metric): the constant block chosen on that class's pairs."""
    n_pairs: int
    """Pairs scored (after dropping)."""
    n_clusters: int
    """Countries among them."""
    n_dropped: int
    """Pairs dropped for a NaN effect or score."""
    n_blocks: int
    """Blocks per pair."""


def source_kind(source: str) -> str:
    """A pair's source as a token class: ``"capital-pairs"`` stays, a file's
    ``"<file name>:<line>"`` becomes its file name (one class per file, not per line)."""
    head, sep, tail = str(source).rpartition(":")
    return head if sep and head and tail.isdigit() else str(source)


def _classes(meta: DataFrame) -> dict[str, np.ndarray]:
    out = {"all": np.ones(len(meta), dtype=bool)}
    if "target_top1" in meta:
        out["target_top1"] = meta["target_top1"].fillna(False).to_numpy(dtype=bool)
    if "source" in meta:
        src = np.array([source_kind(s) for s in meta["source"].astype(str)])
        for s in sorted(set(src)):
            out[f"source={s}"] = src == s
    return out


def pair_summary(
    table: DataFrame, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> PairSummary:
    """Summarise :func:`pair_scores` per method, criterion, metric and token class.

    Parameters
    ----------
    table:
        The runner's table (see :func:`pair_scores`).
    n_boot:
        Cluster-bootstrap replicates (0: no intervals, NaN bounds).
    seed:
        Seed of the random block and of the resampling. Every method, metric and paired
        difference of a token class is resampled with the same draws of countries.
    level:
        Coverage of the intervals.

    Returns
    -------
    :class:`PairSummary`. Token classes: ``all``, ``target_top1`` (the target is the model's
    top-1 on the clean prompt) and ``source=<kind>`` per source (:func:`source_kind`: the
    built-in set, or each file). The best constant is chosen
    anew on each class's pairs (and held fixed over the resamples).
    """
    import pandas as pd

    level = check_level(level)
    pairs = _prepare(table, seed)
    methods = [*pairs.methods, RANDOM, BEST_CONSTANT]
    keys = [m[0] for m in PAIR_METRICS]
    rows, sat_rows, late_rows, const_rows = [], [], [], []
    named_all = None
    for cls, mask in _classes(pairs.meta).items():
        if not mask.any():
            continue
        sub = pairs.subset(mask)
        scores, constants = _score(sub)
        first = scores[scores["method"] == methods[0]]
        clusters = first["cluster"].to_numpy()
        n_pairs, n_clusters = len(first), len(np.unique(clusters))
        mm = len(methods)
        value = np.concatenate([_wide(scores, methods, k) for k in keys], axis=1)  # (P, K*M)
        if IG in methods:
            ig = np.repeat(value[:, [methods.index(IG) + i * mm for i in range(len(keys))]], mm, 1)
            diff = ig - value
        else:
            diff = np.full_like(value, np.nan)
        named = _wide(scores, methods, "named")
        late_keys = ("strict_patch_total", "tol_patch_total", "window")
        late = np.concatenate(
            [np.where(named >= LATE_FROM, _wide(scores, methods, k), np.nan) for k in late_keys],
            axis=1,
        )
        sat = first["saturated"].to_numpy(dtype=np.float64)[:, None]
        allv = np.concatenate([value, diff, late, sat], axis=1)
        point, lo, hi = _mean_intervals(allv, clusters, n_boot, seed, level)
        kv = len(keys) * mm
        n_values = np.isfinite(value).sum(axis=0)
        for i, (key, criterion, metric) in enumerate(PAIR_METRICS):
            for j, m in enumerate(methods):
                c = i * mm + j
                rows.append(
                    {
                        "token_class": cls,
                        "method": m,
                        "criterion": criterion,
                        "metric": metric,
                        "value": point[c],
                        "lo": lo[c],
                        "hi": hi[c],
                        "diff": point[kv + c],
                        "diff_lo": lo[kv + c],
                        "diff_hi": hi[kv + c],
                        "n_values": int(n_values[c]),
                        "n_pairs": n_pairs,
                        "n_clusters": n_clusters,
                        # the block behind the best constant's hits (ρ: the LOO mean, none)
                        "constant_block": (
                            constants.get(key, constants["window"])
                            if m == BEST_CONSTANT and metric not in ("rho", "rho_no_last")
                            else None
                        ),
                    }
                )
        base = 2 * kv
        n_named = (named >= LATE_FROM).sum(axis=0)
        for i, key in enumerate(late_keys):
            for j, m in enumerate(methods):
                c = base + i * mm + j
                late_rows.append(
                    {
                        "token_class": cls,
                        "method": m,
                        "metric": key,
                        "value": point[c],
                        "lo": lo[c],
                        "hi": hi[c],
                        "n_named": int(n_named[j]),
                    }
                )
        sat_rows.append(
            {
                "token_class": cls,
                "share": point[-1],
                "lo": lo[-1],
                "hi": hi[-1],
                "n_pairs": n_pairs,
            }
        )
        const_rows += [{"token_class": cls, "metric": k, "block": b} for k, b in constants.items()]
        if cls == "all":
            named_all = named
    assert named_all is not None  # class "all" is never empty
    dist = []
    for j, m in enumerate(methods):
        counts = np.bincount(named_all[:, j].astype(np.int64), minlength=pairs.n_blocks + 1)
        for b in range(1, pairs.n_blocks + 1):
            dist.append(
                {
                    "method": m,
                    "block": b,
                    "count": int(counts[b]),
                    "share": counts[b] / len(named_all),
                }
            )
    out = pd.DataFrame(rows, columns=list(PAIR_SUMMARY_COLUMNS))
    out["constant_block"] = out["constant_block"].astype("Int64")
    return PairSummary(
        methods=out,
        saturated=pd.DataFrame(sat_rows),
        named_blocks=pd.DataFrame(dist),
        late=pd.DataFrame(late_rows),
        best_constant=pd.DataFrame(const_rows),
        n_pairs=len(pairs.meta),
        n_clusters=int(pairs.meta["cluster"].astype(str).nunique()),
        n_dropped=len(pairs.dropped),
        n_blocks=pairs.n_blocks,
    )


# --------------------------------------------------------------------------- words


def _num(x: float, digits: int = 2, sign: bool = False) -> str:
    if not np.isfinite(x):
        return "—"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def comparison(
    subject: str,
    action: str,
    other: str,
    diff: float,
    lo: float,
    hi: float,
    words: tuple[str, str, str] = ("better than", "no better than", "worse than"),
    digits: int = 2,
) -> str:
    """One comparison in words drawn from its paired interval.

    ``words`` = (above, overlapping, below): the first when the interval's lower bound is
    above 0, the last when its upper bound is below 0, the middle one otherwise (an interval
    that holds 0, or none). ``comparison("IG-Lens", "ranks the direct effect", "DLA", 0.21,
    0.15, 0.27)`` → ``"IG-Lens ranks the direct effect better than DLA (+0.21 [0.15, 0.27])"``.
    """
    if np.isfinite(lo) and lo > 0:
        word = words[0]
    elif np.isfinite(hi) and hi < 0:
        word = words[2]
    else:
        word = words[1]
    if np.isfinite(lo) and np.isfinite(hi):
        numbers = f"{_num(diff, digits, True)} [{_num(lo, digits)}, {_num(hi, digits)}]"
    else:
        numbers = f"{_num(diff, digits, True)}, no interval"
    return f"{subject} {action} {word} {other} ({numbers})"


_OFTEN = ("more often than", "no more often than", "less often than")


# --------------------------------------------------------------------------- hypotheses


def _not_run(hypothesis: str, question: str, statistic: str, why: str, rule: str) -> dict:
    return {
        "hypothesis": hypothesis,
        "question": question,
        "statistic": statistic,
        "comparator": "",
        "value": np.nan,
        "lo": np.nan,
        "hi": np.nan,
        "rule": rule,
        "verdict": "not run",
        "sentence": f"Not run: {why}.",
        "detail": "",
    }


@dataclass(frozen=True)
class Evidence:
    """What every hypothesis is decided on: the per-(pair, method) scores of one table, the
    best constants chosen on it, its clusters (countries) and the bootstrap's settings (the
    same resamples for every comparison: one ``seed``)."""

    scores: DataFrame
    constants: dict[str, int]
    clusters: np.ndarray
    n_boot: int
    seed: int
    level: float

    @property
    def methods(self) -> list[str]:
        return list(dict.fromkeys(self.scores["method"]))

    def column(self, method: str, key: str) -> np.ndarray:
        """The score ``key`` of ``method``, one value per pair."""
        rows = self.scores["method"] == method
        return self.scores.loc[rows, key].to_numpy(dtype=np.float64)

    def paired(self, a: str, b: str, key: str) -> tuple[float, float, float]:
        """The mean over pairs of ``key`` of ``a`` − of ``b``, with its interval."""
        d = (self.column(a, key) - self.column(b, key))[:, None]
        p, lo, hi = _mean_intervals(d, self.clusters, self.n_boot, self.seed, self.level)
        return float(p[0]), float(lo[0]), float(hi[0])


def _answer(
    hypothesis: str, question: str, statistic: str, rule: str, **fields: object
) -> dict[str, object]:
    return {
        "hypothesis": hypothesis,
        "question": question,
        "statistic": statistic,
        "rule": rule,
        **fields,
    }


def h1_direct(e: Evidence) -> dict[str, object]:
    """**H1 (direct)**, ``docs/study.md`` "Hypotheses and decision rules": over blocks,
    IG-Lens contrast contributions rank the direct patching effect better than frozen-norm
    DLA, the logit-difference jump, a random block and the best constant. Statistic: per
    pair, Spearman ρ over blocks 1 … n between the method's scores and ``patch_direct``; the
    mean over pairs of ρ(IG-Lens) − ρ(method) (the best constant: leave-one-country-out
    mean). **Yes** when the lower bound is above 0 against each of the four; otherwise no,
    naming the methods IG-Lens does not beat. The row's value is the comparison with the
    smallest lower bound; ``detail`` gives all four."""
    q = "IG-Lens contributions rank the direct patching effect better than each baseline"
    s = "mean over pairs of ρ(ig_logit, patch_direct) − ρ(method, patch_direct)"
    r = "yes when every lower bound > 0"
    comparators = ["dla", "ld_jump", RANDOM, BEST_CONSTANT]
    absent = [m for m in (IG, "dla", "ld_jump") if m not in e.methods]
    if absent:
        return _not_run("H1", q, s, f"no column {', '.join(absent)}", r)
    parts, beaten, stats = [], [], []
    for m in comparators:
        d, lo, hi = e.paired(IG, m, "rho_patch_direct")
        other = method_label(m) if m != BEST_CONSTANT else "the best constant (LOO mean)"
        parts.append(comparison(method_label(IG), "ranks the direct effect", other, d, lo, hi))
        beaten.append(bool(np.isfinite(lo) and lo > 0))
        stats.append((d, lo, hi))
    # the row shows the binding comparison: the smallest lower bound (none: the first)
    binding = int(np.argmin([lo if np.isfinite(lo) else -np.inf for _, lo, _ in stats]))
    worst = stats[binding]
    yes = all(beaten)
    not_beaten = [method_label(m) for m, b in zip(comparators, beaten) if not b]
    sentence = (
        f"Yes: {parts[binding]}, the closest of the four."
        if yes
        else f"No: IG-Lens does not beat {', '.join(not_beaten)}: "
        + "; ".join(p for p, b in zip(parts, beaten) if not b)
        + "."
    )
    return _answer(
        "H1",
        q,
        s,
        r,
        comparator=", ".join(comparators),
        value=worst[0],
        lo=worst[1],
        hi=worst[2],
        verdict="yes" if yes else "no",
        sentence=sentence,
        detail="; ".join(parts),
    )


def h2_total(e: Evidence) -> dict[str, object]:
    """**H2 (total at the answer position)**, ``docs/study.md`` "Hypotheses and decision
    rules": the onset lies within ±2 blocks of the argmax of ``patch_total`` more often than
    the best constant block does. Statistic: the ±2-window hit rate of the IG-Lens (logit)
    onset minus the best constant's (the block whose window hits most often, chosen on the
    same data). **Yes** when the lower bound is above 0."""
    q = "the onset lies within ±2 blocks of the patch_total argmax more often than a constant"
    s = "±2 hit rate of the ig_logit onset − the best constant's"
    r = "yes when the lower bound > 0"
    if IG not in e.methods:
        return _not_run("H2", q, s, f"no column {IG}", r)
    d, lo, hi = e.paired(IG, BEST_CONSTANT, "window")
    constant = f"the best constant (block {e.constants['window']})"
    subject = f"The {method_label(IG)} onset"
    text = comparison(subject, "is within ±2 blocks", constant, d, lo, hi, _OFTEN)
    yes = bool(np.isfinite(lo) and lo > 0)
    return _answer(
        "H2",
        q,
        s,
        r,
        comparator=f"best constant (block {e.constants['window']})",
        value=d,
        lo=lo,
        hi=hi,
        verdict="yes" if yes else "no",
        sentence=f"{'Yes' if yes else 'No'}: {text}.",
        detail=f"onset hit rate {e.column(IG, 'window').mean():.3f}, best constant "
        f"{e.column(BEST_CONSTANT, 'window').mean():.3f}",
    )


def h3_sufficiency(e: Evidence) -> dict[str, object]:
    """**H3 (sufficiency)**, ``docs/study.md`` "Hypotheses and decision rules": restoring
    the clean state at the answer position at the onset depth recovers ≥ 50% of the logit
    difference. Statistic: the median over pairs of ``restore_state`` at the IG-Lens (logit)
    onset. **Yes** when the lower bound is at least 0.5 (:data:`SUFFICIENT`). The test is
    easier the later the onset, so ``detail`` gives the sufficiency depth (the first block
    with ``restore_state`` ≥ 0.5; median) and the paired onset − depth (mean)."""
    q = "restoring the clean state at the onset recovers ≥ 50% of the logit difference"
    s = "median over pairs of restore_state at the ig_logit onset"
    r = "yes when the lower bound ≥ 0.5"
    if IG not in e.methods:
        return _not_run("H3", q, s, f"no column {IG}", r)
    boot = (e.clusters, e.n_boot, e.seed, e.level)
    med, lo, hi = median_interval(e.column(IG, "restore"), *boot)
    depth = e.column(IG, "sufficiency_depth")
    dmed, dlo, dhi = median_interval(depth, *boot)
    gap, glo, ghi = _mean_intervals((e.column(IG, "named") - depth)[:, None], *boot)
    yes = bool(np.isfinite(lo) and lo >= SUFFICIENT)
    detail = (
        f"sufficiency depth (first block with restore_state ≥ {SUFFICIENT}): median "
        f"{_num(dmed, 1)} [{_num(dlo, 1)}, {_num(dhi, 1)}] ({int(np.isfinite(depth).sum())} "
        f"pairs reach it); onset − sufficiency depth: mean {_num(gap[0], 2, True)} "
        f"[{_num(glo[0], 2, True)}, {_num(ghi[0], 2, True)}] blocks"
    )
    bar = "at least" if yes else "not shown to be at least"
    return _answer(
        "H3",
        q,
        s,
        r,
        comparator=f"the bar {SUFFICIENT}",
        value=med,
        lo=lo,
        hi=hi,
        verdict="yes" if yes else "no",
        sentence=f"{'Yes' if yes else 'No'}: restoring the clean state at the onset "
        f"recovers a median {_num(med)} [{_num(lo)}, {_num(hi)}] of the logit "
        f"difference, {bar} {SUFFICIENT}.",
        detail=detail,
    )


def h4_lenses(e: Evidence) -> list[dict[str, object]]:
    """**H4 (lenses)**, ``docs/study.md`` "Hypotheses and decision rules": under a fitted
    lens the onset finds the patching site more often than under the logit lens. Statistic:
    the ±2-window hit rate (of the ``patch_total`` argmax) under the shortcut lens minus
    under the logit lens. **Yes** when the lower bound is above 0. The tuned and Jacobian
    lenses, where their columns are present, are secondary rows (``H4 (tuned)``,
    ``H4 (jacobian)``) under the same rule; H4 itself without its columns is "not run"."""
    q = "under a fitted lens the onset finds the patching site more often than the logit lens"
    r = "yes when the lower bound > 0"
    rows: list[dict[str, object]] = []
    for lens, name in (("shortcut", "H4"), ("tuned", "H4 (tuned)"), ("jacobian", "H4 (jacobian)")):
        m = f"ig_{lens}"
        s = f"±2 hit rate of the {m} onset − the ig_logit onset's"
        if m not in e.methods or IG not in e.methods:
            if lens == "shortcut":
                absent = [c for c in (m, IG) if c not in e.methods]
                rows.append(_not_run(name, q, s, f"no column {', '.join(absent)}", r))
            continue
        d, lo, hi = e.paired(m, IG, "window")
        subject = f"The {method_label(m)} onset"
        text = comparison(subject, "is within ±2 blocks", method_label(IG), d, lo, hi, _OFTEN)
        yes = bool(np.isfinite(lo) and lo > 0)
        rows.append(
            _answer(
                name,
                q if lens == "shortcut" else q + " (secondary)",
                s,
                r,
                comparator=IG,
                value=d,
                lo=lo,
                hi=hi,
                verdict="yes" if yes else "no",
                sentence=f"{'Yes' if yes else 'No'}: {text}.",
                detail=f"hit rates {e.column(m, 'window').mean():.3f} ({lens}) and "
                f"{e.column(IG, 'window').mean():.3f} (logit)",
            )
        )
    return rows


def hypotheses(
    table: DataFrame, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> DataFrame:
    """H1–H4 of the pre-registration (``docs/study.md``, "Hypotheses and decision rules"),
    each answered "yes" or "no" by its decision rule: :func:`h1_direct`, :func:`h2_total`,
    :func:`h3_sufficiency`, :func:`h4_lenses` (whose docstrings give the rules).

    A hypothesis whose lens column (or a comparator's column) is absent is "not run", never
    "no". Intervals: 95% percentile cluster bootstrap over countries, ``n_boot`` resamples
    from ``seed``, the same resamples for every comparison. Returns a ``pandas.DataFrame``
    with :data:`HYPOTHESIS_COLUMNS`, one row per hypothesis (H4's secondary lenses after it).
    """
    import pandas as pd

    level = check_level(level)
    pairs = _prepare(table, seed)
    scores, constants = _score(pairs)
    first = scores["method"].iloc[0] if len(scores) else None
    clusters = scores.loc[scores["method"] == first, "cluster"].to_numpy()
    evidence = Evidence(scores, constants, clusters, n_boot, seed, level)
    rows = [h1_direct(evidence), h2_total(evidence), h3_sufficiency(evidence)]
    out = pd.DataFrame([*rows, *h4_lenses(evidence)])
    out["n_pairs"] = len(clusters)
    out["n_clusters"] = len(np.unique(clusters))
    out.attrs.update(n_dropped=len(pairs.dropped), best_constant=constants)
    return out[list(HYPOTHESIS_COLUMNS)]
