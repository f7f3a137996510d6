"""The interior path of one position, computed lazily (issue 11, finding 9), and the
recompute's progress and cancel.

Reference values come from whole-prompt attributions (``path_probs`` at m steps, the
Riemann estimator's contributions), computed by :meth:`IGLens.run` independently of
:meth:`IGLens.interior_path`.
"""

from __future__ import annotations

import numpy as np
import pytest

from iglens_viz import InvalidRequestError
from iglens_viz.widget import IGLensWidget
from tests.support import HANG_S
from tests.support.widget_page import Page, error_of

PROMPT = "w3 w5 w7 w9 w11 w13"


@pytest.mark.parametrize("boundaries", [None, "every:2", "sublayer"])
@pytest.mark.parametrize("steps", [2, 5])
def test_interior_path_equals_the_whole_prompt_path(lens, boundaries, steps):
    shown = lens.attribute(PROMPT, boundaries=boundaries)  # m = 1: no path in the result
    assert shown.path_probs is None
    full = lens.attribute(PROMPT, boundaries=boundaries, steps=steps)
    for position in (0, 3, len(shown.input_ids) - 1):
        path = lens.interior_path(shown, position, steps=steps)
        assert path.shape == (len(shown.boundaries) - 1, steps + 1)
        np.testing.assert_allclose(path, full.path_probs[position], rtol=1e-5, atol=1e-6)
        # the ends are the lens probabilities at the boundaries
        np.testing.assert_allclose(path[:, 0], shown.lens_probs[position, :-1], atol=1e-7)
        np.testing.assert_allclose(path[:, -1], shown.lens_probs[position, 1:], atol=1e-7)


def test_interior_path_with_a_contrast(lens):
    shown = lens.attribute(PROMPT, target="w7", contrast="w9")
    full = lens.attribute(PROMPT, target="w7", contrast="w9", steps=4)
    np.testing.assert_allclose(
        lens.interior_path(shown, 2, steps=4), full.path_probs[2], rtol=1e-5, atol=1e-6
    )


def test_riemann_terms_sum_to_the_riemann_contributions(lens):
    shown = lens.attribute(PROMPT, estimator="riemann", steps=1)
    full = lens.attribute(PROMPT, estimator="riemann", steps=6)
    _, terms = lens.interior_path(shown, 4, steps=6, terms=True)
    assert terms.shape == (len(shown.boundaries) - 1, 6)
    np.testing.assert_allclose(terms.sum(axis=1), full.contributions[4], rtol=1e-4, atol=1e-6)


def test_interior_path_reuses_the_forward_pass(lens, forward_calls):
    shown = lens.attribute(PROMPT)
    forward_calls.clear()
    lens.interior_path(shown, 1, steps=8)
    assert forward_calls == []


def test_interior_path_rejects_bad_positions(lens):
    shown = lens.attribute(PROMPT, target="next")
    T = len(shown.input_ids)
    with pytest.raises(InvalidRequestError, match="no target"):
        lens.interior_path(shown, T - 1)
    with pytest.raises(InvalidRequestError, match="position must be"):
        lens.interior_path(shown, T)
    with pytest.raises(InvalidRequestError):
        lens.interior_path(shown, 0, steps=0)


def test_widget_answers_a_path_command(lens, forward_calls):
    w = IGLensWidget(None, lens, PROMPT)
    page = Page(w)
    assert w.path == {}
    full = lens.attribute(PROMPT, steps=4)
    forward_calls.clear()
    assert page.ask("path", position=2, steps=4)["ok"]
    assert forward_calls == []
    assert w.path["position"] == 2 and w.path["steps"] == 4 and w.path["terms"] is None
    assert w.path["result_id"] == w.result_id and w.path["request_id"] == "p1"
    assert w.path["labels"] == w.result["segment_labels"]
    assert w.path["target_id"] == int(w.attribution.target_ids[2])
    np.testing.assert_allclose(np.array(w.path["path"]), full.path_probs[2], rtol=1e-5, atol=1e-6)
    # errors are answered; the trait keeps the last path
    assert "position" in error_of(page.ask("path", position=99, steps=4))
    assert "steps" in error_of(page.ask("path", position=1, steps="x"))
    assert w.path["request_id"] == "p1"
    # a new result clears it
    assert page.ask("path", position=1, steps=3)["ok"] and w.path["position"] == 1
    w.recompute(target="next")
    assert w.path == {}


