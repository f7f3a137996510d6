"""Static views: matplotlib figures and a tidy pandas table of an attribution result.

* :func:`plot_heatmap` — positions × segments, signed contributions on a diverging scale
  centred at 0 with symmetric limits.
* :func:`plot_token` — one position: signed segment bars, the cumulative probability curve
  f(h_L), the logit-lens top-1 overlay, non-monotone stretches (shaded *and* hatched), the
  interpolation path, and the completeness check.
* :func:`to_dataframe` — one row per (position, segment).

The figures are :class:`matplotlib.figure.Figure` objects built without pyplot, so nothing
piles up in pyplot's global state: return one from a notebook cell to show it, or call
``fig.savefig(...)``. Every token string is untrusted: labels go through
:func:`~iglens_viz.views.token_format.format_token` (visible whitespace, escapes) and
:func:`~iglens_viz.views.token_format.escape_mathtext`, and are drawn with ``usetex=False``.
"""

from __future__ import annotations

import functools
import io
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike

from ..core.boundaries import is_sublayer
from ..core.trajectory import NONMONOTONE_THRESHOLD, non_monotone
from ..errors import InvalidRequestError
from .token_format import plot_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap
    from matplotlib.container import BarContainer
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from pandas import DataFrame

    from ..core.result import AttributionResult
    from ..core.trajectory import NonMonotone

DEFAULT_CMAP = "RdBu_r"
"""ColorBrewer RdBu reversed: diverging, colour-blind safe, red = positive, blue = negative."""
POSITIVE_COLOR = "#b2182b"  # the RdBu ends, so bars match the heatmap
NEGATIVE_COLOR = "#2166ac"
NAN_COLOR = "#d9d9d9"
NONMONOTONE_COLOR = "#f1a340"  # orange: distinct from the red/blue of the signs
NONMONOTONE_HATCH = "///"
CURVE_COLOR = "#1a1a1a"
TOP1_COLOR = "#7f7f7f"

# Artist ids, so callers (and tests) can find what was drawn.
GID_HEATMAP = "iglens-heatmap"
GID_BARS = "iglens-bars"
GID_CURVE = "iglens-curve"
GID_PATH = "iglens-path"
GID_TOP1 = "iglens-top1"
GID_NONMONOTONE = "iglens-nonmonotone"
GID_COMPONENTS = "iglens-components"

_TEXT: dict[str, Any] = {"usetex": False}  # token text is never LaTeX


# ----------------------------------------------------------------------------- helpers


def position_label(result: AttributionResult, i: int, max_len: int = 14) -> str:
    """``"[i] token → target"`` with visible whitespace, safe for matplotlib."""
    token = plot_label(result.tokens[i], max_len=max_len)
    if int(result.target_ids[i]) < 0:
        return f"[{i}] {token} → (no target)"
    label = f"[{i}] {token} → {plot_label(result.target_tokens[i], max_len=max_len)}"
    contrast = getattr(result, "contrast_ids", None)
    if contrast is not None and int(contrast[i]) >= 0:
        label += f" vs {plot_label(result.token_text.get(int(contrast[i]), ''), max_len=max_len)}"
    return label


def lens_suffix(result: AttributionResult) -> str:
    """``" — tuned lens"`` for a result read through a fitted lens, "" under the logit
    lens: the titles say which coordinates the numbers are in (safe for matplotlib)."""
    name = result.lens_name
    return "" if name == "logit" else f" — {plot_label(name, max_len=40)} lens"


def _lens_label(result: AttributionResult) -> str:
    """The lens's name as a panel label: ``logit lens``, ``tuned lens`` …"""
    suffix = lens_suffix(result)
    return suffix.removeprefix(" — ") if suffix else "logit lens"


def _check_position(result: AttributionResult, i: object) -> int:
    T = len(result.tokens)
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
        raise TypeError(f"position must be an int, not {type(i).__name__}")
    t = int(i)
    if not -T <= t < T:
        raise IndexError(f"position {t} is out of range for {T} positions")
    return t % T


