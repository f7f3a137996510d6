"""Issue 32's in-class defects (items 10-13) in a real JupyterLab, driven as a teacher does:
real clicks, key presses, the present button, JupyterLab's own Settings → Theme menu and
window resizes, never a trait set by hand.

The notebook (tests/ui/live_server.py's Jupyter home and server) shows

* the student view of a 30-block result made without a model (:func:`lesson_result`): the
  Vietnam lesson's tokens, whose answer opens with four words of the question, so that the
  answer's first *content* token (Python's ``opening_position``: ``[19] ␣is → ␣Ho``) is
  neither the answer's first position nor the last one;
* the full view of a widget on a tiny random Llama (tests/tiny_models.py) whose blocks sleep
  (``slow``), so that a question can be cancelled while it runs; an observer in the kernel
  writes the answers Python sends to the page to a JSON file.

10. ←/→ (and ↑/↓) on the walk's slider move the walk by one block each, in JupyterLab too (its
    command mode took them from the focused slider); a code cell's editor keeps its own keys.
11. The lesson's curve is drawn at its column's width after each change — presentation mode on
    and off (its button), Escape, a JupyterLab theme switch, a window resize: the curve never
    wider than its column, the last block's point visible and not under the lens column.
12. A message belongs to its request: a cancelled question's "cancelled: …" goes with the next
    Apply that succeeds, and a failed Apply is the only red line.
13. Escape brings the student view back to the answer's first content token; the strip shows
    whole lines of tokens only.

The exported page's side of item 13 (the status line, the walk's list, the strip at 700 px,
Escape) is in tests/ui/test_lesson_view.py, on the real model's Vietnam lesson.
"""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from iglens_viz.protocol.opening import opening_position

from .helpers import CURVE_FITS, STRIP_CUT, PageRecorder, curve_fits, synthetic_result
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

PROMPT = ["<|im_start|>", "user", "\n", "What", " is", " the", " capital", " of", " Vietnam", "?"]
PROMPT += ["<|im_end|>", "\n", "<|im_start|>", "assistant", "\n"]
ANSWER = ["The", " capital", " of", " Vietnam", " is", " Ho", "i", " An", ".", "<|im_end|>"]
BLOCKS = 30


def lesson_result():
    """A 30-block result of the Vietnam lesson's tokens, without a model: each position's
    target is the next token (and the lens's top guess), the answer after the chat template."""
    tokens = PROMPT + ANSWER
    r = synthetic_result(tokens=tokens, n=BLOCKS, K=5, seed=5)
    r.target_ids = np.r_[r.input_ids[1:], r.input_ids[-1]].astype(np.int64)
    r.target_tokens = [r.token_text[int(i)] for i in r.target_ids]
    r.top_ids[:, :, 0] = r.target_ids[:, None]
    r.prompt_length = len(PROMPT)
    return r


SETUP = """\
import json, pathlib, sys, time
sys.path.insert(0, {tests!r})
sys.path.append({root!r})  # the tests package; iglens_viz as installed
from tiny_models import tiny_model, tiny_tokenizer
from iglens_viz import IGLens
from iglens_viz.widget import show
from tests.ui.test_in_class import lesson_result

def slow(lens, seconds):
    # every block the lens's model runs sleeps first (a question runs long enough to cancel)
    for block in lens.adapter.blocks:
        block.register_forward_pre_hook(lambda module, args: time.sleep(seconds))"""

LESSON_CELL = """\
wl = lesson_result().widget()
wl.view = "lesson"
wl"""

FULL_CELL = """\
lens = IGLens(tiny_model("llama"), tiny_tokenizer())
wf = show(lens, None, "w3 w5", max_new_tokens=50)
slow(lens, 0.1)  # a question: 51 passes of 4 blocks, about 20 s uncancelled
answers, state = [], pathlib.Path({state!r})
def record(change=None):
    state.write_text(json.dumps({{"answers": answers, "running": wf.running,
                                  "target": wf.result["controls"]["target"]}}))
_send = wf.send
def send(content, buffers=None):
    answers.append(content)
    record()
    return _send(content, buffers)
wf.send = send
wf.observe(record, names=["running", "result"])
record()
wf"""

EDITOR_CELL = "# a cell to type in"
LESSON, FULL, EDITOR = 1, 2, 3


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("in-class")
    work = root / "work"
    work.mkdir()
    _, env = jupyter_home(root)
    state = root / "state.json"
    cells = [
        SETUP.format(tests=str(TESTS), root=str(TESTS.parent)),
        LESSON_CELL,
        FULL_CELL.format(state=str(state)),
        EDITOR_CELL,
    ]
    (work / "class.ipynb").write_text(json.dumps(notebook(cells)))
    log = root / "lab.log"
    with serve_lab(work, "class.ipynb", env=env, log=log) as server:
        yield {**server, "log": log, "state": state}


