"""The counterfactual study's report: the pre-registered hypotheses answered, the methods
compared, written as Markdown beside a CSV summary and PNG figures.

Every sentence comes from the numbers it reports (:func:`~.pair_scoring.comparison`: the
words of a comparison follow its paired interval), and every table shows the baselines that
could beat IG-Lens (a random block, the best constant) beside it. Token strings and prompts
are untrusted: they are escaped (:func:`markdown_text`) before they reach the Markdown.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from iglens_viz.core.result import display_name
from iglens_viz.files import write_atomic
from iglens_viz.views.token_format import format_token, visible_text

from .pair_scoring import (
    BEST_CONSTANT,
    CRITERIA,
    IG,
    LATE_FROM,
    SATURATION,
    TOLERANCE,
    WINDOW,
    PairSummary,
    hypotheses,
    method_label,
    pair_scores,
    pair_summary,
)
from .report import _save, report_folder

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from pandas import DataFrame

__all__ = [
    "csv_text",
    "markdown_text",
    "plot_effects_by_block",
    "plot_hit_rates",
    "write_pair_report",
]

_MARKDOWN_SPECIAL = set("\\`*_[]<>|~$&")


def markdown_text(text: object, *, token: bool = False) -> str:
    """Untrusted text (a prompt, a token, a country) made safe in a Markdown table cell.

    Dangerous characters become visible escapes first (:func:`visible_text`; with
    ``token=True`` :func:`format_token` without truncation, so spaces at the ends show as
    ``␣``), newlines and tabs included; then every Markdown metacharacter (the table's
    ``|``, emphasis, links, HTML, code spans, math) is backslash-escaped, which CommonMark
    renders as the character itself.
    """
    shown = format_token(text, max_len=None) if token else visible_text(text, keep="")
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in shown)


def _iv(value: float, lo: float, hi: float, digits: int = 3, sign: bool = False) -> str:
    if not np.isfinite(value):
        return "—"
    v = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return v
    return f"{v} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _label(method: str, constant: Any = None) -> str:
    import pandas as pd

    if method == BEST_CONSTANT and constant is not None and not pd.isna(constant):
        return f"best constant (block {int(constant)})"
    return method_label(method)


# --------------------------------------------------------------------------- figures


def plot_effects_by_block(table: DataFrame, scores: DataFrame | None = None) -> Figure:
    """The mean patching effect per block of each criterion (lines), with the distribution
    of the IG-Lens (logit) onset over pairs overlaid (bars, right axis)."""
    import matplotlib.pyplot as plt

    scores = pair_scores(table) if scores is None else scores
    kept = table[table["pair"].isin(set(scores["pair"]))]
    means = kept.groupby("block")[[*CRITERIA, "restore_state"]].mean()
    fig, ax = plt.subplots(figsize=(9, 3.6), layout="constrained")
    n = int(means.index.max())
    onset = scores.loc[scores["method"] == IG, "named"]
    twin = ax.twinx()
    if len(onset):
        counts = np.bincount(onset.to_numpy(dtype=np.int64), minlength=n + 1)[1:]
        twin.bar(np.arange(1, n + 1), counts, color="0.85", width=0.8, label="IG-Lens onset")
    argmax = scores.drop_duplicates("pair")["patch_argmax"].to_numpy(dtype=np.int64)
    counts = np.bincount(argmax, minlength=n + 1)[1:]
    twin.step(np.arange(1, n + 1), counts, where="mid", color="0.45", lw=1.0)
    twin.set_ylabel("pairs (bars: onset; step: patch_total argmax)", fontsize=8)
    ax.set_zorder(twin.get_zorder() + 1)
    ax.patch.set_visible(False)
    for c in (*CRITERIA, "restore_state"):
        ax.plot(means.index, means[c], marker="o", ms=3, lw=1.3, label=c)
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xlabel("block")
    ax.set_ylabel("mean normalised effect")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("patching effects per block, and where the IG-Lens onset falls", fontsize=10)
    return fig


_HIT_PANELS = (
    ("window", "patch_total", f"±{WINDOW} blocks of the patch_total argmax"),
    ("tol_top1", "patch_total", f"top-1 within {TOLERANCE:.0%}: patch_total"),
    ("tol_top1", "patch_direct", f"top-1 within {TOLERANCE:.0%}: patch_direct"),
)


def plot_hit_rates(summary: PairSummary, token_class: str = "all") -> Figure:
    """Hit rates per method with their 95% cluster-bootstrap intervals (one panel per
    metric: the ±2 window, tolerance top-1 against the total and the direct effect)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    m = summary.methods
    m = m[m["token_class"] == token_class]
    methods = list(dict.fromkeys(m["method"]))
    size = (12, 0.4 * len(methods) + 1.5)
    fig, axes = plt.subplots(1, len(_HIT_PANELS), figsize=size, sharey=True, layout="constrained")
    y = np.arange(len(methods))
    for ax, (metric, criterion, title) in zip(axes, _HIT_PANELS):
        rows = m[(m["metric"] == metric) & (m["criterion"] == criterion)].set_index("method")
        rows = rows.reindex(methods)
        # drawn from lo to hi: a percentile interval need not hold its estimate
        ax.hlines(y, rows["lo"].to_numpy(float), rows["hi"].to_numpy(float), color="C0", lw=1.2)
        ax.plot(rows["value"].to_numpy(float), y, "o", color="C0")
        ax.set_xlim(-0.02, 1.02)
        ax.set_title(title, fontsize=9)
        if BEST_CONSTANT in rows.index:  # chosen per metric: its block beside its point
            r = rows.loc[BEST_CONSTANT]
            if np.isfinite(r["value"]) and not pd.isna(r["constant_block"]):
                j = methods.index(BEST_CONSTANT)
                ax.annotate(
                    f"block {int(r['constant_block'])}",
                    (r["value"], j),
                    xytext=(0, 7),
                    textcoords="offset points",
                    ha="center",
                    fontsize=7,
                )
        labels = ["best constant" if x == BEST_CONSTANT else method_label(x) for x in methods]
        ax.set_yticks(y, labels)
    axes[0].invert_yaxis()
    fig.suptitle(
        f"hit rates, {token_class} pairs (95% cluster-bootstrap intervals over countries)",
        fontsize=10,
    )
    return fig


