"""The widget's static fallback picture: a small PNG of the current view, drawn in Python.

A notebook saved with outputs keeps each output's whole MIME bundle. Where no widget
manager runs — GitHub's and nbviewer's notebook previews, ``jupyter nbconvert --to html``
opened offline — the widget view has nothing to draw, so
:meth:`IGLensWidget._repr_mimebundle_` puts this picture beside it as ``image/png``. Jupyter
front ends that render widgets rank the widget view above ``image/png`` and show the live
widget; the others show the picture (see ``docs/widget-protocol.md``, "The static fallback
picture", for which exporter picks which).

The picture is :func:`~iglens_viz.views.static.plot_heatmap` (a window of at most
:data:`MAX_ROWS` positions around the selection, the selected row outlined; the chat template's
positions left out where the widget's strip folds them, :func:`folded_positions`) beside
:func:`~iglens_viz.views.static.plot_token` of the selected position, under a title naming
the model, the prompt, the target and the lens — no plotting code of its own. It always has
:data:`FIGSIZE` × :data:`DPI` pixels and is saved as a palette PNG: 13–17 kB for the
default demos (docs/widget-protocol.md has the figures). Every untrusted string (tokens,
the prompt, the model's name) goes through :func:`~iglens_viz.views.token_format.plot_label`:
visible escapes, no mathtext.
"""

from __future__ import annotations

import io
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from ..views.static import lens_suffix, new_figure, plot_heatmap, plot_token
from ..views.token_format import plot_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..core.result import AttributionResult
    from .widget import IGLensWidget

__all__ = [
    "DPI",
    "FIGSIZE",
    "MAX_ROWS",
    "PNG_SIZE",
    "fallback_figure",
    "fallback_png",
    "fallback_svg",
    "folded_positions",
    "render_png",
]

FIGSIZE = (9.0, 4.6)
"""The picture's size in inches (width, height)."""
DPI = 80
"""Its resolution: :data:`FIGSIZE` × ``DPI`` = :data:`PNG_SIZE` pixels."""
PNG_SIZE = (round(FIGSIZE[0] * DPI), round(FIGSIZE[1] * DPI))
"""The picture's (width, height) in pixels: 720 × 368."""
MAX_ROWS = 14
"""The most heatmap rows drawn (positions around the selected one): more would not be legible."""
COLORS = 256
"""Palette size of the PNG (Pillow's fast octree quantizer, no dithering)."""
ACCENT = "#0969da"  # the widget's selection colour (js/figures/theme.js, light theme)
VIEW_NAMES = {
    "heatmap": "layer heatmap",
    "grid": "logit-lens grid",
    "compare": "compare view",
    "lesson": "lesson view",
}
"""How the title names each tab of the main view (``iglens_viz.protocol.VIEWS``)."""


def fallback_png(widget: IGLensWidget) -> bytes:
    """The PNG of ``widget``'s current view: its shown result, selection and tab, without the
    template positions its strip folds."""
    result, view = widget.attribution, str(widget.view)
    hidden = folded_positions(result, str(widget.template), view)
    return render_png(result, int(widget.selected), view=view, hidden=hidden)


def fallback_svg(widget: IGLensWidget) -> bytes:
    """The picture of :func:`fallback_png` as SVG text (UTF-8 bytes): the same figure, drawn
    as vectors."""
    result, view = widget.attribution, str(widget.view)
    hidden = folded_positions(result, str(widget.template), view)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a glyph missing from the font draws a box
        fig = fallback_figure(result, int(widget.selected), view=view, hidden=hidden)
        from matplotlib.backends.backend_svg import FigureCanvasSVG

        out = io.BytesIO()
        FigureCanvasSVG(fig).print_svg(out)
    return out.getvalue()


def folded_positions(result: AttributionResult, template: str, view: str) -> np.ndarray:
    """The chat template's positions the token strip folds (the rule of
    js/views/strip/template-fold.js): with ``template`` ``"folded"``, or ``"auto"`` in the
    student view, the result's ``template_positions`` before its answer (a position predicting
    the answer never folds); else none."""
    positions = result.template_positions
    if positions is None or template == "shown" or (template == "auto" and view != "lesson"):
        return np.arange(0)
    positions = np.asarray(positions)
    return positions[positions < result.answer_start]


def render_png(
    result: AttributionResult,
    selected: int = -1,
    *,
    view: str = "heatmap",
    hidden: np.ndarray | None = None,
) -> bytes:
    """The fallback picture of ``result`` with position ``selected`` (-1: none) as PNG bytes
    (:func:`fallback_figure` at :data:`DPI`, :data:`PNG_SIZE` pixels). Raises what
    matplotlib raises: the widget catches it."""
    with warnings.catch_warnings():
        # A glyph missing from the font (CJK, emoji tokens) draws a box; its warning would
        # otherwise print under the cell at every display.
        warnings.simplefilter("ignore")
        return _png(fallback_figure(result, selected, view=view, hidden=hidden))


