"""The studies' tables, their columns in one place.

* The ablation study (:func:`~.run.study`): :data:`TABLE_COLUMNS` (what scoring reads),
  :data:`CLUSTER_COLUMN`; its scores, summary and differences: :data:`SCORE_COLUMNS`,
  :data:`SUMMARY_COLUMNS`, :data:`DIFFERENCE_COLUMNS`.
* The counterfactual study (:func:`~.counterfactual.pair_study`): :func:`pair_columns` (the
  runner's table, :data:`PER_PAIR_COLUMNS` first, :func:`column_dtype` each),
  :data:`PAIR_TABLE_COLUMNS` (what scoring needs), :data:`PAIR_SCORE_COLUMNS`,
  :data:`PAIR_SUMMARY_COLUMNS`, :data:`HYPOTHESIS_COLUMNS`.

The runners and the scoring both read them from here, so neither imports the other for a
column list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# --- the ablation study ----------------------------------------------------------------------

TABLE_COLUMNS = (
    "prompt",
    "position",
    "segment",
    "contribution",
    "lens_prob_start",
    "lens_prob_end",
    "lens_logit_start",
    "lens_logit_end",
    "top1_end",
    "frozen_prob_start",
    "frozen_prob_end",
)
"""Columns the scored table must have (besides at least one ``drop_<mode>``): ``prompt``
(int), ``position`` (int), ``segment`` (0..k−1; segment j covers block j+1),
``contribution`` (IG-Lens contribution of the segment), ``lens_prob_start``/``_end``
(logit-lens probability of the target before/after the segment), ``lens_logit_start``/``_end``
(the target's lens logit before/after), ``top1_end`` (bool: the target is the lens's top-1
after the segment), ``frozen_prob_start``/``_end`` (lens probability with the final norm's
scale frozen at the last state's). Methods only read the columns they need (see
:class:`~.scoring.Predictor`), so a table for a subset of ``methods`` may lack the others."""

SCORE_COLUMNS = (
    "mode",
    "prompt",
    "position",
    "method",
    "predicted",
    "agreement",
    "hit_at_3",
    "rho",
    "monotone",
    "onset_last",
    "cluster",
)
"""Columns of :func:`~.scoring.score`'s output, one row per (mode, prompt, position, method)."""

CLUSTER_COLUMN = "cluster"
"""The table's optional column naming each prompt's cluster, the unit of the bootstrap: a
capital prompt's country (its two phrasings ask the same fact), else the prompt itself. A
table without it clusters by prompt."""

SUMMARY_COLUMNS = (
    "mode",
    "method",
    "token_class",
    "agreement",
    "agreement_lo",
    "agreement_hi",
    "hit_at_3",
    "hit_at_3_lo",
    "hit_at_3_hi",
    "rho",
    "rho_lo",
    "rho_hi",
    "n_tokens",
    "n_prompts",
    "n_clusters",
    "n_rho",
    "best_constant",
)
"""Columns of :func:`~.scoring.summarize`'s output, one row per (mode, method, token class)."""

DIFFERENCE_COLUMNS = (
    "mode",
    "token_class",
    "method",
    "metric",
    "difference",
    "lo",
    "hi",
    "n_tokens",
    "n_clusters",
)
"""Columns of :func:`~.scoring.paired_differences`'s output, one row per (mode, class,
method, metric)."""


# --- the counterfactual study ---------------------------------------------------------------

PER_PAIR_COLUMNS = (
    "pair",
    "cluster",
    "clean",
    "corrupt",
    "target",
    "contrast",
    "target_id",
    "contrast_id",
    "template",
    "source",
    "n_tokens",
    "p_target",
    "target_top1",
    "m_clean",
    "m_corrupt",
)
"""The table's columns that hold one value per pair (repeated on each of its block rows)."""
_HEAD = (
    *PER_PAIR_COLUMNS,
    "block",
    "patch_total",
    "patch_total_all",
    "patch_direct",
    "restore_state",
    "attribution",
)
_TAIL = ("dla", "ld_jump")