@pytest.fixture(scope="module")
def opened(lab, browser, tmp_path_factory):
    """One JupyterLab page at 1024×768 with the notebook's widgets shown (hello answered)."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    recorder = PageRecorder().attach(page, allow_hosts=(lab["host"],))
    shot = tmp_path_factory.mktemp("shots") / "in-class.png"
    with reported(page, shot=shot, log=lab["log"], name="JupyterLab"):
        page.goto(lab["url"])
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=RENDER_TIMEOUT)
        for i in (0, LESSON, FULL):
            run_cell(page, i)
        output(page, LESSON).locator("[data-view=lesson] .iglens-lesson-row").first.wait_for(
            timeout=RENDER_TIMEOUT
        )
        output(page, FULL).locator("[data-token-index]").first.wait_for(timeout=RENDER_TIMEOUT)
        wait_for(lambda: "hello" in commands(lab), what="the full view's hello")
        yield page
    assert recorder.page_errors == []
    assert recorder.network == [], recorder.network
    context.close()


def output(page, cell: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(cell).locator(".jp-OutputArea").first


def kernel_state(lab) -> dict:
    try:
        return json.loads(lab["state"].read_text())
    except (OSError, ValueError):
        return {}


def commands(lab) -> list[str]:
    return [a.get("command") for a in kernel_state(lab).get("answers", [])]


def answered(lab, kind: str) -> list[dict]:
    return [a for a in kernel_state(lab).get("answers", []) if a.get("command") == kind]


def cursor(lesson) -> str:
    return lesson.get_attribute("data-cursor")


# ------------------------------------------------------------------ 10. the walk's keys


def test_arrow_keys_move_the_walk_in_jupyterlab(opened):
    page = opened
    lesson = output(page, LESSON).locator("[data-view=lesson]")
    slider = lesson.locator("input[name=lesson-block]")
    slider.scroll_into_view_if_needed()
    slider.click()  # the slider jumps to the block under the pointer and takes the focus
    at = int(cursor(lesson))
    assert slider.input_value() == str(at)
    steps = [("ArrowLeft", -1), ("ArrowLeft", -1), ("ArrowRight", 1), ("ArrowDown", -1)]
    steps += [("ArrowUp", 1), ("ArrowUp", 1)]
    for key, d in steps:
        page.keyboard.press(key)
        at += d
        assert (cursor(lesson), slider.input_value()) == (str(at), str(at)), key
    readout = lesson.locator(".iglens-lesson-readout").text_content()
    assert readout.startswith(f"block {at} · the model's guess: "), readout
    # a row of the lens column, clicked: the same keys step from its block
    lesson.locator(".iglens-lesson-row[data-block='10']").click()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert cursor(lesson) == "12"
    page.keyboard.press("Home")
    assert cursor(lesson) == "0"
    page.keyboard.press("End")
    assert cursor(lesson) == str(BLOCKS)
    # typing in a code cell is the editor's: the keys move its caret, not the walk
    editor = page.locator(".jp-Notebook .jp-Cell").nth(EDITOR).locator(".cm-content")
    editor.click()
    page.keyboard.press("End")
    page.keyboard.type("ab")
    page.keyboard.press("ArrowLeft")
    page.keyboard.type("X")
    page.keyboard.press("ArrowRight")
    assert editor.text_content().endswith("aXb"), editor.text_content()
    assert cursor(lesson) == str(BLOCKS)
    page.keyboard.press("Escape")  # back to command mode, as the teacher left it


# ------------------------------------------------------------------ 13. Escape, whole lines


def test_escape_returns_the_lesson_to_the_answers_first_content_token(opened):
    page = opened
    out = output(page, LESSON)
    lesson = out.locator("[data-view=lesson]")
    r = lesson_result()
    want = opening_position(r.tokens, r.target_tokens, r.answer_start)
    assert (r.tokens[want], r.target_tokens[want]) == (" is", " Ho")
    assert want not in (r.answer_start, len(r.tokens) - 1)  # the old fallbacks
    assert lesson.get_attribute("data-position") == str(want)  # it opens there
    out.locator(".iglens-strip [data-token-index='7']").click()
    wait_for(lambda: lesson.get_attribute("data-position") == "7", what="the lesson on [7]")
    lesson.locator(".iglens-lesson-glossary").click()
    page.keyboard.press("Escape")
    wait_for(lambda: lesson.get_attribute("data-position") == str(want), what="Escape's way back")
    assert out.locator(".iglens-strip [aria-selected=true]").count() == 0
    # the strip (folded to lines of tokens) shows no token cut in half
    strip = page.evaluate(STRIP_CUT, out.element_handle())
    assert strip["cut"] == [], strip


# ------------------------------------------------------------------ 11. the curve fits


def jupyterlab_theme(page, name: str) -> None:
    """Settings → Theme → `name`, through JupyterLab's menu bar."""
    page.locator(".lm-MenuBar-item", has_text="Settings").click()
    page.locator(".lm-Menu-item", has_text="Theme").first.hover()
    page.get_by_role("menuitem", name=name, exact=True).click()