def _positions(result: AttributionResult, positions: ArrayLike | slice | None) -> np.ndarray:
    T = len(result.tokens)
    if positions is None:
        return np.arange(T)
    if isinstance(positions, slice):
        return np.arange(T)[positions]
    out = np.atleast_1d(np.asarray(positions))
    if out.dtype == bool:
        if out.shape != (T,):
            raise ValueError(f"a boolean position mask needs {T} entries, got {out.shape}")
        return np.flatnonzero(out)
    return np.array([_check_position(result, int(p)) for p in out], dtype=np.int64)


def symmetric_limit(values: ArrayLike) -> float:
    """max |value| ignoring NaN (1.0 when there is nothing nonzero), for vmin = −vmax."""
    array = np.asarray(values, dtype=np.float64)
    finite = array[np.isfinite(array)]
    vmax = float(np.abs(finite).max()) if finite.size else 0.0
    return vmax if vmax > 0 else 1.0


@functools.cache
def _notebook_figure() -> type[Figure]:
    from matplotlib.figure import Figure

    class NotebookFigure(Figure):
        """A ``Figure`` with its own PNG representation for IPython."""

        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            self.savefig(buffer, format="png", bbox_inches="tight")
            return buffer.getvalue()

    return NotebookFigure


def new_figure(width: float, height: float) -> Figure:
    """A figure outside pyplot (nothing global, nothing left open) that shows itself in a
    notebook: IPython displays a bare ``Figure`` as ``<Figure size …>`` text unless pyplot's
    inline backend was loaded first, so it carries its own PNG representation."""
    return _notebook_figure()(figsize=(width, height), layout="constrained")


def figure_of(ax: Axes) -> Figure:
    """The figure a view drew into, returned by the plots: ``ax.figure`` (a SubFigure when
    ``ax`` is in one; matplotlib types it ``Figure | SubFigure``)."""
    return cast("Figure", ax.figure)


def _colormap(cmap: str | Colormap) -> Colormap:
    import matplotlib

    cm = matplotlib.colormaps[cmap] if isinstance(cmap, str) else cmap
    return cm.with_extremes(bad=(0.0, 0.0, 0.0, 0.0))  # NaN cells show the grey face


# ----------------------------------------------------------------------------- heatmap