# --------------------------------------------------------------------------- tables


def _hypotheses_table(h: DataFrame) -> list[str]:
    lines = [
        "| hypothesis | statistic | value [95% interval] | rule | verdict |",
        "|---|---|---|---|---|",
    ]
    for _, r in h.iterrows():
        lines.append(
            f"| {r['hypothesis']} | {r['statistic']} | "
            f"{_iv(r['value'], r['lo'], r['hi'])} | {r['rule']} | "
            f"**{r['verdict']}** |"
        )
    lines.append("")
    # the words are generated (method names, numbers): no untrusted text to escape
    for _, r in h.iterrows():
        detail = f" ({r['detail']})" if r["detail"] else ""
        lines.append(f"- **{r['hypothesis']}.** {r['sentence']}{detail}")
    return lines


_METHOD_COLUMNS = (
    ("window", "patch_total", f"±{WINDOW} window"),
    ("strict_top1", "patch_total", "strict top-1 (total)"),
    ("tol_top1", "patch_total", "tol. top-1 (total)"),
    ("tol_top1", "patch_total_all", "tol. top-1 (all pos.)"),
    ("tol_top1", "patch_direct", "tol. top-1 (direct)"),
    ("rho", "patch_direct", "ρ direct"),
    ("rho_no_last", "patch_direct", "ρ direct, no last"),
    ("rho", "patch_total", "ρ total"),
    ("rho_no_last", "patch_total", "ρ total, no last"),
    ("restore", "restore_state", "restore at named"),
)


def _methods_table(m: DataFrame, diff: bool) -> list[str]:
    methods = list(dict.fromkeys(m["method"]))
    head = "| method | " + " | ".join(c[2] for c in _METHOD_COLUMNS) + " |"
    lines = [head, "|---" * (len(_METHOD_COLUMNS) + 1) + "|"]
    index = m.set_index(["method", "metric", "criterion"])
    for method in methods:
        if diff and method == IG:
            continue
        cells = []
        const = None
        for metric, criterion, _ in _METHOD_COLUMNS:
            r = index.loc[(method, metric, criterion)]
            const = r["constant_block"] if metric == "window" else const
            if diff:
                cells.append(_iv(r["diff"], r["diff_lo"], r["diff_hi"], sign=True))
            else:
                cells.append(_iv(r["value"], r["lo"], r["hi"]))
        lines.append(f"| {_label(method, const)} | " + " | ".join(cells) + " |")
    return lines


