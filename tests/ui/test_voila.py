"""The demo app, gallery/app.ipynb, served by Voilà and opened in Chromium (issues 23 and 24).

``voila app.ipynb`` runs on 127.0.0.1 (free port, a temporary Jupyter home as the other live
front ends: tests/ui/live_server.py) and executes the app in a ``python3`` kernel (this
interpreter); the app shows the real default model's chat answer to "What is the capital of
Vietnam?" in the student view. The test measures and prints the **first paint** (from the
server's start to the student view's curve drawn: kernel start, model load, generation and
attribution included) and the **kernel's memory** (RSS of the kernel process, with its
anonymous and file-backed parts and its peak), then checks what a student sees and does:

* the caption and the widget, no code and no table on the page;
* the student view opened on the answer's first content token with the output's top 5 in its
  header — the tokens, the position and the percentages computed here with plain
  transformers (``apply_chat_template``, greedy ``generate``, a forward pass's softmax), not
  with iglens_viz;
* a click: the walk's slider and a sentence of the walk move the cursor;
* a question typed into the prompt box and answered through the kernel: the new answer, its
  opening position and top 5 against the same independent computation.

With ``IGLENS_SCREENSHOTS`` set to a folder, the app as it opens is saved there as
``frontend-voila.png`` (docs/screenshots/ holds the committed one).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from .helpers import PageRecorder
from .live_server import RENDER_TIMEOUT, TIMEOUT, free_port, jupyter_home, require, serve
from .test_opening_prompts import expected_opening

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "gallery" / "app.ipynb"
PROMPT = "What is the capital of Vietnam?"
ASKED = "What is the capital of France?"
CURVE = "[data-view=lesson] svg.iglens-lesson-curve"
# Every request that would leave 127.0.0.1 is aborted and listed: there must be none. Voilà's
# "lab" template links Font Awesome from a CDN; the app's own template (share/jupyter/voila/
# templates/iglens, named in the app's metadata) drops those links.
# Voilà 0.5.13 loads every lab extension installed beside it; two need a shared module Voilà
# does not provide, and its module-federation runtime logs RUNTIME-012 for each: Notebook 7's
# and jupytext's (which mkdocs-jupyter, the docs site's notebook renderer, installs).
UPSTREAM_ERROR = "RUNTIME-012"
UPSTREAM_EXTENSIONS = ("@jupyter-notebook/lab-extension", "/labextensions/jupyterlab-jupytext/")
# mybinder.org's memory limit for a whole session, 2 GB (its user guide), in MiB. The app (its
# kernel and the Voilà server, which is all a Binder of this demo runs) must fit in it. Not a
# tighter figure: the kernel's RSS depends on the machine's libraries (952 MiB here, 1,027 MiB
# on the CI machine), and docs/frontends.md gives the measured figures.
BINDER_LIMIT_MIB = 2 * 10**9 // 2**20


def test_app_is_committed_clean():
    """The app as committed: no outputs, a python3 kernel, one markdown caption of one line
    and one code cell that shows the widget and prints nothing (Voilà shows every output)."""
    nb = json.loads(APP.read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    kinds = [c["cell_type"] for c in nb["cells"]]
    assert kinds == ["markdown", "code"]
    caption, code = ("".join(c["source"]) for c in nb["cells"])
    assert caption.strip() and "\n" not in caption.strip()
    assert nb["cells"][1]["outputs"] == [] and nb["cells"][1]["execution_count"] is None
    assert "print(" not in code and "to_dataframe" not in code
    assert 'w.view = "lesson"' in code and "selected=" not in code  # it opens on the point


def reference(model, tokenizer, prompt: str, new_tokens: int = 16) -> dict:
    """What the page should show, from plain transformers: the chat ids, the greedy answer,
    the opening position (:func:`expected_opening`) and the output's top 5 there."""
    import torch

    from iglens_viz.views.token_format import format_token

    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_dict=True
    )
    chat = [int(i) for i in chat["input_ids"]]
    with torch.no_grad():
        out = model.generate(
            torch.tensor([chat]), max_new_tokens=new_tokens, do_sample=False, num_beams=1
        )
    ids = out[0].tolist()
    position, token = expected_opening(tokenizer, ids, prompt)
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([ids])).logits[0, position].double(), -1)
    top = torch.topk(probs, 5)
    top5 = []
    for p, t in zip(top.values.tolist(), top.indices.tolist()):
        v = 100 * p
        pct = "<0.1%" if v < 0.1 else f"{v:.1f}%" if v < 9.95 else f"{round(v)}%"
        top5.append(f"{format_token(tokenizer.decode([t]), max_len=16)} {pct}")
    answer = tokenizer.decode(ids[len(chat) :], skip_special_tokens=True).strip()
    return {"ids": ids, "position": position, "token": token, "top5": top5, "answer": answer}


