"""What the Colab-like host test (tests/ui/test_hosts.py) found, held in process (issue 35).

* Colab's widget manager drops the binary buffers of ``comm_open``
  (googlecolab/colab-cdn-widget-manager#33): under Colab (``google.colab.output`` imported)
  the widget's state carries no binary buffer, every array as base64 text of the same bytes.
* Their output frames may block downloads: :meth:`IGLensWidget.save_png` / ``save_svg`` write
  the picture of the view from Python.
* Colab and VS Code run comm messages on the kernel's main shell: the commands that compute
  (``path``, ``components`` as well as the background ones) run in the widget's thread,
  never in the comm handler; ``hello`` and ``cancel`` are answered at once.
"""

from __future__ import annotations

import base64
import sys
import threading
import types

import numpy as np
import pytest

from iglens_viz.widget import IGLensWidget
from tests.support import HANG_S

PROMPT = "w3 w5 w7 w9 w11"


def binary_leaves(value, path=()):
    """The paths of every bytes/memoryview in a (nested) state."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in binary_leaves(v, (*path, k))]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in binary_leaves(v, (*path, i))]
    return []


def at(state, path):
    for key in path:
        state = state[key]
    return state


def test_state_under_colab_has_no_binary_buffer(lens, monkeypatch):
    w = IGLensWidget(None, lens, PROMPT)
    jupyter = w.get_state()
    paths = binary_leaves(jupyter)
    assert ("result", "lens_probs", "buffer") in paths  # the payload travels as buffers
    output = types.ModuleType("google.colab.output")
    monkeypatch.setitem(sys.modules, "google.colab.output", output)
    colab = w.get_state()
    assert binary_leaves(colab) == []
    for path in paths:  # the same bytes, as base64 text
        assert base64.b64decode(at(colab, path)) == bytes(at(jupyter, path))
    lens_probs = np.frombuffer(base64.b64decode(colab["result"]["lens_probs"]["buffer"]), "<f4")
    np.testing.assert_array_equal(lens_probs, w.attribution.lens_probs.astype(np.float32).ravel())


@pytest.mark.parametrize("kind", ["path", "components"])
def test_computing_commands_run_in_the_widgets_thread(lens, kind):
    w = IGLensWidget(None, lens, PROMPT)
    w.threaded = True
    sent = []
    answered = threading.Event()
    send = w.send

    def record(content, buffers=None):
        sent.append((content, threading.current_thread().name))
        if content.get("command") == kind:
            answered.set()
        return send(content, buffers)

    w.send = record
    fields = {"steps": 4} if kind == "path" else {}
    message = {"kind": kind, "id": "p1", "result_id": w.result_id, "position": 2, **fields}
    assert w.dispatch(message) is None  # not computed in the caller (the comm handler)
    assert answered.wait(HANG_S)
    (answer, thread), *_ = [(a, t) for a, t in sent if a.get("command") == kind]
    assert answer["ok"], answer
    assert thread == f"iglens-{kind}"
    # hello computes nothing: answered at once, in the caller
    assert w.dispatch({"kind": "hello", "id": "h1"})["ok"]


def test_save_png_and_svg_write_the_picture_of_the_view(lens, tmp_path):
    from PIL import Image

    from iglens_viz.widget.fallback import FIGSIZE, PNG_SIZE, fallback_png

    w = IGLensWidget(None, lens, PROMPT, selected=3)
    png = w.save_png(tmp_path / "view.png")
    assert png == tmp_path / "view.png"
    assert png.read_bytes() == fallback_png(w)  # the output's own picture
    with Image.open(png) as image:
        assert image.format == "PNG" and image.size == PNG_SIZE
    svg = w.save_svg(str(tmp_path / "view.svg"))
    import xml.etree.ElementTree as ET

    root = ET.parse(svg).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    # the same figure, in points (72 per inch)
    assert (root.get("width"), root.get("height")) == tuple(f"{x * 72:g}pt" for x in FIGSIZE)
    assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 10  # drawn, not empty


def test_the_save_command_writes_the_pages_picture(lens, tmp_path, monkeypatch):
    """A frame that blocks downloads sends the page's picture: Python writes it, by its plain
    name, in the kernel's working folder, and refuses any other name or bad bytes."""
    from tests.support.widget_page import Page, error_of

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    page = Page(IGLensWidget(None, lens, PROMPT))
    svg = b"<svg xmlns='http://www.w3.org/2000/svg'><rect width='3' height='2'/></svg>"
    answer = page.ask("save", name="iglens-heatmap.svg", data=base64.b64encode(svg).decode())
    assert answer["ok"], answer
    assert (work / "iglens-heatmap.svg").read_bytes() == svg
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    for name in ("../escaped.png", "/tmp/escaped.png", "view.exe", ".png", ""):
        answer = page.ask("save", name=name, data=png)
        assert "a file name ending .png or .svg" in error_of(answer), answer
    assert list(tmp_path.rglob("escaped.png")) == []
    answer = page.ask("save", name="view.png", data="not base64!")
    assert "as base64" in error_of(answer)
    assert not (work / "view.png").exists()
