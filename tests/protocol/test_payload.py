"""The answers' dicts of iglens_viz.protocol.payload: one finite-or-null rule, the answer tags,
a lens fit's progress, and the builders still importable where they were first defined."""

from __future__ import annotations

import math

import pytest

from iglens_viz.lenses import FitProgress
from iglens_viz.protocol import payload
from iglens_viz.widget import commands, widget


def test_every_answer_number_that_is_not_finite_is_null():
    ablation = payload.ablation_payload(
        3,
        [0.5, math.nan, -math.inf],
        math.nan,
        ["a", "b", "c"],
        parts=["block"] * 3,
        target_id=7,
    )
    assert ablation["drops"] == [0.5, None, None] and ablation["clean"] is None
    path = payload.path_payload(
        3,
        [[0.0, math.inf, 1.0], [0.25, 0.5, math.nan]],
        [[math.nan, 0.5], [1.0, 2.0]],
        ["a", "b"],
        target_id=7,
        estimator="riemann",
    )
    assert path["path"] == [[0.0, None, 1.0], [0.25, 0.5, None]]
    assert path["terms"] == [[None, 0.5], [1.0, 2.0]] and path["steps"] == 2


def test_an_answer_names_its_result_and_request():
    tagged = payload.answered({"position": 2, "result_id": "old"}, result_id="r3", request_id="q")
    assert tagged == {"position": 2, "result_id": "r3", "request_id": "q"}


def test_a_fit_report_as_the_page_shows_it():
    report = FitProgress(
        kind="tuned", phase="fit", done=20, total=250, unit="steps", seconds=4.0, resumed_at=0
    )
    assert payload.fit_payload(report) == {
        "kind": "tuned",
        "phase": "fit",
        "done": 20,
        "total": 250,
        "unit": "steps",
        "remaining_s": 46.0,
        "resumed_at": 0,
    }


@pytest.mark.parametrize("name", ["segment_ablation", "gate_game_payload", "position_path"])
def test_the_builders_are_still_importable_from_the_widget_module(name):
    assert getattr(widget, name) is getattr(payload, name)
    assert name in widget.__all__ and name in payload.__all__


def test_recompute_cancelled_is_the_command_servers():
    assert widget.RecomputeCancelled is commands.RecomputeCancelled
