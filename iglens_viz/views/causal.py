"""Figures of the causal checks: an ablation beside the attribution, and the validation scatter.

The causal package computes (:class:`~iglens_viz.causal.AblationResult`,
:class:`~iglens_viz.causal.ValidationResult`); these functions draw what it computed, and
the results' ``plot_vs`` / ``plot`` call them, as an attribution's plots call
:mod:`.static`. They read the results through their public fields only. Figures are built
without pyplot, as every static view (:func:`~iglens_viz.views.static.new_figure`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.result import onset_segments
from ..errors import InvalidRequestError
from .static import figure_of, new_figure
from .token_format import plot_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..core.result import AttributionResult

# The results drawn here (AblationResult, ValidationResult, GateLedger) are the causal
# package's, a floor above the views: they are typed Any, and read through their public fields
# only.

__all__ = ["GATE_LEDGER_STYLE", "plot_ablation_vs", "plot_gate_ledger", "plot_validation"]

GATE_LEDGER_STYLE = {
    "readable": ("becomes readable (IG-Lens)", "#7f7f7f"),
    "reverse": ("arrives (patching: reverse staircase)", "#d9822b"),
    "diagonal": ("shared credit (diagonal)", "#3b6fb6"),
    "forward": ("forward staircase", "#9e9ac8"),
}
"""Each ledger's legend words and colour, shared by the figure and the widget's chart."""


def plot_ablation_vs(
    ablation: Any, attribution: AttributionResult, position: int, ax: Axes | None = None
) -> Figure:
    """Per-block IG-Lens contribution next to the ablation drop, for one token.

    ``ablation`` is an :class:`~iglens_viz.causal.AblationResult` of whole blocks
    (``part="block"``) and ``attribution`` an :class:`~iglens_viz.AttributionResult` of the
    same prompt and target whose segments match its columns
    (:meth:`~iglens_viz.causal.AblationResult.segment_columns`). Returns the matplotlib Figure.
    """
    if ablation.part != "block":
        raise InvalidRequestError(
            f"plot_vs compares whole-block ablations with IG-Lens "
            f"segments; this result ablated part={ablation.part!r} "
            f"(columns {ablation.column_labels}): plot drop_at(...) "
            f"against the matching share yourself, or ablate with "
            f"part='block'"
        )
    cols = ablation.segment_columns(attribution)
    t = int(position)
    if not -len(ablation.tokens) <= t < len(ablation.tokens):
        raise IndexError(f"position {position} is out of range for {len(ablation.tokens)} tokens")
    contrib = np.asarray(attribution.contributions)[t]
    drop = ablation.drop[t, cols]
    if ax is None:
        ax = new_figure(max(4.0, 0.28 * len(drop) + 2), 3.2).add_subplot()
    fig = figure_of(ax)
    x = np.arange(len(drop))
    width = 0.4
    ax.bar(x - width / 2, contrib, width, label="IG-Lens contribution", color="#3b6fb6")
    ax.bar(x + width / 2, drop, width, label="ablation drop", color="#d9822b")
    ax.axhline(0.0, color="0.3", lw=0.8)
    labels = attribution.segment_labels
    ax.set_xticks(x, labels, rotation=90 if len(x) > 12 else 0, fontsize=8)
    ax.set_xlabel("block")
    ax.set_ylabel("Δ probability")
    ax.set_title(
        f"position {t % len(ablation.tokens)}: {plot_label(ablation.tokens[t])} → "
        f"{plot_label(ablation.target_tokens[t])}",
        fontsize=9,
        usetex=False,
    )
    onset = int(onset_segments(contrib[None])[0])
    if onset >= 0:
        ax.axvspan(onset - 0.5, onset + 0.5, color="0.85", zorder=0, label="onset")
    ax.legend(fontsize=8)
    return fig


def plot_validation(validation: Any, ax: Axes | None = None) -> Figure:
    """Scatter of contribution vs ablation drop for every (token, segment) of a
    :class:`~iglens_viz.causal.ValidationResult`, coloured by monotone / non-monotone
    trajectory. Returns the matplotlib Figure."""
    if ax is None:
        ax = new_figure(4.8, 4.0).add_subplot()
    fig = figure_of(ax)
    mono = validation.table["monotone"].to_numpy(dtype=bool)
    summary = validation.summary()
    for name, mask, colour in (("monotone", mono, "#3b6fb6"), ("non-monotone", ~mono, "#d9822b")):
        if not mask.any():
            continue
        row = summary.loc[name]
        ax.scatter(
            validation.contributions[mask].ravel(),
            validation.drops[mask].ravel(),
            s=6,
            alpha=0.45,
            color=colour,
            linewidths=0,
            label=f"{name}: n={int(row.n_tokens)}, ρ̄={row.mean_spearman:.2f}, "
            f"hit={row.hit_rate:.0%}",
        )
    ax.axhline(0.0, color="0.5", lw=0.6)
    ax.axvline(0.0, color="0.5", lw=0.6)
    ax.set_xlabel("IG-Lens contribution")
    ax.set_ylabel(f"ablation drop ({validation.mode})")
    ax.set_title("Contribution vs causal drop, per token and segment", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return fig


def plot_gate_ledger(ledger: Any, ax: Axes | None = None, *, paths: Any = None) -> Figure:
    """The block-gate game's ledgers of one position side by side on the gate axis, in
    probability units: the readable ledger (IG-Lens), the reverse staircase (where the
    answer-specific information arrives) and the diagonal (shared credit), or ``paths`` (any of
    ``"readable"`` and the ledger's paths, ``"forward"`` included).

    ``ledger`` is a :class:`~iglens_viz.causal.gates.GateLedger`. Each ledger's total is in
    the legend (IG-Lens's is Δp; the counterfactual game's p(clean) − p(counterfactual)).
    Returns the matplotlib Figure.
    """
    if paths is None:  # the three questions; the forward staircase on request
        paths = ["readable", *(p for p in ledger.paths if p != "forward")]
    chosen = list(paths)
    values = {p: ledger.readable if p == "readable" else ledger.entries[p] for p in chosen}
    k = len(ledger.labels)
    if ax is None:
        ax = new_figure(max(5.0, 0.3 * k + 3), 3.4).add_subplot()
    fig = figure_of(ax)
    x = np.arange(k)
    width = 0.8 / len(values)
    for j, (path, v) in enumerate(values.items()):
        words, colour = GATE_LEDGER_STYLE[path]
        ax.bar(
            x + (j - (len(values) - 1) / 2) * width,
            v,
            width,
            color=colour,
            label=f"{words}: Σ = {float(np.sum(v)):+.3f}",
        )
    ax.axhline(0.0, color="0.3", lw=0.8)
    ax.set_xticks(x, ledger.labels, rotation=90 if k > 12 else 0, fontsize=8)
    ax.set_xlabel("block")
    ax.set_ylabel("Δ probability")
    t = ledger.position
    ax.set_title(
        f"position {t}: {plot_label(ledger.tokens[t])} → {plot_label(ledger.target)}"
        f" · {ledger.baseline} game, m = {ledger.steps}",
        fontsize=9,
        usetex=False,
    )
    ax.legend(fontsize=7, loc="best")
    return fig
