"""The widget and a lens fitted on its first use, in process (issue 32, item 1): the page
learns which fitted lenses are cached (``cached_lenses``, for the note before Apply), sees a
fit's phases in ``running["fit"]``, and a Cancel during the fit answers ``RecomputeCancelled``
naming the checkpoint kept. tests/widget/test_kernel_fit_cancel.py does the same in a real kernel.
"""

from __future__ import annotations

import pytest

from iglens_viz import IGLens
from iglens_viz.lenses import fit_lens
from iglens_viz.widget import commands as command_server
from iglens_viz.widget import show
from tests.support.tiny_models import tiny_tokenizer
from tests.support.widget_page import Page, error_of

PROMPT = "w3 w5 w7 w9 w11 w13"
CONTROLS = {
    "target": "predicted",
    "contrast": "",
    "boundaries": "all",
    "estimator": "prediction_aware",
    "steps": 1,
}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))


def test_cached_lenses_follow_the_cache(llama):
    w = show(IGLens(llama, tiny_tokenizer()), None, PROMPT)
    page = Page(w)
    assert w.cached_lenses == []  # nothing fitted for this model yet
    fit_lens(llama, tiny_tokenizer(), "jacobian")  # from a notebook cell, default settings
    assert page.recompute(**CONTROLS, lens="shortcut")["ok"]  # fitted by the Apply
    assert w.cached_lenses == ["shortcut", "jacobian"]  # in FITTED_KINDS order
    assert any(u.get("cached_lenses") == ["shortcut", "jacobian"] for u in page.updates)
    # a new widget on the same model knows at once
    assert show(IGLens(llama, tiny_tokenizer()), None, PROMPT).cached_lenses == [
        "shortcut",
        "jacobian",
    ]


def test_a_cancel_during_a_fit_names_the_checkpoint_kept(llama):
    w = show(IGLens(llama, tiny_tokenizer()), None, PROMPT)
    page = Page(w)
    seen: list = []
    report = w._server.fit_report

    def cancel_at_step_7(r):  # the page's Cancel arrives during step 7
        seen.append((dict(w.running.get("fit") or {}), r))
        if r.phase == "fit" and r.done == 7:
            w.cancel()
        report(r)

    w._server.fit_report = cancel_at_step_7
    shown = w.result
    answer = page.recompute(**CONTROLS, lens="tuned")
    assert not answer["ok"] and answer["error"]["type"] == "RecomputeCancelled"
    assert error_of(answer) == (
        "cancelled: the tuned lens's checkpoint at step 7/250 is kept, so choosing the tuned "
        "lens again resumes its fit; the previous result is still shown"
    )
    assert w.result is shown and w.running == {} and w.cached_lenses == []
    phases = [r.phase for _, r in seen]
    assert phases[0] == "corpus" and "states" in phases and phases[-1] == "fit"
    assert seen[-1][1].done == 7  # stopped at the step of the Cancel
    # what the page saw of the fit: its phase, count and time left, in `running`
    shown_fit = [u["running"]["fit"] for u in page.updates if "fit" in u.get("running", {})]
    assert {f["phase"] for f in shown_fit} == {"corpus", "states", "fit"}
    last = shown_fit[-1]  # at most four updates a second reach the page
    assert (last["kind"], last["unit"], last["total"]) == ("tuned", "steps", 250)
    assert 0 <= last["done"] <= 7 and last["phase"] == "fit"
    for f in shown_fit:  # the time left, once the phase has a pace
        assert (f["remaining_s"] is None) == (f["done"] == f["resumed_at"]), f
        assert f["remaining_s"] is None or f["remaining_s"] >= 0, f
    # the next Apply resumes it
    w._server.fit_report = report
    assert page.recompute(**CONTROLS, lens="tuned")["ok"]
    assert w.attribution.request.lens == "tuned" and w.cached_lenses == ["tuned"]


def test_a_widget_that_cannot_tell_the_cached_lenses_still_shows(llama, monkeypatch):
    def broken(model):
        raise RuntimeError("no fingerprint")

    monkeypatch.setattr(command_server, "cached_fitted_kinds", broken)
    w = show(IGLens(llama, tiny_tokenizer()), None, PROMPT)
    assert w.cached_lenses == [] and w.interactive
