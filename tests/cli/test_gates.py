"""``iglens PROMPT --counterfactual TEXT``: the block-gate game's three ledgers on the command
line and in ``--json``, equal to an independent ``gate_ledger`` call in process."""

from __future__ import annotations

import json

import numpy as np
import pytest

import iglens_viz as ig
from iglens_viz.cli import main
from tests.support.tiny_models import tiny_model, tiny_tokenizer

PROMPT, OTHER = "w3 w5 w7 w9 w11", "w3 w6 w7 w9 w11"


def test_counterfactual_prints_and_writes_the_three_ledgers(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out.json"
    args = [PROMPT, "--model", tiny_model_dir, "--no-chat", "--json", str(out)]
    assert main([*args, "--counterfactual", OTHER, "--gate-position", "-1"]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # rich wraps the table's lines
    expected = ig.gate_ledger(tiny_model("llama"), tiny_tokenizer(), PROMPT, OTHER)
    data = json.loads(out.read_text())["gates"]
    assert data["position"] == 4 and data["target_id"] == expected.target_id
    for path in ("forward", "reverse", "diagonal"):
        np.testing.assert_array_equal(data["entries"][path], expected.entries[path])
    np.testing.assert_array_equal(data["readable"], expected.readable)
    assert "Block-gate game at position 4" in printed and "“w3 w6 w7 w9 w11”" in printed
    for sentence in expected.sentences().values():
        assert sentence in printed
    assert f"{expected.total:+.4f}" in printed


def test_a_counterfactual_of_another_length_is_one_line(tiny_model_dir, capsys):
    args = [PROMPT, "--model", tiny_model_dir, "--no-chat", "--counterfactual", "w3 w6"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("iglens: error: the clean sequence has 5 tokens")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("position", ["5", "-6"])
def test_a_gate_position_outside_the_prompt_is_refused(tiny_model_dir, capsys, position):
    args = [PROMPT, "--model", tiny_model_dir, "--no-chat", "--counterfactual", OTHER]
    assert main([*args, "--gate-position", position]) == 2
    assert "outside the 5 positions" in capsys.readouterr().err
