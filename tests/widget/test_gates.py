"""The widget's ``gates`` command, in process: the page's counterfactual box asks for the
block-gate game of one token, and the ``gates`` trait holds the ledgers an independent
``gate_ledger`` call gives, for that result and position only."""

from __future__ import annotations

import numpy as np
import pytest

import iglens_viz as ig
from iglens_viz.export.html import page_state
from iglens_viz.widget import show
from tests.support.tiny_models import tiny_tokenizer
from tests.support.widget_page import Page, error_of

PROMPT, OTHER = "w3 w5 w7 w9 w11 w13", "w3 w6 w7 w9 w11 w13"


def test_the_gate_game_answers_through_its_trait(lens, llama):
    w = show(lens, None, PROMPT, target="next")
    page = Page(w)
    answer = page.ask("gates", position=3, counterfactual=OTHER, steps=8)
    assert answer["ok"], answer
    got = w.gates
    assert got["request_id"] == answer["request_id"] and got["result_id"] == w.result_id
    assert got["prompt"] == OTHER and got["position"] == 3 and got["steps"] == 8
    expected = ig.gate_ledger(
        llama,
        tiny_tokenizer(),
        PROMPT,
        OTHER,
        position=3,
        target=int(w.attribution.target_ids[3]),
        steps=8,
    )
    assert got["target_id"] == expected.target_id
    for path in ("forward", "reverse", "diagonal"):
        np.testing.assert_array_equal(got["entries"][path], expected.entries[path])
    np.testing.assert_array_equal(got["readable"], expected.readable)
    assert got["sentences"] == expected.sentences()
    assert w.running == {} and w.progress == -1.0
    # an exported page carries it; a new result drops it
    assert page_state(w)["gates"]["request_id"] == got["request_id"]
    assert page.recompute(target="predicted")["ok"]
    assert w.gates == {}
    assert "gates" not in page_state(w)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"position": 3, "counterfactual": None}, "needs a counterfactual"),
        ({"position": 3, "counterfactual": "   "}, "needs a counterfactual"),
        ({"position": 3, "counterfactual": "w3 w6"}, "the clean sequence has 6 tokens"),
        (
            {"position": 3, "counterfactual": OTHER, "steps": 0},
            "steps is the diagonal's step count",
        ),
        ({"position": 3, "counterfactual": OTHER, "steps": 257}, "1 … 256"),
        ({"position": 3, "counterfactual": ["w3"]}, "counterfactual is a prompt"),
        ({"position": 5, "counterfactual": OTHER}, "has no target"),
        ({"position": 1, "counterfactual": OTHER}, "differ at the gated position 1 itself"),
    ],
)
def test_bad_gate_commands_get_one_line_errors(lens, fields, error):
    w = show(lens, None, PROMPT, target="next")
    answer = Page(w).ask("gates", **fields)
    assert not answer["ok"] and error in error_of(answer), answer
    assert "\n" not in error_of(answer)
    assert w.gates == {} and w.running == {}


def test_a_cancel_stops_the_game_at_its_next_block(lens):
    """The game's runs go through the widget's cancellable blocks: a Cancel set while it runs
    (here by the progress hook, after its first chunk of runs) stops it at the next check:
    no ledger is set and the widget is free again."""
    w = show(lens, None, PROMPT, target="next")
    page = Page(w)
    report = w._server.report
    seen = []

    def cancel_after_first(done, total):
        seen.append(done)
        if len(seen) == 1:
            w.cancel()
        report(done, total)

    w._server.report = cancel_after_first
    answer = page.ask("gates", position=3, counterfactual=OTHER)
    assert not answer["ok"] and answer["error"]["type"] == "RecomputeCancelled"
    assert len(seen) == 1 and w.gates == {} and w.running == {}
