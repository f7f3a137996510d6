"""The widget's static fallback picture (issue 24): ``image/png`` beside the widget view in
its MIME bundle, for GitHub, nbviewer and offline nbconvert HTML (iglens_viz.widget.fallback).

Measured for docs/widget-protocol.md: the embedded SmolLM2-135M's "The capital of France is"
(5 positions, 30 blocks) gives a 13.2 kB PNG, "What is the capital of Vietnam?" with chat=True,
max_new_tokens=12 (47 positions) 17.0 kB; 0.7 s a picture on a loaded 2-core machine.
"""

from __future__ import annotations

import base64
import io
import logging

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.text import Text
from PIL import Image

from iglens_viz import IGLens
from iglens_viz.protocol.state import VIEWS
from iglens_viz.widget import IGLensWidget, fallback
from iglens_viz.widget.fallback import PNG_SIZE, fallback_figure, render_png
from tests.support.tiny_models import tiny_tokenizer
from tests.ui.helpers import synthetic_result

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
HOSTILE = [
    "$\\alpha$",
    "<script>alert(1)</script>",
    " $x^2$",
    "a_b^c",
    "$$",
    "\\frac{1}{2}",
    "\x1b[31m",
    "\u202e!",
]
# The picture's budget: a palette PNG (one byte a pixel before compression) of PNG_SIZE, a
# heatmap of MAX_ROWS × 30 cells beside a bar chart, compresses more than 6-fold.
MAX_BYTES = PNG_SIZE[0] * PNG_SIZE[1] // 6  # 44 kB at 720 × 368


def bundle_of(widget: IGLensWidget) -> tuple[dict, dict]:
    out = widget._repr_mimebundle_()
    assert isinstance(out, tuple)
    return out


def png_of(widget: IGLensWidget) -> bytes:
    data, _ = bundle_of(widget)
    return base64.b64decode(data["image/png"], validate=True)


@pytest.fixture(scope="module")
def widget():
    """A widget without a model (no lens needed to display one)."""
    return IGLensWidget(synthetic_result(T=12, n=6, seed=3))


@pytest.fixture(scope="module")
def bundle(widget):
    """The widget's bundle at its opening selection (drawn once for the module)."""
    return bundle_of(widget)


def test_bundle_keeps_the_widget_view_and_adds_a_png(widget, bundle):
    data, metadata = bundle
    assert set(data) == {"text/plain", WIDGET_VIEW, "image/png"}
    assert data[WIDGET_VIEW]["model_id"] == widget.model_id
    assert isinstance(data["image/png"], str)  # base64 text, as nbformat stores it
    assert isinstance(metadata, dict)


def test_png_decodes_at_the_figure_size(bundle):
    png = base64.b64decode(bundle[0]["image/png"], validate=True)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    image = Image.open(io.BytesIO(png))
    image.load()
    assert image.size == PNG_SIZE == (720, 368)
    assert image.mode == "P"  # a palette PNG
    pixels = np.asarray(image.convert("RGB"))
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 20  # drawn, not blank


def test_png_follows_the_selection_and_the_tab(widget):
    widget.selected = 2
    two = png_of(widget)
    widget.selected = 7
    seven = png_of(widget)
    assert two != seven
    assert png_of(widget) == seven  # the same view draws the same picture
    widget.view = "grid"
    try:
        grid = png_of(widget)
        title = fallback_figure(widget.attribution, 7, view="grid").get_suptitle()
    finally:
        widget.view = "heatmap"
    assert grid != seven
    assert "logit-lens grid needs the live widget" in title


@pytest.mark.parametrize("view", VIEWS)
def test_every_tab_is_named(widget, view):
    title = fallback_figure(widget.attribution, 3, view=view).get_suptitle()
    assert title.startswith("IG-Lens layer heatmap · synthetic")
    if view != "heatmap":
        assert f"the {fallback.VIEW_NAMES[view]} needs the live widget" in title


def test_long_result_shows_a_window_around_the_selection():
    result = synthetic_result(T=40, n=30, seed=1)
    fig = fallback_figure(result, 30)
    heat = fig.axes[0]
    labels = [t.get_text() for t in heat.get_yticklabels()]
    assert len(labels) == fallback.MAX_ROWS
    assert any(label.startswith("[30]") for label in labels)
    assert "positions 23–36 of 40" in fig.get_suptitle()
    png = render_png(result, 30)
    assert Image.open(io.BytesIO(png)).size == PNG_SIZE
    assert len(png) < MAX_BYTES < 60_000


def heat_positions(fig) -> list[int]:
    """The positions of the heatmap's rows, read back from their labels ("[12] tok…")."""
    return [int(t.get_text().split("]")[0][1:]) for t in fig.axes[0].get_yticklabels()]


def with_template(T: int = 40, prompt_length: int | None = None):
    """A synthetic result whose positions 0-19 and 26-29 are "chat template"."""
    result = synthetic_result(T=T, n=6, seed=5)
    result.template_positions = np.r_[0:20, 26:30]
    result.prompt_length = prompt_length
    return result


