"""Write ``js/model/protocol.js`` (the front end's copy of the constants Python declares) and
the trait, command and ``result`` tables of ``docs/widget-protocol.md``.

The page needs the state's defaults, the commands, their fields and limits, the lens kinds
and their labels and the result payload's fields; each is declared once in Python and only
generated here, so no JS literal restates one. Run from the repository root after changing
one of them::

    .venv/bin/python -m iglens_viz.protocol.mirror

tests/protocol/test_protocol_mirror.py regenerates both in memory and fails when a committed
file differs (a change on one side only); ``--check`` says the same without writing.

Sources: :data:`.state.STATE` (with ``COLOR_BY``, ``VIEWS``, ``TEMPLATE_MODES``),
:data:`.commands.COMMANDS` and its limits, :mod:`.notes`' limits,
:data:`iglens_viz.core.coordinates.LENS_KINDS` / ``LENS_LABELS``,
:data:`iglens_viz.lenses.FITTED_KINDS` and :data:`.schema.SCHEMAS`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.coordinates import LENS_KINDS, LENS_LABELS
from ..core.request import MAX_STEPS
from ..core.trajectory import NONMONOTONE_THRESHOLD
from ..lenses.fit import FITTED_KINDS
from . import commands, notes, state
from .schema import RESULT_FIELDS, SCHEMAS, PayloadField

__all__ = ["DOC", "OUT", "main", "render", "render_doc"]

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "js" / "model" / "protocol.js"
"""The generated module, in the repository's ``js/model/`` folder (the page's readers)."""
DOC = ROOT / "docs" / "widget-protocol.md"
"""The protocol doc, whose trait and command tables are generated between markers."""

DIRECTION_WORDS = {"to_page": "Python → JS", "to_kernel": "JS → Python", "both": "JS ↔ Python"}
"""A :class:`.state.StateKey`'s direction as the doc's table says it."""

COMMAND = "python -m iglens_viz.protocol.mirror"


def _js(value: Any) -> str:
    """A JSON value as a JS literal, as prettier writes it: ``{ name: "id" }`` (keys
    unquoted where they are identifiers), ``-1.0`` as ``-1`` (the same number in JS)."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = ", ".join(f"{_key(k)}: {_js(v)}" for k, v in value.items())
        return f"{{ {items} }}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_js(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value)


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_$][\w$]*", name) else json.dumps(name)


def _union(values: Iterable[str]) -> str:
    return "|".join(_js(v) for v in values)


def _tuple(doc: str, name: str, values: Iterable[str]) -> str:
    items = ", ".join(_js(v) for v in values)
    return f"/** {doc} */\nexport const {name} = /** @type {{const}} */ ([{items}]);\n"


def _number(doc: str, name: str, value: float) -> str:
    return f"/** {doc} */\nexport const {name} = {value};\n"


def _state() -> str:
    rows = "".join(f"  {key.name}: {_js(key.default)},\n" for key in state.STATE)
    writable = ", ".join(_js(key.name) for key in state.STATE if key.page_writes)
    return (
        _tuple("Token-strip colourings (state.COLOR_BY).", "COLOR_BY", state.COLOR_BY)
        + _tuple("The main view's tabs (state.VIEWS).", "VIEWS", state.VIEWS)
        + _tuple(
            "The `template` switch's values (state.TEMPLATE_MODES).",
            "TEMPLATE_MODES",
            state.TEMPLATE_MODES,
        )
        + "\n/**\n * Every synced value's default, in the widget's declaration order (state.STATE)."
        "\n * Read only: `stateDefaults()` gives a copy to own.\n */\n"
        f"export const STATE_DEFAULTS = {{\n{rows}}};\n\n"
        "/** A fresh copy of STATE_DEFAULTS (no list or dict shared with another model). */\n"
        "export const stateDefaults = () => /** @type {typeof STATE_DEFAULTS} */ "
        "(JSON.parse(JSON.stringify(STATE_DEFAULTS)));\n\n"
        "/** The values the page may write (state.PAGE_WRITABLE): its wishes and the shared "
        "view state. */\n"
        f"export const PAGE_WRITABLE = /** @type {{const}} */ ([{writable}]);\n"
    )


