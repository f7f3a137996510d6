"""Issue 23's template switch and teacher notes on an exported page in headless Chromium: the
real default model's answer to "What is the capital of Vietnam?" (``chat=True``,
``max_new_tokens=12``), exported in the student view with two notes written from Python (one
on ``[41] ␣is`` whose text is markup, one on block 25).

The template: the strip opens folded (the chips left are exactly the positions Python did not
mark, and the user's tokens among them spell the question), a click on a folded chip shows
every chip, the switch folds them again, and the selection and the lesson's position stay at
41 throughout; in the full view the template shows unless switched. The notes: both callouts
show their text as text (no element from it, no script run), the strip marks position 41;
a note added with the page's editor goes back through the widget's page-write path
(``set_state``, the comm's route), is exported again and shows in the new page. With
``IGLENS_SCREENSHOTS`` set to a folder, that page is saved there as
``lesson-notes-1280-light.png``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import iglens_viz

from .helpers import PageRecorder

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
AXE_RUN = """async () => {
  const res = await axe.run(document, {resultTypes: ['violations']});
  return res.violations.filter((v) => ['critical', 'serious'].includes(v.impact))
    .map((v) => ({id: v.id, impact: v.impact,
      where: v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ': ' + n.failureSummary)}));
}"""

pytestmark = [pytest.mark.browser, pytest.mark.real_model]

PROMPT = "What is the capital of Vietnam?"
OPENS_ON = 41  # [41] ␣is → ␣Ho
EVIL = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> look: H & Ho'
PAGE_NOTE = "<b>bold?</b> ask the class what block 0 guesses"


@pytest.fixture(scope="module")
def vietnam(tmp_path_factory):
    from iglens_viz.loading import DEFAULT_MODEL_NAME

    model, tokenizer = iglens_viz.load_model()
    result = iglens_viz.IGLens(model, tokenizer).attribute(PROMPT, chat=True, max_new_tokens=12)
    result = dataclasses.replace(result, model_name=DEFAULT_MODEL_NAME)
    widget = result.widget()
    widget.view = "lesson"
    widget.add_note(EVIL, position=OPENS_ON)
    widget.add_note("block 25: ␣Ho becomes the top guess", block=25)
    path = tmp_path_factory.mktemp("notes") / "lesson.html"
    widget.to_html(path)
    return result, widget, path


def open_page(browser, path, **kwargs):
    context = browser.new_context(
        viewport={"width": 1280, "height": 800}, device_scale_factor=1, **kwargs
    )
    page = context.new_page()
    page.set_default_timeout(30_000)
    recorder = PageRecorder().attach(page)
    page.goto(path.as_uri())
    page.wait_for_selector("[data-view=lesson] svg.iglens-lesson-curve", timeout=60_000)
    return context, page, recorder


SHOWN = """() => [...document.querySelectorAll('.iglens-strip [data-token-index]')]
  .filter(c => c.offsetParent !== null).map(c => Number(c.dataset.tokenIndex))"""


def state(page) -> dict:
    return page.evaluate(
        """() => ({
          position: document.querySelector('[data-view=lesson]').dataset.position,
          selected: document.querySelector('.iglens-strip [aria-selected=true]')
            ?.dataset.tokenIndex,
          checked: document.querySelector('input[name=hide_template]').checked,
          folds: [...document.querySelectorAll('.iglens-template-fold')]
            .map(f => [Number(f.dataset.foldStart), Number(f.dataset.foldEnd)]),
        })"""
    )


def test_the_template_folds_and_unfolds(browser, vietnam):
    result, _, path = vietnam
    T = len(result.tokens)
    template = [int(t) for t in result.template_positions]
    folded = [t for t in template if t < result.answer_start]
    context, page, recorder = open_page(browser, path)
    s = state(page)
    assert s["position"] == s["selected"] == str(OPENS_ON) and s["checked"] is True
    # the runs are those of Python's positions: the system turn + the user header, and the
    # end of the user turn + the assistant header
    runs = [[a, b] for a, b in s["folds"]]
    assert [t for a, b in runs for t in range(a, b + 1)] == folded
    assert len(runs) == 2
    shown = page.evaluate(SHOWN)
    assert shown == [t for t in range(T) if t not in folded]
    # what is left of the prompt is the user's question, token for token
    prompt_shown = [t for t in shown if t < result.prompt_length - 1]
    assert "".join(result.tokens[t] for t in prompt_shown) == PROMPT
    for tok in ("You", "<|im_start|>", "ass", "istant", " helpful"):
        assert all(result.tokens[t] != tok for t in shown), tok
    # a click on the chip unfolds; the selection and the lesson stay
    page.click(".iglens-template-fold >> nth=0")
    assert page.evaluate(SHOWN) == list(range(T))
    s = state(page)
    assert s["folds"] == [] and s["checked"] is False
    assert s["position"] == s["selected"] == str(OPENS_ON)
    page.check("input[name=hide_template]")
    assert page.evaluate(SHOWN) == shown
    assert state(page)["position"] == str(OPENS_ON)
    assert page.evaluate("() => window.iglens.handle.model.get('template')") == "folded"
    # the full view shows the template under "auto", and folds it when switched
    page.evaluate("() => window.iglens.handle.model.set('template', 'auto')")
    page.click("[data-view-tab=heatmap]")
    page.wait_for_selector("[data-view=heatmap]", state="visible")
    assert page.is_visible(".iglens-template-switch")
    assert page.evaluate(SHOWN) == list(range(T))
    page.check("input[name=hide_template]")
    assert page.evaluate(SHOWN) == shown
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


def test_notes_show_as_text_and_survive_export(browser, vietnam, tmp_path):
    result, widget, path = vietnam
    context, page, recorder = open_page(browser, path)
    texts = page.eval_on_selector_all(
        "[data-view=lesson] aside.iglens-note .iglens-note-text",
        "els => els.map(e => e.textContent)",
    )
    assert texts == [EVIL, "block 25: ␣Ho becomes the top guess"]
    assert page.evaluate("() => window.__pwned") is None
    assert page.query_selector("img[src=x]") is None
    assert page.query_selector(f".iglens-strip [data-token-index='{OPENS_ON}'].iglens-token-noted")
    # the block note moves the walk to block 25 and is highlighted there
    page.click("aside.iglens-note >> nth=1 >> .iglens-note-go")
    L = result.boundaries.index(25)
    assert page.get_attribute("[data-view=lesson]", "data-cursor") == str(L)
    assert "iglens-note-now" in page.get_attribute("aside.iglens-note >> nth=1", "class")
    # a note written in the page: the editor, pinned to this token at the walk's block
    page.click(".iglens-note-editor > summary")
    page.fill("textarea[name=note-text]", PAGE_NOTE)
    page.select_option("select[name=note-pin]", "both")
    page.click("[data-action=note-add]")
    page_notes = page.evaluate("() => window.iglens.handle.model.get('notes')")
    assert page_notes[-1] == {"position": OPENS_ON, "block": 25, "text": PAGE_NOTE}
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()
    # back through the widget's page-write path (what the comm calls), then exported again
    widget.set_state({"notes": page_notes})
    assert widget.notes == page_notes
    again = tmp_path / "again.html"
    widget.to_html(again)
    context, page, recorder = open_page(browser, again)
    texts = page.eval_on_selector_all(
        "aside.iglens-note .iglens-note-text", "els => els.map(e => e.textContent)"
    )
    assert texts == [EVIL, "block 25: ␣Ho becomes the top guess", PAGE_NOTE]
    assert page.query_selector("aside.iglens-note b") is None
    assert page.evaluate("() => window.__pwned") is None
    shots = os.environ.get("IGLENS_SCREENSHOTS")
    for folder in [tmp_path] + ([Path(shots)] if shots else []):
        page.screenshot(path=str(Path(folder) / "lesson-notes-1280-light.png"))
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()


@pytest.mark.skipif(not AXE.is_file(), reason="axe-core is not installed (npm ci)")
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_violation_with_folds_and_notes(browser, vietnam, scheme):
    _, _, path = vietnam
    # the page's CSP admits its own script only: axe is injected
    context, page, recorder = open_page(browser, path, color_scheme=scheme, bypass_csp=True)
    page.add_script_tag(path=str(AXE))
    assert page.locator(".iglens-template-fold").count() == 2
    assert page.locator("aside.iglens-note").count() == 2
    found = {"folded, notes": page.evaluate(AXE_RUN)}
    page.click(".iglens-note-editor > summary")
    found["editor open"] = page.evaluate(AXE_RUN)
    assert found == {"folded, notes": [], "editor open": []}, found
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()
