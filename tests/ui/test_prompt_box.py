"""The prompt box and the compare box in a real JupyterLab, through a real kernel.

The notebook (tests/ui/live_server.py's Jupyter home and server helpers) shows three widgets
on tiny random Llamas (tests/tiny_models.py), each with an observer in the kernel that writes
what Python sees to a JSON file, and a reference computed in the kernel by an independent
``IGLens(tiny_model("llama"), tiny_tokenizer())`` (a fresh model from the same seed) for the
request the widget received:

1. the student view of a widget that generates its answer (``max_new_tokens=6``): a question
   typed into ``form[data-prompt-box]`` and asked shows progress (the model's blocks are
   slowed in the kernel so that a page can see it), then a new result whose numbers equal the
   reference, drawn in the page;
2. the full view of a widget that generates 50 tokens, slowed: Cancel in the prompt box stops
   the question inside generation; the old result stays and ``running`` clears;
3. the student view of a widget with ``answer=" w9 w11"``: an answer typed into the compare
   box recomputes with ``versus=`` and the page draws both curves, the versus curve's
   log-probabilities equal to the reference's.

With ``IGLENS_SCREENSHOTS`` set to a folder, the asked widget's student view, the running
question in the full view and the compared curves are saved there as ``prompt-box-*.png``.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np
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

SETUP = """\
import json, pathlib, sys, time
sys.path.insert(0, {tests!r})
from tiny_models import tiny_model, tiny_tokenizer
from iglens_viz import IGLens
from iglens_viz.widget import show

def slow(lens, seconds):
    # every block the lens's model runs sleeps first (a page can then see a question run)
    for block in lens.adapter.blocks:
        block.register_forward_pre_hook(lambda module, args: time.sleep(seconds))

def watch(w, path, reference):
    answers, progress = [], []
    def record(change=None):
        if change is not None and change["name"] == "progress":
            progress.append(change["new"])
        a = w.attribution
        ref = reference(a.request)
        path.write_text(json.dumps({{
            "result_id": w.result_id, "running": w.running, "progress": progress,
            "answers": answers, "prompt": a.request.prompt,
            "max_new_tokens": a.request.max_new_tokens,
            "lens_probs": a.lens_probs.tolist(), "ref_lens_probs": ref and ref.lens_probs.tolist(),
            "input_ids": a.input_ids.tolist(), "ref_input_ids": ref and ref.input_ids.tolist(),
            "answer_probs": a.answer and a.answer.lens_probs.tolist(),
            "ref_answer_probs": ref and ref.answer and ref.answer.lens_probs.tolist(),
            "versus_logprobs": a.versus and a.versus.lens_logprobs.tolist(),
            "ref_versus_logprobs": ref and ref.versus and ref.versus.lens_logprobs.tolist(),
            "cached_answers": [list(k[0]) for k in w.lens.answer_cache.keys()]}}))
    send = w.send
    def sent(content, buffers=None):
        answers.append(content)
        record()
        return send(content, buffers)
    w.send = sent
    w.observe(record, names=["result", "running", "progress"])
    record()

_refs = {{}}
def reference(**fixed):
    # the same request by an independent lens (a fresh model from the same seed); a field
    # fixed as None is the request's own (the answer length a question asked for)
    def ref(request):
        kwargs = {{k: getattr(request, k) if v is None else v for k, v in fixed.items()}}
        key = (request.prompt, request.versus, tuple(sorted(kwargs.items())))
        if key not in _refs:
            lens = IGLens(tiny_model("llama"), tiny_tokenizer())
            _refs[key] = lens.attribute(request.prompt, versus=request.versus, **kwargs)
        return _refs[key]
    return ref
