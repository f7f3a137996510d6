"""The notebook widget without a browser: serializers, the result payload, the page's commands
(sent through the widget's comm as the page sends them: ``widget_page.Page``)."""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from iglens_viz import IGLens, IGLensError, InvalidRequestError
from iglens_viz.core.trajectory import NONMONOTONE_THRESHOLD
from iglens_viz.protocol import (
    array_from_payload,
    array_to_payload,
    result_payload,
    to_base64_state,
)
from iglens_viz.widget import IGLensWidget, show
from iglens_viz.widget.widget import PAGE_WRITABLE
from tests.support import HANG_S, ROOT
from tests.support.tiny_models import tiny_model, tiny_tokenizer
from tests.support.widget_page import Page, error_of

PROMPT = "w3 w5 w7 w9 w11 w13"

ARRAYS = (
    "input_ids",
    "target_ids",
    "onset",
    "contributions",
    "lens_probs",
    "delta_p",
    "top_ids",
    "top_probs",
    "path_probs",
)


def decoded(payload: dict) -> dict:
    return {k: None if payload[k] is None else array_from_payload(payload[k]) for k in ARRAYS}


# ------------------------------------------------------------------------------ serializers


@pytest.mark.parametrize(
    "dtype, sent",
    [
        (np.float64, "float32"),
        (np.float32, "float32"),
        (np.float16, "float32"),
        (np.int64, "int32"),
        (np.int32, "int32"),
        (np.int8, "int32"),
        (np.uint16, "int32"),
        (np.bool_, "int32"),
    ],
)
def test_serializer_dtypes(dtype, sent):
    arr = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    payload = array_to_payload(arr)
    assert payload["dtype"] == sent and payload["shape"] == [2, 3, 4]
    assert isinstance(payload["buffer"], bytes) and len(payload["buffer"]) == 24 * 4
    back = array_from_payload(payload)
    assert back.dtype == (np.float32 if sent == "float32" else np.int32)
    np.testing.assert_array_equal(back, arr.astype(back.dtype))


def test_serializer_keeps_nan_and_little_endian_layout():
    arr = np.array([[0.25, np.nan], [-1.5, 1e-9]])
    payload = array_to_payload(arr)
    raw = np.frombuffer(payload["buffer"], dtype="<f4")
    assert np.isnan(raw[1]) and raw[0] == 0.25 and raw[2] == -1.5
    assert array_from_payload(payload).shape == (2, 2)
    big_endian = np.array([1, 2, 3], dtype=">i8")
    assert np.frombuffer(array_to_payload(big_endian)["buffer"], "<i4").tolist() == [1, 2, 3]


def test_serializer_rejects_what_js_cannot_read():
    with pytest.raises(ValueError, match="int32 range"):
        array_to_payload(np.array([2**40]))
    with pytest.raises(TypeError, match="dtype"):
        array_to_payload(np.array(["a", "b"]))
    with pytest.raises(ValueError, match="dtype"):
        array_from_payload({"dtype": "complex64", "shape": [1], "buffer": b"\0" * 8})


def test_serializer_scalars_and_empty_arrays():
    assert array_to_payload(np.float64(2.5))["shape"] == []
    assert array_from_payload(array_to_payload(np.float64(2.5))).item() == 2.5
    empty = array_to_payload(np.zeros((3, 0), dtype=np.int64))
    assert empty["shape"] == [3, 0] and empty["buffer"] == b""


def test_base64_state_round_trip():
    payload = array_to_payload(np.array([1.0, np.nan, -2.0]))
    state = {"result": {"a": payload, "tokens": ["x"], "none": None}, "selected": 3}
    encoded = to_base64_state(state)
    assert isinstance(encoded["result"]["a"]["buffer"], str)
    assert base64.b64decode(encoded["result"]["a"]["buffer"]) == payload["buffer"]
    assert encoded["result"]["tokens"] == ["x"] and encoded["selected"] == 3
    np.testing.assert_array_equal(
        array_from_payload(encoded["result"]["a"]), array_from_payload(payload)
    )
    assert isinstance(state["result"]["a"]["buffer"], bytes)  # the input is not changed


# ------------------------------------------------------------------------------ payload


