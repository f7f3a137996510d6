"""Issue 23's student view on an exported page in headless Chromium: the real default model's
answer to "What is the capital of Vietnam?" (``chat=True, max_new_tokens=12``, as
tests/test_real_model.py), exported with ``view = "lesson"`` and no ``selected=``.

At 1280×800 and 1024×768, light and dark, the page opens on the answer's content token
(``[41] ␣is → ␣Ho``) and shows the curve, the lens column and the top-5 header without
scrolling the page; the slider, the keys and play move the walk's cursor (the curve's line
and the column's row follow); the heatmap tab leaves the view and the lesson tab comes back.
The top 5's percentages are computed here from the result. With ``IGLENS_SCREENSHOTS`` set
to a folder, each page is saved there as ``lesson-{width}-{scheme}.png``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

import iglens_viz
from iglens_viz.protocol.opening import opening_position
from iglens_viz.views.token_format import format_token

from .helpers import STRIP_CUT, PageRecorder

pytestmark = [pytest.mark.browser, pytest.mark.real_model]

PROMPT = "What is the capital of Vietnam?"
SIZES = [(1280, 800), (1024, 768)]
OPENS_ON = 41  # [41] ␣is → ␣Ho

BOXES = """() => {
  const box = (sel) => {
    const el = document.querySelector(sel);
    if (!el) return null;
    const q = el.getBoundingClientRect();
    return {top: q.top, bottom: q.bottom, left: q.left, right: q.right, height: q.height};
  };
  return {
    scroll: document.scrollingElement.scrollHeight - window.innerHeight,
    curve: box('[data-view=lesson] svg.iglens-lesson-curve'),
    column: box('[data-view=lesson] [data-lesson-column]'),
    rows: box('[data-view=lesson] .iglens-lesson-rows'),
    top5: box('[data-view=lesson] [data-lesson-top5]'),
    walk: box('[data-view=lesson] .iglens-lesson-walk'),
  };
}"""


@pytest.fixture(scope="module")
def vietnam(tmp_path_factory):
    from iglens_viz.loading import DEFAULT_MODEL_NAME

    model, tokenizer = iglens_viz.load_model()
    result = iglens_viz.IGLens(model, tokenizer).attribute(PROMPT, chat=True, max_new_tokens=12)
    # the default model loads from a cache folder: its name, not the path, in the header
    result = dataclasses.replace(result, model_name=DEFAULT_MODEL_NAME)
    widget = result.widget()  # no selected=: it opens on the point
    widget.view = "lesson"
    path = tmp_path_factory.mktemp("lesson") / "lesson.html"
    widget.to_html(path)
    return result, path


def pct(p: float) -> str:
    """A probability as the student view says it: "45%", "6.1%", "<0.1%" (0 to 99.5%)."""
    v = 100 * float(p)
    if v == 0:
        return "0%"
    return "<0.1%" if v < 0.1 else f"{v:.1f}%" if v < 9.95 else f"{round(v)}%"


def top5_text(result, i: int, L: int = -1) -> list[str]:
    """The top 5 at position i after boundary L (the output) as the view says them: "␣Ho 45%"."""
    out = []
    for t, p in zip(result.top_ids[i, L, :5], result.top_probs[i, L, :5]):
        out.append(f"{format_token(result.token_text[int(t)], max_len=16)} {pct(p)}")
    return out


def open_lesson(browser, path: Path, width: int, height: int, scheme: str):
    context = browser.new_context(
        color_scheme=scheme, device_scale_factor=1, viewport={"width": width, "height": height}
    )
    page = context.new_page()
    page.set_default_timeout(30_000)
    recorder = PageRecorder().attach(page)
    page.goto(path.as_uri())
    page.wait_for_selector("[data-view=lesson] svg.iglens-lesson-curve", timeout=60_000)
    page.mouse.move(2, 2)
    page.wait_for_timeout(200)
    return context, page, recorder


def cursor(page) -> dict[str, str | None]:
    return page.evaluate(
        """() => {
          const v = document.querySelector('[data-view=lesson]');
          const row = v.querySelector('.iglens-lesson-row[aria-current=true]');
          return {view: v.dataset.cursor, curve: v.querySelector('svg').dataset.cursor,
                  row: row && row.dataset.block,
                  slider: v.querySelector('input[name=lesson-block]').value,
                  x: v.querySelector('.iglens-lesson-cursor').getAttribute('x1')};
        }"""
    )


def assert_cursor_at(page, L: int) -> str:
    c = cursor(page)
    assert (c["view"], c["curve"], c["row"], c["slider"]) == (str(L),) * 4, c
    return c["x"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(("width", "height"), SIZES)
def test_the_lesson_fits_the_window_and_opens_on_the_point(
    browser, vietnam, width, height, scheme, tmp_path
):
    result, path = vietnam
    context, page, recorder = open_lesson(browser, path, width, height, scheme)
    lesson = page.locator("[data-view=lesson]")
    assert lesson.get_attribute("data-position") == str(OPENS_ON)
    assert result.tokens[OPENS_ON] == " is" and result.target_tokens[OPENS_ON] == " Ho"
    selected = page.get_attribute(".iglens-strip [aria-selected=true]", "data-token-index")
    assert selected == str(OPENS_ON)
    # the near tie at the output, without a click: ␣Ho 45% · ␣H 41%
    items = page.eval_on_selector_all(
        "[data-lesson-top5] li",
        "els => els.map(e => e.querySelector('.iglens-chip').textContent + ' '"
        " + e.querySelector('.iglens-lesson-pct').textContent)",
    )
    assert items == top5_text(result, OPENS_ON)
    assert items[:2] == ["␣Ho 45%", "␣H 41%"]
    boxes = page.evaluate(BOXES)
    assert boxes["scroll"] <= 0, boxes  # the page does not scroll
    for name in ("curve", "column", "rows", "top5", "walk"):
        b = boxes[name]
        assert b is not None and b["height"] > 0, name
        assert b["top"] >= 0 and b["bottom"] <= height, (name, b)
        assert b["left"] >= 0 and b["right"] <= width, (name, b)
    assert boxes["rows"]["height"] >= 180  # the lens column's rows have room
    # no estimator, steps or head shares on screen
    shown = page.inner_text(".iglens-root")
    for word in ("m=1", "prediction_aware", "Riemann", "Heads and MLPs", "Δp"):
        assert word not in shown, word
    shots = os.environ.get("IGLENS_SCREENSHOTS")
    for folder in [tmp_path] + ([Path(shots)] if shots else []):
        page.screenshot(path=str(Path(folder) / f"lesson-{width}-{scheme}.png"))
    assert recorder.console_errors == [] and recorder.page_errors == []
    assert recorder.network == []
    context.close()


@pytest.mark.parametrize(("width", "height", "scheme"), [(1280, 800, "light"), (1024, 768, "dark")])
def test_the_walk_steps_with_the_slider_the_keys_and_play(browser, vietnam, width, height, scheme):
    result, path = vietnam
    k = len(result.boundaries) - 1
    context, page, recorder = open_lesson(browser, path, width, height, scheme)
    x_out = assert_cursor_at(page, k)  # opens at the output
    slider = page.locator("[data-view=lesson] input[name=lesson-block]")
    slider.focus()
    page.keyboard.press("Home")  # the slider's own keys
    x0 = assert_cursor_at(page, 0)
    page.keyboard.press("ArrowRight")
    x1 = assert_cursor_at(page, 1)
    assert float(x0) < float(x1) < float(x_out)  # the curve's line moves right
    # the view's keys: ←/→ step, space plays and pauses
    page.locator("[data-view=lesson]").focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert_cursor_at(page, 3)
    page.keyboard.press("ArrowLeft")
    assert_cursor_at(page, 2)
    readout = page.text_content("[data-view=lesson] .iglens-lesson-readout")
    assert readout.startswith("block 2 · the model's guess: ")
    page.keyboard.press(" ")
    page.wait_for_function(
        "() => Number(document.querySelector('[data-view=lesson]').dataset.cursor) >= 5"
    )
    page.keyboard.press(" ")
    paused = cursor(page)["view"]
    page.wait_for_timeout(1200)
    assert cursor(page)["view"] == paused
    # a sentence names block 30's new top guess, ␣Ho, and its probability
    sentences = page.eval_on_selector_all(
        ".iglens-lesson-event", "els => els.map(e => e.textContent)"
    )
    assert any(s.startswith(f"block {k}: ␣Ho becomes the top guess, 45%") for s in sentences)
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


def test_one_click_to_the_heatmap_and_back(browser, vietnam):
    _, path = vietnam
    context, page, recorder = open_lesson(browser, path, 1280, 800, "light")
    root = page.locator(".iglens-root")
    assert "iglens-lesson-mode" in root.get_attribute("class")
    assert not page.is_visible(".iglens-detail")
    page.click("[data-view-tab=heatmap]")
    page.wait_for_selector("[data-view=heatmap]", state="visible")
    assert page.is_hidden("[data-view=lesson]")
    assert "iglens-lesson-mode" not in root.get_attribute("class")
    assert page.is_visible(".iglens-detail") and page.is_visible(".iglens-answers")
    page.click("[data-view-tab=lesson]")
    page.wait_for_selector("[data-view=lesson] svg.iglens-lesson-curve", state="visible")
    assert page.is_hidden("[data-view=heatmap]")
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


# ---------------------------------------------------------------- issue 32, item 13


def test_the_status_line_says_each_number_once(browser, vietnam):
    """At every block the walk's line says the block, the model's guess and each followed
    probability, once: at the output ␣Ho is the guess, so "␣Ho 45%" is not said again."""
    result, path = vietnam
    k = len(result.boundaries) - 1
    token = format_token(result.target_tokens[OPENS_ON], max_len=16)
    context, page, recorder = open_lesson(browser, path, 1280, 800, "light")
    readout = page.locator("[data-view=lesson] .iglens-lesson-readout")
    page.locator("[data-view=lesson] .iglens-lesson-glossary").click()  # the view has the focus
    answer = result.answer.lens_probs.astype(np.float32)  # as the page has them (float32)
    lens = result.lens_probs[OPENS_ON].astype(np.float32)
    for L in range(k, -1, -1):
        guess = top5_text(result, OPENS_ON, L)[0]
        parts = [f"{'embeddings' if L == 0 else f'block {L}'}", f"the model's guess: {guess}"]
        parts.append(f"the whole answer {pct(answer[L])}")
        if f"{token} {pct(lens[L])}" != guess:
            parts.append(f"{token} {pct(lens[L])}")
        assert readout.text_content() == " · ".join(parts), L
        page.keyboard.press("ArrowLeft")
    assert readout.text_content().startswith("embeddings")
    assert page.locator("[data-view=lesson]").get_attribute("data-cursor") == "0"
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


STEPS = """() => {
  // the walk's list of steps: its scroll offset, and the steps cut at its top or bottom edge
  const list = document.querySelector('[data-view=lesson] .iglens-lesson-story');
  const box = list.getBoundingClientRect();
  const top = box.top + list.clientTop, bottom = top + list.clientHeight;
  const items = [...list.children].map((li) => li.getBoundingClientRect());
  const shown = items.map((q, n) => [n, q])
    .filter(([, q]) => q.bottom > top + 0.5 && q.top < bottom - 0.5);
  const current = [...list.children].findIndex((li) => li.querySelector('[aria-current=true]'));
  return {scrollTop: list.scrollTop, shown: shown.map(([n]) => n), current,
          cut: shown.filter(([, q]) => q.top < top - 0.5 || q.bottom > bottom + 0.5)
            .map(([n]) => n)};
}"""


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_the_walks_steps_open_at_the_first_and_show_whole(browser, vietnam, width, height):
    """The list of steps opens at its first step, whole; walking to each step shows it whole,
    and no step is ever cut at the list's edges."""
    _, path = vietnam
    context, page, recorder = open_lesson(browser, path, width, height, "light")
    steps = page.evaluate(STEPS)
    assert steps["scrollTop"] == 0 and steps["shown"][0] == 0 and steps["cut"] == [], steps
    blocks = page.eval_on_selector_all(
        "[data-view=lesson] .iglens-lesson-event", "els => els.map(e => Number(e.dataset.block))"
    )
    assert len(blocks) > len(steps["shown"])  # the list scrolls: some steps are out of view
    page.locator("[data-view=lesson] .iglens-lesson-glossary").click()
    page.keyboard.press("Home")
    at = 0
    for n, block in enumerate(blocks):
        for _ in range(block - at):
            page.keyboard.press("ArrowRight")
        at = block
        steps = page.evaluate(STEPS)
        assert steps["current"] == n and n in steps["shown"] and steps["cut"] == [], (block, steps)
    for block in reversed(blocks):  # and back, with the keys
        for _ in range(at - block):
            page.keyboard.press("ArrowLeft")
        at = block
        steps = page.evaluate(STEPS)
        assert steps["shown"] and steps["cut"] == [], (block, steps)
        assert blocks[steps["current"]] == block and steps["current"] in steps["shown"], steps
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


