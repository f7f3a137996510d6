"""The exported page of the real default model on the Vietnam prompt, in light and dark."""

from __future__ import annotations

import pytest

import iglens_viz
from iglens_viz.export import to_html

from .helpers import PageRecorder

pytestmark = [pytest.mark.browser, pytest.mark.real_model]

PROMPT = "What is the capital of Vietnam?"


@pytest.fixture(scope="module")
def vietnam(tmp_path_factory):
    model, tokenizer = iglens_viz.load_model()
    result = iglens_viz.IGLens(model, tokenizer).attribute(PROMPT, chat=True, max_new_tokens=12)
    path = tmp_path_factory.mktemp("vietnam") / "vietnam.html"
    # The position after "... is": its target is the answer's city (" Ho" of "Hoi An", the
    # model's answer, as tests/test_real_model.py knows).
    answer = [int(i) for i in result.answer_positions if result.tokens[i].strip() == "is"]
    assert answer, result.tokens[result.prompt_length :]
    to_html(result, path, selected=answer[0])
    return result, path, answer[0]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_vietnam_page(browser, vietnam, scheme, tmp_path):
    result, path, selected = vietnam
    context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    recorder = PageRecorder().attach(page)
    page.goto(path.as_uri())
    page.wait_for_selector(f"[data-selected-index='{selected}']", timeout=30_000)
    assert page.locator("[data-token-index]").count() == len(result.tokens)
    detail = page.locator("[data-selected-index]").first.text_content()
    assert result.target_tokens[selected].strip() in detail
    # The completeness check is shown in plain numbers: Σ contributions vs Δp.
    text = detail.replace("\u2212", "-")
    assert "\u03a3 contributions" in text and "\u0394p" in text
    dp = result.delta_p[selected]
    assert f"{dp:+.4f}" in text or f"{dp:+.3f}" in text, (dp, text)
    shot = tmp_path / f"{scheme}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000
    context.close()
    assert recorder.console_errors == [] and recorder.page_errors == []
    assert recorder.network == []


def test_vietnam_page_in_present_mode_fits_1024x768(browser, vietnam):
    """A classroom projector: the selected answer token (in the strip's box), the heatmap and
    the cumulative curve on one screen, the page not scrolled; ⤓ PNG and ⤓ SVG on one line."""
    from .test_present_a11y import MEASURE, assert_fits

    _, path, selected = vietnam
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.goto(path.as_uri())
    page.wait_for_selector(f"[data-selected-index='{selected}']", timeout=30_000)
    page.click("[data-action=present]")
    page.wait_for_timeout(300)
    assert_fits(page.evaluate(MEASURE), ("token", "heatmap", "curve"))
    context.close()
