"""The static HTML export (no browser): self-contained, offline, and safe with hostile tokens.

The browser checks of the same page (rendering, linked selection, no requests, no script
injection) are in tests/ui/test_export_page.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

import iglens_viz.protocol.bundle as bundle
from iglens_viz import IGLensError
from iglens_viz.export import to_html
from iglens_viz.export.html import CSP, page_state, script_json
from iglens_viz.protocol import array_from_payload
from tests.ui.helpers import synthetic_result

HOSTILE = [
    "Hello",
    "</script><img src=x onerror=alert(1)>",
    "<!--",
    "]]>",
    "&amp;",
    "\u2028line\u2029para",
    "<img src=x onerror=window.__pwned=1>",
    "'\"`${x}",
    "</SCRIPT >",
    "<script>alert(2)</script>",
]


class Page(HTMLParser):
    """Every tag with its attributes, and the text of each <script>/<style> element."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self.styles: list[str] = []
        self._open: tuple[str, dict] | None = None
        self._buffer: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag in ("script", "style"):
            self._open, self._buffer = (tag, attrs), []

    def handle_endtag(self, tag):
        if self._open and tag == self._open[0]:
            text = "".join(self._buffer)
            if tag == "script":
                self.scripts.append((self._open[1], text))
            else:
                self.styles.append(text)
            self._open = None

    def handle_data(self, data):
        if self._open:
            self._buffer.append(data)

    def script(self, element_id: str) -> str:
        return next(text for attrs, text in self.scripts if attrs.get("id") == element_id)


@pytest.fixture(scope="module")
def hostile():
    return synthetic_result(tokens=HOSTILE, n=4, steps=2, seed=3)


@pytest.fixture(scope="module")
def page_text(hostile):
    return to_html(hostile, title="Export <test> & co")


@pytest.fixture(scope="module")
def page(page_text):
    return Page(page_text)


def test_page_is_self_contained(page, page_text):
    assert page_text.startswith("<!DOCTYPE html>")
    # Exactly three scripts: the data, the bundle (both inert JSON), the module that mounts.
    kinds = [attrs.get("type") for attrs, _ in page.scripts]
    assert kinds == ["application/json", "application/json", "module"]
    for tag, attrs in page.tags:
        assert "src" not in attrs or tag not in ("script", "iframe", "img", "link"), (tag, attrs)
        assert tag != "link", attrs
        for name in ("src", "href", "action", "data", "poster"):
            assert not re.match(r"\s*(https?:)?//", attrs.get(name) or ""), (tag, attrs)
    module = page.scripts[2][1]
    assert "import(url)" in module and "bundle.mount(root, state)" in module
    # No URL in the markup, the page script or the styles may reach the network. The bundle
    # may name XML namespaces (http://www.w3.org/...), which are identifiers, not requests.
    outside_bundle = page_text.replace(page.script("iglens-bundle"), "")
    assert not re.search(r"https?://", outside_bundle)
    bundle_js = json.loads(page.script("iglens-bundle"))
    urls = set(re.findall(r"https?://[^\s\"'`)]*", bundle_js))
    assert all(u.startswith("http://www.w3.org/") for u in urls), urls
    assert not re.search(r"""\bimport\s*\(\s*["'`]|\bfrom\s*["'`]https?:""", bundle_js)
    assert not re.search(r"@import|url\(\s*['\"]?https?:", "".join(page.styles))


def test_page_carries_the_bundle_and_styles(page):
    bundle_js = json.loads(page.script("iglens-bundle"))
    assert bundle_js == bundle.BUNDLE_JS.read_text(encoding="utf-8")
    css = bundle.BUNDLE_CSS.read_text(encoding="utf-8")
    assert any(css.strip()[:200] in style for style in page.styles)


def test_csp_meta(page):
    metas = [
        a
        for t, a in page.tags
        if t == "meta" and a.get("http-equiv", "").lower() == "content-security-policy"
    ]
    assert len(metas) == 1
    policy = metas[0]["content"]
    assert policy == CSP
    assert "default-src 'none'" in policy and "connect-src" not in policy
    assert "http" not in policy and "unsafe-inline' blob" not in policy
    assert "base-uri 'none'" in policy and "form-action 'none'" in policy
    # The one executable inline script is named by its hash (computed here from the page),
    # instead of 'unsafe-inline' for scripts.
    [loader] = [text for attrs, text in page.scripts if attrs.get("type") == "module"]
    digest = base64.b64encode(hashlib.sha256(loader.encode("utf-8")).digest()).decode()
    script_src = re.search(r"script-src ([^;]*)", policy).group(1).split()
    assert script_src == [f"'sha256-{digest}'", "blob:"]


def test_hostile_tokens_cannot_break_out(page, page_text, hostile):
    # The raw page never holds a token's markup: every '<', '>' and '&' of the data is a
    # \\u escape inside the JSON element, which therefore ends only at its own </script>.
    raw = page.script("iglens-state")
    for token in HOSTILE:
        if any(c in token for c in "<>&\u2028\u2029"):
            assert token not in raw, token
        if "<" in token:
            assert token not in page_text, token
    assert "\u2028" not in page_text and "\u2029" not in page_text
    assert "\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e" in raw
    assert not re.search(r"[<>&]", raw)
    # Only the page's own elements exist: no injected <img> or <script>.
    assert [t for t, _ in page.tags if t == "img"] == []
    assert sum(t == "script" for t, _ in page.tags) == 3
    # ... and the JSON gives the tokens back exactly.
    state = json.loads(raw)
    assert state["result"]["tokens"] == hostile.tokens
    assert state["result"]["token_text"][str(hostile.input_ids[1])] == HOSTILE[1]