def plot_heatmap(
    result: AttributionResult,
    ax: Axes | None = None,
    positions: ArrayLike | slice | None = None,
    cmap: str | Colormap = DEFAULT_CMAP,
    annotate: bool = False,
    mark_onset: bool = True,
    max_label_len: int = 14,
) -> Figure:
    """Heatmap of signed contributions: positions (rows) × segments (columns).

    Parameters
    ----------
    result:
        An :class:`~iglens_viz.AttributionResult`.
    ax:
        A matplotlib Axes to draw into (its figure gets the colour bar); None makes a new
        figure sized to the data.
    positions:
        Which positions to show: indices, a slice or a boolean mask (default: all).
    cmap:
        A diverging colour map name or object. The default ``"RdBu_r"`` is colour-blind
        safe; ``"PuOr_r"`` is another. The scale is always centred at 0 with symmetric
        limits ``vmin = −vmax``, ``vmax = max |contribution|`` over the shown positions.
    annotate:
        Write each contribution in its cell.
    mark_onset:
        Outline each row's onset cell (the largest signed contribution) in black.
    max_label_len:
        Longest token text in the row labels (longer tokens end with "…").

    Positions without a target are drawn grey and hatched. Rows are labelled
    ``"[position] token → target"`` with visible whitespace (``␣``, ``↵``, ``⇥``).

    Returns
    -------
    The :class:`matplotlib.figure.Figure`.
    """
    from matplotlib.patches import Rectangle

    pos = _positions(result, positions)
    data = np.asarray(result.contributions, dtype=np.float64)[pos]
    P, k = data.shape
    vmax = symmetric_limit(data)
    if ax is None:
        fig = new_figure(
            min(3.5 + 0.34 * k, 22.0) + 0.06 * max_label_len * 2, min(1.6 + 0.26 * max(P, 3), 40.0)
        )
        ax = fig.add_subplot()
    fig = figure_of(ax)
    ax.set_facecolor(NAN_COLOR)
    small = P * k > 1500
    mesh = ax.pcolormesh(
        np.ma.masked_invalid(data),
        cmap=_colormap(cmap),
        vmin=-vmax,
        vmax=vmax,
        edgecolors="none" if small else "white",
        linewidth=0 if small else 0.5,
    )
    mesh.set_gid(GID_HEATMAP)
    ax.set_xlim(0, k)
    ax.set_ylim(P, 0)  # position order top to bottom
    seg = result.segment_labels
    single = all(b - a == 1 for a, b in result.segments)
    ax.set_xticks(
        np.arange(k) + 0.5,
        labels=seg,
        rotation=90 if (k > 16 or (k > 8 and not single)) else 0,
        fontsize=8 if k > 16 else 9,
    )
    ax.set_xlabel(
        "sub-layer" if is_sublayer(result.boundaries) else "block" if single else "blocks (segment)"
    )
    ax.set_yticks(
        np.arange(P) + 0.5,
        labels=[position_label(result, int(p), max_len=max_label_len) for p in pos],
        fontsize=8 if P > 20 else 9,
        **_TEXT,
    )
    ax.set_ylabel("position: token → target")
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)

    missing = ~np.isfinite(data).any(axis=1)
    for r in np.flatnonzero(missing):
        ax.add_patch(
            Rectangle(
                (0, int(r)), k, 1, facecolor="none", edgecolor="#9e9e9e", hatch="//", linewidth=0
            )
        )
        ax.text(
            k / 2,
            r + 0.5,
            "no target",
            ha="center",
            va="center",
            fontsize=8,
            color="#4d4d4d",
            bbox=dict(facecolor=NAN_COLOR, edgecolor="none", pad=1.5),
            **_TEXT,
        )
    if mark_onset:
        onset = result.onset_segment[pos]
        for r in np.flatnonzero(onset >= 0):
            j = int(onset[r])
            ax.add_patch(
                Rectangle(
                    (j + 0.06, r + 0.06),
                    0.88,
                    0.88,
                    facecolor="none",
                    edgecolor="black",
                    linewidth=1.2,
                )
            )
    if annotate:
        digits = max(2, 1 - int(np.floor(np.log10(vmax))))  # two significant digits of vmax
        for r, j in zip(*np.nonzero(np.isfinite(data))):
            v = data[r, j]
            ax.text(
                j + 0.5,
                r + 0.5,
                f"{v:+.{digits}f}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if abs(v) > 0.6 * vmax else "black",
                **_TEXT,
            )

    bar = fig.colorbar(mesh, ax=ax, fraction=0.05, pad=0.02, shrink=min(1.0, 6.0 / max(P, 1) + 0.4))
    bar.set_label(f"contribution to {result.target_name}")
    bar.outline.set_visible(False)
    title = "IG-Lens: contribution of each segment" + lens_suffix(result)
    if mark_onset:
        title += " (outlined: onset)"
    ax.set_title(title, fontsize=10, **_TEXT)
    return fig


# ----------------------------------------------------------------------------- one token


def _completeness_text(result: AttributionResult, i: int) -> str:
    total = float(np.sum(result.contributions[i]))
    dp = float(result.delta_p[i])
    est = getattr(result, "estimator", "prediction_aware")
    steps = getattr(result, "steps", 1)
    return (
        f"Σ contributions = {total:+.4f},  Δp = {dp:+.4f}  (error {abs(total - dp):.1e};"
        f" {est}, m={steps})"
    )


