"""Shared by the browser tests of live front ends (JupyterLab, Notebook 7, marimo).

* :func:`jupyter_home`: a temporary Jupyter home (config, data, runtime, settings, workspace
  folders) with a kernel spec that points at this interpreter (the venv's python), and the
  environment a server started on it needs.
* :func:`serve`: a server process on 127.0.0.1 (free port from :func:`free_port`), awaited
  until it answers, its output in a log file, ended (terminate, then kill) on exit.
* :data:`SETUP_CELL` / :data:`PRINT_CELL`: the notebook cells that show the widget on a tiny
  random Llama (tests/tiny_models.py) and record the widget's Python-side state to a file at
  every change, so that a test reads what Python sees (:func:`python_state`).
* :func:`run_cell`: run a cell of a JupyterLab-built notebook page (JupyterLab, Notebook 7).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
KERNEL = "iglens-test-venv"
# The first widget render in a fresh server can take well over 10 s (kernel start, imports).
RENDER_TIMEOUT = int(os.environ.get("IGLENS_UI_RENDER_TIMEOUT_MS", 180_000))
TIMEOUT = 120_000  # generous: on a loaded 2-core machine the kernel can be slow to answer
LAB_IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"

SETUP_CELL = """\
import json, pathlib, sys
sys.path.insert(0, {tests!r})
from tiny_models import tiny_model, tiny_tokenizer
from iglens_viz import IGLens
from iglens_viz.widget import show

lens = IGLens(tiny_model("llama"), tiny_tokenizer())
w = show(lens, None, "w3 w5 w7 w9 w11 w13 w15", target="predicted")
state_file = pathlib.Path({state!r})

def path_reference():
    # the whole prompt at the path's steps, computed independently of the lazy path
    if not w.path.get("steps"):
        return None
    full = lens.run(w.attribution.request.replace(steps=w.path["steps"]))
    return full.path_probs[w.path["position"]].tolist()

answers = []  # the answer envelopes sent to the page
_refs = {{}}

def ablation_reference():
    # the total effect at the answer position, by an independent ablate() of the ids up to it
    a = w.ablation
    if not a.get("drops") or a.get("positions") != "target":
        return None
    if a["request_id"] not in _refs:
        from iglens_viz.causal import ablate
        p = a["position"]
        ids = [int(i) for i in w.attribution.input_ids[: p + 1]]
        target = [-1] * p + [int(w.attribution.target_ids[p])]
        res = ablate(lens.model, None, ids, target=target, positions="target")
        _refs[a["request_id"]] = res.drop[p].tolist()
    return _refs[a["request_id"]]

def record(change=None):
    errors = [a["error"]["message"] for a in answers if not a["ok"]]
    state_file.write_text(json.dumps({{
        "selected": w.selected, "target": w.result["controls"]["target"],
        "error": errors[-1] if errors else "", "commands": [a["command"] for a in answers],
        "target_ids": w.attribution.target_ids.tolist(), "running": w.running,
        "ablation": w.ablation, "ablation_ref": ablation_reference(),
        "path": w.path, "path_ref": path_reference(),
        "lens": w.attribution.lens_name,
        "recompute_ok": [a["ok"] for a in answers if a["command"] == "recompute"]}}))

_send = w.send
def send(content, buffers=None):
    answers.append(content)
    record()
    return _send(content, buffers)

w.send = send
w.observe(record, names=["selected", "result", "running", "ablation", "path"])
record()
w"""

PRINT_CELL = """\
pathlib.Path({out!r}).write_text(str(w.selected))
print("python sees selected =", w.selected)"""

# Issue 22 through the kernel: a second widget with whole answers; Python's own figures go to a
# file, so the test compares what the page draws from the comm's binary buffers with them.
ANSWERS_CELL = """\
w2 = lens.widget("w5 w17 w3 w42 w8", answer=" w9 w11", versus=" w7")
r2 = w2.attribution
rows = r2.lens_logprobs[1:4].astype("float32").astype("float64")
pathlib.Path({answers!r}).write_text(json.dumps({{
    "logprob_gap": r2.comparison.logprob_gap,
    "onset": r2.comparison.prob_onset,  # the view opens in probability space
    "answer_logprob": r2.answer.logprob,
    "span_bars": (rows[:, 1:] - rows[:, :-1]).sum(axis=0).tolist()}}))
w2"""


def require(module: str, package: str, minversion: str | None = None) -> None:
    """Skip the test when a front end's package is not installed; fail instead under CI
    (``CI`` set), where the test extra installs it. Looked up, not imported: the front end
    runs in its own process, and importing marimo into the test process failed in CI's full
    run (a dataclass of its config, after what earlier tests imported)."""
    import importlib.metadata
    import importlib.util

    from packaging.version import Version

    found = importlib.util.find_spec(module) is not None
    if found and minversion is not None:
        found = Version(importlib.metadata.version(module)) >= Version(minversion)
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"this test needs {package} (the test extra: pip install -e '.[test]')")
        pytest.skip(f"this test needs {package}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float = TIMEOUT / 1000, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def python_state(server: dict) -> dict:
    """What the kernel's observer last wrote to ``server["state"]`` ({} while unreadable)."""
    try:
        return json.loads(server["state"].read_text())
    except (OSError, ValueError):
        return {}


