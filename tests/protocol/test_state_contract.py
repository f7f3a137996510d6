"""The model's state is declared once (issue 19): ``iglens_viz.protocol.state.STATE``.

The widget's traits, ``DEFAULT_STATE``, ``PAGE_WRITABLE``, the page's defaults
(``STATE_DEFAULTS`` of the generated js/model/protocol.js, which js/standalone.js starts from) and
the trait table of docs/widget-protocol.md must agree with it: a trait added in widget.py
only, a JS default only or a doc row only fails here.
"""

from __future__ import annotations

import json
import re

import anywidget
import pytest
import traitlets

from iglens_viz.protocol import DEFAULT_STATE, PAGE_WRITABLE, STATE, STATE_KEYS
from iglens_viz.widget import IGLensWidget
from iglens_viz.widget import widget as widget_module
from tests.support import ROOT

TRAIT_TYPES = {
    "int": traitlets.Int,
    "float": traitlets.Float,
    "bool": traitlets.Bool,
    "str": traitlets.Unicode,
    "dict": traitlets.Dict,
    "list": traitlets.List,
}
ARROWS = {"to_page": "Python → JS", "to_kernel": "JS → Python", "both": "JS ↔ Python"}


def own_sync_traits(cls: type) -> dict[str, traitlets.TraitType]:
    """The synced traits ``cls`` declares beyond anywidget's and ipywidgets' own."""
    base = set(anywidget.AnyWidget.class_traits(sync=True))
    return {n: t for n, t in cls.class_traits(sync=True).items() if n not in base}


def test_state_names_are_unique_and_typed():
    names = [key.name for key in STATE]
    assert len(names) == len(set(names)) == len(STATE_KEYS)
    for key in STATE:
        assert key.kind in TRAIT_TYPES, key
        assert key.direction in ARROWS, key
        assert key.doc.strip(), key
        assert not key.choices or (key.kind == "str" and key.default in key.choices), key
        assert isinstance(key.default, {"float": (int, float)}.get(key.kind, type(key.default)))


def test_widget_traits_are_the_state():
    traits = own_sync_traits(IGLensWidget)
    assert sorted(traits) == sorted(STATE_KEYS), "a synced trait not declared in STATE"
    for name, trait in traits.items():
        key = STATE_KEYS[name]
        if key.choices:
            assert isinstance(trait, traitlets.Enum), name
            assert tuple(trait.values or ()) == key.choices, name
        else:
            assert type(trait) is TRAIT_TYPES[key.kind], name
        assert trait.default() == key.default, name
        assert trait.help == key.doc, name


def test_widget_defaults_are_fresh_copies():
    # a mutable default is never STATE's own object (a widget's in-place change would leak)
    for name in ("running", "pinned", "components"):
        trait = IGLensWidget.class_traits()[name]
        assert trait.default() is not STATE_KEYS[name].default


def test_a_trait_added_in_the_widget_only_is_caught():
    class Extra(IGLensWidget):
        stray = traitlets.Int(0).tag(sync=True)

    assert set(own_sync_traits(Extra)) - set(STATE_KEYS) == {"stray"}


def test_default_state_and_page_writable_derive_from_state():
    assert {k.name: k.default for k in STATE if k.initial} == DEFAULT_STATE
    # the values the exported page always carries (unchanged by the single declaration)
    assert list(DEFAULT_STATE) == [
        "selected",
        "hovered",
        "color_by",
        "interactive",
        "running",
        "view",
        "pinned",
        "template",
        "notes",
    ]
    assert {k.name for k in STATE if k.direction != "to_page"} == PAGE_WRITABLE
    assert widget_module.PAGE_WRITABLE is PAGE_WRITABLE
    assert {
        "selected",
        "hovered",
        "color_by",
        "view",
        "pinned",
        "template",
        "notes",
    } == PAGE_WRITABLE  # the page's commands are messages, not traits


def js_defaults(text: str) -> dict[str, object]:
    """``export const STATE_DEFAULTS = {...};`` of js/model/protocol.js as a dict (its values are
    JSON)."""
    found = re.search(r"^export const STATE_DEFAULTS = \{\n(.*?)^\};", text, flags=re.M | re.S)
    assert found, "js/model/protocol.js has no `export const STATE_DEFAULTS = {...};`"
    body = re.sub(r"^\s*(\w+):", r'"\1":', found.group(1), flags=re.M)
    return json.loads("{" + re.sub(r",\s*$", "", body.strip()) + "}")


def test_page_defaults_are_the_state():
    defaults = js_defaults((ROOT / "js" / "model" / "protocol.js").read_text(encoding="utf-8"))
    assert defaults == {k.name: k.default for k in STATE}


def test_js_defaults_parser_catches_a_stray_key():
    text = "export const STATE_DEFAULTS = {\n  selected: -1,\n  stray: {},\n};\n"
    assert js_defaults(text) == {"selected": -1, "stray": {}}
    with pytest.raises(AssertionError):
        js_defaults("const OTHER = {};\n")


def doc_rows() -> dict[str, tuple[str, str, str]]:
    text = (ROOT / "docs" / "widget-protocol.md").read_text(encoding="utf-8")
    section = text.split("\n## Traits\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `(\w+)` \| (\w+) \| ([^|]+) \| `([^`]*)` \| .+ \|$", line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} listed twice"
            rows[m.group(1)] = (m.group(2), m.group(3).strip(), m.group(4))
    return rows


def test_protocol_doc_table_is_the_state():
    rows = doc_rows()
    assert sorted(rows) == sorted(STATE_KEYS)
    for key in STATE:
        assert rows[key.name] == (key.kind, ARROWS[key.direction], json.dumps(key.default)), key