def _draw_bars(ax: Axes, result: AttributionResult, i: int, flags: NonMonotone) -> BarContainer:
    b = np.asarray(result.boundaries, dtype=np.float64)
    c = np.asarray(result.contributions[i], dtype=np.float64)
    widths = 0.8 * np.diff(b)
    centres = (b[:-1] + b[1:]) / 2
    colors = [POSITIVE_COLOR if v >= 0 else NEGATIVE_COLOR for v in c]
    bars = ax.bar(
        centres, c, width=widths, color=colors, edgecolor="none", zorder=3, gid=GID_BARS
    )  # every bar Rectangle carries the gid
    for patch, flagged in zip(bars.patches, flags.segments):
        if flagged:  # a second, colour-free cue
            patch.set_hatch(NONMONOTONE_HATCH)
            patch.set_edgecolor("black")
            patch.set_linewidth(0.8)
    ax.axhline(0, color="black", linewidth=0.8, zorder=4)
    ax.set_ylabel(f"contribution to {result.target_name}")
    lo, hi = min(float(np.nanmin(c)), 0.0), max(float(np.nanmax(c)), 0.0)
    pad = 0.08 * ((hi - lo) or 1.0)
    ax.set_ylim(lo - pad, hi + pad)
    return bars


def _shade(ax: Axes, result: AttributionResult, flags: NonMonotone, label: bool) -> None:
    from matplotlib.colors import to_rgba

    b = result.boundaries
    first = True
    for j in flags.segment_indices:
        ax.axvspan(
            b[j],
            b[j + 1],
            facecolor=to_rgba(NONMONOTONE_COLOR, 0.16),
            edgecolor=to_rgba(NONMONOTONE_COLOR, 0.6),
            hatch=NONMONOTONE_HATCH,
            linewidth=0,
            zorder=0,
            gid=GID_NONMONOTONE,
            label="segment against Δp (non-monotone)" if (label and first) else None,
        )
        first = False


def _draw_curve(ax: Axes, result: AttributionResult, i: int, flags: NonMonotone) -> Line2D:
    b = np.asarray(result.boundaries, dtype=np.float64)
    f = np.asarray(result.lens_probs[i], dtype=np.float64)
    ax.axhline(f[0], color="#bdbdbd", linewidth=0.8, linestyle=":", zorder=1)
    (curve,) = ax.plot(
        b,
        f,
        color=CURVE_COLOR,
        marker="o",
        markersize=4,
        linewidth=1.8,
        zorder=5,
        label=f"{result.target_name} at each boundary",
    )
    curve.set_gid(GID_CURVE)
    path = getattr(result, "path_probs", None)
    if path is not None:
        p = np.asarray(path[i], dtype=np.float64)  # [k, m+1]
        m = p.shape[-1] - 1
        frac = np.arange(m + 1) / m
        xs = b[:-1, None] + frac[None, :] * np.diff(b)[:, None]  # [k, m+1]
        (line,) = ax.plot(
            xs.ravel(),
            p.ravel(),
            color="#4393c3",
            linewidth=1.0,
            marker=".",
            markersize=3,
            zorder=4,
            label=f"interpolation path (m={m})",
        )
        line.set_gid(GID_PATH)
        if flags.steps is not None and flags.steps.any():
            first = True
            for j, s in flags.step_indices:
                ax.plot(
                    xs[j, s : s + 2],
                    p[j, s : s + 2],
                    color=NONMONOTONE_COLOR,
                    linewidth=2.6,
                    marker="x",
                    markersize=6,
                    markeredgecolor="black",
                    zorder=6,
                    label="step against its segment" if first else None,
                )
                first = False
    return curve


