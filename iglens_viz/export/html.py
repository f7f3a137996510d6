"""One self-contained, offline HTML page of the IG-Lens views.

The page carries the front-end bundle (JS and CSS) and the data inline; it makes no network
request and works from ``file://``. The views stay linked (selection, hover, colouring): the
bundle's ``mount(el, state)`` runs them on an in-page model with the same interface as the
notebook widget's. Recomputing needs a kernel, so the controls are off (``interactive:
false``).

Safety: token strings are untrusted. The state is JSON inside a
``<script type="application/json">`` element with ``<``, ``>``, ``&`` and U+2028/U+2029
written as ``\\u`` escapes, so no token can close the element; the bundle inserts tokens as
text only. The Content-Security-Policy allows exactly one inline script — the page's
constant loader, named by its SHA-256 hash — plus the ``blob:`` module it imports, inline
styles, and nothing else: no network, no external scripts, styles or images, no ``<base>``,
no form submission.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..errors import InvalidRequestError
from ..files import write_atomic
from ..protocol import bundle, initial_state, result_payload, to_base64_state
from ..views.token_format import visible_text

if TYPE_CHECKING:
    from ..core.result import AttributionResult
    from ..protocol import ColorBy

__all__ = ["CSP", "page_state", "to_html"]


class ShownWidget(Protocol):
    """What an export reads from a widget (an :class:`~iglens_viz.widget.IGLensWidget`,
    typed by its shape: the widget imports this module, not the other way round)."""

    @property
    def result(self) -> dict[str, Any]: ...

    @property
    def selected(self) -> int: ...

    @property
    def color_by(self) -> ColorBy: ...


_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_ESCAPE_RE = re.compile("[<>&\u2028\u2029]")


def script_json(value: Any) -> str:
    """JSON text that is safe inside a ``<script>`` element (cannot end it or the page)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return _JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text)


def _style_text(css: str) -> str:
    # A stylesheet cannot contain "</style" without ending the element; "<\/" is the same
    # character sequence to the CSS parser inside strings and harmless elsewhere.
    return re.sub(r"</(?=style)", r"<\\/", css, flags=re.IGNORECASE)


def page_state(
    obj: AttributionResult | ShownWidget,
    *,
    selected: int | None = None,
    color_by: ColorBy | None = None,
) -> dict[str, Any]:
    """The model state the page mounts (see :func:`iglens_viz.protocol.initial_state`),
    buffers as base64.

    ``obj`` is an :class:`~iglens_viz.core.result.AttributionResult` or an
    :class:`~iglens_viz.widget.IGLensWidget` (its current result, selection and colouring,
    unless ``selected`` / ``color_by`` say otherwise; Python's answers about that result:
    the causal check's drops, the interior path and the head split it computed; its
    ``view`` tab, ``pinned`` positions, ``template`` switch, teacher ``notes`` and — from
    :func:`iglens_viz.compare` — its ``comparison`` of further results).
    """
    extra: dict[str, Any] = {}
    if isinstance(getattr(obj, "result", None), dict) and hasattr(obj, "selected"):
        widget = cast("ShownWidget", obj)
        payload = widget.result
        selected = widget.selected if selected is None else selected
        color_by = widget.color_by if color_by is None else color_by
        # Python's answers about the shown result (the causal check, the path, the split)
        for name in ("ablation", "gates", "path", "components"):
            value = getattr(obj, name, None)
            if isinstance(value, dict) and value.get("result_id") == payload.get("id"):
                extra[name] = to_base64_state(value)
        # the shown tab, the compare view's pins and the other results of a comparison
        for name in ("view", "pinned", "template", "notes"):
            if hasattr(obj, name):
                extra[name] = getattr(obj, name)
        comparison = getattr(obj, "comparison", None)
        if isinstance(comparison, dict) and comparison.get("results"):
            extra["comparison"] = to_base64_state(comparison)
    else:
        payload = result_payload(cast("AttributionResult", obj))
    state = initial_state(payload, selected=selected, color_by=color_by)
    return {**state, "result": to_base64_state(payload), **extra}