def test_payload_round_trip_equals_the_result(lens):
    result = lens.attribute(PROMPT, target="next", contrast="w4", boundaries=[0, 1, 4], steps=3)
    payload = result_payload(result)
    arrays = decoded(payload)
    for name in ARRAYS:
        expected = getattr(result, name)
        got = arrays[name]
        assert got.shape == expected.shape, name
        if expected.dtype.kind == "f":
            assert got.dtype == np.float32
            # The payload is the float32 cast itself: equal up to far less than eps32 (1.2e-7).
            np.testing.assert_allclose(
                got, expected.astype(np.float32), rtol=1e-6, equal_nan=True, err_msg=name
            )
        else:
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, expected, err_msg=name)
    assert np.isnan(arrays["contributions"][-1]).all()  # no next token at the end
    assert payload["tokens"] == result.tokens
    assert payload["target_tokens"] == result.target_tokens and payload["target_tokens"][-1] == ""
    assert payload["contrast_tokens"] == ["w4"] * 6
    assert payload["boundaries"] == [0, 1, 4] and payload["n_blocks"] == 4
    assert payload["steps"] == 3 and payload["estimator"] == "prediction_aware"
    assert payload["family"] == result.family and payload["prompt_length"] == 6
    assert payload["controls"] == {
        "target": "next",
        "contrast": "w4",
        "boundaries": "0,1,4",
        "estimator": "prediction_aware",
        "steps": 3,
    }
    assert payload["request"] == {
        "prompt": PROMPT,
        "target": "next",
        "contrast": "w4",
        "boundaries": [0, 1, 4],
        "estimator": "prediction_aware",
        "steps": 3,
        "chat": False,
        "max_new_tokens": 0,
        "components": False,
    }
    assert payload["target_name"] == "p(target) − p(contrast)"
    assert payload["segment_labels"] == ["1", "2–4"]
    assert payload["answer_start"] == 6  # no generated answer
    assert payload["nonmonotone_threshold"] == NONMONOTONE_THRESHOLD
    assert set(payload["token_text"]) >= {str(i) for i in np.unique(result.top_ids)}
    assert all(isinstance(k, str) for k in payload["token_text"])
    assert payload["token_text"]["4"] == "w4"


def test_payload_controls_come_from_the_request(lens):
    result = lens.attribute(PROMPT)
    payload = result_payload(result)
    assert payload["path_probs"] is None and payload["contrast_tokens"] is None
    assert payload["controls"]["target"] == "predicted" and payload["controls"]["contrast"] == ""
    assert payload["controls"]["boundaries"] == "all" and payload["target_name"] == "p(target)"
    assert result_payload(lens.attribute(PROMPT, target=7))["controls"]["target"] == "7"
    spec = result_payload(lens.attribute(PROMPT, target=" w3", boundaries="every:2"))
    assert spec["controls"]["target"] == " w3" and spec["controls"]["boundaries"] == "every:2"
    per_position = lens.attribute(PROMPT, target=[3] * 6)
    assert result_payload(per_position)["controls"]["target"] == "(per position)"


def test_payload_answer_start_is_the_results(lens):
    """One definition of the answer: the first position whose target is generated."""
    result = lens.attribute(PROMPT, max_new_tokens=3)
    payload = result_payload(result)
    assert result.prompt_length == 6 and payload["answer_start"] == 5
    assert payload["answer_start"] == result.answer_positions[0] == result.answer_start


def test_payload_travels_as_binary_buffers(lens):
    """The widget's state splits into JSON plus binary buffers (no base64, no JSON lists)."""
    from ipywidgets.widgets.widget import _remove_buffers

    w = IGLensWidget(lens.attribute(PROMPT))
    state, paths, buffers = _remove_buffers(w.get_state())
    assert ["result", "contributions", "buffer"] in paths
    assert len(buffers) >= 8 and all(isinstance(b, (bytes, memoryview)) for b in buffers)
    import json

    json.dumps(state, allow_nan=False)  # the rest is plain JSON


# ------------------------------------------------------------------------------ the widget


def test_plain_result_widget_is_not_interactive(lens):
    result = lens.attribute(PROMPT)
    w = result.widget()
    assert isinstance(w, IGLensWidget)
    assert w.interactive is False and w.engine is None
    assert w.selected == 5  # no answer: the last position, as the exported page opens
    assert w.hovered == -1 and w.color_by == "p_final"
    assert w.running == {} and w.result_id == "r1"
    assert w.attribution is result
    assert w._esm and "IGLensWidget(6 tokens, 4 segments" in repr(w)
    answer = Page(w).recompute(target="next")  # nobody recomputes: the result stays
    assert "no IGLens" in error_of(answer) and answer["result_id"] == "r1"
    assert w.attribution is result
    with pytest.raises(IGLensError, match="no IGLens"):
        w.recompute(target="next")


def test_trait_validation(lens):
    result = lens.attribute(PROMPT)
    w = IGLensWidget(result, selected=2, color_by="onset")
    assert w.selected == 2 and w.color_by == "onset"
    w.set_state({"selected": 4, "hovered": 1, "color_by": "delta_p"})  # as the browser does
    assert (w.selected, w.hovered, w.color_by) == (4, 1, "delta_p")
    import traitlets

    with pytest.raises(traitlets.TraitError):
        w.color_by = "rainbow"
    with pytest.raises(InvalidRequestError, match="selected"):
        IGLensWidget(result, selected=6)
    assert IGLensWidget(result, selected=-1).selected == -1
    with pytest.raises(TypeError, match="only used when result is None"):
        IGLensWidget(result, target="next")
    with pytest.raises(TypeError, match="needs a result"):
        IGLensWidget()


