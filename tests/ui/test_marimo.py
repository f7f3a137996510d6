"""The live widget in a marimo app (``marimo run``): ``mo.ui.anywidget(IGLensWidget(...))``
renders, a click reaches Python (and re-runs the cell that reads it), and a recompute runs in
marimo's kernel.

The app file is written here: its first cell is the notebook tests' setup cell
(tests/ui/live_server.py: the widget on a tiny random Llama, an observer that writes the
widget's Python-side state to a file at every change) followed by ``mo.ui.anywidget(w)``; its
second cell reads ``ui.widget.selected`` and ``ui.value``, so marimo re-runs it when the page
changes the selection. marimo serves it headless on 127.0.0.1 (free port, an access token),
with its config and cache folders in the run's temporary folder and no update check. marimo
draws the widget inside a shadow root; Playwright's CSS selectors pierce it. With
``IGLENS_SCREENSHOTS`` set to a folder, the rendered widget is saved there as
``frontend-marimo.png``.

Cancel: marimo reads the page's next message, the Cancel, only after its handler of the
previous one returns, so the widget runs a recompute in its own thread under marimo by
default (``IGLensWidget.threaded`` None: it detects marimo's runtime; marimo's comm keeps the
session it was opened in, so the thread's answers reach the page). A third widget, left at
that default, gets a slow recompute and the test checks that Cancel stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import textwrap
from pathlib import Path

import pytest

from .helpers import PageRecorder
from .live_server import (
    ANSWERS_CELL,
    RENDER_TIMEOUT,
    SETUP_CELL,
    TESTS,
    TIMEOUT,
    free_port,
    python_state,
    recompute_target,
    reported,
    require,
    serve,
    wait_for,
)

pytestmark = pytest.mark.browser

APP = """\
import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import marimo as mo
{setup}
    ui = mo.ui.anywidget(w)
    ui
    return IGLens, json, lens, mo, pathlib, tiny_model, tiny_tokenizer, ui


@app.cell
def _(json, lens, mo, pathlib):
{answers}
    mo.ui.anywidget(w2)


@app.cell
def _(IGLens, json, mo, tiny_model, tiny_tokenizer):
    # Cancel: no IPython kernel here, but the widget sees marimo's runtime and runs a
    # recompute in its thread by default (which a Cancel needs to be heard); not set here.
    import time
    lens3 = IGLens(tiny_model("llama"), tiny_tokenizer())
    lens3.memory_budget = 1 << 16  # many small chunks, each slowed: about 12 s uncancelled
    w3 = lens3.widget("w3 w5 w7 w9 w11 w13")
    _send, _report = w3.send, w3._server.report

    def _slow_report(done, total):
        time.sleep(0.08)
        _report(done, total)

    def _recorded(content, buffers=None):
        with open({cancel!r}, "a") as f:
            f.write(json.dumps(content) + "\\n")
        return _send(content, buffers)

    w3._server.report, w3.send = _slow_report, _recorded
    mo.ui.anywidget(w3)


@app.cell
def _(mo, pathlib, ui):
    _selected = ui.widget.selected
    pathlib.Path({out!r}).write_text(str(_selected))
    mo.md(f"python sees selected = {{_selected}}, ui.value: {{ui.value['selected']}}")
    return


if __name__ == "__main__":
    app.run()
