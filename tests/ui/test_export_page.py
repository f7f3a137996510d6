"""The exported HTML page in headless Chromium, opened from file://.

Linked selection (token strip → detail panel, heatmap → selection, keyboard), no console
errors, no request leaves the page, and hostile token strings render as text, never as markup.
"""

from __future__ import annotations

import pytest

from iglens_viz.export import to_html

from .helpers import PageRecorder, synthetic_result

pytestmark = pytest.mark.browser

PWN = "<img src=x onerror=window.__pwned=1>"
TOKENS = [
    "The",
    " capital",
    " of",
    " Vietnam",
    PWN,
    " is",
    "</script><script>window.__pwned=2</script>",
    " Han",
    "oi",
    "\u2028&amp;<b>bold</b>",
]
TIMEOUT = 30_000


@pytest.fixture(scope="module")
def result():
    return synthetic_result(tokens=TOKENS, n=6, steps=3, seed=5)


@pytest.fixture(scope="module")
def page_url(result, tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "iglens page.html"  # a space: URL-encoded
    to_html(result, path)
    return path.as_uri()


@pytest.fixture
def opened(page, page_url):
    recorder = PageRecorder().attach(page)
    page.goto(page_url)
    page.wait_for_selector("[data-token-index]", timeout=TIMEOUT)
    return page, recorder


def detail_index(page) -> str | None:
    """The detail panel's data-selected-index now (None when nothing is selected)."""
    return page.evaluate(
        "document.querySelector('[data-selected-index]')"
        "?.getAttribute('data-selected-index') ?? null"
    )


def test_page_renders_every_token_as_text(opened, result):
    page, recorder = opened
    assert page.evaluate("document.documentElement.dataset.iglensReady") == "true"
    tokens = page.locator("[data-token-index]")
    assert tokens.count() == len(TOKENS)
    indices = [tokens.nth(i).get_attribute("data-token-index") for i in range(len(TOKENS))]
    assert indices == [str(i) for i in range(len(TOKENS))]
    # The hostile strings are there as text (long ones shortened with "…", in full in the
    # title), maybe with visible whitespace marks ...
    text = tokens.nth(4).text_content()
    assert text.startswith("<img src=x onerror=window.__pwn")
    assert PWN in tokens.nth(4).get_attribute("title")
    assert "<b>bold</b>" in tokens.nth(9).text_content()
    assert "</script><script>" in tokens.nth(6).text_content()
    # ... and nothing they spell was created or ran.
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert page.evaluate("document.querySelectorAll('[onerror], [onload]').length") == 0
    assert (
        page.evaluate(
            "[...document.querySelectorAll('b')].filter((b) => b.textContent === 'bold').length"
        )
        == 0
    )
    assert page.evaluate("document.scripts.length") == 3
    assert page.locator("canvas.iglens-heatmap-canvas").count() == 1
    # Static export: controls hidden (no kernel to recompute).
    controls = page.locator(".iglens-controls")
    assert controls.count() == 0 or not controls.first.is_visible()
    assert recorder.console_errors == [] and recorder.page_errors == []
    assert recorder.network == []


def test_click_token_updates_detail_panel(opened, result):
    page, recorder = opened
    for i in (3, 7, 0, 1):
        page.click(f"[data-token-index='{i}']")
        page.wait_for_selector(f"[data-selected-index='{i}']", timeout=TIMEOUT)
        detail = page.locator("[data-selected-index]").first
        assert result.target_tokens[i].strip() in detail.text_content()
        assert page.get_attribute(f"[data-token-index='{i}']", "aria-selected") == "true"
        # The onset is a block number (AttributionResult.onset): the panel names that block.
        onset = detail.locator(".iglens-stat", has_text="onset").text_content()
        assert onset.split()[-1] == str(result.onset[i]), (i, onset, result.onset[i])
    # Hostile target text shows up as text in the panel too.
    hostile = [i for i, t in enumerate(result.target_tokens) if "<" in t]
    for i in hostile[:2]:
        page.click(f"[data-token-index='{i}']")
        page.wait_for_selector(f"[data-selected-index='{i}']", timeout=TIMEOUT)
    assert page.evaluate("window.__pwned") is None
    assert recorder.console_errors == [] and recorder.page_errors == []
    assert recorder.network == []


def test_heatmap_click_selects_its_row(opened):
    page, recorder = opened
    canvas = page.locator("canvas.iglens-heatmap-canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box and box["width"] > 100 and box["height"] > 100
    # Rows are positions, below a column header. Clicking down the canvas (row labels on the
    # left, then cells in the middle) must select every row in turn, top to bottom.
    for x in (8, box["width"] / 2):
        order, last = [], detail_index(page)
        y = 1.0
        while y < box["height"] - 1:
            page.mouse.click(box["x"] + x, box["y"] + y)
            now = detail_index(page)
            if now is not None and now != last:
                order.append((now, y))
                last = now
            y += 5
        rows = [int(i) for i, _ in order]
        assert rows == list(range(len(TOKENS))), (x, order)
    # The token strip follows a heatmap click.
    y6 = dict(order)["6"]
    page.mouse.click(box["x"] + 8, box["y"] + y6 + 2)
    page.wait_for_selector("[data-selected-index='6']", timeout=TIMEOUT)
    assert page.get_attribute("[data-token-index='6']", "aria-selected") == "true"
    assert recorder.console_errors == [] and recorder.page_errors == []


def test_keyboard_moves_the_selection(opened):
    page, _ = opened
    page.click("[data-token-index='2']")
    page.wait_for_selector("[data-selected-index='2']")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("[data-selected-index='3']", timeout=TIMEOUT)
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    page.wait_for_selector("[data-selected-index='1']", timeout=TIMEOUT)


def test_hover_previews_with_a_tooltip(opened):
    page, recorder = opened
    canvas = page.locator("canvas.iglens-heatmap-canvas").first
    box = canvas.bounding_box()
    tooltip = page.locator(".iglens-tooltip").first
    x = 4.0
    while x < box["width"] and not tooltip.is_visible():
        page.mouse.move(box["x"] + x, box["y"] + box["height"] / 2)
        x += 20
    tooltip.wait_for(state="visible", timeout=TIMEOUT)
    assert tooltip.text_content().strip()
    page.mouse.move(box["x"] + box["width"] + 200, box["y"] - 50)
    assert recorder.console_errors == [] and recorder.page_errors == []


def test_no_request_even_with_a_blocking_route(browser, page_url):
    """Every request is routed: anything but file:/data:/blob: would be recorded and aborted."""
    context = browser.new_context()
    leaked = []

    def route(request_route):
        url = request_route.request.url
        if url.startswith(("file:", "data:", "blob:")):
            request_route.continue_()
        else:
            leaked.append(url)
            request_route.abort()

    context.route("**/*", route)
    page = context.new_page()
    recorder = PageRecorder().attach(page)
    page.goto(page_url)
    page.wait_for_selector("[data-token-index]", timeout=TIMEOUT)
    page.click("[data-token-index='5']")
    page.wait_for_selector("[data-selected-index='5']", timeout=TIMEOUT)
    context.close()
    assert leaked == [] and recorder.network == []
    assert recorder.console_errors == [] and recorder.page_errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_both_colour_schemes_render(browser, page_url, scheme):
    context = browser.new_context(color_scheme=scheme, viewport={"width": 1100, "height": 800})
    page = context.new_page()
    recorder = PageRecorder().attach(page)
    page.goto(page_url)
    page.wait_for_selector("[data-token-index]", timeout=TIMEOUT)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    context.close()
    dark = background in ("rgb(17, 20, 24)",)
    assert dark == (scheme == "dark"), background
    assert recorder.console_errors == [] and recorder.page_errors == []


def test_head_shares_render_for_the_selected_token(browser, tmp_path):
    """A real (tiny) attribution with sub-layer boundaries and components: the heads section
    shows the selected token's shares of its onset segment, as numbers the result holds."""
    import numpy as np
    import torch

    from iglens_viz import IGLens
    from tests.support.tiny_models import random_ids, tiny_model

    result = IGLens(tiny_model("llama"), None).attribute(
        random_ids(6), boundaries="sublayer", components=True
    )
    path = tmp_path / "heads.html"
    to_html(result, path)
    page = browser.new_page()
    recorder = PageRecorder().attach(page)
    page.goto(path.as_uri())
    page.wait_for_selector('[data-view="components"]', timeout=TIMEOUT)
    selected = int(detail_index(page))
    segment = int(page.locator('[data-view="components"]').get_attribute("data-segment"))
    assert segment == result.onset_segment[selected]
    cells = page.locator('[data-view="components"] [data-component]')
    shown = {}
    for i in range(cells.count()):
        cell = cells.nth(i)
        shown[(int(cell.get_attribute("data-block")), cell.get_attribute("data-component"))] = (
            float(cell.get_attribute("data-share"))
        )
    inside = np.argwhere(result.component_segments == segment)
    expected = {
        (int(b) + 1, result.component_names[c]): result.component_shares[selected, b, c]
        for b, c in inside
    }
    assert set(shown) == set(expected)
    for key, value in expected.items():  # the payload is float32: one rounding
        assert abs(shown[key] - value) <= torch.finfo(torch.float32).eps * abs(value)
    assert np.isclose(sum(shown.values()), result.contributions[selected, segment], atol=1e-6)
    assert recorder.console_errors == recorder.page_errors == recorder.network == []
    page.close()


def test_exported_causal_check_draws_the_drops(browser, tmp_path):
    """A widget's causal check travels with its export: the selected token's drop bars (the
    trait's numbers), the caption; another token's button is off with the hint."""
    from iglens_viz import IGLens
    from iglens_viz.widget import show
    from tests.support.tiny_models import random_ids, tiny_model

    w = show(IGLens(tiny_model("llama"), None), None, random_ids(6))
    check = w.causal_check(w.selected)
    path = tmp_path / "causal.html"
    w.to_html(path)
    page = browser.new_page()
    recorder = PageRecorder().attach(page)
    page.goto(path.as_uri())
    page.wait_for_selector('[data-series="ablation"] [data-drop]', timeout=TIMEOUT)
    bars = page.locator('[data-series="ablation"] [data-drop]')
    shown = {
        int(bars.nth(i).get_attribute("data-segment")): float(
            bars.nth(i).get_attribute("data-drop")
        )
        for i in range(bars.count())
    }
    assert shown == dict(enumerate(check["drops"]))  # the same JSON numbers, exactly
    assert page.locator("[data-action=ablate]").count() == 0  # drops here: nothing to click
    direct = page.locator('[data-series="direct"] [data-direct]')
    assert [float(direct.nth(i).get_attribute("data-direct")) for i in range(direct.count())] == [
        v for v in check["direct"] if v is not None
    ]
    caption = page.locator(".iglens-ablation-caption").text_content()
    assert "Spearman total \u03c1" in caption and "direct \u03c1" in caption, caption
    assert "at the answer position" in caption, caption
    assert "readable" in page.locator(".iglens-ablation-sentence").text_content()
    assert page.locator(".iglens-ablation-controls").count() == 0  # no kernel: nothing to set
    page.locator(f"[data-token-index='{check['position'] - 1}']").click()
    button = page.locator("[data-action=ablate]")
    assert button.count() == 1 and button.is_disabled()
    assert page.locator('[data-series="ablation"]').count() == 0
    assert recorder.console_errors == recorder.page_errors == recorder.network == []
    page.close()