def test_request_recomputes_without_rerunning_the_model(lens, forward_calls):
    w = show(lens, None, PROMPT)
    assert w.interactive is True and w.engine is lens
    with pytest.warns(DeprecationWarning, match="IGLensWidget.engine"):
        assert w.lens is lens  # the old name still answers, with a warning
    assert len(forward_calls) == 1  # the attribution's pass (nothing is split unasked)
    before = decoded(w.result)
    running_seen = []
    w.observe(lambda change: running_seen.append(change["new"]), names="running")
    w.selected = 2
    answer = Page(w).recompute(
        target="next", contrast="", boundaries="every:2", estimator="riemann", steps="3"
    )
    assert answer == {
        "kind": "answer",
        "request_id": "p1",
        "command": "recompute",
        "ok": True,
        "result_id": "r2",
        "error": None,
    }
    assert w.result_id == "r2" and w.running == {}
    assert running_seen == [{"id": "p1", "command": "recompute"}, {}]
    assert len(forward_calls) == 1  # the cached forward pass served the recompute
    after = decoded(w.result)
    expected = lens.attribute(
        PROMPT, target="next", boundaries=[0, 2, 4], steps=3, estimator="riemann"
    )
    # float32 payload vs the float64 result: one rounding to float32 (≤ eps32/2 = 6e-8).
    np.testing.assert_allclose(
        after["contributions"], expected.contributions, rtol=1e-6, equal_nan=True
    )
    assert after["contributions"].shape == (6, 2) and before["contributions"].shape == (6, 4)
    assert after["path_probs"].shape == (6, 2, 4)
    assert w.result["controls"] == {
        "target": "next",
        "contrast": "",
        "boundaries": "every:2",
        "estimator": "riemann",
        "steps": 3,
    }
    assert w.attribution.request == w.attribution.request.replace(
        target="next", boundaries="every:2", estimator="riemann", steps=3
    )
    assert w.attribution.boundaries == [0, 2, 4]
    assert w.selected == 2  # same token ids: the selection stays
    assert len(forward_calls) == 1


def test_request_token_forms(lens, forward_calls):
    w = show(lens, None, PROMPT)
    page = Page(w)
    answer = page.recompute(
        target="w9", contrast="4", boundaries="0,2,4", estimator="prediction_aware", steps=1
    )
    assert answer["ok"]
    assert w.attribution.target_ids.tolist() == [9] * 6
    assert w.attribution.contrast_ids.tolist() == [4] * 6
    assert w.result["target_tokens"] == ["w9"] * 6 and w.result["contrast_tokens"] == ["w4"] * 6
    answer = page.recompute(target=11.0, contrast=None, boundaries=[0, 4], steps=2.0)
    assert answer["ok"] and w.attribution.target_ids.tolist() == [11] * 6
    assert w.result["controls"]["boundaries"] == "0,4" and w.result["controls"]["target"] == "11"
    assert w.attribution.contrast_ids is None and w.result["contrast_tokens"] is None
    assert len(forward_calls) == 1


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"target": "w1 w2"}, "not a single token"),
        ({"target": "-3"}, "not a single token"),  # only bare digits are an id: "-3" is text
        ({"target": " 4"}, "not in the vocabulary"),  # text too (the tokenizer has no "4")
        ({"target": "500"}, "out of range"),
        (
            {"target": "18446744073709551616"},
            "out of range: 18446744073709551616; this model's token ids are 0..96",
        ),
        ({"target": "w3", "contrast": "w3"}, "the contrast is the target itself"),
        ({"boundaries": "0,3,2,4"}, "strictly increasing"),
        ({"boundaries": "every:x"}, "every:K"),
        ({"boundaries": "0,2"}, "end at n=4"),
        ({"steps": "two"}, "steps"),
        ({"steps": 0}, "steps"),
        ({"estimator": "simpson"}, "unknown estimator"),
        ({"target": ["w1"]}, "target"),
        ({"boundaries": 3}, "boundaries"),
        ({"boundaries": "0,1.5,4"}, "boundary spec '0,1.5,4'"),
        ({"steps": 5000}, "steps must be an integer from 1 to 1000"),
    ],
)
def test_bad_request_answers_an_error_and_keeps_the_result(lens, request_, message):
    w = show(lens, None, PROMPT, target="next")
    page = Page(w)
    old_result, old_attribution = w.result, w.attribution
    answer = page.recompute(**request_)
    assert message in error_of(answer) and answer["error"]["type"] == "InvalidRequestError"
    assert answer["result_id"] == "r1" and w.running == {}
    assert w.result is old_result and w.attribution is old_attribution
    answer = page.recompute(target="predicted", boundaries="all")  # the next good one works
    assert answer["ok"] and w.result["controls"]["target"] == "predicted"