def _draw_top1(ax: Axes, result: AttributionResult, i: int, max_label_len: int) -> Line2D:
    """The logit-lens overlay: top-1 lens token and its probability at every boundary."""
    b = np.asarray(result.boundaries, dtype=np.float64)
    ids = np.asarray(result.top_ids)[i, :, 0]
    probs = np.asarray(result.top_probs, dtype=np.float64)[i, :, 0]
    hits = ids == int(result.target_ids[i])
    (line,) = ax.plot(
        b,
        probs,
        color=TOP1_COLOR,
        linestyle="--",
        linewidth=1.0,
        zorder=3,
        label="top-1 lens token",
    )
    line.set_gid(GID_TOP1)
    ax.scatter(b[hits], probs[hits], s=26, color=CURVE_COLOR, zorder=4, label="top-1 is the target")
    ax.scatter(
        b[~hits],
        probs[~hits],
        s=26,
        facecolors="white",
        edgecolors=TOP1_COLOR,
        zorder=4,
        label="top-1 is another token",
    )
    f = np.asarray(result.lens_probs[i], dtype=np.float64)
    ax.plot(
        b,
        f,
        color=CURVE_COLOR,
        linewidth=0.8,
        alpha=0.5,
        zorder=2,
        label=f"{result.target_name} (same scale)",
    )
    changes = [0] + [j for j in range(1, len(ids)) if ids[j] != ids[j - 1]]
    for n, j in enumerate(changes):
        text = plot_label(
            result.token_text.get(int(ids[j]), f"<{int(ids[j])}>"), max_len=max_label_len
        )
        # Three staggered heights keep neighbouring labels apart; the box makes one-glyph
        # tokens ("." "," "␣") readable as labels.
        ax.annotate(
            text,
            (b[j], probs[j]),
            xytext=(0, 6 + 11 * (n % 3)),
            textcoords="offset points",
            fontsize=8,
            color="#1a1a1a",
            ha="center",
            va="bottom",
            annotation_clip=False,
            bbox=dict(
                boxstyle="round,pad=0.15",
                facecolor="white",
                alpha=0.85,
                edgecolor="#bdbdbd",
                linewidth=0.6,
            ),
            **_TEXT,
        )
    ax.set_ylim(0, 1.25)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    return line


def _has_top1(result: AttributionResult) -> bool:
    top_ids = getattr(result, "top_ids", None)
    return top_ids is not None and np.ndim(top_ids) == 3 and np.shape(top_ids)[-1] > 0


class PositionTypeError(InvalidRequestError, TypeError):
    """A position that is not an integer (also a ``TypeError``)."""


class PositionRangeError(InvalidRequestError, IndexError):
    """A position outside the result's tokens (also an ``IndexError``)."""


def _token_position(result: AttributionResult, i: object) -> int:
    """``i`` as a position in [0, T) that has a target, or an InvalidRequestError naming
    the positions that would work."""
    T = len(result.tokens)
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
        raise PositionTypeError(
            f"plot_token needs an integer position in [-{T}, {T}), not {type(i).__name__} {i!r}"
        )
    if not -T <= int(i) < T:
        raise PositionRangeError(
            f"position {int(i)} is out of range: the result has {T} "
            f"positions; pick one in [-{T}, {T})"
        )
    i = int(i) % T
    has = (np.asarray(result.target_ids) >= 0) & np.isfinite(np.asarray(result.delta_p))
    if not has[i]:
        ok = np.flatnonzero(has)
        if not ok.size:
            where = "no position has one"
        elif ok[-1] - ok[0] + 1 == ok.size:
            where = f"positions {ok[0]}–{ok[-1]} have one"
        else:
            where = (
                "positions "
                + ", ".join(str(p) for p in ok[:8])
                + (", …" if ok.size > 8 else "")
                + " have one"
            )
        raise InvalidRequestError(
            f"position {i} has no target (with target='next' the last position has none): {where}"
        )
    return i


