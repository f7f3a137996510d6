"""The live widget in a Colab-like and a VS Code-like host, offline, on a real kernel.

**Colab** renders widgets with its own manager (googlecolab/colab-cdn-widget-manager), which
asks the page's *environment* for each model's state and comm and fetches the model's front
end, anywidget's, from jsDelivr. ``@cocalc/widgets`` (npm, a devDependency) is CoCalc's
repackaging of that manager: the same ``createWidgetManager(environment)`` and AMD loader.
tests/ui/hosts/colab.js implements the environment over ``@jupyterlab/services``. The
manager's request for ``https://cdn.jsdelivr.net/npm/anywidget@~0.11.*/dist/index.js`` is
answered by a Playwright route with the environment's own copy
(``share/jupyter/nbextensions/anywidget/index.js``, the AMD bundle the anywidget wheel
installs). Two runs: ``manager`` (the messages handed over as they came) and ``colab``
(Colab's documented behaviour, googlecolab/colab-cdn-widget-manager#33: ``comm_open``'s
binary buffers dropped, custom-message buffers as ``Uint8Array``; the kernel imports a
stand-in ``google.colab.output``, as Colab's runtime has it).

**VS Code** renders widgets with ``@vscode/jupyter-ipywidgets8`` (npm, a devDependency):
requirejs (npm) on the page, its ``WidgetManager`` over a kernel connection, and anywidget
loaded by requirejs from the environment's ``share/jupyter/nbextensions/anywidget/`` (VS
Code's local widget script source): tests/ui/hosts/vscode.js.

Both pages are bundled by the project's esbuild and served by a ``jupyter server`` on
127.0.0.1 (tests/ui/live_server.py's Jupyter home; a real kernel on the tiny random Llama of
tests/tiny_models.py), comm messages on the kernel's main shell (no subshells, as in both
hosts); every request off 127.0.0.1 but the routed CDN one is aborted and fails the test.
Each run checks: the widget renders and its ``hello`` is answered; a click reaches
``w.selected``; a recompute (a new target) and a question in the prompt box are answered and
drawn; Cancel stops a running recompute; every computing command ran in the widget's own
thread, never in the comm handler. A third run puts the Colab-like host in a sandboxed iframe
without ``allow-downloads``, as hosts' output frames may be: the PNG button's picture is then
written by the kernel. With ``IGLENS_SCREENSHOTS`` set to a folder the rendered
widget is saved there as ``frontend-colab-<mode>.png`` / ``frontend-vscode.png``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import LOCAL_SCHEMES
from .live_server import (
    KERNEL,
    RENDER_TIMEOUT,
    TESTS,
    TIMEOUT,
    free_port,
    jupyter_args,
    jupyter_home,
    recompute_target,
    reported,
    serve,
    wait_for,
)

pytestmark = pytest.mark.browser

ROOT = TESTS.parent
HOSTS = Path(__file__).resolve().parent / "hosts"
CDN_ANYWIDGET = "https://cdn.jsdelivr.net/npm/anywidget@*/dist/index.js"
ANYWIDGET_AMD = Path(sys.prefix) / "share" / "jupyter" / "nbextensions" / "anywidget" / "index.js"

# Colab's runtime has google.colab.output (anywidget calls its enable_custom_widget_manager);
# the stand-in lets the kernel's Python see the host it is in.
COLAB_RUNTIME = """\
import importlib.machinery, sys, types
_colab = types.ModuleType("google.colab")
_colab.output = types.ModuleType("google.colab.output")
for _m in (_colab, _colab.output):
    _m.__spec__ = importlib.machinery.ModuleSpec(_m.__name__, None)
_colab.output.enable_custom_widget_manager = lambda: None
_colab.output._widgets = types.SimpleNamespace(_installed_url=None)  # read by anywidget
_google = sys.modules.setdefault("google", types.ModuleType("google"))
_google.colab = _colab
sys.modules["google.colab"], sys.modules["google.colab.output"] = _colab, _colab.output
"""

CODE = """\
import json, pathlib, sys, threading, time
sys.path.insert(0, {tests!r})
from tiny_models import tiny_model, tiny_tokenizer
from iglens_viz import IGLens
from iglens_viz.widget import show