def test_recompute_keeps_the_generated_answer(lens, forward_calls):
    w = show(lens, None, PROMPT, max_new_tokens=3, boundaries="every:2")
    first = w.attribution
    assert first.prompt_length == 6 and len(first.input_ids) == 9
    assert w.result["controls"]["boundaries"] == "every:2" and w.result["prompt_length"] == 6
    calls = len(forward_calls)  # generation + the traced pass
    page = Page(w)
    assert page.recompute(target="next", boundaries="all")["ok"]
    assert page.recompute(target="predicted", boundaries="every:2")["ok"]
    assert len(forward_calls) == calls
    again = w.attribution
    np.testing.assert_array_equal(again.input_ids, first.input_ids)
    assert again.prompt_length == 6 and w.result["prompt_length"] == 6
    np.testing.assert_array_equal(again.answer_positions, [5, 6, 7])
    # Along the answer the "predicted" target is the generated token, as in the original call.
    np.testing.assert_array_equal(again.target_ids, first.target_ids)
    # The same cached trace and the same arithmetic: equal up to float64 rounding.
    np.testing.assert_allclose(again.contributions, first.contributions, atol=1e-12)


def test_selected_token_is_split_into_components_lazily(lens, forward_calls):
    w = show(lens, None, PROMPT, steps=2)
    page = Page(w)
    assert w.components == {}  # nothing before the page asks
    answer = page.ask("components", position=w.selected)
    split = w.components
    assert answer["ok"] and split["result_id"] == "r1" and split["request_id"] == "p1"
    assert split["positions"] == [w.selected] and split["names"] == lens.component_names
    shares = array_from_payload(split["shares"])
    segments = array_from_payload(split["segments"])
    expected = lens.components(w.attribution, [w.selected])
    # float32 payload of float64 shares: one rounding (eps32/2 relative).
    np.testing.assert_allclose(shares, expected, rtol=6e-8, atol=0)
    sums = [shares[0][segments == j].sum() for j in range(segments.max() + 1)]
    np.testing.assert_allclose(sums, w.attribution.contributions[w.selected], rtol=1e-5)
    calls = len(forward_calls)
    assert page.ask("components", position=1)["ok"]
    assert w.components["positions"] == [1] and len(forward_calls) == calls
    assert page.recompute(target="next", boundaries="every:2")["ok"]
    assert w.components == {}  # a new result clears the split of the old one
    stale = page.ask("components", position=1, result_id="r1")
    assert "about result 'r1', but the widget now shows 'r2'" in error_of(stale)
    assert page.ask("components", position=1)["ok"] and w.components["result_id"] == "r2"
    assert array_from_payload(w.components["segments"]).max() == 1  # two segments now
    for bad, message in [(99, "not a position of this result"), (5, "has no target")]:
        assert message in error_of(page.ask("components", position=bad))
    plain = Page(IGLensWidget(w.attribution))  # no lens: nothing to compute with
    assert "no IGLens" in error_of(plain.ask("components", position=1))
    whole = lens.attribute(PROMPT, components=True)
    sent = result_payload(whole)["components"]
    assert sent["positions"] == list(range(6))
    np.testing.assert_allclose(
        array_from_payload(sent["shares"]), whole.component_shares, rtol=6e-8, atol=0
    )
    assert result_payload(w.attribution)["components"] is None


def test_head_split_under_a_fitted_lens_has_its_coordinate_component(lens):
    import torch

    from iglens_viz.core.coordinates import Lens, model_fingerprint

    d, n = lens.model.config.hidden_size, lens.n_blocks
    gen = torch.Generator().manual_seed(0)
    shift = {L: torch.eye(d) + 0.05 * torch.randn(d, d, generator=gen) for L in range(n)}
    fitted = Lens("shortcut", n, d, shift, {}, model_fingerprint(lens.model))
    w = show(lens, None, PROMPT, lens=fitted)
    assert w.result["lens"] == "shortcut"
    assert Page(w).ask("components", position=2)["ok"]
    split = w.components
    assert split["names"][-1] == "coordinate" and split["names"][:-1] == lens.component_names
    shares = array_from_payload(split["shares"])[0]
    segments = array_from_payload(split["segments"])
    sums = [shares[segments == j].sum() for j in range(segments.max() + 1)]
    # the split adds up to each segment's contribution (float32 payload: eps32 relative)
    np.testing.assert_allclose(sums, w.attribution.contributions[2], rtol=1e-5, atol=1e-7)
    assert np.abs(shares[:, -1]).max() > 0  # the coordinates do change along the path


def test_python_recompute_method(lens):
    w = IGLensWidget(None, lens, PROMPT, target="next")
    assert w.result["controls"]["target"] == "next" and w.interactive
    new = w.recompute(target="w5", boundaries=[0, 2, 4])
    assert new is w.attribution and w.result["controls"]["target"] == "w5"
    assert w.result["controls"]["boundaries"] == "0,2,4"
    with pytest.raises(InvalidRequestError, match="not a single token"):
        w.recompute(target="w1 w2")


def test_boundary_text_works_in_the_widget_constructor_and_recompute(lens):
    """Regression: both raised TypeError (only show() converted the text first)."""
    w = IGLensWidget(None, lens, PROMPT, boundaries="every:2")
    assert w.attribution.boundaries == [0, 2, 4]
    assert w.result["controls"]["boundaries"] == "every:2"
    w.recompute(boundaries="every:3")
    assert w.attribution.boundaries == [0, 3, 4]
    w.recompute(boundaries="0,1,4")
    assert w.attribution.boundaries == [0, 1, 4]