def test_the_lesson_curve_fits_its_column_after_each_change(opened):
    page = opened
    page.set_viewport_size({"width": 1024, "height": 768})
    out = output(page, LESSON)
    lesson = out.locator("[data-view=lesson]")
    present = out.locator("[data-action=present]")
    root = out.locator(".iglens-root")

    def measure():
        return page.evaluate(CURVE_FITS, out.element_handle())

    def check(what: str, *, dark: bool, presenting: bool):
        # the curve is drawn again in the frame after its column's new width (a timeout is
        # said below, with the figures)
        with contextlib.suppress(AssertionError):
            wait_for(lambda: curve_fits(measure()), timeout=10, what=what)
        m = measure()
        assert curve_fits(m), f"{what}: {m}"
        assert (m["dark"], m["present"]) == (dark, presenting), (what, m)
        strip = page.evaluate(STRIP_CUT, out.element_handle())
        assert strip["cut"] == [], (what, strip)

    check("opened", dark=False, presenting=False)
    present.click()
    check("presentation mode on", dark=False, presenting=True)
    lesson.locator(".iglens-lesson-glossary").click()
    page.keyboard.press("Escape")
    check("Escape", dark=False, presenting=True)
    jupyterlab_theme(page, "JupyterLab Dark")
    wait_for(lambda: "iglens-dark" in root.get_attribute("class"), what="the dark theme")
    check("JupyterLab Dark", dark=True, presenting=True)
    present.click()
    check("presentation mode off", dark=True, presenting=False)
    for width, height in ((1280, 800), (700, 768), (1024, 768)):
        page.set_viewport_size({"width": width, "height": height})
        check(f"{width}×{height}", dark=True, presenting=False)
    jupyterlab_theme(page, "JupyterLab Light")
    wait_for(lambda: "iglens-dark" not in root.get_attribute("class"), what="the light theme")
    check("JupyterLab Light", dark=False, presenting=False)


# ------------------------------------------------------------------ 12. one message at a time

ALERTS = """(out) => [...out.querySelectorAll('[role=alert]')]
  .filter((e) => e.offsetParent !== null && e.textContent.trim()).map((e) => e.textContent)"""


def test_a_message_belongs_to_its_request(lab, opened):
    page = opened
    out = output(page, FULL)
    alerts = lambda: page.evaluate(ALERTS, out.element_handle())  # noqa: E731
    controls = out.locator(".iglens-controls").first
    box = controls.locator("form[data-prompt-box]")
    # a question, cancelled while it runs: its message shows
    box.locator("textarea[name=prompt]").fill("w9 w11")
    box.locator("[data-action=ask]").click()
    wait_for(
        lambda: (box.locator(".iglens-prompt-status").text_content() or "").startswith("Thinking"),
        what="the question running",
    )
    wait_for(lambda: kernel_state(lab).get("running", {}).get("command") == "ask", what="running")
    box.locator("[data-action=cancel-ask]").click()
    wait_for(lambda: answered(lab, "ask"), what="the cancelled question's answer")
    assert answered(lab, "ask")[-1]["error"]["type"] == "RecomputeCancelled"
    wait_for(lambda: alerts(), what="the cancelled question's message")
    assert alerts() == ["cancelled: the previous result is still shown"]
    # an Apply that succeeds: the question's message goes (it was the question's)
    wait_for(lambda: not kernel_state(lab).get("running"), what="the kernel idle")
    controls.locator("[name='target']").fill("w42")
    controls.locator(".iglens-apply").click()
    wait_for(lambda: answered(lab, "recompute"), what="the recompute answered")
    assert answered(lab, "recompute")[-1]["ok"], answered(lab, "recompute")
    wait_for(lambda: kernel_state(lab).get("target") == "w42", what="the new result")
    out.locator(".iglens-meta-part:has-text('w42')").first.wait_for()
    assert alerts() == []
    # an Apply that fails: its message, and only it
    controls.locator("[name='target']").fill("w1 w2")
    controls.locator(".iglens-apply").click()
    wait_for(lambda: len(answered(lab, "recompute")) == 2, what="the failed recompute")
    wait_for(lambda: alerts(), what="the failed Apply's message")
    (message,) = alerts()
    assert (
        "not a single token" in message
        and message == answered(lab, "recompute")[-1]["error"]["message"]
    )
    # a question that succeeds (two tokens long): the failed Apply's message goes too
    box.locator("textarea[name=prompt]").fill("w13")
    box.locator("input[name=max_new_tokens]").fill("2")
    box.locator("[data-action=ask]").click()
    wait_for(lambda: len(answered(lab, "ask")) == 2, timeout=60, what="the second question")
    assert answered(lab, "ask")[-1]["ok"], answered(lab, "ask")
    wait_for(lambda: box.locator(".iglens-prompt-status").text_content() == "", what="done")
    assert alerts() == []