lens = IGLens(tiny_model("llama"), tiny_tokenizer())
w = show(lens, None, "w3 w5 w7 w9 w11 w13 w15", target="predicted")
state_file = pathlib.Path({state!r})
answers = []

def record(change=None):
    state_file.write_text(json.dumps({{
        "selected": w.selected, "running": w.running, "result_id": w.result_id,
        "prompt": w.attribution.request.prompt, "target_ids": w.attribution.target_ids.tolist(),
        "answers": answers, "commands": [a["command"] for a in answers],
        "recompute_ok": [a["ok"] for a in answers if a["command"] == "recompute"]}}))

_send = w.send
def send(content, buffers=None):
    answers.append({{**content, "thread": threading.current_thread().name}})
    record()
    return _send(content, buffers)

w.send = send
w.observe(record, names=["selected", "result", "running"])
record()

def slow():
    # many small chunks, each slowed: a Riemann recompute of 100 steps takes about 12 s
    lens.memory_budget = 1 << 16
    report = w._server.report
    def slowed(done, total):
        time.sleep(0.08)
        report(done, total)
    w._server.report = slowed

w"""

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title></head>
<body><div id="outputs"></div>
{scripts}<script type="module">
import {{ start }} from "./iglens-{host}.js";
window.hostStart = start;
</script></body></html>"""

# The Colab-like host inside an output frame as hosts make them: sandboxed, scripts and its own
# origin allowed, downloads not.
FRAMED = """<!doctype html>
<html><head><meta charset="utf-8"><title>A sandboxed output frame</title></head>
<body style="margin:0"><iframe sandbox="allow-scripts allow-same-origin" src="iglens-colab.html"
style="width:1270px;height:890px;border:0"></iframe></body></html>"""

HOST_PAGES = {
    "colab": {"title": "Colab-like host", "scripts": ""},
    # VS Code's webview has requirejs on the page before its widget manager
    "vscode": {"title": "VS Code-like host", "scripts": '<script src="./require.js"></script>\n'},
}


def bundle(entry: Path, out: Path) -> Path:
    """``entry`` bundled for the browser by the project's esbuild (node_modules, no network)."""
    esbuild = ROOT / "node_modules" / ".bin" / "esbuild"
    packages = ("@cocalc/widgets", "@jupyterlab/services")
    if not esbuild.exists() or not all((ROOT / "node_modules" / p).is_dir() for p in packages):
        if os.environ.get("CI"):
            pytest.fail("the host pages need node_modules: npm ci (make install)")
        pytest.skip("the host pages need node_modules (npm ci)")
    subprocess.run(
        [
            str(esbuild),
            str(entry),
            "--bundle",
            "--format=esm",
            f"--outfile={out}",
            "--log-level=error",
        ],
        cwd=ROOT,
        check=True,
    )
    return out


