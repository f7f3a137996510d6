"""The logit-lens grid, the compare view and the PNG/SVG export, in an exported page.

Headless Chromium from file://: the views render, link to the selection, show what Python
computed (top-k lists, cumulative curves, the shared colour limit), and the export buttons
download an SVG that parses and carries the title block, and a real PNG.
"""

from __future__ import annotations

import dataclasses
import struct
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import iglens_viz
from iglens_viz.export import to_html
from iglens_viz.views.token_format import format_token
from iglens_viz.widget.compare import shared_limit

from .helpers import PageRecorder, synthetic_result
from .test_jupyterlab import lab, lab_page  # noqa: F401 - fixtures for the live widget's test

pytestmark = pytest.mark.browser

PWN = "<img src=x onerror=window.__pwned=1>"
TOKENS = [
    " The",
    " capital",
    " of",
    PWN,
    " is",
    "</script><script>window.__pwned=2</script>",
    " Han",
    "oi",
    "\u2028&amp;<b>bold</b>",
    ".",
]
TIMEOUT = 30_000
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def result():
    res = synthetic_result(tokens=TOKENS, n=6, seed=5)
    # hostile text among the lens's top tokens too
    text = dict(res.token_text)
    text[int(res.top_ids[2, 3, 0])] = PWN
    return dataclasses.replace(res, token_text=text)


@pytest.fixture(scope="module")
def page_url(result, tmp_path_factory):
    path = tmp_path_factory.mktemp("grid") / "page.html"
    to_html(result, path)
    return path.as_uri()


@pytest.fixture(scope="module")
def compared():
    a = synthetic_result(tokens=TOKENS, n=6, seed=5)
    b = synthetic_result(T=7, n=6, seed=9)
    b = dataclasses.replace(b, contributions=b.contributions * 3.0)  # b sets the shared limit
    return a, b


@pytest.fixture(scope="module")
def compare_url(compared, tmp_path_factory):
    a, b = compared
    path = tmp_path_factory.mktemp("compare") / "compare.html"
    iglens_viz.compare(a, b, labels=["first prompt", PWN]).to_html(path)
    return path.as_uri()


def open_page(page, url):
    recorder = PageRecorder().attach(page)
    page.goto(url)
    page.wait_for_selector("[data-token-index]", timeout=TIMEOUT)
    return recorder


def clean(page, recorder):
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert recorder.console_errors == [] and recorder.page_errors == []
    assert recorder.network == []


def attr(page, selector, name):
    return page.evaluate(f"document.querySelector({selector!r})?.getAttribute({name!r}) ?? null")


def values(page, selector) -> np.ndarray:
    text = attr(page, selector, "data-values")
    assert text is not None, selector
    return np.array([float(v) for v in text.split(",")])


def cumulative(contributions_row) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.asarray(contributions_row, dtype=np.float64))])


# ------------------------------------------------------------------------------------- grid


