"""Teacher notes and the template switch in a real JupyterLab, through a real kernel.

The notebook shows a widget on a tiny random Llama (tests/tiny_models.py) whose word-level
tokenizer is given a chat template (``w1 w2 {message} w3 w4 w6``), in the student view; an
observer in the kernel writes what Python holds (``notes``, ``template``, and the page
``to_html`` exports) to a JSON file on every change.

- The template: the strip folds exactly the positions Python computed (``template_positions``)
  that come before the answer, and unfolding in the page reaches Python (``template``).
- A note typed into the lesson's editor (markup in its text) reaches Python as the checked
  note, and Python's export carries it: the exported page, opened, shows the callout as text.
- A note written in Python (a later cell, ``add_note``) shows in the page as a callout.
"""

from __future__ import annotations

import json

import pytest

from .helpers import PageRecorder
from .live_server import (
    RENDER_TIMEOUT,
    TESTS,
    TIMEOUT,
    jupyter_home,
    notebook,
    reported,
    run_cell,
    serve_lab,
    wait_for,
)

pytestmark = pytest.mark.browser

NOTE = "<b>look</b> & <script>window.__pwned = 1</script> the answer starts here"

SETUP = """\
import json, pathlib, sys
sys.path.insert(0, {tests!r})
from tiny_models import tiny_model, tiny_tokenizer
from iglens_viz import IGLens
from iglens_viz.widget import show

tok = tiny_tokenizer()
tok.chat_template = "{{% for m in messages %}}w1 w2 {{{{ m['content'] }}}} w3{{% endfor %}} w4 w6"
lens = IGLens(tiny_model("llama"), tok)
w = show(lens, None, "w5 w17 w3", chat=True, max_new_tokens=3)
w.view = "lesson"
out = pathlib.Path({state!r})
page = pathlib.Path({page!r})

def record(change=None):
    w.to_html(page)
    out.write_text(json.dumps({{
        "notes": w.notes, "template": w.template, "selected": w.selected,
        "template_positions": w.attribution.template_positions.tolist(),
        "answer_start": int(w.attribution.answer_start), "T": len(w.attribution.tokens)}}))

w.observe(record, names=["notes", "template"])
record()
w"""

ADD_CELL = """w.add_note("from Python: block 2", block=2)"""


def read(path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("notes-live")
    work = root / "work"
    work.mkdir()
    _, env = jupyter_home(root)
    state, page = root / "state.json", root / "export.html"
    cells = [SETUP.format(tests=str(TESTS), state=str(state), page=str(page)), ADD_CELL]
    (work / "notes.ipynb").write_text(json.dumps(notebook(cells)))
    log = root / "lab.log"
    with serve_lab(work, "notes.ipynb", env=env, log=log) as server:
        yield {
            **server,
            "log": log,
            "state": state,
            "page": page,
            "shot": root / "notes-live.png",
        }


def test_notes_and_the_template_switch_through_the_kernel(lab, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    recorder = PageRecorder().attach(page, allow_hosts=(lab["host"],))
    with reported(page, shot=lab["shot"], log=lab["log"], name="JupyterLab"):
        page.goto(lab["url"])
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=RENDER_TIMEOUT)
        run_cell(page, 0)
        out = page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea").first
        out.locator("[data-view=lesson] .iglens-lesson-row").first.wait_for(timeout=RENDER_TIMEOUT)
        py = wait_for(lambda: read(lab["state"]), what="the kernel's first record")
        # the strip folds Python's template positions before the answer, nothing else
        folded = [t for t in py["template_positions"] if t < py["answer_start"]]
        assert folded == [0, 1, 5, 6]  # w1 w2 … w3 w4 (w6 predicts the answer)
        shown = out.locator(".iglens-strip [data-token-index]").evaluate_all(
            "els => els.filter(e => e.offsetParent !== null).map(e => Number(e.dataset.tokenIndex))"
        )
        assert shown == [t for t in range(py["T"]) if t not in folded]
        out.locator(".iglens-template-fold").first.click()
        wait_for(lambda: read(lab["state"]).get("template") == "shown", what="template in Python")
        assert out.locator(".iglens-strip [data-token-index]:visible").count() == py["T"]

        # a note typed in the page reaches Python, checked, and Python's export carries it
        out.locator(".iglens-note-editor > summary").click()
        out.locator("textarea[name=note-text]").fill(NOTE)
        out.locator("[data-action=note-add]").click()
        selected = py["selected"]
        want = [{"position": selected, "text": NOTE}]
        wait_for(lambda: read(lab["state"]).get("notes") == want, what="the note in Python")
        callout = out.locator("aside.iglens-note .iglens-note-text")
        assert callout.first.text_content() == NOTE

        # a note written in Python shows in the page
        run_cell(page, 1)
        wait_for(lambda: callout.count() == 2, what="Python's note in the page")
        assert callout.nth(1).text_content() == "from Python: block 2"
    exported = context.new_page()
    exported.goto(lab["page"].as_uri())
    exported.wait_for_selector("aside.iglens-note", timeout=RENDER_TIMEOUT)
    texts = exported.eval_on_selector_all(
        "aside.iglens-note .iglens-note-text", "els => els.map(e => e.textContent)"
    )
    assert texts == [NOTE, "from Python: block 2"]
    assert exported.query_selector("aside.iglens-note b, aside.iglens-note script") is None
    assert exported.evaluate("() => window.__pwned") is None
    assert recorder.page_errors == []
    assert recorder.network == [], recorder.network
    context.close()