def read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``jupyter server`` on 127.0.0.1 with the tests' kernel spec, and the host page's bundle."""
    if not ANYWIDGET_AMD.is_file():
        pytest.fail(f"anywidget's AMD bundle is missing: {ANYWIDGET_AMD}")
    root = tmp_path_factory.mktemp("hosts")
    work = root / "work"
    work.mkdir()
    _, env = jupyter_home(root)
    # The host page is served by the Jupyter server itself (its extra static path): a page
    # fulfilled by a Playwright route counts as off the machine for Chromium's local network
    # access checks, which then block its WebSocket to 127.0.0.1.
    static = root / "static"
    static.mkdir()
    for host, page in HOST_PAGES.items():
        bundle(HOSTS / f"{host}.js", static / f"iglens-{host}.js")
        (static / f"iglens-{host}.html").write_text(PAGE.format(host=host, **page))
    shutil.copy(ROOT / "node_modules" / "requirejs" / "require.js", static / "require.js")
    (static / "iglens-framed.html").write_text(FRAMED)
    # the environment's share/jupyter: /static/nbextensions/anywidget/index.js (VS Code's
    # local widget script source reads that folder)
    share = ANYWIDGET_AMD.parents[2]
    port, token = free_port(), secrets.token_hex(16)
    base = f"http://127.0.0.1:{port}"
    log = root / "server.log"
    args = [
        *jupyter_args("server", port=port, token=token, root_dir=work),
        f"--ServerApp.extra_static_paths={json.dumps([str(static), str(share)])}",
    ]
    with serve(
        args,
        ready_url=f"{base}/api/status?token={token}",
        log=log,
        cwd=work,
        env=env,
        name="Jupyter server",
    ):
        yield {"base": base, "token": token, "host": f"127.0.0.1:{port}", "log": log, "work": work}


def open_host(
    page, server: dict, host: str, mode: str, state: Path, *, framed: bool = False
) -> tuple[dict, dict, object]:
    """The host page on the server's origin (``framed``: in a sandboxed iframe without
    ``allow-downloads``), the test's code run in a fresh kernel; returns the outcome, the
    routed CDN requests and the requests aborted (off the machine), and the frame."""
    base = server["base"]
    routed: dict[str, list[str]] = {"cdn": [], "aborted": []}

    def local_or_abort(route):
        url = route.request.url
        if url.startswith(LOCAL_SCHEMES) or url.startswith(f"{base}/"):
            return route.continue_()
        routed["aborted"].append(url)
        return route.abort()

    def anywidget(route):
        routed["cdn"].append(route.request.url)
        route.fulfill(body=ANYWIDGET_AMD.read_text(), content_type="text/javascript")

    page.route("**/*", local_or_abort)
    page.route(CDN_ANYWIDGET, anywidget)  # the later route is tried first
    page.goto(f"{base}/static/iglens-{'framed' if framed else host}.html")
    target = page.main_frame.child_frames[0] if framed else page.main_frame
    target.wait_for_function("() => !!window.hostStart")
    code = (COLAB_RUNTIME if mode == "colab" else "") + CODE.format(
        tests=str(TESTS), state=str(state)
    )
    outcome = target.evaluate(
        """async ({baseUrl, token, kernelName, mode, code, nbextensions}) => {
            window.host = await window.hostStart({baseUrl, token, kernelName, mode, nbextensions});
            const status = await window.host.run(code);
            return {status, errors: window.host.errors, rendered: window.host.rendered.length};
        }""",
        {
            "baseUrl": base,
            "token": server["token"],
            "kernelName": KERNEL,
            "mode": mode,
            "code": code,
            "nbextensions": f"{base}/static/nbextensions",
        },
    )
    return outcome, routed, target


def exercise(page, state: Path) -> None:
    """The checks of both hosts on the rendered widget: it renders and ``hello`` is answered; a
    click reaches Python; a recompute and a question are answered and drawn; Cancel stops a
    running recompute; every computing command ran in the widget's thread."""
    widget = page.locator(".host-output").first
    widget.locator(".iglens-strip [data-token-index]").first.wait_for(timeout=RENDER_TIMEOUT)
    assert widget.locator(".iglens-strip [data-token-index]").count() == 7
    assert widget.locator("canvas.iglens-heatmap-canvas").count() == 1
    wait_for(lambda: "hello" in read(state).get("commands", []), what="the hello answered")

    # A click reaches Python.
    widget.locator("[data-token-index='2']").click()
    widget.locator("[data-selected-index='2']").first.wait_for()
    wait_for(lambda: read(state).get("selected") == 2, what="w.selected == 2")

    # A recompute (a new target), answered and drawn.
    recompute_target(widget, lambda: read(state))

    # A question in the prompt box, answered in the kernel and drawn in the page.
    box = widget.locator(".iglens-controls form[data-prompt-box]")
    box.locator("textarea[name=prompt]").fill("w9 w11 w13")
    box.locator("[data-action=ask]").click()
    asked = wait_for(
        lambda: (s := read(state)) and "ask" in s["commands"] and not s["running"] and s,
        what="the question answered",
    )
    ask = [a for a in asked["answers"] if a["command"] == "ask"][0]
    assert ask["ok"], ask
    assert asked["prompt"] == "w9 w11 w13"
    wait_for(
        lambda: widget.locator(".iglens-strip [data-token-index]").count() == 3,
        what="the question's three tokens drawn",
    )

    # Cancel stops a running recompute (the widget's thread hears it).
    assert page.evaluate("async () => window.host.run('slow()')") == "ok"
    controls = widget.locator(".iglens-controls").first
    controls.locator("[name='estimator']").select_option("riemann")
    controls.locator("[name='steps']").fill("100")
    controls.locator(".iglens-apply").click()
    controls.locator("[data-action=cancel]").click()  # waits until it shows
    done = wait_for(
        lambda: (s := read(state)) and len(s["recompute_ok"]) == 2 and not s["running"] and s,
        what="the second recompute's answer",
    )
    last = [a for a in done["answers"] if a["command"] == "recompute"][-1]
    assert last["error"]["message"].startswith("cancelled"), last
    assert [a for a in done["answers"] if a["command"] == "cancel"][0]["ok"]
    widget.locator(".iglens-error:has-text('cancelled')").wait_for(timeout=TIMEOUT)

    # Every computing command was answered from the widget's thread, not the comm handler
    # (these hosts run comm messages on the kernel's main shell, which a handler blocks).
    computed = [a for a in done["answers"] if a["command"] not in ("hello", "cancel")]
    assert {a["command"] for a in computed} >= {"recompute", "ask", "components"}, computed
    for a in computed:
        assert a["thread"] == f"iglens-{a['command']}", a


