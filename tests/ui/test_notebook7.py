"""The live widget in Jupyter Notebook 7 (the ``notebook`` package): it renders, a click
reaches Python, and a recompute runs in the kernel.

The server is ``jupyter notebook`` on 127.0.0.1 (free port, token, no browser) in a temporary
Jupyter home (tests/ui/live_server.py: the same kernel spec, settings and notebook cells as
the JupyterLab test, which goes much further through the protocol; this one checks that the
classic-style front end loads the bundle and carries the comm both ways). With
``IGLENS_SCREENSHOTS`` set to a folder, the rendered widget is saved there as
``frontend-notebook7.png`` (docs/screenshots/ holds the committed one).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from .helpers import PageRecorder
from .live_server import (
    PRINT_CELL,
    RENDER_TIMEOUT,
    SETUP_CELL,
    TESTS,
    TIMEOUT,
    free_port,
    jupyter_args,
    jupyter_home,
    notebook,
    python_state,
    recompute_target,
    reported,
    require,
    run_cell,
    serve,
    wait_for,
)

pytestmark = pytest.mark.browser

# Notebook 7.6.5 throws this on every notebook page it opens (an empty notebook's too, no
# widget on it), from its own bundle (the keyboard shortcuts' settings): not counted.
UPSTREAM_ERROR = "Cannot read properties of undefined (reading 'schema')"
UPSTREAM_BUNDLE = "/static/notebook/notebook_core."


@pytest.fixture(scope="module")
def nb7(tmp_path_factory):
    require("notebook", "notebook>=7", minversion="7")
    root = tmp_path_factory.mktemp("notebook7")
    work = root / "work"
    work.mkdir()
    _, env = jupyter_home(root)
    state, out = root / "state.json", root / "selected.txt"
    cells = [SETUP_CELL.format(tests=str(TESTS), state=str(state)), PRINT_CELL.format(out=str(out))]
    (work / "widget.ipynb").write_text(json.dumps(notebook(cells)))
    port, token = free_port(), secrets.token_hex(16)
    base = f"http://127.0.0.1:{port}"
    log = root / "notebook.log"
    args = jupyter_args("notebook", port=port, token=token, root_dir=work)
    ready = f"{base}/api/status?token={token}"
    with serve(args, ready_url=ready, log=log, cwd=work, env=env, name="Notebook 7"):
        yield {
            "url": f"{base}/notebooks/widget.ipynb?token={token}",
            "state": state,
            "out": out,
            "log": log,
            "host": f"127.0.0.1:{port}",
        }


def test_widget_in_notebook7(nb7, page, tmp_path):
    page.set_default_timeout(TIMEOUT)
    recorder = PageRecorder().attach(page, allow_hosts=(nb7["host"],))
    stacks: list[str] = []
    page.on("pageerror", lambda err: stacks.append(f"{err}\n{err.stack}"))
    with reported(page, shot=tmp_path / "notebook7.png", log=nb7["log"], name="Notebook 7"):
        page.goto(nb7["url"])
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=RENDER_TIMEOUT)
        assert page.locator("#main-panel .jp-NotebookPanel").count() == 1  # Notebook 7's shell
        run_cell(page, 0)
        widget = page.locator(".jp-OutputArea").first
        widget.locator(".iglens-strip [data-token-index]").first.wait_for(timeout=RENDER_TIMEOUT)
        assert widget.locator(".iglens-strip [data-token-index]").count() == 7
        assert widget.locator("canvas.iglens-heatmap-canvas").count() == 1
        wait_for(lambda: "hello" in python_state(nb7).get("commands", []), what="the hello")

        # A click selects in the page (detail panel) and in Python; a later cell reads it.
        widget.locator("[data-token-index='2']").click()
        page.wait_for_selector(".jp-OutputArea [data-selected-index='2']", timeout=TIMEOUT)
        wait_for(lambda: python_state(nb7).get("selected") == 2, what="w.selected == 2")
        run_cell(page, 1)
        page.wait_for_selector(
            ".jp-OutputArea-output:has-text('python sees selected = 2')", timeout=TIMEOUT
        )
        assert wait_for(lambda: nb7["out"].exists() and nb7["out"].read_text()) == "2"

        # A new target in the controls → the kernel recomputes → the detail panel changes.
        recompute_target(widget, lambda: python_state(nb7))
        assert widget.locator("[data-selected-index='2']").count() == 1  # selection kept

        shots = os.environ.get("IGLENS_SCREENSHOTS")
        if shots:
            widget.evaluate("el => el.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(Path(shots) / "frontend-notebook7.png"))
    ours = [s for s in stacks if not (UPSTREAM_ERROR in s and UPSTREAM_BUNDLE in s)]
    assert ours == [], ours
    assert recorder.network == [], recorder.network