def test_recompute_replays_the_request(lens):
    """A recompute changes the asked fields and keeps the rest of the shown request."""
    w = IGLensWidget(None, lens, PROMPT, contrast="w4", steps=2, max_new_tokens=2)
    answer = Page(w).recompute(
        target="next", contrast="w4", boundaries="all", estimator="prediction_aware", steps=2
    )
    assert answer["ok"]
    assert w.attribution.request == w.attribution.request.replace(
        prompt=PROMPT, target="next", contrast="w4", steps=2, max_new_tokens=2
    )
    assert w.attribution.prompt_length == 6


def test_lens_of_another_model_is_refused(lens):
    other = IGLens(tiny_model("gpt2"), tiny_tokenizer())
    with pytest.raises(IGLensError, match="blocks"):
        IGLensWidget(lens.attribute(PROMPT), other)


def test_core_runs_without_anywidget():
    """The attribution core and the HTML payload never import anywidget or ipywidgets."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules["anywidget"] = None  # any import of it fails
        sys.modules["ipywidgets"] = None
        import iglens_viz
        sys.path.insert(0, {str(ROOT)!r})  # the tests package
        from tests.support.tiny_models import tiny_model, tiny_tokenizer
        result = iglens_viz.attribute(tiny_model("llama"), tiny_tokenizer(), "w1 w2 w3")
        from iglens_viz.protocol import result_payload
        assert result_payload(result)["tokens"] == ["w1", "w2", "w3"]
        try:
            result.widget()
        except ImportError:
            print("widget needs anywidget")
        print("ok")
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["widget", "needs", "anywidget", "ok"]
    assert "anywidget" not in out.stderr


def test_lens_widget_is_interactive_and_reuses_the_lens():
    from iglens_viz import IGLens
    from tests.support.tiny_models import random_ids, tiny_model

    lens = IGLens(tiny_model("llama"))
    w = lens.widget(random_ids(6), target="next", boundaries="every:2")
    assert w.interactive and w.result["boundaries"] == [0, 2, 4]
    assert len(lens.trace_cache) == 1


# ------------------------------------------------------------------------------ causal check


def _ablate_at(lens, ids, position, token, **kwargs):
    """An independent ablation: the drop at ``position`` of ``token``'s probability, on ``ids``."""
    from iglens_viz.causal import ablate

    target = np.full(len(ids), -1)
    target[position] = token
    res = ablate(lens.model, lens.tokenizer, [int(i) for i in ids], target=target, **kwargs)
    return res.drop[position], res.clean_probs[position]


def test_causal_check_is_lazy_and_equals_ablate(lens, forward_calls):
    w = show(lens, None, PROMPT)
    calls = len(forward_calls)
    assert w.ablation == {} and w.running == {}
    w.selected = 1
    w.selected = 3
    assert w.ablation == {} and len(forward_calls) == calls  # nothing runs before the click
    running_seen = []
    w.observe(lambda change: running_seen.append(change["new"]), names="running")
    page = Page(w)
    assert page.ask("ablation", position=3, positions="all")["ok"]  # what the button sends
    assert running_seen == [{"id": "p1", "command": "ablation"}, {}]
    # one batched pass for every block, after the clean one, on 4 tokens
    assert len(forward_calls) == calls + 2
    result = w.attribution
    check = w.ablation
    assert set(check) == {
        "position",
        "mode",
        "drops",
        "clean",
        "labels",
        "parts",
        "target_id",
        "contrast_id",
        "target_name",
        "seconds",
        "positions",
        "direct",
        "patching",
        "result_id",
        "request_id",
    }
    assert check["result_id"] == "r1" and check["request_id"] == "p1"
    assert check["position"] == 3 and check["mode"] == "zero"
    assert check["labels"] == result.segment_labels == ["1", "2", "3", "4"]
    assert check["parts"] == ["block"] * 4
    assert check["target_id"] == int(result.target_ids[3]) and check["contrast_id"] is None
    assert check["target_name"] == "p(target)" and check["seconds"] > 0
    assert all(isinstance(v, float) for v in check["drops"])
    # an independent ablation on the ids up to the position: the same computation
    truncated, clean = _ablate_at(lens, result.input_ids[:4], 3, result.target_ids[3])
    np.testing.assert_allclose(check["drops"], truncated, rtol=0, atol=1e-12)
    assert check["clean"] == pytest.approx(clean, abs=1e-12)
    # causal attention: the tokens after the position change nothing (float32 model: the
    # longer sequence runs other kernels, rounding at ~1e-7)
    full, full_clean = _ablate_at(lens, result.input_ids, 3, result.target_ids[3])
    np.testing.assert_allclose(check["drops"], full, rtol=0, atol=2e-6)
    assert check["clean"] == pytest.approx(full_clean, abs=2e-6)
    # the unablated model's probability is the lens value at the last boundary
    assert check["clean"] == pytest.approx(result.lens_probs[3, -1], abs=2e-6)
    # zero-ablating the last block: its drop is its contribution (nothing reads it after)
    assert check["drops"][-1] == pytest.approx(result.contributions[3, -1], abs=2e-6)
    # the same click again recomputes; another position replaces the check
    assert page.ask("ablation", position=3, positions="all")["ok"]
    np.testing.assert_allclose(w.ablation["drops"], check["drops"], rtol=0, atol=1e-12)
    assert w.ablation["request_id"] == "p2"
    assert page.ask("ablation", position=1)["ok"]  # positions: the answer position by default
    assert w.ablation["position"] == 1 and w.ablation["positions"] == "target"