def _commands() -> str:
    rows = []
    for kind, spec in commands.COMMANDS.items():
        entry = {
            "fields": list(spec.fields),
            "optional": list(spec.optional),
            "background": spec.background,
            "while_running": spec.while_running,
        }
        rows.append(f"  {kind}: {_js(entry)},\n")
    return (
        f"/** @typedef {{{_union(commands.COMMANDS)}}} CommandKind a command the page sends */\n"
        "/**\n * Every command by kind (commands.COMMANDS): its fields beside `kind` and `id`, "
        "the optional\n * ones, whether it runs in Python's background thread and whether it "
        "is answered while\n * another runs.\n"
        " * @type {Record<CommandKind, {fields: string[], optional: string[], background: "
        "boolean, while_running: boolean}>}\n */\n"
        f"export const COMMANDS = {{\n{''.join(rows)}}};\n\n"
        + _number("The longest request id.", "MAX_ID_LENGTH", commands.MAX_ID_LENGTH)
        + _number(
            "The longest text a command carries, in characters.",
            "MAX_PROMPT_LENGTH",
            commands.MAX_PROMPT_LENGTH,
        )
        + _number(
            "The longest answer an `ask` may ask for, in tokens.",
            "MAX_ASK_NEW_TOKENS",
            commands.MAX_ASK_NEW_TOKENS,
        )
        + _number(
            "The most diagonal steps a `gates` command may ask for.",
            "MAX_GATE_STEPS",
            commands.MAX_GATE_STEPS,
        )
        + _tuple(
            "The `positions` of an `ablation` command.",
            "CHECK_POSITIONS",
            commands.CHECK_POSITIONS,
        )
        + _number(
            "The longest note text (notes.MAX_NOTE_CHARS).", "MAX_NOTE_CHARS", notes.MAX_NOTE_CHARS
        )
        + _number("The most notes a widget keeps (notes.MAX_NOTES).", "MAX_NOTES", notes.MAX_NOTES)
    )


def _lenses() -> str:
    labels = "".join(f"  {kind}: {_js(LENS_LABELS[kind])},\n" for kind in LENS_KINDS)
    return (
        f"/** @typedef {{{_union(LENS_KINDS)}}} LensKind how a lens was made */\n"
        + _tuple(
            "The lens kinds, the raw logit lens first (core.coordinates.LENS_KINDS).",
            "LENS_KINDS",
            LENS_KINDS,
        )
        + _tuple(
            "The kinds fitted on their first use (lenses.FITTED_KINDS).",
            "FITTED_KINDS",
            FITTED_KINDS,
        )
        + "/**\n * Each kind in words, as the lens select offers it (core.coordinates.LENS_LABELS)."
        "\n * @type {Record<LensKind, string>}\n */\n"
        f"export const LENS_LABELS = {{\n{labels}}};\n"
    )


def _field(f: PayloadField) -> str:
    entry: dict[str, Any] = {"name": f.name, "kind": f.kind}
    if f.dtype:
        entry["dtype"] = f.dtype
    if f.shape:
        entry["shape"] = list(f.shape)
    if f.nullable:
        entry["nullable"] = True
    if f.schema:
        entry["schema"] = f.schema
    return "    " + _js(entry) + ",\n"


def _schemas() -> str:
    tables = "".join(
        f"  {name}: [\n{''.join(_field(f) for f in fields)}  ],\n"
        for name, fields in SCHEMAS.items()
    )
    return (
        "/**\n * @typedef {object} PayloadField one key of a payload dict (schema.PayloadField)\n"
        " * @property {string} name\n"
        ' * @property {"array"|"str"|"int"|"float"|"list"|"dict"|"object"} kind\n'
        ' * @property {"float32"|"int32"} [dtype] an array\'s dtype as sent\n'
        " * @property {string[]} [shape] an array's shape (a list's length): T positions, k "
        "segments, K top\n *   tokens, m steps, A answer tokens, n blocks, C components, P "
        "positions (`k+1`: one more than k)\n"
        " * @property {boolean} [nullable] the value may be null\n"
        " * @property {string} [schema] an object's table in PAYLOAD_SCHEMAS\n */\n"
        "/**\n * The payload tables (schema.SCHEMAS): `result` (the result trait) and the "
        "objects in it.\n * @type {Record<string, PayloadField[]>}\n */\n"
        f"export const PAYLOAD_SCHEMAS = {{\n{tables}}};\n\n"
        + _number(
            "The most interpolation steps a request may ask for (core.request.MAX_STEPS): "
            "a result's `max_steps`.",
            "MAX_STEPS",
            MAX_STEPS,
        )
        + _number(
            "A segment against Δp by more than this share of the largest |contribution| marks "
            "a\n * non-monotone token (core.trajectory.NONMONOTONE_THRESHOLD): a result's "
            "`nonmonotone_threshold`.",
            "NONMONOTONE_THRESHOLD",
            NONMONOTONE_THRESHOLD,
        )
    )


