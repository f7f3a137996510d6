"""Presentation mode on a 1024×768 projector, and axe-core on the exported page.

* Present mode at 1024×768: the strip's selected (answer) token, the main view (the
  heatmap's rows, the logit-lens grid's box with the selected column and the picked row, or
  the compare view's curves) and the cumulative curve are on screen together without
  scrolling the page; the export buttons share a line; the jump box's placeholder is not cut.
* axe-core (node_modules/axe-core, a devDependency), light and dark, in each view (and with
  the help, the non-monotone list and a pin open): no critical or serious violation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iglens_viz.export import to_html

from .helpers import PageRecorder, synthetic_result

pytestmark = pytest.mark.browser

TIMEOUT = 30_000
ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SELECTED = 40

MEASURE = """() => {
  const box = (el) => {
    if (!el) return null;
    const q = el.getBoundingClientRect();
    return {top: q.top, bottom: q.bottom};
  };
  const jump = document.querySelector('.iglens-jump-input');
  const cs = getComputedStyle(jump);
  const c = document.createElement('canvas').getContext('2d');
  c.font = cs.font;
  const inner = jump.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  return {
    scrollTop: document.scrollingElement.scrollTop,
    token: box(document.querySelector('.iglens-token.iglens-selected')),
    strip: box(document.querySelector('.iglens-strip')),
    heatmap: box(document.querySelector('.iglens-heatmap-body')),
    grid: box(document.querySelector('.iglens-grid-scroll')),
    compare: box(document.querySelector('.iglens-compare-chart')),
    curve: box(document.querySelectorAll('.iglens-detail svg.iglens-chart')[1]),
    exportTops: [...document.querySelectorAll('[data-export]')].map((b) => b.offsetTop),
    jump: {scrollWidth: jump.scrollWidth, clientWidth: jump.clientWidth,
           placeholder: c.measureText(jump.placeholder).width, inner},
  };
}"""

AXE_RUN = """async () => {
  const res = await axe.run(document, {resultTypes: ['violations']});
  return res.violations.map((v) => ({id: v.id, impact: v.impact, nodes: v.nodes.length,
    where: v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ': ' + n.failureSummary)}));
}"""


@pytest.fixture(scope="module")
def page_path(tmp_path_factory):
    """45 positions over 30 blocks, the last 9 predicting a generated answer."""
    result = synthetic_result(T=45, n=30, seed=7)
    result.prompt_length = 36
    assert SELECTED in result.answer_positions
    path = tmp_path_factory.mktemp("present") / "present.html"
    to_html(result, path, selected=SELECTED)
    return path


def assert_fits(m, parts, height=768, jump=True):
    """The page not scrolled; the selected token inside the strip's box; `parts` on screen;
    the export buttons on one line; the jump box's placeholder whole (the heatmap's: `jump`)."""
    assert m["scrollTop"] == 0, m
    token, strip = m["token"], m["strip"]
    assert strip["top"] <= token["top"] and token["bottom"] <= strip["bottom"], m
    for part in parts:
        assert m[part]["top"] >= 0 and m[part]["bottom"] <= height, (part, m)
    assert len(set(m["exportTops"])) == 1, m  # ⤓ PNG and ⤓ SVG on one line
    if not jump:
        return
    j = m["jump"]
    assert j["scrollWidth"] <= j["clientWidth"] and j["placeholder"] <= j["inner"], m


def open_page(browser, path, **kwargs):
    context = browser.new_context(**kwargs)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    recorder = PageRecorder().attach(page)
    page.goto(path.as_uri())
    page.wait_for_selector(".iglens-heatmap-canvas[data-row-height]")
    page.wait_for_timeout(150)
    return context, page, recorder


def test_present_mode_fits_a_1024x768_projector(browser, page_path):
    context, page, recorder = open_page(browser, page_path, viewport={"width": 1024, "height": 768})
    page.click("[data-action=present]")
    page.wait_for_timeout(300)
    assert page.get_attribute("[data-action=present]", "aria-pressed") == "true"
    assert_fits(page.evaluate(MEASURE), ("token", "strip", "heatmap", "curve"))
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


GRID_SHOWS = """() => {
  const grid = document.querySelector('[data-view=grid]');
  const scroller = document.querySelector('.iglens-grid-scroll');
  const canvas = document.querySelector('.iglens-grid-canvas');
  return {
    first: +grid.getAttribute('data-first-column'), last: +grid.getAttribute('data-last-column'),
    row: +document.querySelector('.iglens-grid-topk').getAttribute('data-boundary'),
    scrollTop: scroller.scrollTop, scrollMax: scroller.scrollHeight - scroller.clientHeight,
    clientHeight: scroller.clientHeight, canvasHeight: canvas.getBoundingClientRect().height,
  };
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("view", ["grid", "compare"])
def test_present_mode_fits_a_1024x768_projector_in_each_view(browser, page_path, view, scheme):
    """The grid (shorter in present mode: its rows scroll inside its own box) and the compare
    view fit like the heatmap. The grid's tab is chosen before presenting (the toggle lays
    the shown view out again), the compare's after."""
    context, page, recorder = open_page(
        browser, page_path, viewport={"width": 1024, "height": 768}, color_scheme=scheme
    )
    if view == "grid":
        page.click("[data-view-tab=grid]")
        page.wait_for_selector("[data-view=grid]:not([hidden])")
    page.click("[data-action=present]")
    page.wait_for_timeout(300)
    if view == "compare":
        page.click("[data-view-tab=compare]")
        page.wait_for_selector("[data-view=compare]:not([hidden])")
        page.wait_for_timeout(200)
    assert page.get_attribute("[data-action=present]", "aria-pressed") == "true"
    assert_fits(page.evaluate(MEASURE), ("token", "strip", view, "curve"), jump=False)
    if view == "grid":
        g = page.evaluate(GRID_SHOWS)
        # the selected column in view, and the picked (output) row: the rows scrolled to the
        # bottom, whose last row the box shows whole (the canvas is the box's height)
        assert g["first"] <= SELECTED <= g["last"], g
        assert g["row"] == 30 and g["scrollMax"] > 0 and g["scrollTop"] == g["scrollMax"], g
        assert g["clientHeight"] == g["canvasHeight"], g
        page.click("[data-action=present]")  # and back: the default, taller grid
        page.wait_for_timeout(300)
        assert page.evaluate(MEASURE)["grid"]["bottom"] > 768
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


def serious(violations):
    return [v for v in violations if v["impact"] in ("critical", "serious")]


@pytest.mark.skipif(not AXE.is_file(), reason="axe-core is not installed (npm ci)")
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_violation(browser, page_path, scheme):
    context, page, recorder = open_page(
        browser,
        page_path,
        viewport={"width": 1280, "height": 900},
        color_scheme=scheme,
        bypass_csp=True,  # the page's CSP admits its own script only: axe is injected
    )
    page.add_script_tag(path=str(AXE))
    page.click(".iglens-help-toggle")
    page.click(".iglens-nonmono-summary")
    page.wait_for_selector(".iglens-jump-item")
    found = {}
    for view in ("heatmap", "grid", "compare"):
        page.click(f"[data-view-tab={view}]")
        page.wait_for_selector(f"[data-view={view}]:not([hidden])")
        page.wait_for_timeout(200)
        found[view] = serious(page.evaluate(AXE_RUN))
        if view == "compare":  # and with a pin: the pins' list has items
            page.click(".iglens-pin")
            page.wait_for_selector(".iglens-compare-pin")
            found["compare, pinned"] = serious(page.evaluate(AXE_RUN))
    page.click("[data-action=present]")
    page.click("[data-view-tab=heatmap]")
    page.wait_for_timeout(200)
    found["present"] = serious(page.evaluate(AXE_RUN))
    assert all(v == [] for v in found.values()), found
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


def test_chart_values_by_keyboard(browser, page_path):
    """Tab reaches the detail's charts; arrow keys read each segment's value aloud (the readout)."""
    context, page, _ = open_page(browser, page_path, viewport={"width": 1280, "height": 900})
    bars = page.locator(".iglens-detail svg[aria-label='segment contributions']")
    bars.focus()
    readout = page.locator(".iglens-readout")
    assert readout.get_attribute("aria-live") == "polite"
    page.keyboard.press("Home")
    assert "block 1" in readout.text_content() and "contribution" in readout.text_content()
    page.keyboard.press("ArrowRight")
    assert "block 2" in readout.text_content()
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert focused != "segment contributions"
    context.close()
