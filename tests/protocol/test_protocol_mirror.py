"""js/model/protocol.js is generated from Python's declarations (issue 36) and is fresh.

``iglens_viz.protocol.mirror`` writes it from the state table, the commands and their limits,
the notes' limits, the lens kinds and labels and the payload schema. Here: the committed file
is what the generator writes now (a constant changed on one side only fails), the module
evaluates in Node to Python's values, no other JS module restates one of its constants, and
the payload schema is what ``result_payload`` writes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import get_args

import pytest

from iglens_viz.core.coordinates import LENS_KINDS, LENS_LABELS
from iglens_viz.lenses import FITTED_KINDS
from iglens_viz.protocol import commands, mirror, notes, payload, schema, state
from tests.support import ROOT

REGENERATE = "regenerate it: .venv/bin/python -m iglens_viz.protocol.mirror"
JS = ROOT / "js"


def test_committed_mirror_is_what_python_declares_now():
    committed = mirror.OUT.read_text(encoding="utf-8")
    assert mirror.OUT == JS / "model" / "protocol.js"
    assert committed == mirror.render(), f"js/model/protocol.js is stale; {REGENERATE}"


def test_a_constant_changed_in_python_only_makes_it_stale(monkeypatch):
    committed = mirror.OUT.read_text(encoding="utf-8")
    monkeypatch.setattr(commands, "MAX_GATE_STEPS", commands.MAX_GATE_STEPS + 1)
    fresh = mirror.render()
    assert fresh != committed
    assert f"MAX_GATE_STEPS = {commands.MAX_GATE_STEPS};" in fresh


def test_check_mode_says_stale_without_writing(monkeypatch, tmp_path, capsys):
    out, doc = tmp_path / "protocol.js", tmp_path / "widget-protocol.md"
    monkeypatch.setattr(mirror, "OUT", out)
    monkeypatch.setattr(mirror, "DOC", doc)
    out.write_text(mirror.render().replace("MAX_NOTES = 50", "MAX_NOTES = 51"), encoding="utf-8")
    doc.write_text(
        "# doc\n"
        + "".join(
            f"<!-- mirror:{name} -->\nSTALE-ROW\n<!-- /mirror:{name} -->\n"
            for name in mirror.TABLES
        ),
        encoding="utf-8",
    )
    assert mirror.main(["--check"]) == 1
    assert "stale: protocol.js, widget-protocol.md" in capsys.readouterr().out
    assert "MAX_NOTES = 51" in out.read_text(encoding="utf-8")  # --check writes nothing
    assert mirror.main([]) == 0 and mirror.main(["--check"]) == 0
    written = doc.read_text(encoding="utf-8")
    assert "STALE-ROW" not in written
    assert "| `gates` | `result_id`, `position`, `counterfactual` |" in written


def test_protocol_doc_tables_are_generated_and_fresh():
    committed = mirror.DOC.read_text(encoding="utf-8")
    assert committed == mirror.render_doc(committed), (
        f"docs/widget-protocol.md is stale; {REGENERATE}"
    )
    for name in mirror.TABLES:
        assert committed.count(f"<!-- mirror:{name} -->") == 1, name
    for kind, spec in commands.COMMANDS.items():
        optional = ", ".join(f"`{f}`" for f in spec.optional) or "—"
        assert f"| `{kind}` | " in committed and f" | {optional} | " in committed, kind
    # the limits in the commands' prose are the constants, not a copy
    assert f"1 … {commands.MAX_ASK_NEW_TOKENS} (`MAX_ASK_NEW_TOKENS`" in committed
    assert f"1 … {commands.MAX_PROMPT_LENGTH:,} characters" in committed
    for f in schema.RESULT_FIELDS:  # every key of the result, with its form
        assert f"| `{f.name}` | {f.form} | " in committed, f.name
    assert "| `top_probs` | float32 | (T, k+1, K) | " in committed


def test_a_command_changed_in_python_only_makes_the_doc_stale(monkeypatch):
    committed = mirror.DOC.read_text(encoding="utf-8")
    spec = commands.COMMANDS["path"]
    changed = {**commands.COMMANDS, "path": commands.CommandSpec(spec.fields, False, "Other.")}
    monkeypatch.setattr(commands, "COMMANDS", changed)
    assert "| `path` | `result_id`, `position`, `steps` | — | Other. |" in mirror.render_doc(
        committed
    )
    with pytest.raises(ValueError, match="mirror:traits"):
        mirror.render_doc("no markers here")


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_generated_module_evaluates_to_the_python_values():
    script = (
        "import(process.argv[1]).then((m) => {"
        " const out = {}; for (const [k, v] of Object.entries(m))"
        " out[k] = typeof v === 'function' ? v() : v;"
        " console.log(JSON.stringify(out)); })"
    )
    run = subprocess.run(
        ["node", "-e", script, (JS / "model" / "protocol.js").as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    js = json.loads(run.stdout)
    assert js["STATE_DEFAULTS"] == {key.name: key.default for key in state.STATE}
    assert js["stateDefaults"] == js["STATE_DEFAULTS"]
    assert list(js["STATE_DEFAULTS"]) == [key.name for key in state.STATE]
    assert sorted(js["PAGE_WRITABLE"]) == sorted(state.PAGE_WRITABLE)
    assert js["COLOR_BY"] == list(state.COLOR_BY)
    assert js["VIEWS"] == list(state.VIEWS)
    assert js["TEMPLATE_MODES"] == list(state.TEMPLATE_MODES)
    assert list(js["COMMANDS"]) == list(commands.COMMANDS)
    for kind, spec in commands.COMMANDS.items():
        assert js["COMMANDS"][kind] == {
            "fields": list(spec.fields),
            "optional": list(spec.optional),
            "background": spec.background,
            "while_running": spec.while_running,
        }
    for name in ("MAX_ID_LENGTH", "MAX_PROMPT_LENGTH", "MAX_ASK_NEW_TOKENS", "MAX_GATE_STEPS"):
        assert js[name] == getattr(commands, name), name
    assert js["CHECK_POSITIONS"] == list(commands.CHECK_POSITIONS)
    assert (js["MAX_NOTE_CHARS"], js["MAX_NOTES"]) == (notes.MAX_NOTE_CHARS, notes.MAX_NOTES)
    assert js["LENS_KINDS"] == list(LENS_KINDS) and js["FITTED_KINDS"] == list(FITTED_KINDS)
    assert js["LENS_LABELS"] == LENS_LABELS
    assert set(js["PAYLOAD_SCHEMAS"]) == set(schema.SCHEMAS)
    for name, fields in schema.SCHEMAS.items():
        assert [f["name"] for f in js["PAYLOAD_SCHEMAS"][name]] == [f.name for f in fields]
        for got, f in zip(js["PAYLOAD_SCHEMAS"][name], fields):
            assert got.get("shape", []) == list(f.shape), (name, f.name)
            assert got.get("dtype", "") == f.dtype and got.get("nullable", False) == f.nullable


PROTOCOL_NAMES = re.findall(r"^export const (\w+)", mirror.render(), flags=re.M)


def test_no_other_js_module_declares_a_protocol_constant():
    """One home per fact: the constants are imported (and re-exported) from protocol.js."""
    assert {"STATE_DEFAULTS", "COMMANDS", "MAX_NOTES", "LENS_LABELS", "VIEWS"} <= set(
        PROTOCOL_NAMES
    )
    declared = re.compile(
        r"^\s*(?:export\s+)?(?:const|let|var)\s+(" + "|".join(PROTOCOL_NAMES) + r")\b"
    )
    found = []
    for path in sorted(JS.rglob("*.js")):
        rel = path.relative_to(JS).as_posix()
        if (
            rel == "model/protocol.js"
            or rel.endswith(".test.js")
            or rel.split("/")[0] in ("testing", "dev")
        ):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if declared.match(line):
                found.append(f"js/{rel}:{n}: {line.strip()}")
    assert not found, "import these from js/model/protocol.js instead:\n" + "\n".join(found)


def test_standalone_page_starts_from_the_generated_defaults():
    text = (JS / "standalone.js").read_text(encoding="utf-8")
    assert 'import { stateDefaults } from "./model/protocol.js";' in text
    assert "const DEFAULTS = {" not in text


# -- the payload schema against what Python writes --------------------------------------


def test_schema_is_the_committed_contract_payload():
    """js/testing/payload.json is held fresh by test_payload_contract.py; its result (with
    ``answer``, ``versus`` and ``comparison``) fits the schema, sizes bound consistently."""
    sent = json.loads((JS / "testing" / "payload.json").read_text(encoding="utf-8"))
    result = sent["state"]["result"]
    sizes = schema.check_fields(result)
    assert sizes == {"T": len(result["tokens"]), "k": len(result["segment_labels"]), "K": 5}


def test_schema_is_what_result_payload_writes_with_every_part(lens):
    """The parts the contract payload leaves null: a contrast, the path, the head split."""
    result = lens.attribute("w5 w17 w3 w42", target=" w9", contrast=" w7", steps=3, components=True)
    sent = payload.result_payload(result)
    assert sent["path_probs"] is not None and sent["components"] is not None
    assert sent["contrast_tokens"] is not None
    sizes = schema.check_fields(sent)
    assert sizes["T"] == len(result.input_ids)
    assert sizes["k"] == result.contributions.shape[1]
    assert sizes["m"] == 3
    assert [f.name for f in schema.RESULT_FIELDS] == list(sent)  # the order it is written in


def test_check_fields_names_what_does_not_fit():
    sent = json.loads((JS / "testing" / "payload.json").read_text(encoding="utf-8"))
    result = sent["state"]["result"]
    bad = {**result, "delta_p": {**result["delta_p"], "shape": [len(result["tokens"]) + 1]}}
    with pytest.raises(ValueError, match=r"result\.delta_p: T = 8 but T = 7"):
        schema.check_fields(bad)
    with pytest.raises(ValueError, match=r"missing \['lens'\]"):
        schema.check_fields({k: v for k, v in result.items() if k != "lens"})
    with pytest.raises(ValueError, match="int32 ndarray"):
        schema.check_fields({**result, "onset": {**result["onset"], "dtype": "float32"}})
    with pytest.raises(ValueError, match=r"ledger\.ids"):
        answer = {**result["answer"], "ids": {**result["answer"]["ids"], "shape": [2, 1]}}
        schema.check_fields({**result, "answer": answer})


def test_the_python_sources_agree_among_themselves():
    """The typing Literals the mirror leans on name what the tables declare."""
    assert get_args(commands.CommandKind) == tuple(commands.COMMANDS)
    assert tuple(LENS_LABELS) == LENS_KINDS
    assert set(FITTED_KINDS) == set(LENS_KINDS) - {"logit"}
    assert list(schema.SCHEMAS) == ["result", "ledger", "comparison", "components"]
    for fields in schema.SCHEMAS.values():
        for f in fields:
            assert (f.kind == "array") == bool(f.dtype), f
            assert (f.kind == "object") == (f.schema in schema.SCHEMAS), f