def _md(text: str) -> str:
    """A docstring as one Markdown table cell: reST roles and literals as code spans, one
    line, ``|`` escaped."""
    text = re.sub(r":[a-z]+:`[~.]*([^`]+)`", r"`\1`", text).replace("``", "`")
    return " ".join(text.split()).replace("|", "\\|")


def _trait_table() -> str:
    head = "| trait | type | direction | default | meaning |\n|---|---|---|---|---|\n"
    return head + "".join(
        f"| `{key.name}` | {key.kind} | {DIRECTION_WORDS[key.direction]} | "
        f"`{json.dumps(key.default)}` | {_md(key.doc)} |\n"
        for key in state.STATE
    )


def _command_table() -> str:
    def names(fields: tuple[str, ...]) -> str:
        return ", ".join(f"`{name}`" for name in fields) or "—"

    head = (
        "| `kind` | fields | optional | what Python does | where the answer's data goes |\n"
        "|---|---|---|---|---|\n"
    )
    return head + "".join(
        f"| `{kind}` | {names(spec.fields)} | {names(spec.optional)} | {_md(spec.doc)} | "
        f"{_md(spec.answer)} |\n"
        for kind, spec in commands.COMMANDS.items()
    )


def _result_table() -> str:
    def shape(f: PayloadField) -> str:
        if f.kind == "array":
            return "(" + ", ".join(f.shape) + ("," if len(f.shape) == 1 else "") + ")"
        return f.shape[0] if f.shape else ""

    head = "| key | payload | shape | meaning |\n|---|---|---|---|\n"
    return head + "".join(
        f"| `{f.name}` | {f.form} | {shape(f)} | {_md(f.doc)} |\n" for f in RESULT_FIELDS
    )


TABLES = {"traits": _trait_table, "commands": _command_table, "result": _result_table}
"""The doc's generated tables, by their marker's name."""


def render_doc(text: str) -> str:
    """``text`` (the protocol doc) with every table of :data:`TABLES` regenerated between
    its markers, ``<!-- mirror:NAME -->`` and ``<!-- /mirror:NAME -->``."""
    for name, table in TABLES.items():
        start, end = f"<!-- mirror:{name} -->\n", f"<!-- /mirror:{name} -->"
        if text.count(start) != 1 or text.count(end) != 1:
            raise ValueError(f"{DOC.name} needs one {start.strip()} … {end} pair")
        before, rest = text.split(start)
        after = rest.split(end)[1]
        text = before + start + "\n" + table() + "\n" + end + after  # blank lines: Markdown
    return text


def render() -> str:
    """The text of ``js/model/protocol.js`` from the Python declarations."""
    head = (
        f"// Generated by `{COMMAND}` from iglens_viz's Python declarations:\n"
        "// do not edit. tests/protocol/test_protocol_mirror.py fails when it is stale.\n"
        "/**\n * The protocol's constants as Python declares them (iglens_viz.protocol): the "
        "state's\n * defaults, the commands and their limits, the lens kinds and labels, the "
        "payload's fields.\n * @module protocol\n */\n"
    )
    parts = (_state(), _commands(), _lenses(), _schemas())
    return head + "\n" + "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Write :data:`OUT` and the generated tables of :data:`DOC`; with ``--check``, only say
    whether both are up to date (status 1 when one is stale)."""
    args = sys.argv[1:] if argv is None else argv
    doc = DOC.read_text(encoding="utf-8")
    fresh = {OUT: render(), DOC: render_doc(doc)}
    if "--check" in args:
        stale = [p.name for p, text in fresh.items() if p.read_text(encoding="utf-8") != text]
        print(f"stale: {', '.join(stale)}; run {COMMAND}" if stale else "up to date")
        return 1 if stale else 0
    for path, text in fresh.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