def pair_columns(lenses: Sequence[str]) -> list[str]:
    """The table's columns, in order, for the lens names ``lenses``."""
    return [*_HEAD, *(f"ig_{name}" for name in lenses), *_TAIL]


TEXT_COLUMNS = {"cluster", "clean", "corrupt", "target", "contrast", "template", "source"}


def column_dtype(name: str) -> Any:
    """The dtype of the pair table's column ``name`` (text, integers, a bool, else floats)."""
    if name in TEXT_COLUMNS:
        return object
    if name in ("pair", "target_id", "contrast_id", "n_tokens", "block"):
        return np.int64
    return bool if name == "target_top1" else np.float64


CRITERIA = ("patch_total", "patch_total_all", "patch_direct")
"""The patching effects a method's named block is scored against (noising, normalised)."""

PAIR_TABLE_COLUMNS = ("pair", "cluster", "block", *CRITERIA, "restore_state")
"""Columns the scored table must have: ``pair`` (int), ``cluster`` (the clean prompt's
country), ``block`` (1 … n, each once per pair), the patching effects and ``restore_state``.
Method columns (``ig_<lens>``, ``attribution``, ``dla``, ``ld_jump``) are scored where
present (an ``ig_<lens>`` column of NaN only counts as absent); ``target_top1`` and
``source`` give the token classes; the runner's other columns (``clean``, ``corrupt``,
``target``, ``contrast``, …) are carried per pair."""

PAIR_META = tuple(c for c in PER_PAIR_COLUMNS if c not in ("target_id", "contrast_id"))
"""The runner's per-pair columns carried into the scores."""

PAIR_METRICS: tuple[tuple[str, str, str], ...] = (
    ("window", "patch_total", "window"),
    *((f"strict_{c}", c, "strict_top1") for c in CRITERIA),
    *((f"tol_{c}", c, "tol_top1") for c in CRITERIA),
    *((f"rho_{c}", c, "rho") for c in CRITERIA),
    *((f"rho_{c}_nolast", c, "rho_no_last") for c in CRITERIA),
    ("restore", "restore_state", "restore"),
)
"""(score column, criterion, metric) of every per-pair metric, in the summary's order."""

PAIR_SCORE_COLUMNS = (
    "pair",
    "cluster",
    "source",
    "target_top1",
    "method",
    "named",
    *(m[0] for m in PAIR_METRICS),
    "patch_argmax",
    "saturated",
    "sufficiency_depth",
)
"""Columns of :func:`~.pair_scoring.pair_scores`, one row per (pair, method): ``named``
(1-based block), the metrics (bools for hits, floats for ρ and ``restore``), and per pair
``patch_argmax`` (the ``patch_total`` argmax, 1-based), ``saturated`` and
``sufficiency_depth`` (the first block with ``restore_state`` ≥ 0.5; NaN if none)."""

PAIR_SUMMARY_COLUMNS = (
    "token_class",
    "method",
    "criterion",
    "metric",
    "value",
    "lo",
    "hi",
    "diff",
    "diff_lo",
    "diff_hi",
    "n_values",
    "n_pairs",
    "n_clusters",
    "constant_block",
)
"""Columns of :attr:`~.pair_scoring.PairSummary.methods`: ``diff`` is IG-Lens (logit) −
method, paired."""

HYPOTHESIS_COLUMNS = (
    "hypothesis",
    "question",
    "statistic",
    "comparator",
    "value",
    "lo",
    "hi",
    "rule",
    "verdict",
    "sentence",
    "detail",
    "n_pairs",
    "n_clusters",
)
"""Columns of :func:`~.pair_scoring.hypotheses`, one row per hypothesis (H4's fitted lenses
besides the shortcut as secondary rows ``H4 (tuned)``, ``H4 (jacobian)``)."""
