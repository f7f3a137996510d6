"""The widget's front end asks no server for code: what VS Code and Colab would run, checked
without them (docs/frontends.md).

Every host (JupyterLab, Notebook 7, VS Code, Colab, marimo) gets the widget's code the same
way: anywidget sends the ``_esm`` and ``_css`` traits, the text of iglens_viz/static/widget.js
and widget.css (``npm run build``: one esbuild ESM file with its dependencies inside), in the
comm's state; its front end imports that text from a blob URL, or imports ``_esm`` as a URL
when it *is* one. So the widget needs no network when (a) the traits are the files' text, not
a URL, and (b) the files name no remote module, stylesheet or font and open no connection.
The browser tests check the rest where a browser runs here: no request leaves the page in
JupyterLab, Notebook 7, marimo (tests/ui/test_{jupyterlab,notebook7,marimo}.py) and the
exported page, the same bundle inline (tests/ui/test_export_page.py; tests/export/test_html.py
reads that copy's URLs).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import iglens_viz

STATIC = Path(iglens_viz.__file__).parent / "static"
# XML namespaces are identifiers (createElementNS), never fetched.
NAMESPACES = {
    "http://www.w3.org/2000/svg",
    "http://www.w3.org/1999/xlink",
    "http://www.w3.org/XML/1998/namespace",
}
URL = re.compile(r"""(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s"'`)]*""")
# Ways a script reaches the network or loads more code.
REQUESTS = {
    "dynamic import": re.compile(r"\bimport\s*\("),
    "static import": re.compile(r"""\bimport\s*(?:[\w$*{][^;]*?\bfrom\s*)?["'`]"""),
    "fetch": re.compile(r"\bfetch\s*\("),
    "XMLHttpRequest": re.compile(r"\bXMLHttpRequest\b"),
    "WebSocket": re.compile(r"\bWebSocket\b"),
    "EventSource": re.compile(r"\bEventSource\b"),
    "sendBeacon": re.compile(r"\bsendBeacon\b"),
    "importScripts": re.compile(r"\bimportScripts\b"),
    "Worker": re.compile(r"\bnew\s+(?:Shared)?Worker\s*\("),
}


def bundle_files() -> list[Path]:
    files = sorted(STATIC.glob("*.js")) + sorted(STATIC.glob("*.css"))
    assert STATIC / "widget.js" in files, f"no bundle in {STATIC}: run `npm run build`"
    return files


@pytest.mark.parametrize("name", ["widget.js", "widget.css"])
def test_bundle_names_no_remote_address(name):
    # one file each, no chunks; the kernel-free site's bundle beside it has its own checks
    # (tests/export/test_site_page.py)
    assert {p.name for p in bundle_files()} == {"widget.js", "widget.css", "site.js", "site.css"}
    text = (STATIC / name).read_text(encoding="utf-8")
    urls = {m.group(0) for m in URL.finditer(text)}
    assert urls <= NAMESPACES, sorted(urls - NAMESPACES)
    assert not re.search(r"\b(?:cdn|unpkg|jsdelivr|esm\.sh|skypack|googleapis)\b", text, re.I)


def test_script_opens_no_connection_and_loads_no_module():
    text = (STATIC / "widget.js").read_text(encoding="utf-8")
    found = {what: len(pattern.findall(text)) for what, pattern in REQUESTS.items()}
    assert not any(found.values()), found
    # ESM all the same: the file ends by exporting the anywidget front-end module
    assert re.search(r"export\s*\{[^}]*\bas default\b[^}]*\}\s*;?\s*$", text)


def test_styles_load_nothing():
    css = (STATIC / "widget.css").read_text(encoding="utf-8")
    assert "@import" not in css
    urls = re.findall(r"url\(\s*['\"]?([^'\")]*)", css)
    assert all(u.startswith("data:") for u in urls), urls


def test_widget_sends_the_bundle_text_not_an_address():
    from iglens_viz.widget import IGLensWidget
    from tests.ui.helpers import synthetic_result

    state = IGLensWidget(synthetic_result(T=4, n=3)).get_state()
    assert state["_esm"] == (STATIC / "widget.js").read_text(encoding="utf-8")
    assert state["_css"] == (STATIC / "widget.css").read_text(encoding="utf-8")
    assert not re.match(r"\s*(https?:)?//", state["_esm"])
