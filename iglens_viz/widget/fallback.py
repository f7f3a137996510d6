"""The widget's static fallback picture: a small PNG of the current view, drawn in Python.

A notebook saved with outputs keeps each output's whole MIME bundle. Where no widget
manager runs — GitHub's and nbviewer's notebook previews, ``jupyter nbconvert --to html``
opened offline — the widget view has nothing to draw, so
:meth:`IGLensWidget._repr_mimebundle_` puts this picture beside it as ``image/png``. Jupyter
front ends that render widgets rank the widget view above ``image/png`` and show the live
widget; the others show the picture (see ``docs/widget-protocol.md``, "The static fallback
picture", for which exporter picks which).

The picture is :func:`~iglens_viz.views.static.plot_heatmap` (a window of at most
:data:`MAX_ROWS` positions around the selection, the selected row outlined) beside
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
ACCENT = "#0969da"  # the widget's selection colour (js/export-image.js, light theme)
VIEW_NAMES = {
    "heatmap": "layer heatmap",
    "grid": "logit-lens grid",
    "compare": "compare view",
    "lesson": "lesson view",
}
"""How the title names each tab of the main view (``iglens_viz.protocol.VIEWS``)."""


def fallback_png(widget: IGLensWidget) -> bytes:
    """The PNG of ``widget``'s current view: its shown result, selection and tab."""
    return render_png(widget.attribution, int(widget.selected), view=str(widget.view))


def render_png(result: AttributionResult, selected: int = -1, *, view: str = "heatmap") -> bytes:
    """The fallback picture of ``result`` with position ``selected`` (-1: none) as PNG bytes
    (:func:`fallback_figure` at :data:`DPI`, :data:`PNG_SIZE` pixels). Raises what
    matplotlib raises: the widget catches it."""
    with warnings.catch_warnings():
        # A glyph missing from the font (CJK, emoji tokens) draws a box; its warning would
        # otherwise print under the cell at every display.
        warnings.simplefilter("ignore")
        return _png(fallback_figure(result, selected, view=view))


def fallback_figure(
    result: AttributionResult, selected: int = -1, *, view: str = "heatmap"
) -> Figure:
    """The fallback picture as a :class:`~matplotlib.figure.Figure` of :data:`FIGSIZE`.

    The heatmap of at most :data:`MAX_ROWS` positions around ``selected`` (its row
    outlined) and the detail of one position: ``selected`` when it has a target, else the
    last position that has one (none: the heatmap alone). A ``view`` other than
    ``"heatmap"`` (the grid or compare tab) is named in the title, which says that the
    picture shows the heatmap.
    """
    T = len(result.tokens)
    has_target = (np.asarray(result.target_ids) >= 0) & np.isfinite(np.asarray(result.delta_p))
    detail = _detail_position(has_target, selected)
    rows = _window(T, selected if 0 <= selected < T else (detail if detail is not None else 0))
    fig = new_figure(*FIGSIZE)
    fig.set_dpi(DPI)
    if detail is None:
        ax_heat, ax_token = fig.add_subplot(), None
    else:
        ax_heat, ax_token = fig.subplots(1, 2, width_ratios=[1.2, 1.0])
    plot_heatmap(result, ax=ax_heat, positions=rows, max_label_len=10)
    ax_heat.set_title("contribution of each segment (outlined: onset)", fontsize=8)
    _thin_ticks(ax_heat.get_xticklabels())
    if 0 <= selected < T and rows[0] <= selected <= rows[-1]:
        from matplotlib.patches import Rectangle

        k = len(result.segment_labels)
        ax_heat.add_patch(
            Rectangle((0, selected - rows[0]), k, 1, fill=False, edgecolor=ACCENT, linewidth=2.0)
        )
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


def _window(T: int, centre: int) -> np.ndarray:
    """At most :data:`MAX_ROWS` consecutive positions, ``centre`` among them (in the middle
    when it can be)."""
    n = min(T, MAX_ROWS)
    start = min(max(centre - n // 2, 0), T - n)
    return np.arange(start, start + n)


def _prompt(result: AttributionResult) -> str:
    prompt = result.request.prompt
    if isinstance(prompt, str):
        return prompt
    return "".join(result.tokens[: result.prompt_length or len(result.tokens)])


def _title(result: AttributionResult, view: str, rows: np.ndarray, T: int) -> str:
    """Three lines, as the widget's own PNG export titles a figure (js/export-image.js)."""
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