def test_grid_renders_links_and_lists_the_top_tokens(page, page_url, result):
    recorder = open_page(page, page_url)
    page.click("[data-view-tab='grid']")
    grid = page.locator("[data-view='grid']")
    grid.wait_for(state="visible", timeout=TIMEOUT)
    assert not page.locator(".iglens-heatmap").is_visible()
    # The grid opens on the selected (last) position's column, scrolled into view.
    last = len(TOKENS) - 1
    assert attr(page, ".iglens-grid-topk", "data-position") == str(last)
    assert int(attr(page, "[data-view='grid']", "data-last-column")) == last
    # Selecting the first token in the strip scrolls the grid back to column 0.
    page.click("[data-token-index='0']")
    page.wait_for_function(
        "document.querySelector('[data-view=grid]').getAttribute('data-first-column') === '0'",
        timeout=TIMEOUT,
    )
    canvas = page.locator("canvas.iglens-grid-canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box and box["width"] > 200 and box["height"] > 100
    # Click along one row, left to right: every column in turn selects its position, and
    # the detail panel and the token strip follow.
    seen = []
    y = box["y"] + box["height"] * 0.5
    x = 2.0
    while x < box["width"] - 2:
        page.mouse.click(box["x"] + x, y)
        pos = attr(page, ".iglens-grid-topk", "data-position")
        if pos is not None and (not seen or seen[-1] != pos):
            seen.append(pos)
            page.wait_for_selector(f"[data-selected-index='{pos}']", timeout=TIMEOUT)
            assert attr(page, f"[data-token-index='{pos}']", "aria-selected") == "true"
        x += 12
    shown = [int(p) for p in seen]
    assert len(shown) >= 3 and shown == list(range(shown[0], shown[0] + len(shown))), shown
    assert shown[0] == 0
    # The listed cell's top-k is Python's top_ids at (position, boundary), as text.
    for i, j in ((shown[-1], None), (2, 3)):
        if j is not None:  # reach cell (2, 3) with the keyboard from the last click
            page.click("[data-token-index='2']")
            canvas.focus()
            row = int(attr(page, ".iglens-grid-topk", "data-boundary"))
            for _ in range(abs(row - 3)):
                page.keyboard.press("ArrowUp" if row > 3 else "ArrowDown")
            assert attr(page, ".iglens-grid-topk", "data-position") == "2"
        j = int(attr(page, ".iglens-grid-topk", "data-boundary"))
        items = page.locator(".iglens-grid-topk-item")
        want = [int(t) for t in result.top_ids[i, j] if t >= 0]
        ids = [int(items.nth(q).get_attribute("data-token-id")) for q in range(items.count())]
        assert ids == want
        chips = [items.nth(q).locator(".iglens-chip").text_content() for q in range(items.count())]
        assert chips == [format_token(result.token_text[t], max_len=18) for t in want]
    assert format_token(PWN, max_len=18) in page.locator(".iglens-grid-topk").text_content()
    # Selecting in the strip moves the grid's column.
    page.click("[data-token-index='7']")
    page.wait_for_function(
        "document.querySelector('.iglens-grid-topk')?.getAttribute('data-position') === '7'",
        timeout=TIMEOUT,
    )
    # The colour toggle.
    page.click("[data-grid-color='contribution']")
    assert attr(page, "[data-view='grid']", "data-grid-color") == "contribution"
    assert (
        page.locator(".iglens-grid-legend .iglens-legend-title").text_content()
        == "contribution to p(target)"
    )
    clean(page, recorder)


# ---------------------------------------------------------------------------------- compare


def test_compare_page_shares_one_scale_and_overlays_pinned_curves(page, compare_url, compared):
    a, b = compared
    recorder = open_page(page, compare_url)
    view = page.locator("[data-view='compare']")
    view.wait_for(state="visible", timeout=TIMEOUT)  # compare() opens on this tab
    assert attr(page, "[data-view-tab='compare']", "aria-selected") == "true"
    panels = page.locator(".iglens-compare-panel")
    assert panels.count() == 2
    both = np.concatenate([a.contributions.ravel(), b.contributions.ravel()]).astype(np.float32)
    limit = float(np.abs(both).max())
    for q in range(2):
        assert float(panels.nth(q).get_attribute("data-limit")) == pytest.approx(limit, rel=1e-6)
    assert float(panels.nth(1).get_attribute("data-limit")) == pytest.approx(
        shared_limit([a, b]), rel=1e-6
    )
    assert PWN in panels.nth(1).text_content()  # the label, as text
    # Each row is labelled with its token (as text), in a column left of the canvas.
    for q, res in ((0, a), (1, b)):
        row_labels = panels.nth(q).locator(".iglens-compare-row-label")
        rows = [int(v) for v in row_labels.evaluate_all("(els) => els.map((e) => e.dataset.row)")]
        assert rows and rows[0] == 0 and set(rows) <= set(range(len(res.tokens)))
        texts = row_labels.evaluate_all("(els) => els.map((e) => e.textContent)")
        assert texts == [format_token(res.tokens[i], max_len=12) for i in rows]
        label_box = row_labels.first.bounding_box()
        canvas_box = panels.nth(q).locator("canvas").bounding_box()
        assert label_box["x"] + label_box["width"] <= canvas_box["x"] + 0.5
        assert canvas_box["y"] <= label_box["y"] + 0.5 <= canvas_box["y"] + canvas_box["height"]
    # The default pins: each result's last position; their curves are Python's cumsums.
    for r, res in ((0, a), (1, b)):
        i = len(res.tokens) - 1
        got = values(page, f".iglens-compare-curve[data-result='{r}'][data-position='{i}']")
        np.testing.assert_allclose(got, cumulative(res.contributions[i]), atol=2e-6)
        if r == 0:  # (b's contributions were scaled, its Δp was not)
            assert got[-1] == pytest.approx(res.delta_p[i], abs=1e-5)  # ends at Δp
    # A click on a row of b's panel pins it: a new curve, with b's numbers at that row.
    canvas = panels.nth(1).locator("canvas")
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.3)
    page.wait_for_function(
        "document.querySelectorAll('.iglens-compare-curve[data-result=\"1\"]').length === 2",
        timeout=TIMEOUT,
    )
    positions = page.evaluate(
        "[...document.querySelectorAll('.iglens-compare-curve"
        '[data-result="1"]\')].map((e) => +e.dataset.position)'
    )
    new = [i for i in positions if i != len(b.tokens) - 1]
    assert len(new) == 1
    np.testing.assert_allclose(
        values(page, f".iglens-compare-curve[data-result='1'][data-position='{new[0]}']"),
        cumulative(b.contributions[new[0]]),
        atol=2e-6,
    )
    # The lens value on the y axis instead.
    page.select_option("select[name='compare_y']", "p")
    last = len(a.tokens) - 1
    np.testing.assert_allclose(
        values(page, f".iglens-compare-curve[data-result='0'][data-position='{last}']"),
        a.lens_probs[last],
        atol=2e-6,
    )
    # Pin the selected token of the first result with the button.
    page.click("[data-token-index='2']")
    page.click("[data-action='pin']")
    page.wait_for_selector(
        ".iglens-compare-curve[data-result='0'][data-position='2']:not(.iglens-compare-preview)",
        timeout=TIMEOUT,
    )
    clean(page, recorder)


