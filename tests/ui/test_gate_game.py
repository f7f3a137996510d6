"""The block-gate game in a real JupyterLab, through a real kernel, the way a user plays it.

Two widgets on tiny random Llamas (tests/tiny_models.py), each with an observer in the kernel
that writes what Python holds to a JSON file:

1. a counterfactual typed into the detail panel's box and played: the page shows progress,
   then the ``gates`` trait arrives; its ledgers equal an independent ``gate_ledger`` call in
   the kernel (a fresh model from the same seed), and the page draws those numbers and
   sentences. The Lesson tab shows the same game as curves with the plain sentences.
2. a widget whose model is slowed in the kernel: Cancel stops the running game at its next
   block (far fewer blocks than the whole game runs); no ledger is set and ``running`` clears.

With ``IGLENS_SCREENSHOTS`` set to a folder, the played game (detail panel and Lesson tab) is
saved there as ``gate-game-*.png``.
"""

from __future__ import annotations

import json
import os
import re
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

PROMPT, OTHER = "w3 w5 w7 w9 w11", "w3 w6 w7 w9 w11"

SETUP = """\
import json, pathlib, sys, time
sys.path.insert(0, {tests!r})
from tiny_models import tiny_model, tiny_tokenizer
import iglens_viz as ig
from iglens_viz.widget import show

def watch(w, path, blocks):
    answers = []
    def record(change=None):
        g = w.gates
        ref = None
        if g:
            ref = ig.gate_ledger(tiny_model("llama"), tiny_tokenizer(), {prompt!r}, g["prompt"],
                                 position=g["position"], target=g["target_id"]).to_dict()
        path.write_text(json.dumps({{"gates": g, "reference": ref, "running": w.running,
                                    "answers": answers, "blocks": blocks[0]}}))
    send = w.send
    def sent(content, buffers=None):
        answers.append(content)
        record()
        return send(content, buffers)
    w.send = sent
    w.observe(record, names=["gates", "running"])
    record()

def count_blocks(lens, seconds=0.0):
    # every block the lens's model runs is counted (and sleeps, to let a page see it run)
    blocks = [0]
    def hook(module, args):
        blocks[0] += 1
        time.sleep(seconds)
    for block in lens.adapter.blocks:
        block.register_forward_pre_hook(hook)
    return blocks
"""

PLAY_CELL = """\
lens1 = ig.IGLens(tiny_model("llama"), tiny_tokenizer())
w1 = show(lens1, None, {prompt!r})
watch(w1, pathlib.Path({state!r}), count_blocks(lens1))
w1"""

CANCEL_CELL = """\
lens2 = ig.IGLens(tiny_model("llama"), tiny_tokenizer())
w2 = show(lens2, None, {prompt!r})
watch(w2, pathlib.Path({state!r}), count_blocks(lens2, 0.5))
w2"""


def read(path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def answered(path, kind: str) -> list[dict]:
    return [a for a in read(path).get("answers", []) if a.get("command") == kind]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate-game")
    work = root / "work"
    work.mkdir()
    _, env = jupyter_home(root)
    states = {name: root / f"{name}.json" for name in ("play", "cancel")}
    nb = notebook(
        [
            SETUP.format(tests=str(TESTS), prompt=PROMPT),
            PLAY_CELL.format(prompt=PROMPT, state=str(states["play"])),
            CANCEL_CELL.format(prompt=PROMPT, state=str(states["cancel"])),
        ]
    )
    (work / "gates.ipynb").write_text(json.dumps(nb))
    log = root / "lab.log"
    with serve_lab(work, "gates.ipynb", env=env, log=log) as server:
        yield {**server, "log": log, **states}


@pytest.fixture(scope="module")
def opened(lab, browser, tmp_path_factory):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    recorder = PageRecorder().attach(page, allow_hosts=(lab["host"],))
    shot_path = tmp_path_factory.mktemp("shots") / "gate-game.png"
    with reported(page, shot=shot_path, log=lab["log"], name="JupyterLab"):
        page.goto(lab["url"])
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=RENDER_TIMEOUT)
        for i in range(3):
            run_cell(page, i)
        for i in (1, 2):
            cell = page.locator(".jp-Notebook .jp-Cell").nth(i)
            cell.locator(".jp-OutputArea [data-token-index]").first.wait_for(timeout=RENDER_TIMEOUT)
        for name in ("play", "cancel"):
            wait_for(lambda n=name: answered(lab[n], "hello"), what=f"the {name} widget's hello")
        yield page, recorder
    assert recorder.page_errors == []
    assert recorder.network == [], recorder.network
    context.close()