def fallback_figure(
    result: AttributionResult,
    selected: int = -1,
    *,
    view: str = "heatmap",
    hidden: np.ndarray | None = None,
) -> Figure:
    """The fallback picture as a :class:`~matplotlib.figure.Figure` of :data:`FIGSIZE`.

    The heatmap of at most :data:`MAX_ROWS` positions around ``selected`` (its row
    outlined; the positions in ``hidden``, the folded template, left out) and the detail of
    one position: ``selected`` when it has a target, else the last position that has one
    (none: the heatmap alone). A ``view`` other than ``"heatmap"`` (the grid or compare
    tab) is named in the title, which says that the picture shows the heatmap.
    """
    T = len(result.tokens)
    has_target = (np.asarray(result.target_ids) >= 0) & np.isfinite(np.asarray(result.delta_p))
    detail = _detail_position(has_target, selected)
    shown = np.setdiff1d(np.arange(T), [] if hidden is None else hidden)
    if not shown.size:  # nothing but template: show it rather than nothing
        shown = np.arange(T)
    centre = selected if 0 <= selected < T else (detail if detail is not None else 0)
    rows = _window(shown, centre)
    fig = new_figure(*FIGSIZE)
    fig.set_dpi(DPI)
    if detail is None:
        ax_heat, ax_token = fig.add_subplot(), None
    else:
        ax_heat, ax_token = fig.subplots(1, 2, width_ratios=[1.2, 1.0])
    plot_heatmap(result, ax=ax_heat, positions=rows, max_label_len=10)
    ax_heat.set_title("contribution of each segment (outlined: onset)", fontsize=8)
    _thin_ticks(ax_heat.get_xticklabels())
    if selected in rows:
        from matplotlib.patches import Rectangle

        k, row = len(result.segment_labels), int(np.flatnonzero(rows == selected)[0])
        ax_heat.add_patch(Rectangle((0, row), k, 1, fill=False, edgecolor=ACCENT, linewidth=2.0))
    if ax_token is not None and detail is not None:
        plot_token(result, detail, ax=ax_token, max_label_len=10)
        # its title's second line, the completeness check, wraps before "(error …)"
        ax_token.set_title(ax_token.get_title().replace("  (", "\n("), fontsize=7.5)
        ax_token.set_ylabel("segment contribution", fontsize=8)  # the colour bar says of what
    # (no y=: the constrained layout makes room only for a suptitle it places itself)
    fig.suptitle(_title(result, view, rows, T), fontsize=9, ha="left", x=0.01, usetex=False)
    return fig


def _thin_ticks(labels: list[Any]) -> None:
    """Keep about a dozen of the heatmap's segment labels (every one up to 16 segments)."""
    step = 1 if len(labels) <= 16 else -(-len(labels) // 12)
    for j, label in enumerate(labels):
        label.set_visible((j + 1) % step == 0 or j == 0)


def _detail_position(has_target: np.ndarray, selected: int) -> int | None:
    if 0 <= selected < len(has_target) and has_target[selected]:
        return selected
    ok = np.flatnonzero(has_target)
    return int(ok[-1]) if ok.size else None


def _window(shown: np.ndarray, centre: int) -> np.ndarray:
    """At most :data:`MAX_ROWS` consecutive positions of ``shown`` (sorted), around the first
    one at or after ``centre`` (in the middle when it can be)."""
    n = min(len(shown), MAX_ROWS)
    at = min(int(np.searchsorted(shown, centre)), len(shown) - 1)
    start = min(max(at - n // 2, 0), len(shown) - n)
    return shown[start : start + n]


def _prompt(result: AttributionResult) -> str:
    prompt = result.request.prompt
    if isinstance(prompt, str):
        return prompt
    return "".join(result.tokens[: result.prompt_length or len(result.tokens)])


def _title(result: AttributionResult, view: str, rows: np.ndarray, T: int) -> str:
    """Three lines, as the widget's own PNG export titles a figure (js/figures/titles.js)."""
    model = plot_label(result.model_name or result.family or "model", max_len=60)
    shown = VIEW_NAMES["heatmap"]
    heading = f"IG-Lens {shown} · {model}"
    if view != "heatmap":
        tab = VIEW_NAMES.get(view) or f"{plot_label(view, max_len=20)} tab"
        heading += f" (a static picture: the {tab} needs the live widget)"
    controls = result.request.controls()
    target = f"target: {plot_label(controls['target'], max_len=40)}"
    if result.contrast_ids is not None and controls["contrast"]:
        target += f" vs {plot_label(controls['contrast'], max_len=40)}"
    lens = lens_suffix(result).removeprefix(" — ")
    window = f" · positions {rows[0]}–{rows[-1]} of {T}" if len(rows) < T else ""
    if len(rows) and rows[-1] - rows[0] + 1 > len(rows):
        window += " (template folded)"
    return "\n".join(
        [
            heading,
            f"prompt: “{plot_label(_prompt(result), max_len=110)}”",
            f"{target}{' · ' + lens if lens else ''} · {result.request.estimator}, "
            f"m={result.request.steps} · {result.n_blocks} blocks{window}",
        ]
    )


def _png(fig: Figure) -> bytes:
    """``fig`` rendered by Agg at :data:`DPI`, as a palette PNG (a third of RGBA's bytes)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgb = Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB")
    out = io.BytesIO()
    rgb.quantize(COLORS, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(
        out, format="png", optimize=True
    )
    return out.getvalue()