def test_causal_check_ablates_segments_and_sublayers(lens):
    w = show(lens, None, PROMPT, boundaries="every:2")
    check = w.causal_check(4, positions="all")
    result = w.attribution
    assert check["labels"] == ["1\u20132", "3\u20134"] and check["parts"] == ["block", "block"]
    groups, _ = _ablate_at(
        lens, result.input_ids[:5], 4, result.target_ids[4], layers=[(1, 2), (3, 4)]
    )
    np.testing.assert_allclose(check["drops"], groups, rtol=0, atol=1e-12)

    w.recompute(boundaries="sublayer")
    assert w.ablation == {}  # a new result clears the check
    check = w.causal_check(4, positions="all")
    result = w.attribution
    assert check["labels"] == [
        "1.attn",
        "1.mlp",
        "2.attn",
        "2.mlp",
        "3.attn",
        "3.mlp",
        "4.attn",
        "4.mlp",
    ]
    assert check["parts"] == ["attn", "mlp"] * 4
    ids, token = result.input_ids[:5], result.target_ids[4]
    attn, _ = _ablate_at(lens, ids, 4, token, part="attn")
    mlp, _ = _ablate_at(lens, ids, 4, token, part="mlp")
    np.testing.assert_allclose(check["drops"][0::2], attn, rtol=0, atol=1e-12)
    np.testing.assert_allclose(check["drops"][1::2], mlp, rtol=0, atol=1e-12)
    blocks, _ = _ablate_at(lens, ids, 4, token)
    assert not np.allclose(check["drops"][0::2], blocks, atol=1e-4)  # parts, not blocks
    # the last MLP's drop is its contribution (nothing reads the stream after it)
    assert check["drops"][-1] == pytest.approx(result.contributions[4, -1], abs=2e-6)


def test_causal_check_with_a_contrast_is_the_drop_of_the_difference(lens):
    w = show(lens, None, PROMPT, contrast="w4")
    result = w.attribution
    check = w.causal_check(2, positions="all")
    assert check["target_name"] == "p(target) \u2212 p(contrast)"
    assert check["contrast_id"] == 4 and check["target_id"] == int(result.target_ids[2])
    ids = result.input_ids[:3]
    drop_t, clean_t = _ablate_at(lens, ids, 2, result.target_ids[2])
    drop_c, clean_c = _ablate_at(lens, ids, 2, 4)
    np.testing.assert_allclose(check["drops"], drop_t - drop_c, rtol=0, atol=1e-12)
    assert check["clean"] == pytest.approx(clean_t - clean_c, abs=1e-12)
    assert check["clean"] == pytest.approx(result.lens_probs[2, -1], abs=2e-6)


@pytest.mark.parametrize(
    "wish, message",
    [
        ({"position": 99}, "not a position of this result (0 … 5)"),
        ({"position": 5}, "position 5 has no target"),
        ({"position": -1}, "needs a position"),
        ({"position": "x"}, "needs a position"),
        ({"position": True}, "needs a position"),
        ({}, "needs position"),
    ],
)
def test_bad_causal_check_answers_an_error(lens, forward_calls, wish, message):
    w = show(lens, None, PROMPT, target="next")
    page = Page(w)
    calls, old = len(forward_calls), w.result
    answer = page.ask("ablation", **wish)
    assert message in error_of(answer) and answer["command"] == "ablation"
    assert w.ablation == {} and w.running == {}
    assert w.result is old and len(forward_calls) == calls
    assert page.ask("ablation", position=2)["ok"]  # the next good one works
    assert w.ablation["position"] == 2


def test_causal_check_needs_the_model(lens):
    w = IGLensWidget(lens.attribute(PROMPT))
    answer = Page(w).ask("ablation", position=1)
    assert "no IGLens" in error_of(answer) and w.ablation == {} and w.running == {}
    with pytest.raises(IGLensError, match="no IGLens"):
        w.causal_check(1)


