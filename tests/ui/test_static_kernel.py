"""A static page of an interactive widget leaves no live-looking dead control (issue 19).

Nobody answers the page's ``hello`` on a static page: the exported page (its in-page model
cannot send), or the saved widget state of a notebook rendered without a kernel (nbconvert's
HTML, ``marimo export html``: a model whose messages go nowhere). There the recompute
controls' Apply, the causal check and "Show the path inside each segment" must be hidden or
disabled with a visible note saying why, while the saved answers (the selected token's drops
and interior path) still show.

* the exported page (``to_html`` of a widget with a lens): not interactive, every control is
  hidden or disabled with its reason;
* the same widget's saved state (``interactive`` true) on the in-page model: "no kernel" at once;
* that state on a model whose ``send`` goes nowhere: "connecting to the kernel…", then, about
  4 s after the ``hello``, "no kernel"; no command is sent but the ``hello``.
"""

from __future__ import annotations

import pytest

from iglens_viz.export import to_html
from iglens_viz.export.html import page_state

from .helpers import PageRecorder

pytestmark = pytest.mark.browser

TIMEOUT = 30_000
PROMPT = "w3 w5 w7 w9 w11 w13"
NO_KERNEL = "need a running Python kernel"
CONNECTING = "connecting to the kernel"

# Every control that would ask Python for work, as the page shows it: present, visible,
# disabled, and the note beside it (the text a user reads for why it does nothing).
CONTROLS = """() => {
  const shown = (el) => !!el && !el.closest('[hidden]') && el.getClientRects().length > 0;
  const one = (sel) => {
    const el = document.querySelector(sel);
    const off = !!el && (el.disabled || el.getAttribute('aria-disabled') === 'true');
    return { present: !!el, visible: shown(el), disabled: off };
  };
  const text = (sel) =>
    [...document.querySelectorAll(sel)].filter(shown).map((el) => el.textContent).join(' | ');
  return {
    apply: one('.iglens-controls .iglens-apply'),
    target: one('.iglens-controls input[name=target]'),
    ablate: one('.iglens-detail [data-action=ablate]'),
    path: one('.iglens-detail [data-action=path]'),
    controlsNote: text('.iglens-controls .iglens-kernel-note'),
    ablationStatus: text('.iglens-ablation-status'),
    pathStatus: text('.iglens-path-status'),
    pathHint: text('.iglens-path-hint'),
    drops: document.querySelectorAll('[data-series=ablation] rect').length,
    lazyPath: document.querySelectorAll('[data-series=lazy-path] .iglens-path').length,
  };
}"""

# Mount `state` again on the bundle the page loaded: on its in-page model (`standalone`), or on
# a model whose messages go nowhere (the saved state of a notebook without a kernel).
REMOUNT = """([state, kind]) => {
  const { bundle, handle } = window.iglens;
  handle.destroy();
  const root = document.getElementById('iglens-root');
  root.replaceChildren();
  window.iglensSent = [];
  if (kind === 'standalone') {
    window.iglens.handle = bundle.mount(root, state);
    return;
  }
  // the in-page model decodes the base64 buffers; the copy keeps its state but can send
  const scratch = document.createElement('div');
  const decoded = bundle.mount(scratch, state);
  decoded.destroy();
  const model = { ...decoded.model, standalone: false, send: (msg) => window.iglensSent.push(msg) };
  const cleanup = bundle.default.render({ model, el: root });
  window.iglens.handle = { model, destroy: cleanup };
}"""


@pytest.fixture(scope="module")
def widget(lens_module):
    """An interactive widget whose selected token has its causal check and interior path."""
    from iglens_viz.widget import IGLensWidget

    w = IGLensWidget(lens_module.attribute(PROMPT), lens_module)
    assert w.interactive
    w.causal_check()
    w.interior_path(steps=4)
    return w


@pytest.fixture(scope="module")
def lens_module(llama):
    from iglens_viz import IGLens
    from tests.support.tiny_models import tiny_tokenizer

    return IGLens(llama, tiny_tokenizer())


@pytest.fixture(scope="module")
def page_url(widget, tmp_path_factory):
    path = tmp_path_factory.mktemp("static-kernel") / "page.html"
    to_html(widget, path)
    return path.as_uri()