def test_state_is_the_widget_protocol(page, hostile):
    state = json.loads(page.script("iglens-state"))
    assert set(state) == {
        "result",
        "selected",
        "hovered",
        "color_by",
        "interactive",
        "running",
        "view",
        "pinned",
        "template",
        "notes",
    }
    assert state["interactive"] is False
    assert state["view"] == "heatmap" and state["pinned"] == []  # the default tab, no pins
    assert state["template"] == "auto" and state["notes"] == []  # no notes written
    assert state["selected"] == len(hostile.tokens) - 1  # no answer: opens on the last token
    assert state["color_by"] == "p_final" and state["running"] == {}
    result = state["result"]
    contributions = result["contributions"]
    assert contributions["dtype"] == "float32" and isinstance(contributions["buffer"], str)
    np.testing.assert_allclose(array_from_payload(contributions), hostile.contributions, rtol=1e-6)
    assert array_from_payload(result["onset"]).dtype == np.int32
    assert array_from_payload(result["path_probs"]).shape == hostile.path_probs.shape
    assert state == json.loads(script_json(page_state(hostile)))


def test_title_is_escaped(page, page_text):
    assert "<title>Export &lt;test&gt; &amp; co</title>" in page_text
    assert "Export <test>" not in page_text


def test_write_to_path_and_widget_state(tmp_path, hostile):
    out = tmp_path / "page.html"
    text = hostile.to_html(out)
    assert out.read_text(encoding="utf-8") == text
    w = hostile.widget(selected=2, color_by="onset")
    state = json.loads(Page(w.to_html()).script("iglens-state"))
    assert state["selected"] == 2 and state["color_by"] == "onset"
    override = json.loads(Page(to_html(w, selected=4)).script("iglens-state"))
    assert override["selected"] == 4


def test_script_json_escapes():
    text = script_json({"a": "</script>&<!--\u2028\u2029", "b": [1, None]})
    assert text == ('{"a":"\\u003c/script\\u003e\\u0026\\u003c!--\\u2028\\u2029","b":[1,null]}')
    assert json.loads(text) == {"a": "</script>&<!--\u2028\u2029", "b": [1, None]}
    with pytest.raises(ValueError):
        script_json({"x": float("nan")})


def test_bundle_with_markup_inside_stays_inert(tmp_path, monkeypatch, hostile):
    """Even a bundle whose code contains '</script>' cannot end its element."""
    js = tmp_path / "widget.js"
    css = tmp_path / "widget.css"
    js.write_text(
        'export function mount(el){el.textContent="</script><b>x</b>\u2028";}\n'
        "export default {render(){}};\n",
        encoding="utf-8",
    )
    css.write_text(".iglens-x{content:'</style><script>alert(1)</script>'}", encoding="utf-8")
    monkeypatch.setattr(bundle, "BUNDLE_JS", js)
    monkeypatch.setattr(bundle, "BUNDLE_CSS", css)
    parsed = Page(to_html(hostile))
    assert json.loads(parsed.script("iglens-bundle")) == js.read_text(encoding="utf-8")
    assert sum(t == "script" for t, _ in parsed.tags) == 3
    assert any("<\\/style>" in s for s in parsed.styles)


def test_missing_bundle_says_how_to_build(tmp_path, monkeypatch, hostile):
    monkeypatch.setattr(bundle, "BUNDLE_JS", tmp_path / "nope.js")
    with pytest.raises(IGLensError, match="npm run build"):
        to_html(hostile)


# ------------------------------------------------------------------------------ CLI --html


def test_cli_writes_html(tiny_model_dir, tmp_path, capsys):
    from iglens_viz.cli import main

    out = tmp_path / "views.html"
    assert (
        main(
            [
                "w3 w5 w7 w9",
                "--model",
                tiny_model_dir,
                "--no-chat",
                "--generate",
                "2",
                "--target",
                "next",
                "--boundaries",
                "every:2",
                "--html",
                str(out),
            ]
        )
        == 0
    )
    assert f"wrote {out}" in capsys.readouterr().out
    parsed = Page(out.read_text(encoding="utf-8"))
    state = json.loads(parsed.script("iglens-state"))
    result = state["result"]
    assert result["tokens"][:4] == ["w3", "w5", "w7", "w9"] and len(result["tokens"]) == 6
    assert result["boundaries"] == [0, 2, 4] and result["prompt_length"] == 4
    assert result["controls"]["target"] == "next"
    assert result["controls"]["boundaries"] == "every:2"
    assert result["request"]["prompt"] == "w3 w5 w7 w9" and result["answer_start"] == 3
    # opens on the answer's first content token: position 3 predicts the first generated
    # token, a word the prompt does not have
    assert result["tokens"][4] not in result["tokens"][:4]
    assert state["selected"] == 3
    assert state["interactive"] is False


def test_cli_html_error_is_a_user_error(tiny_model_dir, tmp_path, capsys):
    from iglens_viz.cli import main

    assert (
        main(
            [
                "w3 w5",
                "--model",
                tiny_model_dir,
                "--no-chat",
                "--html",
                str(tmp_path / "missing-dir" / "x.html"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "iglens: error:" in err and "Traceback" not in err


def test_page_title_names_a_fitted_lens():
    from iglens_viz.export.html import default_title

    payload = {"model_name": "gpt2", "request": {"prompt": "The capital of"}, "tokens": ["a"] * 3}
    assert default_title(payload) == "IG-Lens · gpt2 · “The capital of” · 3 tokens"
    assert default_title({**payload, "lens": "logit"}) == default_title(payload)
    assert default_title({**payload, "lens": "shortcut"}) == (
        "IG-Lens · gpt2 · shortcut lens · “The capital of” · 3 tokens"
    )
