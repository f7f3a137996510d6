"""The study's report: tables and seaborn figures, written as Markdown beside PNG files.

Every sentence of the report is generated from the numbers it reports, and every IG-Lens
figure stands beside the baselines that could beat it: the best constant block, a random
block, contributions shuffled within the token, and the logit-lens readings.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from iglens_viz.core.result import display_name
from iglens_viz.files import OutputFileError, write_atomic
from iglens_viz.views.token_format import visible_text

from .scoring import CLASSES, TokenClass, headline

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from pandas import DataFrame, Series

    from .run import Study

__all__ = ["plot_methods", "plot_onsets", "plot_drop_vs_contribution", "write_report"]

CLASSES_SHOWN: tuple[TokenClass, ...] = (*(c for c in CLASSES if c != "onset_last"), "onset_last")
"""The token classes the report shows, in its order: :data:`~.scoring.CLASSES` with
``onset_last`` (where a zero ablation's drop is the contribution by construction) last."""


def _interval(row: Series, metric: str) -> str:
    value, lo, hi = row[metric], row[f"{metric}_lo"], row[f"{metric}_hi"]
    if not np.isfinite(value):
        return "—"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{value:.3f}"
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"


def _difference(d: Series | None) -> str:
    if d is None or not np.isfinite(d["difference"]):
        return "—"
    if not (np.isfinite(d["lo"]) and np.isfinite(d["hi"])):
        return f"{d['difference']:+.3f}"
    return f"{d['difference']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def _agreement_differences(differences: DataFrame | None) -> dict[str, Series]:
    """One mode and class's paired top-1 differences (IG-Lens − method), by method."""
    if differences is None:
        return {}
    d = differences[differences["metric"] == "agreement"]
    return {str(row["method"]): row for _, row in d.iterrows()}


def markdown_table(rows: DataFrame, differences: DataFrame | None = None) -> str:
    """The headline rows as a Markdown table: method, agreement, hit@3, ρ (95% intervals)
    and, given one mode and class's :func:`~.scoring.paired_differences`, IG-Lens's top-1
    agreement minus the method's on the same tokens."""
    by_method = _agreement_differences(differences)
    head = "| method | top-1 agreement | hit@3 | Spearman ρ | tokens |"
    rule = "|---|---|---|---|---|"
    if by_method:
        head, rule = head + " IG-Lens − method, top-1 |", rule + "---|"
    lines = [head, rule]
    for _, row in rows.iterrows():
        line = (
            f"| {row['label']} | {_interval(row, 'agreement')} | "
            f"{_interval(row, 'hit_at_3')} | {_interval(row, 'rho')} | "
            f"{int(row['n_tokens'])} |"
        )
        if by_method:
            line += f" {_difference(by_method.get(str(row['method'])))} |"
        lines.append(line)
    return "\n".join(lines)


def _verdict(rows: DataFrame, differences: DataFrame | None = None) -> str:
    """The sentences comparing IG-Lens's agreement with the best baseline's and a random
    block's, worded from the paired differences (whether their interval holds 0), not from
    whether two marginal intervals overlap."""
    by = rows.set_index("label")
    if "ig_lens" not in by.index:
        return ""
    ig = by.loc["ig_lens"]
    others = by.drop(index="ig_lens")
    others = others[np.isfinite(others["agreement"])]
    if others.empty or not np.isfinite(ig["agreement"]):
        return ""
    best_label = others["agreement"].idxmax()
    best = others.loc[best_label]
    paired = _agreement_differences(differences)
    d = paired.get(str(best["method"]))
    lead = f"IG-Lens names the block with the largest drop for {ig['agreement']:.1%} of the tokens"
    if d is None or not (np.isfinite(d["lo"]) and np.isfinite(d["hi"])):
        return f"{lead}; the best baseline, {best_label}, for {best['agreement']:.1%}."
    share = f"{best_label} ({best['agreement']:.1%}): paired difference {_difference(d)}"
    if d["lo"] > 0:
        text = f"{lead}, more often than the best baseline, {share}."
    elif d["hi"] < 0:
        text = f"{lead}; it is beaten by {share}."
    else:
        text = f"{lead}; no difference is shown from {share}, an interval that holds 0."
    r = paired.get("random")
    if r is not None and best["method"] != "random":
        text += f" Against a random block: {_difference(r)}."
    return text


def plot_methods(summary: DataFrame, mode: str, ax: Axes | None = None) -> Figure:
    """Top-1 agreement and Spearman ρ per method (class ``all``), 95% intervals."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    rows = headline(summary)
    rows = rows[(rows["mode"] == mode) & (rows["token_class"] == "all")]
    fig, axes = plt.subplots(
        1, 2, figsize=(11, 0.42 * len(rows) + 1.4), sharey=True, layout="constrained"
    )
    palette = sns.color_palette("colorblind", 2)
    for ax_, metric, title, color in zip(
        axes,
        ("agreement", "rho"),
        ("top-1 agreement with the largest drop", "Spearman ρ over blocks"),
        palette,
    ):
        y = np.arange(len(rows))
        value = rows[metric].to_numpy(dtype=float)
        # The interval as drawn from lo to hi (not as errors around the estimate: a
        # percentile interval need not hold its estimate, and matplotlib refuses a
        # negative error bar).
        ax_.hlines(
            y,
            rows[f"{metric}_lo"].to_numpy(dtype=float),
            rows[f"{metric}_hi"].to_numpy(dtype=float),
            color=color,
            lw=1.2,
        )
        ax_.plot(value, y, "o", color=color)
        ax_.set_title(title, fontsize=10)
        ax_.axvline(0, color="0.7", lw=0.8)
        ax_.set_yticks(y, rows["label"])
    axes[0].invert_yaxis()  # the axes share y: once, IG-Lens on top
    fig.suptitle(
        f"{mode} ablation: each method scored the same way (95% bootstrap intervals over prompts)",
        fontsize=10,
    )
    return fig


def plot_onsets(table: DataFrame) -> Figure:
    """Histogram of the IG-Lens onset block over tokens, and of the largest-drop block."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    n = int(table["block"].max())
    onsets = table[table["onset"]]["block"]
    fig, ax = plt.subplots(figsize=(8, 3), layout="constrained")
    bins = np.arange(0.5, n + 1.5)
    sns.histplot(
        onsets, bins=bins, ax=ax, color=sns.color_palette("colorblind")[0], label="IG-Lens onset"
    )
    drops = [c for c in table.columns if c.startswith("drop_")]
    if drops:
        reached = table.dropna(subset=[drops[0]])  # mean/resample: unreached tokens are NaN
        biggest = table.loc[
            reached.groupby(["prompt", "position"])[drops[0]].idxmax().astype(int), "block"
        ]
        sns.histplot(
            biggest,
            bins=bins,
            ax=ax,
            color=sns.color_palette("colorblind")[1],
            element="step",
            fill=False,
            label=f"largest {drops[0]}",
        )
    ax.set_xlabel("block")
    ax.set_ylabel("tokens")
    ax.legend()
    return fig


def plot_drop_vs_contribution(table: DataFrame, mode: str) -> Figure:
    """The ablation drop against the IG-Lens contribution, every (token, block), by block."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6.5, 5), layout="constrained")
    sample = table if len(table) <= 40_000 else table.sample(40_000, random_state=0)
    sns.scatterplot(
        data=sample,
        x="contribution",
        y=f"drop_{mode}",
        hue="block",
        palette="viridis",
        s=8,
        linewidth=0,
        alpha=0.6,
        ax=ax,
    )
    lim = [min(ax.get_xlim()[0], ax.get_ylim()[0]), max(ax.get_xlim()[1], ax.get_ylim()[1])]
    ax.plot(lim, lim, color="0.5", lw=0.8, ls="--", label="drop = contribution")
    ax.set_xlabel("IG-Lens contribution of the block")
    ax.set_ylabel(f"drop of p(target) under {mode} ablation")
    return fig


def _save(fig: Figure, path: Path) -> None:
    """``fig`` as a PNG at ``path``, written whole or not at all; the figure is closed."""
    import matplotlib.pyplot as plt

    data = io.BytesIO()
    try:
        fig.savefig(data, format="png", dpi=120)
    finally:
        plt.close(fig)
    write_atomic(path, data.getvalue())


def report_folder(folder: str | os.PathLike[str]) -> Path:
    """``folder`` created if missing (an :class:`OutputFileError` naming it if it cannot be),
    with matplotlib on its file backend unless one was chosen: where a report is written."""
    import matplotlib

    matplotlib.use("Agg", force=False)

    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputFileError(f"cannot create the folder {folder}: {err.strerror or err}") from None
    return folder


def write_report(
    study: Study,
    folder: str | os.PathLike[str],
    summary: DataFrame | None = None,
    differences: DataFrame | None = None,
) -> Path:
    """Write ``report.md`` and its figures into ``folder``; returns the report's path.
    ``summary`` and ``differences`` default to :meth:`Study.summary` and
    :meth:`Study.differences`."""
    folder = report_folder(folder)
    summary = study.summary() if summary is None else summary
    differences = study.differences() if differences is None else differences
    meta = study.metadata
    table = study.table
    # metadata's "model" is the config's name_or_path (resume checks compare it): the
    # heading shows its display name, control and bidi characters as visible escapes.
    model = visible_text(display_name(str(meta.get("model", ""))), keep="")
    lines = [
        f"# IG-Lens study: {model}",
        "",
        f"{meta.get('n_prompts', '?')} prompts ({meta.get('prompts', '')}), "
        f"{table.groupby(['prompt', 'position']).ngroups} tokens, "
        f"{int(table['block'].max())} blocks; ablation modes: "
        f"{', '.join(study.modes)}; iglens_viz {meta.get('version', '')}; "
        f"dtype {meta.get('dtype', '')}; seed {meta.get('seed', '')}.",
        "",
        "Each method names one block per token; *top-1 agreement* is the share of tokens "
        "for which it is the block whose ablation lowers the target's probability most, "
        "*hit@3* the share for which it is among the three largest drops, and ρ the rank "
        "correlation over blocks between the method's scores and the drops. Intervals "
        "are 95% bootstrap intervals over clusters (a capital's two phrasings are one "
        "cluster, any other prompt its own). The last column is IG-Lens's top-1 agreement "
        "minus the method's on the same tokens, a paired difference with its own interval; "
        "the sentences are worded from it. Tokens whose IG-Lens onset is the last "
        "block (where a zero ablation's drop equals the contribution by construction) are "
        "also reported apart. The *best constant* is the block that scores best on these "
        "same data, chosen after the fact: an optimistic baseline, and a sharp one.",
        "",
    ]
    heads = headline(summary)
    _save(plot_onsets(table), folder / "onsets.png")
    lines += ["![onset histogram](onsets.png)", ""]
    for mode in study.modes:
        lines += [f"## {mode} ablation", ""]
        for cls in CLASSES_SHOWN:
            rows = heads[(heads["mode"] == mode) & (heads["token_class"] == cls)]
            if rows.empty or rows["n_tokens"].max() == 0:
                continue
            paired = differences[
                (differences["mode"] == mode) & (differences["token_class"] == cls)
            ]
            lines += [
                f"### tokens: {cls.replace('_', ' ')}",
                "",
                _verdict(rows, paired),
                "",
                markdown_table(rows, paired),
                "",
            ]
        for name, fig in (
            (f"methods_{mode}.png", plot_methods(summary, mode)),
            (f"drop_vs_contribution_{mode}.png", plot_drop_vs_contribution(table, mode)),
        ):
            _save(fig, folder / name)
            lines += [f"![{name}]({name})", ""]
    return write_atomic(folder / "report.md", "\n".join(lines))