def screenshot(page, name: str) -> None:
    shots = os.environ.get("IGLENS_SCREENSHOTS")
    if shots:
        page.locator(".host-output").first.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(Path(shots) / f"frontend-{name}.png"))


@pytest.mark.parametrize("mode", ["manager", "colab"])
def test_widget_in_colab_like_host(server, page, mode, tmp_path):
    page.set_default_timeout(TIMEOUT)
    state = tmp_path / "state.json"
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(f"{err}\n{err.stack}"))
    with reported(page, shot=tmp_path / f"colab-{mode}.png", log=server["log"], name="server"):
        outcome, routed, _ = open_host(page, server, "colab", mode, state)
        assert outcome == {"status": "ok", "errors": [], "rendered": 1}, outcome
        assert len(routed["cdn"]) == 1 and "anywidget@" in routed["cdn"][0], routed
        exercise(page, state)
        screenshot(page, f"colab-{mode}")
    assert errors == [], errors
    assert routed["aborted"] == [], routed["aborted"]


def test_widget_in_vscode_like_host(server, page, tmp_path):
    page.set_default_timeout(TIMEOUT)
    state = tmp_path / "state.json"
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(f"{err}\n{err.stack}"))
    with reported(page, shot=tmp_path / "vscode.png", log=server["log"], name="server"):
        outcome, routed, _ = open_host(page, server, "vscode", "manager", state)
        assert outcome == {"status": "ok", "errors": [], "rendered": 1}, outcome
        # anywidget came from the environment's nbextensions folder, not a CDN
        assert page.evaluate("() => window.host.loaded") == ["anywidget@~0.11.*"]
        assert routed["cdn"] == [], routed
        exercise(page, state)
        screenshot(page, "vscode")
    assert errors == [], errors
    assert routed["aborted"] == [], routed["aborted"]


def test_a_download_the_frame_blocks_is_written_by_python(server, page, tmp_path):
    """In a sandboxed output frame without ``allow-downloads`` the PNG button's download would
    vanish silently: the page sends the picture to Python (the ``save`` command), which writes
    it in the kernel's working folder, and the export bar says so."""
    page.set_default_timeout(TIMEOUT)
    state = tmp_path / "state.json"
    downloads: list[str] = []
    page.on("download", lambda d: downloads.append(d.suggested_filename))
    with reported(page, shot=tmp_path / "framed.png", log=server["log"], name="server"):
        outcome, routed, frame = open_host(page, server, "colab", "manager", state, framed=True)
        assert outcome == {"status": "ok", "errors": [], "rendered": 1}, outcome
        widget = frame.locator(".host-output").first
        widget.locator(".iglens-strip [data-token-index]").first.wait_for(timeout=RENDER_TIMEOUT)
        wait_for(lambda: "hello" in read(state).get("commands", []), what="the hello answered")
        widget.locator("[data-export=png]").click()
        note = widget.locator(".iglens-export-status")
        text = wait_for(
            lambda: "Python saved" in (t := note.text_content() or "") and t,
            what="the note that Python saved the picture",
        )
        assert text.startswith("This frame blocks downloads: Python saved iglens-"), text
        name = text.split("Python saved ")[1].split(" ")[0]
        written = server["work"] / name
        assert written.suffix == ".png" and written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert [a["ok"] for a in read(state)["answers"] if a["command"] == "save"] == [True]
    assert downloads == []  # nothing reached the browser's downloads
    assert routed["aborted"] == [], routed["aborted"]