# ----------------------------------------------------------------------------------- export


def _texts(svg_bytes: bytes):
    root = ET.fromstring(svg_bytes)
    assert root.tag == f"{SVG}svg"
    tags = {el.tag for el in root.iter()}
    assert not any(t.endswith(("}img", "}script", "}foreignObject")) for t in tags), tags
    title = root.find(f"{SVG}title").text
    return title, ["".join(t.itertext()) for t in root.iter(f"{SVG}text")], root


@pytest.mark.parametrize("view", ["heatmap", "grid", "compare"])
def test_export_buttons_download_an_svg_with_the_title_and_a_png(page, page_url, result, view):
    recorder = open_page(page, page_url)
    page.click(f"[data-view-tab='{view}']")
    page.wait_for_selector(f"[data-view='{view}']", state="visible", timeout=TIMEOUT)
    with page.expect_download(timeout=TIMEOUT) as info:
        page.click("[data-export='svg']")
    download = info.value
    assert download.suggested_filename == f"iglens-{view}-synthetic.svg"
    with open(download.path(), "rb") as f:
        title, texts, _ = _texts(f.read())
    prompt = format_token("".join(result.tokens), max_len=120)
    for needle in (
        "synthetic",
        f"prompt: \u201c{prompt}\u201d",
        "target: predicted",
        "estimator: prediction_aware, m=1",
    ):
        assert needle in title, (needle, title)
        assert any(needle in t for t in texts), (needle, texts[:5])
    # below the view, the detail panel's charts of the selected (last) token, titled
    last = len(TOKENS) - 1
    heading = (
        f"detail of position {last}: {format_token(result.tokens[last], max_len=24)} \u2192 "
        f"{format_token(result.target_tokens[last], max_len=24)}"
    )
    assert heading in texts, [t for t in texts if t.startswith("detail")]
    assert "(b) p(target) after block L" in texts
    if view == "grid":  # the exported cells (the columns in view) hold the lens's top-1 tokens
        first = int(attr(page, "[data-view='grid']", "data-first-column"))
        last = int(attr(page, "[data-view='grid']", "data-last-column"))
        assert 0 <= first <= last == len(TOKENS) - 1  # it opened on the selected (last) token
        top1 = {
            format_token(result.token_text[int(result.top_ids[i, j, 0])], max_len=8)
            for i in range(first, last + 1)
            for j in range(result.top_ids.shape[1])
        }
        assert top1 <= set(texts)
        assert (
            any(t.endswith(f"positions {first}\u2013{last} of {len(TOKENS)}") for t in texts)
            or first == 0
        )
    with page.expect_download(timeout=TIMEOUT) as info:
        page.click("[data-export='png']")
    download = info.value
    assert download.suggested_filename == f"iglens-{view}-synthetic.png"
    with open(download.path(), "rb") as f:
        png = f.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    assert width >= 2 * 560 and height >= 2 * 200  # drawn at twice the density
    assert attr(page, ".iglens-export-status", "role") == "status"
    assert (
        page.locator(".iglens-export-status").text_content() == f"saved iglens-{view}-synthetic.png"
    )
    clean(page, recorder)