def test_widget_riemann_path_has_terms(lens):
    w = IGLensWidget(None, lens, PROMPT, estimator="riemann", steps=2)
    assert Page(w).ask("path", position=3, steps=5)["ok"]
    full = lens.attribute(PROMPT, estimator="riemann", steps=5)
    np.testing.assert_allclose(
        np.array(w.path["terms"]).sum(axis=1), full.contributions[3], rtol=1e-4, atol=1e-6
    )


def test_plain_result_widget_has_no_lazy_path(lens):
    w = IGLensWidget(lens.attribute(PROMPT))
    assert "no IGLens" in error_of(Page(w).ask("path", position=1, steps=4))
    assert w.path == {}


CONTROLS = {"target": "predicted", "contrast": "", "boundaries": "all"}


def test_recompute_reports_progress_and_can_be_cancelled(lens):
    w = IGLensWidget(None, lens, PROMPT)
    page = Page(w)
    seen = []
    w.observe(lambda change: seen.append(change["new"]), names="progress")
    answer = page.recompute(**CONTROLS, estimator="prediction_aware", steps=6)
    assert answer["ok"] and w.attribution.request.steps == 6
    fractions = [v for v in seen if v >= 0]
    assert fractions and fractions == sorted(fractions) and fractions[-1] == 1.0
    assert w.progress == -1.0 and w.running == {}
    shown = w.result

    # Cancel as soon as the first chunk reports: the old result stays. (A small memory
    # budget makes the tiny model's points come in many chunks, as a real model's do.)
    lens.memory_budget = 1 << 16

    def cancel_at_first_chunk(change):
        if change["new"] >= 0:
            assert page.ask("cancel", request_id=w.running["id"])["ok"]

    w.observe(cancel_at_first_chunk, names="progress")
    answer = page.recompute(**CONTROLS, estimator="riemann", steps=8)
    assert answer["error"]["type"] == "RecomputeCancelled"
    assert error_of(answer).startswith("cancelled") and answer["result_id"] == shown["id"]
    assert w.result is shown and w.attribution.request.steps == 6
    assert w.running == {} and w.progress == -1.0


def test_threaded_recompute_hears_a_cancel_from_the_browser(lens):
    """In a kernel the recompute runs in a thread, so the Cancel command (handled on the
    kernel's main thread) can stop it between chunks."""
    w = IGLensWidget(None, lens, PROMPT)
    page = Page(w)
    w.threaded = True
    lens.memory_budget = 1 << 16
    shown = w.result
    started = []

    def press_cancel(change):  # the browser's Cancel, as soon as progress is reported
        if change["new"] >= 0 and not started:
            started.append(page.ask("cancel", request_id="p1"))

    w.observe(press_cancel, names="progress")
    assert (
        page.send(
            {
                "kind": "recompute",
                "id": "p1",
                "result_id": shown["id"],
                "controls": {**CONTROLS, "estimator": "riemann", "steps": 8},
            }
        )
        is None
    )
    w._server.worker.join(timeout=HANG_S)
    assert started and started[0]["ok"] and not w._server.worker.is_alive()
    answer = page.answers[-1]
    assert answer["request_id"] == "p1" and answer["error"]["type"] == "RecomputeCancelled"
    assert w.result is shown and w.running == {}
    # and a command that is not cancelled lands
    w.unobserve(press_cancel, names="progress")
    page.send(
        {"kind": "recompute", "id": "p3", "result_id": shown["id"], "controls": {"target": "next"}}
    )
    w._server.worker.join(timeout=HANG_S)
    assert page.answers[-1]["request_id"] == "p3" and page.answers[-1]["ok"]
    assert w.result["controls"]["target"] == "next"