def test_causal_check_is_cleared_by_a_new_result_and_exported(lens):
    import json

    from iglens_viz.export.html import page_state

    w = show(lens, None, PROMPT)
    assert "ablation" not in page_state(w)  # nothing to carry
    check = w.causal_check(2)
    state = page_state(w)
    assert state["ablation"] == check and json.loads(json.dumps(state["ablation"])) == check
    page = w.to_html()
    assert '"ablation":{"position":2' in page
    assert "ablation" not in page_state(w.attribution)  # a plain result has none
    assert Page(w).recompute(target="next", boundaries="all")["ok"]
    assert w.ablation == {}
    w.ablation = {**check, "result_id": "r1"}  # an answer about another result
    assert "ablation" not in page_state(w)  # is not exported with this one


def test_segments_that_mix_halves_and_blocks_cannot_be_ablated(lens):
    from iglens_viz.causal.segments import segment_parts
    from iglens_viz.widget.widget import segment_ablation

    assert segment_parts([0, 1, 3, 4]) == [("block", (1,)), ("block", (2, 3)), ("block", (4,))]
    assert segment_parts([0, 0.5, 1, 1.5, 2]) == [
        ("attn", (1,)),
        ("mlp", (1,)),
        ("attn", (2,)),
        ("mlp", (2,)),
    ]
    with pytest.raises(InvalidRequestError, match="part of a block and whole blocks"):
        segment_parts([0, 0.5, 2])
    with pytest.raises(InvalidRequestError, match="zero"):
        segment_ablation(lens, lens.attribute(PROMPT), 1, mode="mean")


# ------------------------------------------------------------------------------ hostile page


def sane_export(w):
    """to_html works and carries Python's own payload, selection and pins."""
    from iglens_viz.export.html import page_state

    page = w.to_html()
    assert "<!DOCTYPE html>" in page
    state = page_state(w)
    assert state["selected"] == w.selected and state["result"]["tokens"] == w.attribution.tokens
    return state


@pytest.mark.parametrize(
    "name, value",
    [
        ("selected", 10**9),
        ("selected", 6),
        ("selected", -2),
        ("selected", True),
        ("selected", "3"),
        ("selected", 2.5),
        ("selected", None),
        ("selected", [1]),
        ("hovered", 10**9),
        ("hovered", -7),
        ("hovered", False),
        ("color_by", "rainbow"),
        ("color_by", 3),
        ("view", "<img src=x onerror=alert(1)>"),
        ("pinned", [[0, 99]]),
        ("pinned", [[1, 0]]),
        ("pinned", [[0, 1, 2]]),
        ("pinned", [[True, 1]]),
        ("pinned", [[0, -1]]),
        ("pinned", "0,1"),
        ("pinned", [None]),
    ],
)
def test_bad_page_write_is_refused_and_the_page_resynced(lens, name, value):
    w = show(lens, None, PROMPT)
    before = {k: getattr(w, k) for k in PAGE_WRITABLE}
    payload, attribution = w.result, w.attribution
    page = Page(w)
    page.write(**{name: value})  # no exception reaches the comm handler
    assert {k: getattr(w, k) for k in PAGE_WRITABLE} == before
    assert w.result is payload and w.attribution is attribution
    assert page.updates == [{name: before[name]}]  # the page is told Python's value
    sane_export(w)


def test_page_cannot_overwrite_what_python_computed(lens):
    w = show(lens, None, PROMPT)
    w.causal_check(2)
    python_owned = {k: getattr(w, k) for k in w.keys if k not in PAGE_WRITABLE}
    payload = w.result
    page = Page(w)
    page.write(
        result={"tokens": ["<script>alert(1)</script>"]},
        interactive=False,
        running={"id": "pwned", "command": "recompute"},
        components={},
        ablation={"drops": "x"},
        path={"error": 1},
        comparison={"results": [{}]},
        progress=2.0,
        _esm="export default {}",
        _css="*{}",
        layout="IPY_MODEL_x",
        tabbable=True,
        tooltip="hi",
    )
    assert {k: getattr(w, k) for k in python_owned} == python_owned
    assert w.result is payload and w.interactive is True and w.running == {}
    refused = {
        "result",
        "interactive",
        "running",
        "components",
        "ablation",
        "path",
        "comparison",
        "progress",
        "_esm",
        "_css",
        "layout",
        "tabbable",
        "tooltip",
    }
    assert len(page.updates) == 1 and set(page.updates[0]) == refused & set(w.keys)
    state = sane_export(w)
    assert state["ablation"]["position"] == 2 and "pwned" not in w.to_html()
    # The export is Python's own payload, equal to a fresh one of the shown result.
    assert state["result"]["tokens"] == result_payload(w.attribution)["tokens"]


def test_page_writes_that_fit_are_taken(lens):
    w = show(lens, None, PROMPT)
    page = Page(w)
    page.write(selected=4, hovered=1, color_by="onset", view="grid", pinned=[[0, 2], 3])
    assert (w.selected, w.hovered, w.color_by, w.view) == (4, 1, "onset", "grid")
    assert w.pinned == [[0, 2], [0, 3]]  # a bare i is [0, i], as the page reads it
    assert all("selected" not in s and "hovered" not in s for s in page.updates)  # none refused
    # one bad trait in an update: the others are taken, the bad one stays as it was
    page.write(selected=1, hovered=10**9)
    assert w.selected == 1 and w.hovered == 1
    assert page.updates[-1] == {"hovered": 1}
    page.write(selected=-1, hovered=-1)
    assert w.selected == -1 and w.hovered == -1
    assert sane_export(w)["selected"] == -1