def test_compare_export_names_every_result(page, compare_url):
    recorder = open_page(page, compare_url)
    page.wait_for_selector("[data-view='compare']", state="visible", timeout=TIMEOUT)
    with page.expect_download(timeout=TIMEOUT) as info:
        page.click("[data-export='svg']")
    with open(info.value.path(), "rb") as f:
        title, texts, root = _texts(f.read())
    assert "IG-Lens comparison" in title
    assert any(t.startswith("A: first prompt") for t in texts)
    assert any(t.startswith(f"B: {format_token(PWN, max_len=70)}") for t in texts)
    images = list(root.iter(f"{SVG}image"))
    assert len(images) == 2  # one heatmap per result, on the shared scale
    assert all(im.get("href", "").startswith("data:image/png;base64,") for im in images)
    clean(page, recorder)


# ------------------------------------------------------------------------ the live widget


def test_grid_compare_and_export_in_jupyterlab(lab, lab_page):  # noqa: F811 - the fixtures
    """The same views in the live widget: the tab and a grid click reach Python, the export
    buttons download from inside JupyterLab."""
    from .test_jupyterlab import RENDER_TIMEOUT, python_state, run_cell, wait_for

    page = lab_page
    page.set_default_timeout(TIMEOUT)
    recorder = PageRecorder().attach(page, allow_hosts=(lab["host"],))
    page.goto(lab["url"])
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=RENDER_TIMEOUT)
    run_cell(page, 0)
    page.wait_for_selector(".jp-OutputArea [data-token-index]", timeout=RENDER_TIMEOUT)
    widget = page.locator(".jp-OutputArea").first
    widget.locator("[data-view-tab='grid']").click()
    grid = widget.locator("[data-view='grid']")
    grid.wait_for(state="visible", timeout=TIMEOUT)
    canvas = grid.locator("canvas.iglens-grid-canvas")
    # the strip scrolls the grid to column 0; then, along a row, the next column that answers
    # a click selects its position, in JS and in Python
    widget.locator("[data-token-index='0']").click()
    page.wait_for_selector(".jp-OutputArea .iglens-grid-topk[data-position='0']", timeout=TIMEOUT)
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    seen = []
    x = 2.0
    while x < box["width"] - 2 and len(seen) < 2:
        page.mouse.click(box["x"] + x, box["y"] + box["height"] / 2)
        pos = widget.locator(".iglens-grid-topk").get_attribute("data-position")
        if pos is not None and pos not in seen:
            seen.append(pos)
        x += 12
    assert seen == ["0", "1"]
    page.wait_for_selector(".jp-OutputArea [data-selected-index='1']", timeout=TIMEOUT)
    wait_for(lambda: python_state(lab).get("selected") == 1, what="w.selected == 1")
    with page.expect_download(timeout=TIMEOUT) as info:
        widget.locator("[data-export='svg']").click()
    with open(info.value.path(), "rb") as f:
        title, _, _ = _texts(f.read())
    assert title.startswith("IG-Lens logit-lens grid") and "target: predicted" in title
    # compare: pin the selected token; the PNG export works from the widget too
    widget.locator("[data-view-tab='compare']").click()
    widget.locator("[data-action='pin']").click()
    page.wait_for_selector(
        ".jp-OutputArea .iglens-compare-curve[data-position='1']:not(.iglens-compare-preview)",
        timeout=TIMEOUT,
    )
    with page.expect_download(timeout=TIMEOUT) as info:
        widget.locator("[data-export='png']").click()
    with open(info.value.path(), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert recorder.page_errors == [] and recorder.network == []