"""

ASK_CELL = """\
lens1 = IGLens(tiny_model("llama"), tiny_tokenizer())
w1 = show(lens1, None, "w3 w5 w7", max_new_tokens=6)
w1.view = "lesson"
slow(lens1, 0.1)  # after the first result: each question's ~28 blocks take ~3 s
watch(w1, pathlib.Path({state!r}), reference(max_new_tokens=None))
w1"""

CANCEL_CELL = """\
lens2 = IGLens(tiny_model("llama"), tiny_tokenizer())
w2 = show(lens2, None, "w3 w5", max_new_tokens=50)
slow(lens2, 0.1)  # a question: 51 passes of 4 blocks, about 20 s uncancelled
watch(w2, pathlib.Path({state!r}), lambda request: None)
w2"""

COMPARE_CELL = """\
lens3 = IGLens(tiny_model("llama"), tiny_tokenizer())
w3 = show(lens3, None, "w5 w17 w3 w42 w8", answer=" w9 w11")
w3.view = "lesson"
watch(w3, pathlib.Path({state!r}), reference(answer=" w9 w11"))
w3"""


def read(path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def answered(path, kind: str) -> list[dict]:
    return [a for a in read(path).get("answers", []) if a.get("command") == kind]


def drawn(output, series: str) -> list[float]:
    line = output.locator(f"[data-view=lesson] polyline.iglens-lesson-line[data-series='{series}']")
    return [float(v) for v in line.first.get_attribute("data-values").split()]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("prompt-box")
    work = root / "work"
    work.mkdir()
    _, env = jupyter_home(root)
    states = {name: root / f"{name}.json" for name in ("ask", "cancel", "compare")}
    nb = notebook(
        [
            SETUP.format(tests=str(TESTS)),
            ASK_CELL.format(state=str(states["ask"])),
            CANCEL_CELL.format(state=str(states["cancel"])),
            COMPARE_CELL.format(state=str(states["compare"])),
        ]
    )
    (work / "prompt.ipynb").write_text(json.dumps(nb))
    log = root / "lab.log"
    with serve_lab(work, "prompt.ipynb", env=env, log=log) as server:
        yield {**server, "log": log, **states}


@pytest.fixture(scope="module")
def opened(lab, browser, tmp_path_factory):
    """One page with the notebook's four cells run (the widgets rendered, hello answered)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    recorder = PageRecorder().attach(page, allow_hosts=(lab["host"],))
    shot = tmp_path_factory.mktemp("shots") / "prompt-box.png"
    with reported(page, shot=shot, log=lab["log"], name="JupyterLab"):
        page.goto(lab["url"])
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=RENDER_TIMEOUT)
        for i in range(4):
            run_cell(page, i)
        for i in (1, 2, 3):
            cell = page.locator(".jp-Notebook .jp-Cell").nth(i)
            cell.locator(".jp-OutputArea [data-token-index]").first.wait_for(timeout=RENDER_TIMEOUT)
        for name in ("ask", "cancel", "compare"):
            wait_for(lambda n=name: answered(lab[n], "hello"), what=f"the {name} widget's hello")
        yield page, recorder
    assert recorder.page_errors == []
    assert recorder.network == [], recorder.network
    context.close()


def shot(locator, name: str) -> None:
    folder = os.environ.get("IGLENS_SCREENSHOTS")
    if folder:
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=str(Path(folder) / f"prompt-box-{name}.png"))