def shot(locator, name: str) -> None:
    folder = os.environ.get("IGLENS_SCREENSHOTS")
    if folder:
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=str(Path(folder) / f"gate-game-{name}.png"))


def output_of(page, cell: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(cell).locator(".jp-OutputArea").first


def test_play_the_game_and_read_the_three_ledgers(lab, opened):
    page, _ = opened
    out = output_of(page, 1)
    panel = out.locator(".iglens-detail .iglens-gates")
    panel.locator("input[name=gates-counterfactual]").fill(OTHER)
    before = read(lab["play"])["blocks"]
    panel.locator("[data-action=gates]").click()
    state = wait_for(
        lambda: answered(lab["play"], "gates") and (s := read(lab["play"]))["gates"] and s,
        what="the game played in the kernel",
    )
    (played,) = answered(lab["play"], "gates")
    assert played["ok"], played
    got, ref = state["gates"], state["reference"]
    assert got["prompt"] == OTHER and got["position"] == 4
    for path in ("forward", "reverse", "diagonal"):
        np.testing.assert_array_equal(got["entries"][path], ref["entries"][path])
    assert got["readable"] == ref["readable"] and got["sentences"] == ref["sentences"]
    # ... drawn in the page: the bars carry Python's numbers, the sentences its words
    figure = panel.locator(".iglens-gates-figure")
    figure.wait_for()
    for key, values in (
        ("readable", got["readable"]),
        ("arrives", got["entries"]["reverse"]),
        ("shared", got["entries"]["diagonal"]),
    ):
        bars = panel.locator(f"[data-ledger={key}] .iglens-gates-bar")
        drawn = [float(bars.nth(j).get_attribute("data-value")) for j in range(bars.count())]
        assert drawn == values
        assert panel.locator(f"li[data-ledger={key}]").text_content() == got["sentences"][key]
    assert panel.locator(".iglens-gates-counterfactual").text_content() == f"\u201c{OTHER}\u201d"
    whole = state["blocks"] - before
    print(f"blocks the whole game ran: {whole}")
    lab["whole_game_blocks"] = whole
    shot(panel, "detail")
    # the student view: the same game as curves, in a class's words
    out.locator("[data-view-tab=lesson]").click()
    lesson = out.locator("[data-view=lesson] .iglens-gates")
    lesson.locator("polyline[data-ledger=shared]").wait_for()
    for key in ("readable", "arrives", "shared"):
        text = lesson.locator(f"li[data-ledger={key}]").text_content()
        assert text == got["plain_sentences"][key]
        assert not re.search(r"comput|decide", text)
    shot(lesson, "lesson")


def test_cancel_stops_the_game_within_a_block(lab, opened):
    page, _ = opened
    out = output_of(page, 2)
    panel = out.locator(".iglens-detail .iglens-gates")
    panel.locator("input[name=gates-counterfactual]").fill(OTHER)
    before = read(lab["cancel"])["blocks"]
    panel.locator("[data-action=gates]").click()
    status = panel.locator(".iglens-gates-status")
    wait_for(lambda: (status.text_content() or "").startswith("playing"), what="the game running")
    wait_for(lambda: read(lab["cancel"])["running"].get("command") == "gates", what="running")
    panel.locator("[data-action=gates-cancel]").click()
    state = wait_for(
        lambda: (
            answered(lab["cancel"], "gates") and not (s := read(lab["cancel"]))["running"] and s
        ),
        what="the cancelled game's answer",
    )
    (game,) = answered(lab["cancel"], "gates")
    (cancel,) = answered(lab["cancel"], "cancel")
    assert cancel["ok"], cancel
    assert game["error"]["type"] == "RecomputeCancelled", game
    assert state["gates"] == {}
    # the whole game (the first test's count: two plain passes, the batched gated runs and
    # their backward pass, 4 blocks each) sleeps 0.5 s a block here; Cancel stops it at the
    # next block, before its end
    ran = state["blocks"] - before
    whole = lab.get("whole_game_blocks", 16)
    print(f"blocks run before the cancel stopped the game: {ran} of {whole}")
    assert ran < whole
    panel.locator(".iglens-gates-cancel").wait_for(state="hidden")