@pytest.fixture(scope="module")
def expected():
    import iglens_viz

    model, tokenizer = iglens_viz.load_model()
    return {p: reference(model, tokenizer, p) for p in (PROMPT, ASKED)}


def kernel_memory(server) -> dict[str, int]:
    """The Voilà kernel's memory in MiB from /proc: VmRSS (RssAnon + RssFile + RssShmem),
    VmHWM (its peak) and the unique set size; and the Voilà server's RSS (``server_RSS``)."""
    import psutil

    kernels = [
        c
        for c in psutil.Process(server.pid).children(recursive=True)
        if "ipykernel_launcher" in " ".join(c.cmdline())
    ]
    assert len(kernels) == 1, kernels
    k = kernels[0]
    fields = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")
    with open(f"/proc/{k.pid}/status") as f:
        status = {ln.split(":")[0]: int(ln.split()[1]) // 1024 for ln in f if ln.startswith(fields)}
    status["USS"] = k.memory_full_info().uss // 2**20
    status["server_RSS"] = psutil.Process(server.pid).memory_info().rss // 2**20
    return status


@pytest.fixture(scope="module")
def voila_app(tmp_path_factory):
    require("voila", "voila>=0.5,<0.6", minversion="0.5")
    root = tmp_path_factory.mktemp("voila")
    work = root / "work"
    work.mkdir()
    shutil.copy(APP, work / "app.ipynb")  # served from a copy: the checkout stays as it was
    _, env = jupyter_home(root)
    # the real default model from the user's cache (jupyter_home points IGLENS_CACHE at a
    # fresh folder, where it would be converted again)
    env.pop("IGLENS_CACHE")
    if os.environ.get("IGLENS_CACHE"):
        env["IGLENS_CACHE"] = os.environ["IGLENS_CACHE"]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [
        sys.executable,
        "-m",
        "voila",
        "app.ipynb",
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
        "--Voila.port_retries=0",
    ]
    log = root / "voila.log"
    started = time.monotonic()
    ready = f"{base}/voila/labextensions/anywidget/package.json"  # served without a kernel
    with serve(args, ready_url=ready, log=log, cwd=work, env=env, name="Voilà") as proc:
        yield {
            "url": f"{base}/",
            "host": f"127.0.0.1:{port}",
            "log": log,
            "proc": proc,
            "started": started,
            "ready_s": time.monotonic() - started,
        }


def lesson_state(page) -> dict:
    return page.evaluate(
        """() => {
          const v = document.querySelector('[data-view=lesson]');
          const sel = document.querySelector('.iglens-strip [aria-selected=true]');
          return {
            position: v.dataset.position, cursor: v.dataset.cursor,
            selected: sel && sel.dataset.tokenIndex,
            answer: v.querySelector('.iglens-lesson-answer').textContent,
            top5: [...v.querySelectorAll('[data-lesson-top5] li')].map(
              (e) => e.querySelector('.iglens-chip').textContent + ' '
                + e.querySelector('.iglens-lesson-pct').textContent),
          };
        }"""
    )


@pytest.mark.browser
@pytest.mark.real_model
def test_app_in_voila(voila_app, expected, page, tmp_path):
    page.set_default_timeout(TIMEOUT)
    recorder = PageRecorder().attach(page, allow_hosts=(voila_app["host"],))
    aborted: list[str] = []

    def route(r):
        if r.request.url.startswith(f"http://{voila_app['host']}/"):
            r.continue_()
        else:
            aborted.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    try:
        page.goto(voila_app["url"], timeout=RENDER_TIMEOUT)  # Voilà answers once it ran the app
        page.wait_for_selector(CURVE, timeout=RENDER_TIMEOUT)
        first_paint = time.monotonic() - voila_app["started"]
        page.mouse.move(2, 2)
        page.wait_for_timeout(500)
        memory = kernel_memory(voila_app["proc"])
        print(
            f"Voilà: server ready {voila_app['ready_s']:.1f} s; first paint (server start → "
            f"the student view's curve) {first_paint:.1f} s; kernel memory (MiB) {memory}"
        )
        shots = os.environ.get("IGLENS_SCREENSHOTS")
        for folder in [tmp_path] + ([Path(shots)] if shots else []):
            page.screenshot(path=str(Path(folder) / "frontend-voila.png"), full_page=True)

        # The caption and the widget; no code, no table, nothing printed.
        text = page.inner_text("body")
        assert "Where does a language model find its answer?" in text
        assert "import" not in text and "engine.widget(" not in text
        assert page.locator(".jp-CodeCell .jp-InputArea, .jp-InputPrompt").count() == 0
        assert page.locator("pre:visible, table:visible").count() == 0
        outputs = page.locator(".jp-OutputArea-output")
        assert outputs.count() == 1 and outputs.first.locator(".iglens-root").count() == 1

        # The student view, opened on the answer's content token, its top 5 in the header.
        vietnam = expected[PROMPT]
        state = lesson_state(page)
        assert state["position"] == state["selected"] == str(vietnam["position"]), state
        assert vietnam["token"] == " Ho" and vietnam["answer"] in state["answer"], state
        assert state["top5"] == vietnam["top5"], state
        assert state["top5"][:2] == ["␣Ho 45%", "␣H 41%"]

        # A click: the walk's slider, then a sentence of the walk, move the cursor.
        slider = page.locator("[data-view=lesson] input[name=lesson-block]")
        slider.click()
        page.keyboard.press("Home")
        assert lesson_state(page)["cursor"] == "0"
        page.keyboard.press("ArrowRight")
        assert lesson_state(page)["cursor"] == "1"
        event = page.locator("[data-view=lesson] .iglens-lesson-event").last
        block = event.get_attribute("data-block")
        event.click()
        assert lesson_state(page)["cursor"] == block != "1"

        # A question typed into the prompt box and answered through the kernel.
        box = page.locator("[data-view=lesson] form[data-prompt-box]")
        box.locator("textarea[name=prompt]").fill(ASKED)
        asked = time.monotonic()
        box.locator("[data-action=ask]").click()
        france = expected[ASKED]
        page.wait_for_function(
            "(a) => document.querySelector('[data-view=lesson] .iglens-lesson-answer')"
            ".textContent.includes(a)",
            arg=france["answer"],
            timeout=RENDER_TIMEOUT,
        )
        page.wait_for_selector(CURVE)
        answered = time.monotonic() - asked
        state = lesson_state(page)
        assert state["position"] == state["selected"] == str(france["position"]), state
        assert state["top5"] == france["top5"], state
        assert box.get_attribute("aria-busy") == "false"
        memory_after = kernel_memory(voila_app["proc"])
        print(f"Voilà: the question answered in {answered:.1f} s; kernel memory {memory_after}")
    finally:
        print(f"--- Voilà log (tail) ---\n{voila_app['log'].read_text(errors='replace')[-3000:]}")

    for m in (memory, memory_after):  # the app, at its kernel's peak, fits in a Binder
        assert m["VmHWM"] + m["server_RSS"] < BINDER_LIMIT_MIB, m
    assert aborted == [] and recorder.network == [], (aborted, recorder.network)
    ours = [
        e
        for e in recorder.console_errors
        if not (UPSTREAM_ERROR in e and any(x in e for x in UPSTREAM_EXTENSIONS))
    ]
    assert ours == [] and recorder.page_errors == [], (ours, recorder.page_errors)