def _bundle_text() -> tuple[str, str]:
    if not bundle.BUNDLE_JS.is_file():
        raise bundle.BundleMissingError(bundle.MISSING_BUNDLE)
    css = bundle.BUNDLE_CSS.read_text(encoding="utf-8") if bundle.BUNDLE_CSS.is_file() else ""
    return bundle.BUNDLE_JS.read_text(encoding="utf-8"), css


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="generator" content="iglens_viz {version}">
<title>{title}</title>
<style>
html {{ color-scheme: light dark; }}
body {{ margin: 0; padding: 16px; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }}
@media (prefers-color-scheme: light) {{ body {{ background: #ffffff; color: #1f2328; }} }}
@media (prefers-color-scheme: dark) {{ body {{ background: #111418; color: #e6edf3; }} }}
.iglens-page-title {{ font-size: 15px; font-weight: 600; margin: 0 0 12px; }}
.iglens-page-error {{ color: #b42318; white-space: pre-wrap; }}
</style>
<style>
{css}
</style>
</head>
<body>
{heading}<div id="iglens-root" class="iglens-page-root"></div>
<script type="application/json" id="iglens-state">{state}</script>
<script type="application/json" id="iglens-bundle">{bundle}</script>
<script type="module">{loader}</script>
</body>
</html>
"""

# The page's only executable inline script. It never changes, so the CSP names its hash.
_LOADER = """
performance.mark("iglens-start");
const root = document.getElementById("iglens-root");
try {
  const read = (id) => JSON.parse(document.getElementById(id).textContent);
  const url = URL.createObjectURL(new Blob([read("iglens-bundle")], { type: "text/javascript" }));
  const bundle = await import(url);
  URL.revokeObjectURL(url);
  const state = read("iglens-state");
  performance.mark("iglens-mount-start");
  window.iglens = { handle: bundle.mount(root, state), bundle };
  performance.mark("iglens-mounted");
  requestAnimationFrame(() => performance.mark("iglens-drawn"));
  document.documentElement.dataset.iglensReady = "true";
} catch (err) {
  const p = document.createElement("pre");
  p.className = "iglens-page-error";
  p.textContent = "iglens_viz: could not render this page: " + err;
  root.appendChild(p);
  document.documentElement.dataset.iglensReady = "error";
  throw err;
}
"""

_LOADER_HASH = base64.b64encode(hashlib.sha256(_LOADER.encode("utf-8")).digest()).decode()
CSP = (
    f"default-src 'none'; script-src 'sha256-{_LOADER_HASH}' blob:; "
    "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; "
    "base-uri 'none'; form-action 'none'"
)
"""The page's Content-Security-Policy: the loader script (by hash) and the ``blob:`` module
it imports, inline styles; no network, no ``<base>``, no forms."""


def default_title(result: dict[str, Any], *, max_prompt: int = 60) -> str:
    """The page title of a result payload: the model, the prompt (its text, shortened, with
    whitespace collapsed) and the number of tokens, e.g.
    ``IG-Lens · gpt2 · “The capital of Vietnam is” · 6 tokens`` (with ``· shortcut lens`` after
    the model under a fitted lens). Raw text: :func:`to_html`
    makes its control and bidi characters visible and HTML-escapes it."""
    name = result.get("model_name") or result.get("family") or "model"
    request = result.get("request") or {}
    prompt = request.get("prompt") if isinstance(request, dict) else None
    if not isinstance(prompt, str):  # token ids: the prompt's tokens, as text
        tokens = result.get("tokens") or []
        start = result.get("prompt_length")
        prompt = "".join(tokens[:start] if isinstance(start, int) else tokens)
    prompt = " ".join(prompt.split())
    if len(prompt) > max_prompt:
        prompt = prompt[: max_prompt - 1].rstrip() + "\u2026"
    parts = ["IG-Lens", str(name)]
    lens = result.get("lens")
    if isinstance(lens, str) and lens not in ("", "logit"):
        parts.append(f"{lens} lens")
    if prompt:
        parts.append(f"\u201c{prompt}\u201d")
    parts.append(f"{len(result['tokens'])} tokens")
    return " \u00b7 ".join(parts)


def to_html(
    obj: AttributionResult | ShownWidget,
    path: str | os.PathLike[str] | None = None,
    *,
    title: str | None = None,
    selected: int | None = None,
    color_by: ColorBy | None = None,
) -> str:
    """A self-contained HTML page of the IG-Lens views; written to ``path`` when given.

    ``obj`` is an :class:`~iglens_viz.core.result.AttributionResult` or an
    :class:`~iglens_viz.widget.IGLensWidget` (exported as it is now: result, selection,
    colouring). ``selected`` / ``color_by`` override the initial selection (default: the
    answer's first content token, see :func:`iglens_viz.protocol.opening.opening_position`)
    and colouring.
    Returns the page's text; the file is written atomically. The page works offline and
    from ``file://``.
    """
    from .._version import __version__

    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise InvalidRequestError(
            f"to_html's path must be a str or os.PathLike (e.g. "
            f"'iglens.html'), not {type(path).__name__} {path!r}"
        )
    js, css = _bundle_text()
    state = page_state(obj, selected=selected, color_by=color_by)
    if title is None:
        title = default_title(state["result"])
    # The model name and the prompt are untrusted: bidi overrides and control characters
    # become visible escapes before the HTML escaping (a title is one line).
    title = visible_text(title, keep="")
    heading = f'<h1 class="iglens-page-title">{html.escape(title)}</h1>\n' if title else ""
    page = _TEMPLATE.format(
        csp=html.escape(CSP, quote=True),
        version=__version__,
        title=html.escape(title or "IG-Lens"),
        css=_style_text(css),
        heading=heading,
        state=script_json(state),
        bundle=script_json(js),
        loader=_LOADER,
    )
    if path is not None:
        write_atomic(path, page)
    return page
