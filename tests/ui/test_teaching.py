"""Issue 11, "a widget a teacher can project": the composite view's findings 1–8 and 10 on
exported pages in headless Chromium (finding 9, the lazy per-token path, needs a kernel:
tests/ui/test_jupyterlab.py).

Expected values come from Python (the non-monotone rule of ``iglens_viz.core.trajectory``,
the result's arrays) and from the page's own geometry (scroll offsets, row heights), never
from the widget's code under test.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from iglens_viz.core.trajectory import NONMONOTONE_THRESHOLD, against_segments
from iglens_viz.export import to_html

from .helpers import PageRecorder, synthetic_result

pytestmark = pytest.mark.browser

TIMEOUT = 30_000
T, N = 80, 12
ANSWER = 60  # where the page opens: the position predicting the answer's first token
# (prompt_length − 1; its target occurs nowhere in the prompt: iglens_viz.protocol.opening)
NBSP_TARGET = "\u00a0Ha"
REVERSALS = (9, 23, 41)  # positions made strongly non-monotone


@pytest.fixture(scope="module")
def result():
    r = synthetic_result(T=T, n=N, K=5, seed=3)
    # a generated answer after position 60, and a no-break space in that target's text
    text = dict(r.token_text)
    text[int(r.target_ids[ANSWER])] = NBSP_TARGET
    targets = list(r.target_tokens)
    targets[ANSWER] = NBSP_TARGET
    # the random walks drift one way; three positions rise and then fall back by more than the
    # non-monotone threshold (60% of the largest move), so the page has both kinds
    lens = r.lens_probs.copy()
    for i in REVERSALS:
        lens[i] = np.interp(np.arange(N + 1), [0, N // 2, N], [lens[i, 0], 0.85, 0.3])
    contributions = np.diff(lens, axis=1)
    top_probs = r.top_probs.copy()
    top_probs[:, :, 0] = np.maximum(top_probs[:, :, 0], lens)
    return dataclasses.replace(
        r,
        prompt_length=ANSWER + 1,
        token_text=text,
        target_tokens=targets,
        lens_probs=lens,
        contributions=contributions,
        delta_p=lens[:, -1] - lens[:, 0],
        onset=(np.argmax(contributions, axis=1) + 1).astype(np.int64),
        top_probs=top_probs,
    )


@pytest.fixture(scope="module")
def page_url(result, tmp_path_factory):
    path = tmp_path_factory.mktemp("teach") / "page.html"
    to_html(result, path)
    return path.as_uri()


@pytest.fixture(scope="module")
def long_url(tmp_path_factory):
    path = tmp_path_factory.mktemp("teach-long") / "long.html"
    to_html(synthetic_result(T=512, n=30, K=5, seed=0, vocab=49152), path)
    return path.as_uri()


def open_page(page, url, width=1280, height=900):
    page.set_viewport_size({"width": width, "height": height})
    recorder = PageRecorder().attach(page)
    page.goto(url)
    page.wait_for_selector("[data-token-index]", timeout=TIMEOUT)
    page.wait_for_function(
        "document.querySelector('canvas.iglens-heatmap-canvas')?.hasAttribute('data-first-row')",
        timeout=TIMEOUT,
    )
    page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return recorder


def frames(page, n=2):
    page.evaluate(
        f"new Promise((r) => {{ let k = {n}; const f = () => --k ? "
        f"requestAnimationFrame(f) : r(); requestAnimationFrame(f); }})"
    )


def geometry(page) -> dict:
    """The heatmap's scroll offset (the scroller's, as the browser has it) and row geometry."""
    return page.evaluate("""() => {
      const c = document.querySelector('canvas.iglens-heatmap-canvas');
      const s = document.querySelector('.iglens-heatmap-scroll');
      const box = c.getBoundingClientRect();
      return {scrollTop: s.scrollTop, viewH: s.clientHeight, drawnTop: Number(c.dataset.scrollTop),
              rowH: Number(c.dataset.rowHeight), headerH: Number(c.dataset.headerHeight),
              labelW: Number(c.dataset.labelWidth), x: box.x, y: box.y, w: box.width};
    }""")


def hovered(page) -> list[str]:
    return page.evaluate(
        "[...document.querySelectorAll('.iglens-token.iglens-hovered')]"
        ".map((e) => e.dataset.tokenIndex)"
    )


def row_y(g, row):
    """Client y of the middle of a row, from the scroller's offset."""
    return g["y"] + g["headerH"] + row * g["rowH"] - g["scrollTop"] + g["rowH"] / 2