@pytest.fixture
def opened(page, page_url):
    recorder = PageRecorder().attach(page)
    page.goto(page_url)
    page.wait_for_selector("[data-token-index]", timeout=TIMEOUT)
    return page, recorder


def saved_state(widget) -> dict:
    """The widget's state as a notebook saves it: the page's state, interactive as it was."""
    state = page_state(widget)
    state["interactive"] = widget.interactive
    assert state["interactive"] is True
    assert state["ablation"]["result_id"] == state["result"]["id"]  # the saved answers
    assert state["path"]["result_id"] == state["result"]["id"]
    return state


def assert_no_live_control(c: dict, note: str) -> None:
    """Apply, the causal check and the path button: hidden, or disabled with `note` shown."""
    if c["apply"]["visible"]:
        assert c["apply"]["disabled"] and c["target"]["disabled"], c
        assert note in c["controlsNote"], c
    for name, status in (("ablate", "ablationStatus"), ("path", "pathStatus")):
        if c[name]["visible"]:
            assert c[name]["disabled"], (name, c)
            assert note in c[status], (name, c)


def test_exported_page_of_an_interactive_widget(opened):
    page, recorder = opened
    c = page.evaluate(CONTROLS)
    # not interactive: the controls are hidden; the saved answers of the selected token show
    assert not c["apply"]["visible"], c
    assert c["drops"] > 0 and not c["ablate"]["present"], c
    assert c["lazyPath"] > 0, c
    assert_no_live_control(c, "")
    # another token: the causal check is off and says why; no path button, only the hint
    page.locator("[data-token-index='1']").click()
    page.wait_for_selector("[data-selected-index='1']", timeout=TIMEOUT)
    c = page.evaluate(CONTROLS)
    assert c["ablate"]["visible"] and c["ablate"]["disabled"], c
    assert "needs a Python kernel" in c["ablationStatus"], c
    assert not c["path"]["present"] and "steps > 1" in c["pathHint"], c
    assert recorder.page_errors == [] and recorder.console_errors == []


def test_saved_state_on_the_in_page_model_says_no_kernel_at_once(opened, widget):
    page, recorder = opened
    page.evaluate(REMOUNT, [saved_state(widget), "standalone"])
    page.wait_for_selector("[data-token-index]", timeout=TIMEOUT)
    c = page.evaluate(CONTROLS)
    assert c["apply"]["visible"], c  # interactive: shown, but dead and saying so
    assert_no_live_control(c, NO_KERNEL)
    assert c["drops"] > 0 and not c["ablate"]["present"], c  # the saved check still shows
    assert c["lazyPath"] > 0 and c["path"]["visible"], c  # and the saved path
    page.locator("[data-token-index='1']").click()
    page.wait_for_selector("[data-selected-index='1']", timeout=TIMEOUT)
    c = page.evaluate(CONTROLS)
    assert c["ablate"]["visible"], c
    assert_no_live_control(c, NO_KERNEL)
    heads = page.locator(".iglens-detail .iglens-components-status").inner_text()
    assert NO_KERNEL in heads
    assert recorder.page_errors == [] and recorder.console_errors == []


def test_saved_state_without_a_kernel_gives_up_after_the_hello(opened, widget):
    page, recorder = opened
    page.evaluate(REMOUNT, [saved_state(widget), "silent"])
    page.wait_for_selector("[data-token-index]", timeout=TIMEOUT)
    c = page.evaluate(CONTROLS)
    assert_no_live_control(c, CONNECTING)
    assert c["apply"]["visible"], c
    note = "document.querySelector('.iglens-controls .iglens-kernel-note')?.textContent"
    page.wait_for_function(
        f"(t) => ({note} ?? '').includes(t)",
        arg=NO_KERNEL,
        timeout=10_000,
    )
    page.locator("[data-token-index='1']").click()
    page.wait_for_selector("[data-selected-index='1']", timeout=TIMEOUT)
    c = page.evaluate(CONTROLS)
    assert_no_live_control(c, NO_KERNEL)
    # clicks on the dead controls ask nothing: the page sent its hello and no command
    page.locator(".iglens-detail [data-action=ablate]").click(force=True)
    page.locator(".iglens-controls .iglens-apply").click(force=True)
    sent = page.evaluate("window.iglensSent")
    assert [m["kind"] for m in sent] == ["hello"], sent
    assert recorder.page_errors == [] and recorder.console_errors == []