def plot_token(
    result: AttributionResult,
    i: int,
    ax: Axes | None = None,
    *,
    threshold: float = NONMONOTONE_THRESHOLD,
    max_label_len: int = 12,
) -> Figure:
    """Detail figure for position ``i``.

    With ``ax=None``, a figure of stacked panels sharing the x axis (block number,
    0 = embeddings):

    1. signed per-segment bars (red positive, blue negative; width = segment length);
    2. the cumulative curve f(h_L) = ``lens_probs[i]`` over the boundaries (its net change
       is Δp; dotted line: f(h_0)), with the interpolation path inside each segment when
       ``path_probs`` exists (at fractional block positions);
    3. the logit-lens overlay on a fixed 0–1 probability scale: the top-1 lens token's
       probability at every boundary (filled marker where it is the target), labelled with
       the token where the top-1 changes, and p(target) for reference. Omitted when the
       result kept no top tokens (``top_k=0``).

    The overlay has its own panel so that a small p(target) keeps a readable scale in
    panel 2. Non-monotone segments (:func:`~iglens_viz.core.trajectory.non_monotone`) are
    shaded *and* hatched in every panel and their bars hatched; interior steps against
    their segment are drawn thick with ``x`` markers. The title gives the completeness
    check "Σ contributions = …, Δp = … (error …)".

    With an ``ax``, the essential part goes into that one Axes: the bars, the cumulative
    curve (and path) on a twin y axis, and the shading.

    Returns
    -------
    The :class:`matplotlib.figure.Figure`.
    """
    i = _token_position(result, i)
    flags = non_monotone(result, i, threshold)
    b = result.boundaries
    head = position_label(result, i, max_len=max_label_len) + lens_suffix(result)
    check = _completeness_text(result, i)

    if ax is not None:
        fig = figure_of(ax)
        _shade(ax, result, flags, label=True)
        for bar in _draw_bars(ax, result, i, flags).patches:
            bar.set_alpha(0.75)  # the curve on the twin axis stays readable over the bars
        twin = ax.twinx()
        _draw_curve(twin, result, i, flags)
        twin.set_ylabel(result.target_name)
        ax.set_xlabel("block")
        ax.set_xlim(b[0] - 0.3, b[-1] + 0.3)
        ax.set_title(f"{head}\n{check}", fontsize=9, **_TEXT)
        return fig

    overlay = _has_top1(result)
    ratios = [1.0, 1.2, 1.1] if overlay else [1.0, 1.3]
    fig = new_figure(min(max(8.0, 0.3 * b[-1] + 5.0), 18.0), 8.6 if overlay else 6.4)
    axes = fig.subplots(len(ratios), 1, sharex=True, height_ratios=ratios)
    ax_bar, ax_curve = axes[0], axes[1]
    for a in axes:
        _shade(a, result, flags, label=a is ax_bar)
    _draw_bars(ax_bar, result, i, flags)
    ax_bar.set_title(
        "(a) contribution of each segment (hatched: against Δp)", fontsize=9, loc="left"
    )
    _draw_curve(ax_curve, result, i, flags)
    ax_curve.set_ylabel(result.target_name)
    if np.nanmin(result.lens_probs[i]) >= 0:  # a probability: show its distance from 0
        ax_curve.set_ylim(bottom=0)
    ax_curve.set_title(
        "(b) cumulative: lens probability of the target after block L", fontsize=9, loc="left"
    )
    if overlay:
        _draw_top1(axes[2], result, i, max_label_len)
        axes[2].set_ylabel("probability")
        axes[2].set_title(
            f"(c) {_lens_label(result)}: top-1 token after block L", fontsize=9, loc="left", **_TEXT
        )
    axes[-1].set_xlabel("block L (state after block L; 0 = embeddings)")
    axes[-1].set_xlim(b[0] - 0.5, b[-1] + 0.5)
    if len(b) <= 17:
        axes[-1].set_xticks(b)
    else:
        from matplotlib.ticker import MaxNLocator

        axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    for a in axes:
        a.grid(axis="y", color="#eeeeee", linewidth=0.8, zorder=0)
        a.spines[["top", "right"]].set_visible(False)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(f"{head}\n{check}", fontsize=10, **_TEXT)
    return fig


# ----------------------------------------------------------------------------- components