@pytest.mark.parametrize(
    "message, error",
    [
        ({"kind": "recompute", "controls": {"target": {"a": 1}}}, "target"),
        ({"kind": "recompute", "controls": {"steps": [1]}}, "steps"),
        ({"kind": "recompute", "controls": {"steps": 10**9}}, "steps must be an integer"),
        ({"kind": "recompute", "controls": {"boundaries": [0, 10**9]}}, "boundaries"),
        ({"kind": "recompute", "controls": {"estimator": ["riemann"]}}, "estimator"),
        ({"kind": "recompute", "controls": "target=next"}, "needs controls (an object"),
        ({"kind": "recompute"}, "a recompute command needs controls"),
        ({"kind": "ablation", "position": 10**9}, "not a position"),
        ({"kind": "path", "position": 1, "steps": 10**9}, "steps"),
        ({"kind": "path", "position": 10**9, "steps": 4}, "in [-6, 6)"),
        ({"kind": "path", "position": 1, "steps": "4"}, "needs steps (an integer)"),
        ({"kind": "cancel", "request_id": "p0"}, "nothing to cancel: 'p0' is not running"),
        ({"kind": "cancel", "request_id": 5}, "request_id must be a string"),
        ({"kind": "ablation", "position": 1, "result_id": "r0"}, "about result 'r0'"),
        ({"kind": "rm -rf", "id": "x"}, "unknown command kind 'rm -rf': choose one of hello"),
        ({"kind": "hello", "id": ""}, "id must be a string of 1 … 64 characters"),
        ({"kind": "hello", "id": "x" * 65}, "id must be a string of 1 … 64 characters"),
        ({"kind": "hello", "id": 7}, "id must be a string"),
        ({"id": "x"}, "unknown command kind None"),
        ({"kind": ["hello"], "id": "a"}, "unknown command kind ['hello']"),
        ({"kind": {"hello": 1}, "id": "a"}, "unknown command kind {'hello': 1}"),
        ([1, 2], "a command is an object with kind and id, got list"),
        ("recompute", "a command is an object with kind and id, got str"),
    ],
)
def test_bad_command_gets_an_error_answer(lens, message, error):
    w = show(lens, None, PROMPT)
    payload, page = w.result, Page(w)
    if isinstance(message, dict):
        message = {"id": "q1", "result_id": w.result_id, **message}
    answer = page.send(message)  # no exception reaches the comm handler
    assert answer is not None and not answer["ok"] and error in error_of(answer), answer
    assert answer["error"]["type"] == "InvalidRequestError"
    sent_id = message.get("id") if isinstance(message, dict) else None
    assert answer["request_id"] == (sent_id if isinstance(sent_id, str) else "")
    assert w.result is payload and w.running == {}
    assert (w.ablation, w.path, w.components) == ({}, {}, {})
    sane_export(w)


def test_hello_is_answered_and_one_background_command_runs_at_a_time(lens):
    w = show(lens, None, PROMPT)
    page = Page(w)
    assert page.ask("hello")["ok"]
    w.running = {"id": "other", "command": "recompute"}  # as while the worker runs
    for kind, fields in [
        ("recompute", {"controls": {"target": "next"}}),
        ("ablation", {"position": 2}),
        ("path", {"position": 2, "steps": 4}),
        ("components", {"position": 2}),
    ]:
        assert "recompute 'other' is running" in error_of(page.ask(kind, **fields))
    assert page.ask("hello")["ok"]  # hello and cancel are answered meanwhile
    assert page.ask("cancel", request_id="other")["ok"] and w._server.cancelled.is_set()
    w.running = {"id": "check", "command": "ablation"}
    assert "cannot be stopped midway" in error_of(page.ask("cancel", request_id="check"))


def test_python_assignments_are_validated_too(lens):
    import traitlets

    from iglens_viz.widget.widget import InvalidTraitError

    w = show(lens, None, PROMPT)
    for name, value in [
        ("selected", 10**9),
        ("hovered", 6),
        ("selected", True),
        ("pinned", [[0, 6]]),
    ]:
        with pytest.raises(InvalidTraitError, match="position"):
            setattr(w, name, value)
    assert issubclass(InvalidTraitError, IGLensError)
    assert issubclass(InvalidTraitError, traitlets.TraitError)
    w.selected = 0
    assert w.selected == 0
    sane_export(w)


def test_result_widget_takes_the_engine_by_its_old_keyword_with_a_warning(lens):
    result = lens.attribute(PROMPT)
    with pytest.warns(DeprecationWarning, match="engine"):
        w = result.widget(lens=lens)
    assert w.engine is lens and w.interactive is True
    with pytest.raises(TypeError):
        result.widget(lens, lens=lens)
