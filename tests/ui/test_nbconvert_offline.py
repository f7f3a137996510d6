"""An executed notebook's nbconvert HTML, opened offline, shows the widget's fallback picture.

The widget's MIME bundle carries ``image/png`` beside the widget view (issue 24,
iglens_viz/widget/fallback.py). nbconvert's HTML exporter picks the widget view whenever the
notebook's ``metadata.widgets`` holds the widget's model (``WidgetsDataTypeFilter``), and the
page then loads the widget manager from unpkg.com: offline, that output stays empty. Executing
with ``--ExecutePreprocessor.store_widget_state=False`` stores no widget state, so the filter
falls through to ``image/png``, which the page embeds as a data URI.

Both commands run here on a small notebook (the tiny random Llama of tests/tiny_models.py), each
HTML file is opened in Chromium with every request that leaves the file aborted:

* ``jupyter nbconvert --to html --execute --ExecutePreprocessor.store_widget_state=False``:
  the fallback ``<img>`` is visible at 720 × 368 (about 13 kB of PNG on the tiny model);
* ``jupyter nbconvert --to html --execute`` (nbclient's default ``store_widget_state=True``):
  the widget view is chosen, there is no picture, and the page asks unpkg for the manager.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iglens_viz.widget.fallback import PNG_SIZE

pytestmark = pytest.mark.browser

TESTS = Path(__file__).resolve().parent.parent
KERNEL = "iglens-test-venv"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CELL = """\
import sys
sys.path.insert(0, {tests!r})
from tiny_models import tiny_model, tiny_tokenizer
from iglens_viz import IGLens

lens = IGLens(tiny_model("llama"), tiny_tokenizer())
w = lens.widget("w3 w5 w7 w9 w11 w13", target="predicted")
w"""
# The commands, as docs/widget-protocol.md gives them (the notebook and output names aside).
OFFLINE = ["--to", "html", "--execute", "--ExecutePreprocessor.store_widget_state=False"]
DEFAULT = ["--to", "html", "--execute"]
TIMEOUT = 600  # a kernel start and the torch imports, on a loaded 2-core machine


def _notebook() -> dict:
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": KERNEL, "display_name": "Python (iglens tests)"},
            "language_info": {"name": "python"},
        },
        "cells": [
            {
                "cell_type": "code",
                "id": "widget",
                "metadata": {},
                "source": CELL.format(tests=str(TESTS)),
                "outputs": [],
                "execution_count": None,
            }
        ],
    }


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    """The notebook converted by both commands: ``{"offline": html, "default": html}``."""
    root = tmp_path_factory.mktemp("nbconvert")
    dirs = {name: root / name for name in ("config", "data", "runtime", "ipython")}
    for d in dirs.values():
        d.mkdir()
    # The kernel is this interpreter (the project's venv), whatever `python3` means elsewhere.
    spec = dirs["data"] / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python (iglens tests)",
                "language": "python",
            }
        )
    )
    (root / "widget.ipynb").write_text(json.dumps(_notebook()))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        IPYTHONDIR=str(dirs["ipython"]),
        IGLENS_CACHE=str(root / "cache"),
    )
    out = {}
    for name, flags in (("offline", OFFLINE), ("default", DEFAULT)):
        done = subprocess.run(
            [sys.executable, "-m", "jupyter", "nbconvert", *flags, "widget.ipynb"]
            + ["--output", name],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        out[name] = root / f"{name}.html"
        assert out[name].is_file(), done.stderr[-3000:]
    return out


def _open_offline(page, path: Path) -> list[str]:
    """Open ``path`` with every request but the file itself aborted; returns the aborted URLs."""
    aborted: list[str] = []

    def route(r):
        if r.request.url == path.as_uri():
            r.continue_()
        else:
            aborted.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri(), wait_until="load")
    return aborted


def test_offline_command_shows_the_fallback_picture(page, converted):
    aborted = _open_offline(page, converted["offline"])
    img = page.locator(".jp-OutputArea-output img")
    assert img.count() == 1
    img.wait_for(state="visible")
    size = page.wait_for_function(
        "(el) => el.complete && el.naturalWidth > 0 && [el.naturalWidth, el.naturalHeight]",
        arg=img.element_handle(),
    ).json_value()
    assert tuple(size) == PNG_SIZE
    box = img.bounding_box()
    assert box and box["width"] > 100 and box["height"] > 50
    src = img.get_attribute("src") or ""
    assert src.startswith("data:image/png;base64,")  # in the file: no request needed
    png = base64.b64decode(src.split(",", 1)[1])
    assert 2_000 < len(png) < 60_000, len(png)
    assert page.locator(f'script[type="{WIDGET_VIEW}"]').count() == 0
    assert not any("html-manager" in url for url in aborted), aborted


def test_default_command_picks_the_widget_view_and_shows_nothing_offline(page, converted):
    aborted = _open_offline(page, converted["default"])
    # nbclient stored the widget state, so the filter chose the widget view over the PNG
    assert page.locator(f'script[type="{WIDGET_VIEW}"]').count() == 1
    assert page.locator(".jp-OutputArea-output img").count() == 0
    manager = "unpkg.com/@jupyter-widgets/html-manager"
    for _ in range(50):  # the page adds the manager's script at DOMContentLoaded
        if any(manager in url for url in aborted):
            break
        page.wait_for_timeout(100)
    assert any(manager in url for url in aborted), aborted
    output = page.locator(".jupyter-widgets.jp-OutputArea-output").first
    assert (output.inner_text() or "").strip() == ""