def _distribution_lines(summary: PairSummary) -> list[str]:
    d = summary.named_blocks
    late = summary.late[summary.late["token_class"] == "all"].set_index(["method", "metric"])
    lines = [
        f"| method | most named blocks (share of pairs) | block 1 | names a block ≥ {LATE_FROM} | "
        f"strict top-1 when ≥ {LATE_FROM} | ±{WINDOW} window when ≥ {LATE_FROM} |",
        "|---|---|---|---|---|---|",
    ]
    chosen = summary.best_constant
    chosen = chosen[chosen["token_class"] == "all"].set_index("metric")["block"]
    window_block = chosen.get("window")
    for method, g in d.groupby("method", sort=False):
        top = g.sort_values(["count", "block"], ascending=[False, True]).head(4)
        top = top[top["count"] > 0]
        most = ", ".join(f"{int(b)} ({s:.0%})" for b, s in zip(top["block"], top["share"]))
        first = g.loc[g["block"] == 1, "share"].iloc[0]
        strict = late.loc[(method, "strict_patch_total")]
        window = late.loc[(method, "window")]
        label = _label(str(method), window_block if method == BEST_CONSTANT else None)
        lines.append(
            f"| {label} | {most} | {first:.0%} | "
            f"{int(strict['n_named'])} | {_iv(strict['value'], strict['lo'], strict['hi'])} | "
            f"{_iv(window['value'], window['lo'], window['hi'])} |"
        )
    return lines