def recompute_target(widget, state, word: str = "w42") -> dict:
    """Type target ``word`` into the widget's controls and apply it, as a user does; wait for
    the kernel to answer the recompute (``state()``: what Python saw, :func:`python_state`)
    and for the detail panel to show the new target. Returns what Python saw."""
    detail = widget.locator("[data-selected-index]").first
    before = detail.text_content()
    controls = widget.locator(".iglens-controls").first
    controls.locator("[name='target']").fill(word)
    controls.locator(".iglens-apply").click()
    seen = wait_for(
        lambda: (s := state()).get("recompute_ok") and s,
        what="the recompute in the kernel, answered",
    )
    assert seen["recompute_ok"] == [True] and set(seen["target_ids"]) == {int(word[1:])}
    wait_for(lambda: detail.text_content() != before, what="the detail panel to change")
    assert word in detail.text_content()
    return seen


def notebook(cells: list[str]) -> dict:
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {
                "name": KERNEL,
                "display_name": "Python (iglens tests)",
                "language": "python",
            },
            "language_info": {"name": "python"},
        },
        "cells": [
            {
                "cell_type": "code",
                "id": f"cell{i}",
                "metadata": {},
                "source": src,
                "outputs": [],
                "execution_count": None,
            }
            for i, src in enumerate(cells)
        ],
    }


def jupyter_home(root: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Fresh Jupyter folders under ``root`` and the environment that points a server at them.

    The kernel spec :data:`KERNEL` runs this interpreter; JupyterLab's settings (read by
    Notebook 7 too) turn off news, update checks and notification toasts, and start the
    notebook's kernel (its metadata names it) without a "Select Kernel" dialog. The kernel's
    fitted lenses go to a fresh ``IGLENS_CACHE`` of the run, not the user's."""
    dirs = {
        name: root / name
        for name in ("config", "data", "runtime", "ipython", "settings", "workspaces")
    }
    for d in dirs.values():
        d.mkdir()
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
    settings = {
        ("apputils-extension", "notification"): {"fetchNews": "false", "checkForUpdates": False},
        ("notebook-extension", "tracker"): {"autoStartDefaultKernel": True},
    }
    for (extension, name), values in settings.items():
        folder = dirs["settings"] / "@jupyterlab" / extension
        folder.mkdir(parents=True)
        (folder / f"{name}.jupyterlab-settings").write_text(json.dumps(values))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        IPYTHONDIR=str(dirs["ipython"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
        ANYWIDGET_HMR="0",
        IGLENS_CACHE=str(root / "cache"),
        PYTHONUNBUFFERED="1",
    )
    return dirs, env


def jupyter_args(app: str, *, port: int, token: str, root_dir: Path) -> list[str]:
    """``python -m jupyter <app>`` (lab, notebook) headless on 127.0.0.1:port with a token."""
    return [
        sys.executable,
        "-m",
        "jupyter",
        app,
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
    ]


@contextlib.contextmanager
def serve_lab(work: Path, notebook_name: str, *, env: dict[str, str], log: Path) -> Iterator[dict]:
    """JupyterLab serving ``work`` on a free port until the block ends (no news, no update
    check); yields the notebook's ``url`` and the server's ``host``."""
    port, token = free_port(), secrets.token_hex(16)
    base = f"http://127.0.0.1:{port}"
    args = [
        *jupyter_args("lab", port=port, token=token, root_dir=work),
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    ready = f"{base}/api/status?token={token}"
    with serve(args, ready_url=ready, log=log, cwd=work, env=env, name="JupyterLab"):
        yield {"url": f"{base}/lab/tree/{notebook_name}?token={token}", "host": f"127.0.0.1:{port}"}


@contextlib.contextmanager
def serve(
    args: Sequence[str],
    *,
    ready_url: str,
    log: Path,
    cwd: Path,
    env: dict[str, str],
    name: str,
    timeout: float = 120,
) -> Iterator[subprocess.Popen]:
    """Run a server until the block ends; returns once ``ready_url`` answers 200."""
    with open(log, "w") as out:
        proc = subprocess.Popen(list(args), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited: {log.read_text()[-3000:]}")
                try:
                    with urllib.request.urlopen(ready_url, timeout=5) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not start: {log.read_text()[-3000:]}")
                time.sleep(0.5)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def reported(page, *, shot: Path, log: Path, name: str) -> Iterator[None]:
    """On the way out (failure included): a screenshot and the server log's tail, printed
    (pytest shows them in the report of a failed test)."""
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # best effort
            page.screenshot(path=str(shot), full_page=True)
        print(
            f"screenshot: {shot}\n--- {name} log (tail) ---\n"
            f"{log.read_text(errors='replace')[-4000:]}"
        )


def accept_kernel_dialog(page) -> None:
    """Should the page still ask which kernel to start, take its proposal (ours)."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and dialog.first.is_visible():
        text = dialog.first.text_content() or ""
        assert "Python (iglens tests)" in text or "Kernel" in text, text
        dialog.first.locator(".jp-mod-accept").click()
        dialog.first.wait_for(state="detached", timeout=10_000)


def run_cell(page, index: int, timeout: float = 120, idle: str = LAB_IDLE) -> None:
    """Run a notebook cell with Shift+Enter once the kernel is idle (``idle``: the selector
    of the idle kernel's indicator); retry if the key press was lost (the page may still be
    settling right after it opens the notebook)."""
    page.wait_for_selector(idle, timeout=timeout * 1000)
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    prompt = cell.locator(".jp-InputPrompt").first
    before = prompt.text_content()
    deadline = time.monotonic() + timeout
    while True:
        accept_kernel_dialog(page)
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        started = time.monotonic() + 20  # the prompt turns [*] as soon as it is queued
        while time.monotonic() < min(started, deadline):
            if prompt.text_content() != before:  # "[ ]:" → "[*]:" → "[1]:"
                return
            time.sleep(0.2)
        if time.monotonic() >= deadline:
            raise AssertionError(f"cell {index} did not start running")