def overlay_alpha(page, x, y) -> int:
    """Alpha of the overlay canvas (selection, hover) at CSS pixel (x, y) of the canvas."""
    return page.evaluate(
        """([x, y]) => {
      const o = document.querySelector('.iglens-heatmap-overlay');
      const k = o.width / o.getBoundingClientRect().width;
      return o.getContext('2d').getImageData(Math.round(x * k), Math.round(y * k), 1, 1).data[3];
    }""",
        [x, y],
    )


def expected_nonmonotone(result) -> list[int]:
    return [
        i
        for i in range(len(result.input_ids))
        if np.isfinite(result.delta_p[i])
        and against_segments(
            result.contributions[i], result.delta_p[i], NONMONOTONE_THRESHOLD
        ).any()
    ]


# ------------------------------------------------------------------ 3. opens on the answer


def test_page_opens_on_the_answer_with_both_views_scrolled_to_it(page, page_url):
    recorder = open_page(page, page_url)
    assert page.get_attribute("[data-selected-index]", "data-selected-index") == str(ANSWER)
    # the strip shows the token (inside its own scroll box and the window)
    inside = page.evaluate(f"""() => {{
      const t = document.querySelector('[data-token-index="{ANSWER}"]').getBoundingClientRect();
      const s = document.querySelector('.iglens-strip').getBoundingClientRect();
      return t.top >= s.top - 1 && t.bottom <= s.bottom + 1 && t.bottom <= innerHeight;
    }}""")
    assert inside
    # the heatmap's visible rows include it: hovering at its row (by the scroller's
    # offset) previews that very token
    g = geometry(page)
    first = g["scrollTop"] / g["rowH"]
    last = (g["scrollTop"] + g["viewH"] - g["headerH"]) / g["rowH"]
    assert g["scrollTop"] > 0 and first <= ANSWER < last - 1
    page.mouse.move(g["x"] + g["w"] - 20, row_y(g, ANSWER))
    page.wait_for_function(
        f"document.querySelector('[data-token-index=\"{ANSWER}\"]')"
        ".classList.contains('iglens-hovered')"
    )
    assert recorder.page_errors == [] and recorder.console_errors == []


# ------------------------------------------------------------------ 1. theme switch