def _pairs_lines(table: DataFrame, scores: DataFrame, limit: int) -> list[str]:
    ig = scores[scores["method"] == IG].set_index("pair") if IG in set(scores["method"]) else None
    meta = table.drop_duplicates("pair").set_index("pair").loc[scores["pair"].unique()]
    lines = [
        "| pair | country | clean | corrupt | target | contrast | onset | patch_total argmax "
        "| restore at onset |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for pair, r in meta.head(limit).iterrows():
        onset = "—" if ig is None else str(int(ig.loc[pair, "named"]))
        restore = "—" if ig is None else f"{ig.loc[pair, 'restore']:.2f}"
        argmax = int(scores.loc[scores["pair"] == pair, "patch_argmax"].iloc[0])
        cells = [
            str(pair),
            markdown_text(r.get("cluster", "")),
            markdown_text(r.get("clean", "")),
            markdown_text(r.get("corrupt", "")),
            markdown_text(r.get("target", ""), token=True),
            markdown_text(r.get("contrast", ""), token=True),
            onset,
            str(argmax),
            restore,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# --------------------------------------------------------------------------- the report


def write_pair_report(
    table: DataFrame,
    folder: str | os.PathLike[str],
    metadata: Mapping[str, Any] | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    pairs_shown: int = 30,
) -> Path:
    """Write the counterfactual study's ``report.md``, ``summary.csv``, ``hypotheses.csv``
    and figures into ``folder``; returns the report's path.

    Parameters
    ----------
    table:
        The runner's pair table (see :func:`~.pair_scoring.pair_scores`).
    folder:
        Output folder (created if missing).
    metadata:
        Shown in the heading: ``model`` (its display name), ``lens`` or ``lenses`` (names,
        or :func:`~.counterfactual.pair_study`'s list of lens records), and where given
        ``version``, ``dtype``, ``pairs`` (the pair set's name): a study's ``metadata``.
    n_boot, seed:
        Bootstrap replicates and the seed of the random block and the resampling.
    pairs_shown:
        Pairs listed in the report's pair table (the first ones by id).
    """
    folder = report_folder(folder)
    meta = dict(metadata or {})
    scores = pair_scores(table, seed=seed)
    summary = pair_summary(table, n_boot=n_boot, seed=seed)
    h = hypotheses(table, n_boot=n_boot, seed=seed)
    model = markdown_text(display_name(str(meta.get("model", ""))) or "model")
    lens = meta.get("lens", meta.get("lenses", "logit"))
    if not isinstance(lens, str):  # pair_study's metadata: a list of {"name", "kind", …}
        lens = ", ".join(str(x.get("name", x)) if isinstance(x, Mapping) else str(x) for x in lens)
    present = [m for m in dict.fromkeys(scores["method"]) if str(m).startswith("ig_")]
    extras = "; ".join(
        f"{k} {markdown_text(meta[k])}" for k in ("pairs", "version", "dtype") if k in meta
    )
    lines = [
        f"# Counterfactual study: {model}",
        "",
        f"{summary.n_pairs} pairs from {summary.n_clusters} countries (clusters), "
        f"{summary.n_blocks} blocks; {summary.n_dropped} pairs dropped (an undefined "
        f"normalisation or a NaN score); lens: {markdown_text(lens)} (IG-Lens columns: "
        f"{', '.join(present) or 'none'}); {n_boot} bootstrap resamples over "
        f"countries, seed {seed}" + (f"; {extras}" if extras else "") + ".",
        "",
        "Each method names one block per pair, its signed argmax (IG-Lens: the onset). A "
        f"*window* hit: the named block is within ±{WINDOW} of the block whose patching "
        "(noising, last position, total effect) moves the logit difference most; *strict "
        "top-1*: it attains the largest effect; *tolerance top-1*: its effect is within "
        f"{TOLERANCE:.0%} of the largest. ρ: Spearman rank correlation over blocks, with "
        "and without the last block (where a direct reading and the effect coincide). The "
        "*best constant* is the block with the most hits on these same pairs, chosen per "
        "metric (optimistic); for ρ it ranks by the mean effect over the other countries. "
        "Intervals: 95% percentile cluster bootstrap over the clean prompt's country, the "
        "same resamples for every method; differences are paired, IG-Lens (logit lens) − "
        "method.",
        "",
        "## Pre-registered hypotheses",
        "",
        *_hypotheses_table(h),
        "",
        "## Methods",
        "",
    ]
    chosen = summary.best_constant
    chosen = chosen[chosen["token_class"] == "all"]
    lines += [
        "The best constant's block (all pairs), per metric: "
        + ", ".join(f"{k} {int(b)}" for k, b in zip(chosen["metric"], chosen["block"]))
        + " (the methods tables name its window block).",
        "",
    ]
    sat = summary.saturated.set_index("token_class")
    for cls in dict.fromkeys(summary.methods["token_class"]):
        m = summary.methods[summary.methods["token_class"] == cls]
        s = sat.loc[cls]
        lines += [
            f"### pairs: {markdown_text(cls)} ({int(m['n_pairs'].iloc[0])} pairs, "
            f"{int(m['n_clusters'].iloc[0])} countries)",
            "",
            f"Saturated pairs (two or more blocks with patch_total ≥ {SATURATION}): "
            f"{_iv(s['share'], s['lo'], s['hi'])}.",
            "",
            *_methods_table(m, diff=False),
            "",
        ]
        if IG in set(m["method"]):
            lines += [
                "Paired differences, IG-Lens (logit lens) − method:",
                "",
                *_methods_table(m, diff=True),
                "",
            ]
    lines += [
        "## Named blocks",
        "",
        "Where each method points (all pairs), and how often it agrees with patching when it "
        f"names a block ≥ {LATE_FROM} (away from the first blocks).",
        "",
        *_distribution_lines(summary),
        "",
    ]
    for name, fig in (
        ("effects_by_block.png", plot_effects_by_block(table, scores)),
        ("hit_rates.png", plot_hit_rates(summary)),
    ):
        _save(fig, folder / name)
        lines += [f"![{name}]({name})", ""]
    shown = min(int(pairs_shown), summary.n_pairs)
    lines += [
        f"## Pairs (the first {shown} of {summary.n_pairs})",
        "",
        *_pairs_lines(table, scores, shown),
        "",
    ]
    write_atomic(folder / "summary.csv", csv_text(summary.methods))
    write_atomic(folder / "hypotheses.csv", csv_text(h))
    return write_atomic(folder / "report.md", "\n".join(lines))


def csv_text(frame: DataFrame) -> str:
    """``frame`` as the report writes its CSV files (no index, 6 significant digits)."""
    data = io.StringIO()
    frame.to_csv(data, index=False, float_format="%.6g")
    return data.getvalue()
