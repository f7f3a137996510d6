"""The heatmap fits its scroller: no horizontal scrollbar (the last column is never clipped),
and a short prompt gets no scrollbar at all, in an exported page opened in Chromium.

The canvas used to be sized from the heatmap body's width, which ignores the scroller's
border and a classic (space-taking) scrollbar: 12 px too wide, the last column clipped, and a
5-row heatmap with two scrollbars that half-hid its selected bottom row.
"""

from __future__ import annotations

import pytest

from iglens_viz.export import to_html

from .helpers import PageRecorder, launch_chromium, synthetic_result

pytestmark = pytest.mark.browser

TIMEOUT = 30_000

MEASURE = """() => {
  const s = document.querySelector('.iglens-heatmap-scroll');
  const c = document.querySelector('.iglens-heatmap-canvas');
  return {scrollWidth: s.scrollWidth, clientWidth: s.clientWidth, scrollHeight: s.scrollHeight,
          clientHeight: s.clientHeight, canvas: c.getBoundingClientRect().width,
          bar: s.offsetWidth - s.clientWidth - 2};
}"""


@pytest.fixture(scope="module")
def classic_browser(playwright_instance):
    """Chromium with classic scrollbars that take room (as on Windows and Linux desktops):
    headless Chromium hides scrollbars unless Playwright's --hide-scrollbars is left out."""
    browser = launch_chromium(playwright_instance, ignore_default_args=["--hide-scrollbars"])
    yield browser
    browser.close()


def open_page(browser, tmp_path, T, width):
    result = synthetic_result(T=T, n=8, seed=3)
    path = tmp_path / f"heatmap-{T}.html"
    to_html(result, path)
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    recorder = PageRecorder().attach(page)
    page.goto(path.as_uri())
    page.wait_for_selector(".iglens-heatmap-canvas[data-row-height]", timeout=TIMEOUT)
    page.wait_for_timeout(100)
    return context, page, recorder


@pytest.mark.parametrize("classic", [False, True], ids=["overlay", "classic"])
@pytest.mark.parametrize("T", [5, 90])
def test_heatmap_is_no_wider_than_its_scroller(request, tmp_path, T, classic):
    browser = request.getfixturevalue("classic_browser" if classic else "browser")
    context, page, recorder = open_page(browser, tmp_path, T, 1100)
    m = page.evaluate(MEASURE)
    assert m["scrollWidth"] == m["clientWidth"], m
    if T == 5:  # every row fits: no vertical scrollbar either
        assert m["scrollHeight"] == m["clientHeight"], m
    else:  # rows scroll, and the canvas leaves room for the vertical scrollbar
        assert m["scrollHeight"] > m["clientHeight"], m
        assert m["canvas"] <= m["clientWidth"], m
        if classic:  # the scrollbar takes room here: the case the layout used to get wrong
            assert m["bar"] > 0, m
    # a resize lays out again and still fits
    page.set_viewport_size({"width": 800, "height": 900})
    page.wait_for_timeout(200)
    m = page.evaluate(MEASURE)
    assert m["scrollWidth"] == m["clientWidth"], m
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


def test_selected_bottom_row_of_a_short_heatmap_is_in_view(classic_browser, tmp_path):
    context, page, _ = open_page(classic_browser, tmp_path, 5, 1100)
    page.evaluate("document.querySelector('[data-token-index=\"4\"]').click()")
    page.wait_for_timeout(100)
    box = page.evaluate("""() => {
      const s = document.querySelector('.iglens-heatmap-scroll');
      const c = document.querySelector('.iglens-heatmap-canvas');
      const rowH = Number(c.dataset.rowHeight), headH = Number(c.dataset.headerHeight);
      const top = c.getBoundingClientRect().top;
      return {rowBottom: top + headH + 5 * rowH,
              viewBottom: s.getBoundingClientRect().top + s.clientTop + s.clientHeight};
    }""")
    assert box["rowBottom"] <= box["viewBottom"] + 0.5, box
    context.close()
