"""iglens_viz.compare: several results on one colour scale, in the widget and the page."""

from __future__ import annotations

import base64
import dataclasses
import json
import re

import numpy as np
import pytest

import iglens_viz
from iglens_viz import IGLens, InvalidRequestError
from iglens_viz.export.html import page_state
from iglens_viz.protocol import DEFAULT_STATE, array_from_payload
from iglens_viz.widget import IGLensWidget
from iglens_viz.widget.compare import comparison_payload, default_labels, default_pins, shared_limit
from tests.support.tiny_models import tiny_model, tiny_tokenizer
from tests.ui.helpers import synthetic_result

PROMPT = "w3 w5 w7 w9 w11 w13"


@pytest.fixture(scope="module")
def two_targets():
    """One prompt attributed twice on a tiny Llama: the model's prediction, and w9."""
    lens = IGLens(tiny_model("llama"), tiny_tokenizer())
    return lens.attribute(PROMPT), lens.attribute(PROMPT, target="w9")


@pytest.fixture(scope="module")
def two_prompts():
    a = synthetic_result(T=9, n=6, seed=1)
    b = synthetic_result(T=5, n=6, seed=2)
    # make b's largest contribution the larger one, so the shared limit is not a's own
    b = dataclasses.replace(b, contributions=b.contributions * 3.0)
    return a, b


def test_shared_limit_is_the_largest_contribution_of_all(two_prompts, two_targets):
    for a, b in (two_prompts, two_targets):
        both = np.concatenate([np.ravel(a.contributions), np.ravel(b.contributions)])
        assert shared_limit([a, b]) == pytest.approx(float(np.nanmax(np.abs(both))), rel=0)
        assert shared_limit([a, b]) >= max(
            np.nanmax(np.abs(a.contributions)), np.nanmax(np.abs(b.contributions))
        )
    a, b = two_prompts
    assert shared_limit([a, b]) == pytest.approx(float(np.abs(b.contributions).max()))
    zero = dataclasses.replace(a, contributions=np.zeros_like(a.contributions))
    assert shared_limit([zero, zero]) == 1.0


def test_payload_carries_the_other_results_and_the_limit(two_prompts):
    a, b = two_prompts
    c = synthetic_result(T=4, n=6, seed=3)
    payload = comparison_payload([a, b, c], labels=["A", "B", "C"])
    assert payload["labels"] == ["A", "B", "C"]
    assert len(payload["results"]) == 2  # a travels as the widget's own result
    for sent, res in zip(payload["results"], (b, c)):
        np.testing.assert_array_equal(
            array_from_payload(sent["contributions"]), res.contributions.astype(np.float32)
        )
        assert sent["tokens"] == list(res.tokens)
    assert payload["limit"] == pytest.approx(max(np.abs(r.contributions).max() for r in (a, b, c)))
    with pytest.raises(InvalidRequestError, match="one label per result"):
        comparison_payload([a, b], labels=["only one"])


def test_default_labels_name_what_differs(two_prompts, two_targets):
    a, b = two_prompts
    labels = default_labels([a, b])
    assert labels == ["".join(a.tokens), "".join(b.tokens)]  # the prompts (ids: tokens joined)
    t1, t2 = two_targets
    assert default_labels([t1, t2]) == ["target: predicted", "target: w9"]
    same = default_labels([t1, t1])
    assert same == ["prediction_aware, m=1, boundaries all"] * 2


def test_default_pins_open_on_each_results_answer_or_last_position(two_prompts):
    a, b = two_prompts
    assert default_pins([a, b]) == [[0, len(a.tokens) - 1], [1, len(b.tokens) - 1]]
    answered = dataclasses.replace(a, prompt_length=4)
    assert answered.answer_start == 3
    assert default_pins([answered, b])[0] == [0, 3]


def test_compare_returns_a_widget_on_the_compare_view(two_targets):
    a, b = two_targets
    w = iglens_viz.compare(a, b)
    assert isinstance(w, IGLensWidget)
    assert w.view == "compare"
    assert w.attribution is a
    assert w.comparison["labels"] == ["target: predicted", "target: w9"]
    assert w.comparison["limit"] == pytest.approx(
        max(np.abs(a.contributions).max(), np.abs(b.contributions).max())
    )
    got = array_from_payload(w.comparison["results"][0]["target_ids"])
    np.testing.assert_array_equal(got, b.target_ids)
    assert w.pinned == default_pins([a, b])
    assert "side by side" in iglens_viz.compare.__doc__
    assert "compare" in iglens_viz.__all__


def test_compare_rejects_what_it_cannot_show(two_prompts):
    a, b = two_prompts
    with pytest.raises(InvalidRequestError, match="at least two"):
        iglens_viz.compare(a)
    with pytest.raises(InvalidRequestError, match="not an AttributionResult"):
        iglens_viz.compare(a, "b")
    with pytest.raises(InvalidRequestError, match="view="):
        iglens_viz.compare(a, b, view="table")
    with pytest.raises(InvalidRequestError, match="names no position"):
        iglens_viz.compare(a, b, pinned=[[1, 99]])
    w = iglens_viz.compare(a, b, pinned=[(1, 2), (0, 0)], view="grid", labels=["x", "y"])
    assert w.pinned == [[1, 2], [0, 0]] and w.view == "grid"
    assert w.comparison["labels"] == ["x", "y"]


def test_the_page_carries_the_comparison(two_prompts, tmp_path):
    a, b = two_prompts
    w = iglens_viz.compare(a, b)
    state = page_state(w)
    assert state["view"] == "compare"
    assert state["pinned"] == w.pinned
    sent = state["comparison"]["results"][0]["contributions"]
    assert isinstance(sent["buffer"], str)  # base64 in a page
    got = np.frombuffer(base64.b64decode(sent["buffer"]), "<f4").reshape(sent["shape"])
    np.testing.assert_array_equal(got, b.contributions.astype(np.float32))
    assert state["comparison"]["limit"] == pytest.approx(shared_limit([a, b]))
    path = tmp_path / "cmp.html"
    w.to_html(path)
    text = path.read_text(encoding="utf-8")
    found = re.search(
        r'<script type="application/json" id="iglens-state">(.*?)</script>', text, re.DOTALL
    )
    assert json.loads(found.group(1))["comparison"]["labels"] == w.comparison["labels"]
    # a plain result's page: the default tab, no pins, no comparison
    plain = page_state(IGLensWidget(a))
    assert plain["view"] == DEFAULT_STATE["view"] == "heatmap"
    assert plain["pinned"] == [] and "comparison" not in plain