def output_of(page, cell: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(cell).locator(".jp-OutputArea").first


def test_ask_a_new_question(lab, opened):
    page, _ = opened
    out = output_of(page, 1)
    box = out.locator("[data-view=lesson] form[data-prompt-box]")
    assert box.is_visible()
    before = read(lab["ask"])
    box.locator("textarea[name=prompt]").fill("w9 w11 w13")
    box.locator("[data-action=ask]").click()
    # progress in the page while the kernel generates and attributes
    status = box.locator(".iglens-prompt-status")
    wait_for(
        lambda: re.fullmatch(r"Thinking\u2026 ([1-9][0-9]?)%", status.text_content() or ""),
        what="the page's progress above 0%",
    )
    assert float(box.locator("progress").get_attribute("value") or 0) > 0
    state = wait_for(
        lambda: (s := read(lab["ask"])) and answered(lab["ask"], "ask") and not s["running"] and s,
        what="the question answered in the kernel",
    )
    (ask,) = answered(lab["ask"], "ask")
    assert ask["ok"], ask
    assert state["result_id"] != before["result_id"] and state["prompt"] == "w9 w11 w13"
    # Python's progress climbed, never backwards, and the shown result is the reference's
    shares = [p for p in state["progress"] if p >= 0]
    assert shares and shares == sorted(shares) and 0 < shares[-1] <= 1
    assert state["input_ids"] == state["ref_input_ids"]
    np.testing.assert_allclose(state["lens_probs"], state["ref_lens_probs"], rtol=1e-6, atol=1e-9)
    assert state["answer_probs"] == pytest.approx(state["ref_answer_probs"], rel=1e-6, abs=1e-12)
    # ... and drawn in the page: the answer's curve is the new answer's (float32 on the wire)
    wait_for(lambda: status.text_content() == "", what="the status cleared")
    got = drawn(out, "answer")
    assert got == pytest.approx(state["ref_answer_probs"], rel=1e-5, abs=1e-9)
    assert box.locator("textarea[name=prompt]").input_value() == "w9 w11 w13"  # kept
    shot(out.locator(".iglens-root").first, "lesson")
    assert out.locator("[data-view=lesson] .iglens-prompt > .iglens-prompt-error").is_hidden()

    # a prompt too long: the page says so, nothing is sent, the result stays
    box.locator("textarea[name=prompt]").fill("w3 " * 7000)
    box.locator("[data-action=ask]").click()
    error = out.locator("[data-view=lesson] .iglens-prompt > .iglens-prompt-error")
    error.wait_for(state="visible")
    assert "at most 20000: shorten it" in error.text_content()
    assert (
        len(answered(lab["ask"], "ask")) == 1
        and read(lab["ask"])["result_id"] == state["result_id"]
    )

    # the answer's length typed into the box: the kernel generates that many tokens
    box.locator("textarea[name=prompt]").fill("w13 w15")
    length = box.locator("input[name=max_new_tokens]")
    assert length.get_attribute("placeholder") == "6 tokens"  # the shown request's length
    length.fill("2")
    box.locator("[data-action=ask]").click()
    state = wait_for(
        lambda: (
            (s := read(lab["ask"]))
            and len(answered(lab["ask"], "ask")) == 2
            and not s["running"]
            and s
        ),
        what="the question with a length answered in the kernel",
    )
    assert answered(lab["ask"], "ask")[-1]["ok"] and state["prompt"] == "w13 w15"
    assert state["max_new_tokens"] == 2
    assert state["input_ids"] == state["ref_input_ids"]  # the reference generated 2 tokens too
    np.testing.assert_allclose(state["lens_probs"], state["ref_lens_probs"], rtol=1e-6, atol=1e-9)
    wait_for(lambda: status.text_content() == "", what="the status cleared")
    assert drawn(out, "answer") == pytest.approx(state["ref_answer_probs"], rel=1e-5, abs=1e-9)
    assert length.get_attribute("placeholder") == "2 tokens"


def test_cancel_stops_the_question(lab, opened):
    page, _ = opened
    out = output_of(page, 2)
    box = out.locator(".iglens-controls form[data-prompt-box]")  # the full view's controls
    assert box.is_visible()
    before = read(lab["cancel"])
    box.locator("textarea[name=prompt]").fill("w9 w11")
    box.locator("[data-action=ask]").click()
    status = box.locator(".iglens-prompt-status")
    wait_for(
        lambda: re.fullmatch(r"Thinking\u2026 ([1-9][0-9]?)%", status.text_content() or ""),
        what="the question running (progress above 0%)",
    )
    assert read(lab["cancel"])["running"].get("command") == "ask"
    shot(out.locator(".iglens-controls").first, "running")
    clicked = time.monotonic()
    box.locator("[data-action=cancel-ask]").click()
    state = wait_for(
        lambda: answered(lab["cancel"], "ask") and not (s := read(lab["cancel"]))["running"] and s,
        what="the cancelled question's answer",
    )
    seconds = time.monotonic() - clicked
    (ask,) = answered(lab["cancel"], "ask")
    (cancel,) = answered(lab["cancel"], "cancel")
    assert cancel["ok"], cancel
    assert ask["error"]["type"] == "RecomputeCancelled", ask
    print(f"cancelled {seconds:.2f} s after the click; progress then {max(state['progress']):.2f}")
    assert seconds < 15  # uncancelled: about 20 s of generation left (a loaded machine: slack)
    assert max(state["progress"]) < 0.9  # stopped inside generation
    assert state["result_id"] == before["result_id"]  # the old result stays
    assert [9, 11] not in [k[:2] for k in state["cached_answers"]]  # no answer finished
    error = out.locator(".iglens-controls .iglens-prompt-error")
    error.wait_for(state="visible")
    assert error.text_content().startswith("cancelled")
    assert box.locator("[data-action=cancel-ask]").is_hidden()
    assert not box.locator("[data-action=ask]").is_disabled()


def test_compare_with_an_expected_answer(lab, opened):
    page, _ = opened
    out = output_of(page, 3)
    form = out.locator("[data-view=lesson] form[data-compare-box]")
    assert form.is_visible()
    assert out.locator("[data-view=lesson] polyline[data-series='versus']").count() == 0
    form.locator("input[name=versus]").fill(" w7")
    form.locator("[data-action=compare]").click()
    state = wait_for(
        lambda: (s := read(lab["compare"])).get("versus_logprobs") and s,
        what="the recompute with versus in the kernel",
    )
    (rec,) = answered(lab["compare"], "recompute")
    assert rec["ok"], rec
    assert state["versus_logprobs"] == pytest.approx(state["ref_versus_logprobs"], rel=1e-9)
    out.locator("[data-view=lesson] polyline[data-series='versus']").wait_for()
    # two curves: the model's answer and the one to compare with, drawn as Python computed
    assert drawn(out, "answer") == pytest.approx(state["ref_answer_probs"], rel=1e-5, abs=1e-12)
    versus = [math.log(p) for p in drawn(out, "versus")]
    assert versus == pytest.approx(state["ref_versus_logprobs"], rel=1e-5, abs=1e-6)
    shot(out.locator("[data-view=lesson]").first, "compare")
    legend = out.locator("[data-view=lesson] .iglens-lesson-legend").text_content()
    assert "compare with" in legend and "w7" in legend