def test_theme_switch_while_detached_keeps_rows_hover_and_selection(page, page_url):
    open_page(page, page_url)
    page.evaluate("document.querySelector('.iglens-heatmap-scroll').scrollTop = 400")
    frames(page)
    g = geometry(page)
    assert g["scrollTop"] == 400 and g["drawnTop"] == 400
    row = int((400 + 5 * g["rowH"] + 3) // g["rowH"])  # the sixth visible row
    page.mouse.click(g["x"] + g["w"] - 20, row_y(g, row))
    page.wait_for_selector(f"[data-selected-index='{row}']", timeout=TIMEOUT)
    page.mouse.move(0, 0)
    dark_before = page.evaluate(
        "document.querySelector('.iglens-root').classList.contains('iglens-dark')"
    )
    # JupyterLab re-themes while cells are detached (windowed notebooks re-attach them):
    # the scroller reads 0 while out of the page
    page.evaluate(
        """(theme) => {
      const r = document.querySelector('.iglens-root'); const p = r.parentElement;
      p.removeChild(r); window.__iglens = [p, r];
      document.documentElement.setAttribute('data-iglens-theme', theme);
    }""",
        "light" if dark_before else "dark",
    )
    frames(page)
    page.evaluate("() => { const [p, r] = window.__iglens; p.appendChild(r); }")
    frames(page, 4)
    assert (
        page.evaluate("document.querySelector('.iglens-root').classList.contains('iglens-dark')")
        != dark_before
    )
    g = geometry(page)
    # redrawn at its own scroll position, and the scroller agrees with what is drawn
    assert g["scrollTop"] == 400 and g["drawnTop"] == 400
    # the selection box is drawn on the selected row's band of the gutter ...
    sel_y = row_y(g, row) - g["y"]
    assert overlay_alpha(page, 1, sel_y) > 0
    assert overlay_alpha(page, 1, sel_y + 3 * g["rowH"]) == 0
    # ... and hovering that row previews the same token
    page.mouse.move(g["x"] + g["w"] - 20, row_y(g, row + 2))
    page.wait_for_function(
        f"document.querySelector('[data-token-index=\"{row + 2}\"]')"
        ".classList.contains('iglens-hovered')"
    )
    assert hovered(page) == [str(row + 2)]


# ------------------------------------------------------------------ 2. narrow layout


def in_viewport(page, selector) -> bool:
    return page.evaluate(
        """(sel) => { const b = document.querySelector(sel).getBoundingClientRect();
      return b.bottom > 0 && b.top < innerHeight && b.height > 0; }""",
        selector,
    )


def test_at_700px_a_click_changes_something_in_view(page, page_url):
    open_page(page, page_url, width=700, height=800)
    assert not page.evaluate(
        "document.querySelector('.iglens-root').classList.contains('iglens-wide')"
    )
    # a strip click: the detail (placed right under the strip) shows the token, in view
    token = page.locator("[data-token-index='7']")
    token.scroll_into_view_if_needed()
    token.click()
    page.wait_for_selector("[data-selected-index='7']", timeout=TIMEOUT)
    head = "[data-selected-index='7'] .iglens-detail-head"
    assert in_viewport(page, head)
    assert "[7]" in page.text_content(head)
    # a heatmap click, scrolled down to the heatmap: the line above its rows names the row
    page.locator("canvas.iglens-heatmap-canvas").scroll_into_view_if_needed()
    g = geometry(page)
    row = int(g["scrollTop"] // g["rowH"]) + 2
    page.mouse.click(g["x"] + g["w"] - 20, row_y(g, row))
    page.wait_for_selector(f"[data-selected-index='{row}']", timeout=TIMEOUT)
    assert in_viewport(page, ".iglens-heatmap-summary")
    assert f"[{row}]" in page.text_content(".iglens-heatmap-summary")


# ------------------------------------------------------------------ 5. non-monotone tokens


def test_nonmonotone_tokens_are_marked_and_listed(page, page_url, result):
    open_page(page, page_url)
    want = expected_nonmonotone(result)
    assert 0 < len(want) < T  # the fixture has both kinds
    marked = page.evaluate(
        "[...document.querySelectorAll('[data-token-index][data-nonmonotone]')]"
        ".map((e) => Number(e.dataset.tokenIndex))"
    )
    assert marked == want
    page.click("details.iglens-nonmono-list > summary")  # the list is built when opened
    page.wait_for_selector("[data-jump]", timeout=TIMEOUT)
    listed = page.evaluate(
        "[...document.querySelectorAll('[data-jump]')].map((e) => Number(e.dataset.jump))"
    )
    assert listed == want
    summary = page.text_content(".iglens-nonmono-list")
    assert f"{len(want)} of {T}" in summary
    assert f"{NONMONOTONE_THRESHOLD:.0%}" in summary  # the threshold, stated
    # the heatmap marks them in the gutter (orange), and not the others
    rowh = geometry(page)["rowH"]
    page.evaluate(f"document.querySelector('.iglens-heatmap-scroll').scrollTop = {want[0] * rowh}")
    frames(page)
    g = geometry(page)
    first = int(np.ceil(g["scrollTop"] / g["rowH"]))
    rows = range(first, first + int((g["viewH"] - g["headerH"]) // g["rowH"]) - 1)
    mark_x = g["labelW"] - 4

    def gutter_rgb(row):
        return page.evaluate(
            """([x, y]) => {
          const c = document.querySelector('canvas.iglens-heatmap-canvas');
          const k = c.width / c.getBoundingClientRect().width;
          const px = c.getContext('2d').getImageData(Math.round(x * k), Math.round(y * k), 1, 1);
          return [...px.data].slice(0, 3);
        }""",
            [mark_x, row_y(g, row) - g["y"]],
        )

    flagged_row = next(i for i in want if i in rows)
    clean_row = next(i for i in rows if i not in want)
    assert gutter_rgb(flagged_row) == [0xF1, 0xA3, 0x40]
    assert gutter_rgb(clean_row) != [0xF1, 0xA3, 0x40]
    # "non-monotone" colouring: monotone tokens share the neutral colour, flagged ones do not
    page.select_option("select[name=color_by]", "nonmonotone")
    colours = page.evaluate(
        "[...document.querySelectorAll('[data-token-index]')]"
        ".map((e) => getComputedStyle(e).backgroundColor)"
    )
    monotone = {colours[i] for i in range(T) if i not in want and np.isfinite(result.delta_p[i])}
    assert len(monotone) == 1
    assert all(colours[i] not in monotone for i in want)
    # the list jumps: a click selects the token
    page.click(f"[data-jump='{want[-1]}']")
    page.wait_for_selector(f"[data-selected-index='{want[-1]}']", timeout=TIMEOUT)


# ------------------------------------------------------------------ 6. charts


def test_charts_have_ticks_titles_legend_and_readable_labels(page, page_url, result):
    open_page(page, page_url)
    charts = page.locator(".iglens-detail svg.iglens-chart")
    assert charts.count() == 3
    for q in range(3):
        ticks = charts.nth(q).locator(".iglens-xaxis .iglens-xtick-label")
        values = [float(ticks.nth(t).get_attribute("data-tick")) for t in range(ticks.count())]
        assert values[0] == 0 and values[-1] == N and values == sorted(values)
        assert [ticks.nth(t).text_content() for t in range(ticks.count())] == [
            str(int(v)) for v in values
        ]
        assert charts.nth(q).locator(".iglens-ytitle").count() == 1
    legend = page.text_content(".iglens-detail .iglens-chart-legend")
    assert "top-1" in legend and "p(target)" in legend
    # the no-break space of the target shows as a mark, never as a literal escape
    detail = page.text_content(".iglens-detail")
    assert "\\xa0" not in detail and "\u237dHa" in detail
    # presentation mode: every text at least 14 px
    page.click("[data-action=present]")
    frames(page)
    smallest = page.evaluate("""() => {
      const root = document.querySelector('.iglens-root');
      const texts = [...root.querySelectorAll('*')].filter((e) =>
        [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())
        && e.getClientRects().length);
      return Math.min(...texts.map((e) => parseFloat(getComputedStyle(e).fontSize)));
    }""")
    assert smallest >= 14
    canvas_font = page.evaluate(
        "document.querySelector('canvas.iglens-heatmap-canvas').getContext('2d').font"
    )
    assert canvas_font.startswith(("14px", "600 14px"))


# ------------------------------------------------------------------ 4. long prompts


def test_long_prompt_has_an_overview_and_jump_to(page, long_url):
    open_page(page, long_url)
    minimap = page.locator("[data-view=minimap]")
    assert minimap.is_visible()
    box = minimap.bounding_box()
    # a click near the bottom of the overview scrolls the rows there
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.95)
    frames(page)
    g = geometry(page)
    assert g["scrollTop"] / g["rowH"] > 400 and g["drawnTop"] == g["scrollTop"]
    # jump to a position by number
    page.fill("input[name=jump]", "300")
    page.press("input[name=jump]", "Enter")
    page.wait_for_selector("[data-selected-index='300']", timeout=TIMEOUT)
    frames(page)
    g = geometry(page)
    assert g["scrollTop"] <= 300 * g["rowH"] < g["scrollTop"] + g["viewH"] - g["headerH"]


# ------------------------------------------------------------------ 8. colour scale


def test_colour_limit_per_row_and_fixed(page, page_url, result):
    open_page(page, page_url)
    heat = ".iglens-heatmap"
    vmax = float(np.nanmax(np.abs(result.contributions)))
    assert float(page.get_attribute(heat, "data-limit")) == pytest.approx(vmax, rel=1e-6)
    page.select_option("select[name=heatmap_scale]", "row")
    assert page.get_attribute(heat, "data-scale") == "row"
    page.select_option("select[name=heatmap_scale]", "fixed")
    limit = page.locator("input[name=heatmap_limit]")
    assert limit.is_visible()
    assert float(limit.input_value()) == pytest.approx(vmax, rel=1e-2)
    limit.fill("0.5")
    limit.dispatch_event("change")
    assert page.get_attribute(heat, "data-limit") == "0.5"
    assert "fixed" in page.text_content(".iglens-heatmap-legend")


# ------------------------------------------------------------------ 10. the small ones


def test_header_legend_tooltip_and_title_at_700px(page, page_url, result):
    open_page(page, page_url, width=700, height=800)
    meta = page.locator(".iglens-meta")
    assert "target: predicted" in meta.text_content()
    assert page.evaluate(
        "[...document.querySelectorAll('.iglens-meta-part')]"
        ".every((e) => e.scrollWidth <= e.clientWidth + 1)"
    )
    # the legend's title and its first tick do not overlap (colour by Δp: "Δp", "−…")
    page.select_option("select[name=color_by]", "delta_p")
    gap = page.evaluate("""() => {
      const l = document.querySelector('.iglens-strip-legend');
      const title = l.querySelector('.iglens-legend-title').getBoundingClientRect();
      const tick = l.querySelector('.iglens-legend-tick').getBoundingClientRect();
      return tick.left - title.right;
    }""")
    assert gap >= 0
    # the tooltip keeps every line on one line
    g = geometry(page)
    page.locator("canvas.iglens-heatmap-canvas").scroll_into_view_if_needed()
    g = geometry(page)
    page.mouse.move(g["x"] + g["w"] - 20, row_y(g, int(g["scrollTop"] // g["rowH"]) + 1))
    page.wait_for_selector(".iglens-tooltip:not([hidden])", timeout=TIMEOUT)
    wrapped = page.evaluate("""() => [...document.querySelectorAll(
        '.iglens-tooltip .iglens-tt-row, .iglens-tooltip .iglens-tt-head')]
      .filter((e) => {
        const lh = parseFloat(getComputedStyle(e).fontSize) * 1.9;
        return e.getBoundingClientRect().height > lh;
      }).length""")
    assert wrapped == 0
    # the page title names the model and the prompt
    title = page.title()
    assert "synthetic" in title and "".join(result.tokens[:3]) in title