def test_escape_returns_to_the_answers_first_content_token(browser, vietnam):
    """Escape (no selection) brings the view back to where the page opened — Python's
    opening position, [41] ␣is → ␣Ho — not to the token before the answer."""
    result, path = vietnam
    want = opening_position(result.tokens, result.target_tokens, result.answer_start)
    assert want == OPENS_ON and result.answer.positions[0] != want
    context, page, recorder = open_lesson(browser, path, 1024, 768, "light")
    lesson = page.locator("[data-view=lesson]")
    page.click(".iglens-strip [data-token-index='44']")
    page.wait_for_selector("[data-view=lesson][data-position='44']")
    page.locator("[data-view=lesson] .iglens-lesson-glossary").click()
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.querySelector('.iglens-strip [aria-selected=true]')")
    assert lesson.get_attribute("data-position") == str(want)
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


@pytest.mark.parametrize(("width", "height"), [(700, 800), (1024, 768)])
@pytest.mark.parametrize("present", [False, True], ids=["default", "present"])
def test_the_strip_shows_whole_lines_of_tokens(browser, vietnam, width, height, present):
    """No line of tokens cut at the strip's edges, the answer's (the selected token's) whole,
    at 700 px too, and in presentation mode."""
    _, path = vietnam
    context, page, recorder = open_lesson(browser, path, width, height, "light")
    if present:
        page.click("[data-action=present]")
    for _ in range(2):  # as opened, and after a click on a token of another line
        page.wait_for_timeout(100)  # the frame after the strip's new size
        strip = page.evaluate(STRIP_CUT, page.query_selector(".iglens-root"))
        assert strip["cut"] == [] and strip["selected"], strip
        if width == 700:  # a narrow window: the strip scrolls, lines out of view
            assert strip["scroll"] > strip["height"], strip
        page.click(".iglens-strip [data-token-index='45']")
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()