def test_the_folded_template_follows_the_strips_rule():
    result = with_template()
    template = result.template_positions.tolist()
    assert fallback.folded_positions(result, "shown", "lesson").tolist() == []
    assert fallback.folded_positions(result, "auto", "heatmap").tolist() == []
    assert fallback.folded_positions(result, "auto", "lesson").tolist() == template
    assert fallback.folded_positions(result, "folded", "grid").tolist() == template
    # a position that predicts the answer never folds: the answer starts at position 27
    answered = with_template(prompt_length=28)
    assert answered.answer_start == 27
    assert fallback.folded_positions(answered, "folded", "heatmap").tolist() == list(range(20)) + [
        26
    ]
    result.template_positions = None  # a prompt without a template
    assert fallback.folded_positions(result, "folded", "lesson").tolist() == []


def test_a_folded_template_is_left_out_of_the_window():
    result = with_template()
    hidden = result.template_positions
    fig = fallback_figure(result, 25, hidden=hidden)
    rows = heat_positions(fig)
    want = [p for p in range(40) if p not in set(hidden.tolist())][:14]  # 20-25, 30-37
    assert rows == want and 25 in rows
    accent = to_rgba(fallback.ACCENT)
    (box,) = [p for p in fig.axes[0].patches if p.get_edgecolor() == accent]  # the selection
    assert box.get_xy()[1] == rows.index(25)  # the selected row, where it is drawn
    assert "positions 20–37 of 40 (template folded)" in fig.get_suptitle()
    assert heat_positions(fallback_figure(result, 25)) == list(range(18, 32))  # unfolded


def test_the_widget_draws_what_its_strip_shows():
    result = with_template()
    w = IGLensWidget(result, selected=25)
    assert png_of(w) == render_png(result, 25, view="heatmap")  # "auto" outside the lesson
    w.view = "lesson"
    folded = render_png(result, 25, view="lesson", hidden=result.template_positions)
    assert png_of(w) == folded != render_png(result, 25, view="lesson")
    w.template = "shown"
    assert png_of(w) == render_png(result, 25, view="lesson")


def test_hostile_tokens_are_drawn_as_text_not_math():
    result = synthetic_result(tokens=HOSTILE, n=4, seed=2)
    fig = fallback_figure(result, 0)
    fig.canvas.draw()  # every text laid out: a mathtext parse error would raise here
    texts = [t for t in fig.findobj(Text) if t.get_text()]
    assert any("\\$\\alpha\\$" in t.get_text() for t in texts)  # escaped, drawn literally
    assert any("<script>" in t.get_text() for t in texts)
    for t in texts:
        assert not t.get_usetex(), t.get_text()
        assert t._preprocess_math(t.get_text())[1] is False, t.get_text()
    assert not any("\x1b" in t.get_text() or "\u202e" in t.get_text() for t in texts)
    png = render_png(result, 0)
    assert Image.open(io.BytesIO(png)).size == PNG_SIZE


def test_no_selection_and_no_target():
    result = synthetic_result(T=5, n=4, seed=4)
    fig = fallback_figure(result, -1)  # the last position is detailed
    assert "[4]" in fig.axes[1].get_title()
    result.target_ids[:] = -1  # nothing to detail: the heatmap alone
    fig = fallback_figure(result, -1)
    assert len([a for a in fig.axes if a.get_label() != "<colorbar>"]) == 1
    assert Image.open(io.BytesIO(render_png(result, -1))).size == PNG_SIZE


def test_a_model_widget_draws_its_prompt(llama):
    lens = IGLens(llama, tiny_tokenizer())
    w = lens.widget("w3 w5 w7 w9 w11", target="predicted")
    title = fallback_figure(w.attribution, w.selected).get_suptitle()
    assert "prompt: “w3 w5 w7 w9 w11”" in title
    png = png_of(w)
    assert Image.open(io.BytesIO(png)).size == PNG_SIZE
    assert len(png) < MAX_BYTES


def test_ipython_formats_it_and_nbformat_stores_it(widget):
    nbformat = pytest.importorskip("nbformat")
    from IPython.core.formatters import DisplayFormatter

    data, metadata = DisplayFormatter().format(widget)
    assert {WIDGET_VIEW, "image/png", "text/plain"} <= set(data)
    output = nbformat.v4.new_output("display_data", data=data, metadata=metadata)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[output])])
    nbformat.validate(nb)


def test_a_failing_picture_never_breaks_the_widget(widget, monkeypatch, caplog):
    def broken(w):
        raise RuntimeError("no picture today")

    monkeypatch.setattr(fallback, "fallback_png", broken)
    with caplog.at_level(logging.WARNING):
        data, _ = bundle_of(widget)
    assert set(data) == {"text/plain", WIDGET_VIEW}
    assert "no picture today" in caplog.text


def test_an_excluded_picture_is_never_drawn(widget, monkeypatch):
    # display(w, exclude=["image/png"]) (the Voilà app) skips the picture and its cost
    from IPython.core.formatters import DisplayFormatter

    drawn = []
    monkeypatch.setattr(fallback, "fallback_png", lambda w: drawn.append(w) or b"")
    data, _ = DisplayFormatter().format(widget, exclude=["image/png"])
    assert WIDGET_VIEW in data and "image/png" not in data
    assert drawn == []
    data, _ = DisplayFormatter().format(widget)
    assert "image/png" in data and drawn == [widget]