def plot_components(
    result: AttributionResult,
    i: int,
    segment: int | None = None,
    ax: Axes | None = None,
    *,
    cmap: str | Colormap = DEFAULT_CMAP,
    top: int = 5,
) -> Figure:
    """Block × component matrix of position ``i``'s shares (heads, MLP, remainder).

    Rows are the blocks of ``segment`` (every block when None), columns the components
    (``result.component_names``), cells the signed share on a diverging scale centred at 0.
    The ``top`` largest |shares| are written in their cells and named in the title. Needs a
    result attributed with ``components=True`` (or shares from ``engine.components``).
    Returns the matplotlib Figure (built without pyplot).
    """
    i = _check_position(result, i)
    # Without a split, the result's own AttributeError says how to get one (the shares, read
    # first, were a 0-d NaN array: "too many indices for array").
    where = result.component_segments
    names = list(result.component_names or ())  # (set whenever the segments are)
    shares = np.asarray(result.component_shares, dtype=np.float64)[i]
    if segment is None:
        blocks = np.arange(result.n_blocks)
        data = shares
        what = "all segments"
    else:
        k = len(result.segment_labels)
        if not -k <= int(segment) < k:
            raise IndexError(f"segment {segment} is out of range for {k} segments")
        segment = int(segment) % k
        inside = where == segment
        blocks = np.flatnonzero(inside.any(axis=1))
        data = np.where(inside, shares, np.nan)[blocks]
        what = f"segment {result.segment_labels[segment]}"
    if ax is None:
        ax = new_figure(
            max(4.0, 0.45 * len(names) + 2.5), max(2.4, 0.28 * len(blocks) + 1.6)
        ).add_subplot()
    vmax = symmetric_limit(data)
    mesh = ax.pcolormesh(
        np.ma.masked_invalid(data),
        cmap=_colormap(cmap),
        vmin=-vmax,
        vmax=vmax,
        edgecolors="white",
        linewidth=0.5,
    )
    mesh.set_gid(GID_COMPONENTS)
    ax.set_facecolor(NAN_COLOR)
    ax.set_xticks(
        np.arange(len(names)) + 0.5,
        labels=[_component_short(n) for n in names],
        rotation=90 if len(names) > 12 else 0,
        fontsize=8,
    )
    ax.set_yticks(
        np.arange(len(blocks)) + 0.5,
        labels=[str(b + 1) for b in blocks],
        fontsize=8 if len(blocks) > 20 else 9,
    )
    ax.set_ylim(len(blocks), 0)
    ax.set_xlabel("component")
    ax.set_ylabel("block")
    finite = np.where(np.isfinite(data), np.abs(data), -1.0).ravel()
    best = [int(f) for f in np.argsort(finite)[::-1][:top] if finite[f] > 0]
    for flat in best:
        r, c = divmod(flat, len(names))
        ax.text(c + 0.5, r + 0.5, f"{data[r, c]:+.2g}", ha="center", va="center", fontsize=7)
    named = ", ".join(
        f"L{blocks[f // len(names)] + 1}.{_component_short(names[f % len(names)])}"
        for f in best[:3]
    )
    fig = figure_of(ax)
    colorbar = fig.colorbar(mesh, ax=ax, shrink=0.8)
    colorbar.set_label(f"share of {result.target_name}")
    ax.set_title(
        f"{position_label(result, i)} — {what}{lens_suffix(result)}\nlargest: {named or 'none'}",
        fontsize=9,
        **_TEXT,
    )
    return fig


def _component_short(name: str) -> str:
    """``head:3`` → ``h3``; other names as they are."""
    return f"h{name.split(':', 1)[1]}" if name.startswith("head:") else name


# ----------------------------------------------------------------------------- table


