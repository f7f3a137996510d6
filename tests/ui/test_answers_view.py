"""Issue 22's widget half on an exported page in headless Chromium: a widget of a tiny random
Llama made with ``lens.widget(prompt, answer=, versus=)``, exported; a span picked in the
token strip (shift-click, drag, Shift+→) shows its ledger, the whole answer's by default, and
the answer vs answer view shows the differential ledger and the gap at the output.

Expected values come from the Python result (``result.answer``, ``result.comparison``, the
span's sums of ``result.lens_logprobs`` computed here with numpy), never from the widget's
code. The page gets float32 arrays: values are compared at float32 precision.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iglens_viz import IGLens
from iglens_viz.export import to_html
from iglens_viz.views.token_format import format_token, visible_text

from .helpers import PageRecorder

pytestmark = pytest.mark.browser

TIMEOUT = 30_000
PROMPT = "w5 w17 w3 w42 w8"
ANSWER, VERSUS = " w9 w11", " w7"
LO, HI = 1, 3  # a span of prompt positions


@pytest.fixture(scope="module")
def widget():
    """The notebook's way: ``lens.widget(prompt, answer=, versus=)`` (attribute's kwargs)."""
    from tests.support.tiny_models import tiny_model, tiny_tokenizer

    lens = IGLens(tiny_model("llama"), tiny_tokenizer())
    return lens.widget(PROMPT, answer=ANSWER, versus=VERSUS)


@pytest.fixture(scope="module")
def result(widget):
    r = widget.attribution
    assert r.answer is not None and r.comparison is not None and r.lens_logprobs is not None
    return r


@pytest.fixture(scope="module")
def page_url(widget, tmp_path_factory):
    path = tmp_path_factory.mktemp("answers") / "answers.html"
    to_html(widget, path)  # the widget exported as it is
    return path.as_uri()


@pytest.fixture
def opened(page, page_url):
    recorder = PageRecorder().attach(page)
    page.goto(page_url)
    page.wait_for_selector(".iglens-span-panel", timeout=TIMEOUT)
    yield page
    assert recorder.console_errors == [] and recorder.page_errors == []
    assert recorder.network == []


def span_expected(result, lo: int, hi: int) -> dict[str, np.ndarray | float]:
    """The span's ledger from the result's lens_logprobs (as sent: float32), with numpy."""
    rows = np.asarray(result.lens_logprobs[lo : hi + 1], dtype=np.float32).astype(np.float64)
    joint = rows.sum(axis=0)
    return {"bars": np.diff(rows, axis=1).sum(axis=0), "logprob": joint[-1], "logprob0": joint[0]}


def numbers(page, selector: str, attr: str) -> np.ndarray:
    values = page.eval_on_selector_all(
        selector, f"els => els.map(e => Number(e.getAttribute('{attr}')))"
    )
    return np.asarray(values, dtype=np.float64)


def panel(page) -> dict[str, str | None]:
    return page.eval_on_selector(
        ".iglens-span-panel",
        "p => ({source: p.dataset.source ?? null,"
        " lo: p.dataset.lo ?? null, hi: p.dataset.hi ?? null})",
    )


def assert_span_ledger(page, result):
    want = span_expected(result, LO, HI)
    assert panel(page) == {"source": "positions", "lo": str(LO), "hi": str(HI)}
    np.testing.assert_allclose(
        numbers(page, ".iglens-span-panel rect.iglens-span-bar", "data-value"),
        want["bars"],
        rtol=1e-6,
        atol=1e-6,
    )
    for attr in ("logprob", "logprob0"):
        got = numbers(page, ".iglens-span-sum", f"data-{attr}")[0]
        assert got == pytest.approx(float(want[attr]), rel=1e-6)
    chips = page.eval_on_selector_all(
        ".iglens-strip [data-in-span]", "els => els.map(e => Number(e.dataset.tokenIndex))"
    )
    assert chips == list(range(LO, HI + 1))


def test_the_whole_answer_is_shown_by_default(opened, result):
    page = opened
    answer = result.answer
    assert panel(page)["source"] == "answer"
    np.testing.assert_allclose(
        numbers(page, ".iglens-span-panel rect.iglens-span-bar", "data-value"),
        answer.logprob_contributions,
        rtol=1e-5,
        atol=1e-6,
    )
    assert numbers(page, ".iglens-span-sum", "data-logprob")[0] == pytest.approx(
        answer.logprob, rel=1e-9
    )
    assert numbers(page, ".iglens-span-sum", "data-logprob0")[0] == pytest.approx(
        answer.lens_logprobs[0], rel=1e-6
    )
    text = page.text_content(".iglens-span-sum")
    assert "Σ = log p(span) − log F₀" in text
    assert "✓" in text
    curve = page.get_attribute(".iglens-span-panel polyline.iglens-span-curve", "data-values")
    np.testing.assert_allclose(
        np.asarray(curve.split(), dtype=np.float64), answer.lens_probs, rtol=1e-5, atol=1e-30
    )


def test_shift_click_shows_the_span_ledger_and_escape_clears_it(opened, result):
    page = opened
    page.click(f".iglens-strip [data-token-index='{LO}']")
    page.click(f".iglens-strip [data-token-index='{HI}']", modifiers=["Shift"])
    assert_span_ledger(page, result)
    # the anchor stays the selected token (the detail previews the hovered one)
    selected = ".iglens-strip [aria-selected=true]"
    assert page.get_attribute(selected, "data-token-index") == str(LO)
    page.keyboard.press("Escape")
    assert panel(page)["source"] == "answer"
    assert page.eval_on_selector_all(".iglens-strip [data-in-span]", "els => els.length") == 0


def test_a_drag_across_tokens_and_shift_arrows_make_the_same_span(opened, result):
    page = opened
    a = page.locator(f".iglens-strip [data-token-index='{LO}']").bounding_box()
    mid = page.locator(f".iglens-strip [data-token-index='{LO + 1}']").bounding_box()
    b = page.locator(f".iglens-strip [data-token-index='{HI}']").bounding_box()
    page.mouse.move(a["x"] + a["width"] / 2, a["y"] + a["height"] / 2)
    page.mouse.down()
    page.mouse.move(mid["x"] + mid["width"] / 2, mid["y"] + mid["height"] / 2, steps=3)
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2, steps=3)
    page.mouse.up()
    assert_span_ledger(page, result)
    page.keyboard.press("Escape")
    page.click(f".iglens-strip [data-token-index='{LO}']")
    for _ in range(HI - LO):
        page.keyboard.press("Shift+ArrowRight")
    assert_span_ledger(page, result)


def test_answer_vs_answer_shows_the_differential_ledger_and_the_gap(opened, result):
    page = opened
    comparison = result.comparison
    gap = page.locator(".iglens-versus-gap")
    assert float(gap.get_attribute("data-logprob-gap")) == pytest.approx(
        comparison.logprob_gap, rel=1e-9
    )
    assert float(gap.get_attribute("data-prob-gap")) == pytest.approx(comparison.prob_gap, rel=1e-9)
    assert f"{comparison.logprob_gap:+.4f}".replace("-", "−") in gap.text_content()
    assert page.get_attribute(".iglens-versus", "data-space") == "prob"  # it opens there
    page.click(".iglens-versus button[data-space=log]")
    assert page.get_attribute(".iglens-versus-onset", "data-onset") == str(comparison.onset)
    np.testing.assert_allclose(
        numbers(page, ".iglens-versus rect.iglens-versus-bar", "data-value"),
        comparison.logprob_contributions,
        rtol=1e-5,
        atol=1e-6,
    )
    legend = page.eval_on_selector_all(
        ".iglens-versus .iglens-key[data-answer]", "els => els.map(e => e.textContent)"
    )
    # the answers' texts as the page's token formatter mirrors Python's (leading space as ␣)
    assert legend == [
        format_token(visible_text(ledger.text, keep=""), max_len=40)
        for ledger in (result.answer, result.versus)
    ]
    page.click(".iglens-versus button[data-space=prob]")
    assert page.get_attribute(".iglens-versus", "data-space") == "prob"
    assert page.get_attribute(".iglens-versus-onset", "data-onset") == str(comparison.prob_onset)
    np.testing.assert_allclose(
        numbers(page, ".iglens-versus rect.iglens-versus-bar", "data-value"),
        comparison.prob_contributions,
        rtol=1e-5,
        atol=1e-9,
    )


AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
AXE_RUN = """async () => {
  const res = await axe.run(document.querySelector('.iglens-answers'),
                            {resultTypes: ['violations']});
  return res.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({id: v.id, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' '))}));
}"""


@pytest.mark.skipif(not AXE.is_file(), reason="axe-core is not installed (npm ci)")
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_violation_in_the_answers_panel(browser, page_url, scheme):
    context = browser.new_context(
        viewport={"width": 1280, "height": 900},
        color_scheme=scheme,
        bypass_csp=True,  # the page's CSP admits its own script only: axe is injected
    )
    page = context.new_page()
    page.goto(page_url)
    page.wait_for_selector(".iglens-span-panel", timeout=TIMEOUT)
    page.add_script_tag(path=str(AXE))
    found = {"answer": page.evaluate(AXE_RUN)}
    page.click(f".iglens-strip [data-token-index='{LO}']")
    page.click(f".iglens-strip [data-token-index='{HI}']", modifiers=["Shift"])
    page.click(".iglens-versus button[data-space=prob]")
    found["span, probability space"] = page.evaluate(AXE_RUN)
    context.close()
    assert all(v == [] for v in found.values()), found