"""


def read_lines(path: Path) -> list[dict]:
    """The JSON lines written so far (a line being written is left out)."""
    out = []
    for line in path.read_text().splitlines() if path.exists() else ():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


@pytest.fixture(scope="module")
def marimo_app(tmp_path_factory):
    require("marimo", "marimo")
    root = tmp_path_factory.mktemp("marimo")
    work = root / "work"
    work.mkdir()
    state, out = root / "state.json", root / "selected.txt"
    setup = textwrap.indent(SETUP_CELL.format(tests=str(TESTS), state=str(state)), "    ")
    answers = root / "answers.json"
    answers_cell = textwrap.indent(ANSWERS_CELL.format(answers=str(answers)), "    ")
    cancel = root / "cancel.jsonl"
    app = APP.format(setup=setup, out=str(out), answers=answers_cell, cancel=str(cancel))
    (work / "app.py").write_text(app)
    port, token = free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        MARIMO_SKIP_UPDATE_CHECK="1",
        XDG_CONFIG_HOME=str(root / "config"),
        XDG_CACHE_HOME=str(root / "cache"),
        XDG_STATE_HOME=str(root / "state"),
        IGLENS_CACHE=str(root / "iglens-cache"),
        PYTHONUNBUFFERED="1",
    )
    args = [
        sys.executable,
        "-m",
        "marimo",
        "run",
        str(work / "app.py"),
        "--headless",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--token-password",
        token,
    ]
    base = f"http://127.0.0.1:{port}"
    log = root / "marimo.log"
    with serve(args, ready_url=f"{base}/health", log=log, cwd=work, env=env, name="marimo"):
        yield {
            "url": f"{base}/?access_token={token}",
            "state": state,
            "out": out,
            "answers": answers,
            "cancel": cancel,
            "log": log,
            "host": f"127.0.0.1:{port}",
        }


def test_widget_in_marimo(marimo_app, page, tmp_path):
    page.set_default_timeout(TIMEOUT)
    recorder = PageRecorder().attach(page, allow_hosts=(marimo_app["host"],))
    with reported(page, shot=tmp_path / "marimo.png", log=marimo_app["log"], name="marimo"):
        page.goto(marimo_app["url"])
        # marimo runs the app's cells when the page opens: one widget in each of two cells
        widget = page.locator("marimo-anywidget").first
        strip = widget.locator(".iglens-strip [data-token-index]")
        strip.first.wait_for(timeout=RENDER_TIMEOUT)
        assert strip.count() == 7
        assert widget.locator("canvas.iglens-heatmap-canvas").count() == 1
        assert widget.locator(".iglens-controls").first.is_visible()
        wait_for(lambda: "hello" in python_state(marimo_app).get("commands", []), what="hello")
        page.wait_for_selector(":text('python sees selected = 6')", timeout=TIMEOUT)

        # A click selects in the page and in Python; marimo re-runs the cell that reads it.
        widget.locator("[data-token-index='2']").click()
        widget.locator("[data-selected-index='2']").wait_for(timeout=TIMEOUT)
        wait_for(lambda: python_state(marimo_app).get("selected") == 2, what="w.selected == 2")
        page.wait_for_selector(":text('python sees selected = 2, ui.value: 2')", timeout=TIMEOUT)
        assert marimo_app["out"].read_text() == "2"

        # A new target in the controls → marimo's kernel recomputes → the detail changes.
        state = recompute_target(widget, lambda: python_state(marimo_app))
        assert state["error"] == ""
        assert widget.locator("[data-selected-index='2']").count() == 1  # selection kept

        # Whole answers: the second widget draws Python's figures from the comm's buffers.
        wait_for(lambda: page.locator("marimo-anywidget").count() == 3, what="all three widgets")
        second = page.locator("marimo-anywidget").nth(1)
        gap = second.locator(".iglens-versus-gap")
        gap.wait_for(timeout=TIMEOUT)
        want = json.loads(marimo_app["answers"].read_text())
        assert float(gap.get_attribute("data-logprob-gap")) == pytest.approx(want["logprob_gap"])
        onset = second.locator(".iglens-versus-onset").get_attribute("data-onset")
        assert onset == str(want["onset"])
        total = second.locator(".iglens-span-sum").get_attribute("data-logprob")
        assert float(total) == pytest.approx(want["answer_logprob"])

        # Cancel reaches a running recompute: under marimo the widget uses its thread by default.
        third = page.locator("marimo-anywidget").nth(2).locator(".iglens-controls")
        third.locator("[name='estimator']").select_option("riemann")
        third.locator("[name='steps']").fill("100")
        third.locator(".iglens-apply").click()
        third.locator("[data-action=cancel]").click()  # waits until it shows
        answers = wait_for(
            lambda: [
                a for a in read_lines(marimo_app["cancel"]) if a.get("command") == "recompute"
            ],
            what="the recompute's answer",
        )
        assert answers[0]["ok"] is False, answers
        assert answers[0]["error"]["message"].startswith("cancelled"), answers
        third.locator(".iglens-error:has-text('cancelled')").wait_for(timeout=TIMEOUT)

        shots = os.environ.get("IGLENS_SCREENSHOTS")
        if shots:
            widget.evaluate("el => el.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(Path(shots) / "frontend-marimo.png"))
    assert recorder.page_errors == []
    assert recorder.network == [], recorder.network