def to_dataframe(
    result: AttributionResult,
    threshold: float = NONMONOTONE_THRESHOLD,
    components: bool = False,
    answer: bool = False,
) -> DataFrame:
    """A tidy :class:`pandas.DataFrame`, one row per (position, segment).

    Columns: ``position``, ``token``, ``target`` (raw text, not escaped), ``target_id``,
    ``segment`` (index j), ``label`` (the segment's label: ``"12"``, ``"11–15"``,
    ``"12.attn"``), ``block_start``, ``block_end`` (first and last block of the segment,
    inclusive: ``L_j + 1`` and ``L_{j+1}``; one block for a sub-layer), ``contribution``,
    ``lens_prob_start``, ``lens_prob_end`` (f at the segment's two boundaries), ``onset``
    (this segment has the position's largest signed contribution), ``non_monotone`` (the
    segment opposes Δp, see :func:`~iglens_viz.core.trajectory.against_segments`) and
    ``delta_p`` (the position's Δp, repeated). Positions without a target have NaN numbers
    and no onset.

    With ``components`` (a result attributed with ``components=True``), one row per
    (position, segment, block, component) instead: :attr:`AttributionResult.components`
    joined with the segment's columns above.

    With ``answer`` (a result with a whole answer, ``result.answer``), the answer's ledgers
    instead (see :func:`answer_dataframe`).
    """
    import pandas as pd

    if answer:
        return answer_dataframe(result)

    from ..core.trajectory import against_segments

    contrib = np.asarray(result.contributions, dtype=np.float64)
    T, k = contrib.shape
    b = np.asarray(result.boundaries, dtype=np.float64)
    f = np.asarray(result.lens_probs, dtype=np.float64)
    onset_seg = result.onset_segment
    position = np.repeat(np.arange(T), k)
    segment = np.tile(np.arange(k), T)
    table = pd.DataFrame(
        {
            "position": position,
            "token": np.asarray(result.tokens, dtype=object)[position],
            "target": np.asarray(result.target_tokens, dtype=object)[position],
            "target_id": np.asarray(result.target_ids, dtype=np.int64)[position],
            "segment": segment,
            "label": np.asarray(result.segment_labels, dtype=object)[segment],
            "block_start": np.floor(b[:-1]).astype(np.int64)[segment] + 1,
            "block_end": np.ceil(b[1:]).astype(np.int64)[segment],
            "contribution": contrib.ravel(),
            "lens_prob_start": f[:, :-1].ravel(),
            "lens_prob_end": f[:, 1:].ravel(),
            "onset": onset_seg[position] == segment,
            "non_monotone": against_segments(contrib, result.delta_p, threshold).ravel(),
            "delta_p": np.asarray(result.delta_p, dtype=np.float64)[position],
        }
    )
    if not components:
        return table
    return result.components.merge(table, on=["position", "segment"], how="left")


def answer_dataframe(result: AttributionResult) -> DataFrame:
    """The whole answer's ledgers as a tidy :class:`pandas.DataFrame`, one row per (segment,
    answer token); with ``versus=``, the second answer's rows follow.

    Columns: ``answer`` (``"answer"`` or ``"versus"``), ``segment``, ``label``,
    ``block_start``, ``block_end``, ``position`` (in that answer's sequence), ``index`` (the
    token's index in the answer), ``token`` (raw text), ``token_id``, ``logprob_contribution``
    (the token's share of the segment's log-probability contribution), ``logprob_start``,
    ``logprob_end`` (the token's lens log-probability at the segment's boundaries),
    ``segment_logprob_contribution`` and ``segment_prob_contribution`` (the segment's whole
    entries of the two ledgers, repeated over its tokens).
    """
    import pandas as pd

    if result.answer is None:
        raise InvalidRequestError(
            "this result has no whole answer: attribute with answer= (or max_new_tokens > 0)"
        )
    b = np.asarray(result.boundaries, dtype=np.float64)
    parts = []
    for name, ledger in (("answer", result.answer), ("versus", result.versus)):
        if ledger is None:
            continue
        k, n = ledger.logprob_split.shape
        segment, index = np.repeat(np.arange(k), n), np.tile(np.arange(n), k)
        parts.append(
            pd.DataFrame(
                {
                    "answer": name,
                    "segment": segment,
                    "label": np.asarray(result.segment_labels, dtype=object)[segment],
                    "block_start": np.floor(b[:-1]).astype(np.int64)[segment] + 1,
                    "block_end": np.ceil(b[1:]).astype(np.int64)[segment],
                    "position": ledger.positions[index],
                    "index": index,
                    "token": np.asarray(ledger.tokens, dtype=object)[index],
                    "token_id": ledger.ids[index],
                    "logprob_contribution": ledger.logprob_split.ravel(),
                    "logprob_start": ledger.token_logprobs[index, segment],
                    "logprob_end": ledger.token_logprobs[index, segment + 1],
                    "segment_logprob_contribution": ledger.logprob_contributions[segment],
                    "segment_prob_contribution": ledger.prob_contributions[segment],
                }
            )
        )
    return pd.concat(parts, ignore_index=True)
