"""The widget's causal check through the page's message path (tests/support/widget_page.py): the
total effect at the answer position or at every position, the direct effect (later blocks
frozen) and the counterfactual patching effects, each checked against an independent
computation (``ablate()``, plain hooks on the model, ``patch()``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iglens_viz import IGLens
from iglens_viz.causal import ablate, patch
from iglens_viz.widget import show
from tests.support.tiny_models import tiny_model, tiny_tokenizer
from tests.support.tolerances import eps, forward_dtype, forward_tol, readout_size, readout_tol
from tests.support.widget_page import Page, error_of

PROMPT = "w3 w5 w7 w9 w11 w13"
CORRUPT = "w3 w5 w8 w9 w11 w13"  # one subject token changed, same length


@pytest.fixture(scope="module")
def lens():
    return IGLens(tiny_model("llama"), tiny_tokenizer())


def _prob_tol(lens, ids) -> float:
    """|Δ f| between the check and an independent computation of f(h_n) − f(h_n − Δ_L) (or a
    drop) on the same prompt: two readouts' rounding each side (tolerances.readout_tol) plus
    two forward passes' (tolerances.forward_tol, at the precision the model rounds in)."""
    size = readout_size(lens.model, torch.as_tensor([int(i) for i in ids]))
    dtype = forward_dtype(lens.model)
    return 4 * readout_tol(size, dtype) + forward_tol(size, lens.n_blocks, dtype)


def _logit_tol(lens, ids) -> float:
    """|Δ| of a logit difference read two ways from the same forward pass (h_n′ patched in
    the pass, or h_n − Δ_L + Δ′_L added after it): each of its two logits within
    3 √w eps S per block that re-rounds the stream (tolerances: readout_tol's logit term),
    on both sides."""
    size = readout_size(lens.model, torch.as_tensor([int(i) for i in ids]))
    per_logit = 3 * np.sqrt(size.width) * eps(forward_dtype(lens.model)) * size.scale
    return 4 * lens.n_blocks * per_logit


def _drops(lens, ids, token, positions, **kwargs):
    target = np.full(len(ids), -1)
    target[-1] = token
    res = ablate(
        lens.model,
        lens.tokenizer,
        [int(i) for i in ids],
        target=target,
        positions=positions,
        **kwargs,
    )
    return res.drop[-1], res.clean_probs[-1]


@torch.no_grad()
def _direct(lens, ids, token):
    """f(h_n) − f(h_n − Δ_L) at the last position with plain forward hooks on the blocks and
    the model's own final norm and head (float64 softmax)."""
    model = lens.model
    updates = {}

    def keep(index):
        def hook(module, args, kwargs, output):
            out = output[0] if isinstance(output, tuple) else output
            x = args[0] if args else kwargs["hidden_states"]
            updates[index] = (out - x)[0, -1]
            if index == len(model.model.layers) - 1:
                updates["h_n"] = out[0, -1]

        return hook

    handles = [
        block.register_forward_hook(keep(i), with_kwargs=True)
        for i, block in enumerate(model.model.layers)
    ]
    try:
        model(input_ids=torch.as_tensor([[int(i) for i in ids]]))
    finally:
        for handle in handles:
            handle.remove()
    h_n = updates["h_n"]
    rows = torch.stack([h_n] + [h_n - updates[i] for i in range(len(model.model.layers))])
    logits = model.lm_head(model.model.norm(rows)).double()
    p = torch.softmax(logits, -1)[:, token].numpy()
    return p[0] - p[1:]


def test_target_positions_total_and_direct_through_the_page(lens):
    w = show(lens, None, PROMPT)
    page = Page(w)
    answer = page.ask("ablation", position=3, positions="target")
    assert answer["ok"], answer
    check, result = w.ablation, w.attribution
    assert check["positions"] == "target" and check["patching"] is None
    ids, token = result.input_ids[:4], int(result.target_ids[3])
    # total: the segment zero-ablated at the answer position only, the later blocks running
    want, clean = _drops(lens, ids, token, "target")
    np.testing.assert_array_equal(check["drops"], want)  # the same ablate() calls
    assert check["clean"] == clean
    every, _ = _drops(lens, ids, token, "all")
    assert not np.allclose(check["drops"], every, atol=1e-4)  # not the all-positions drop
    # direct: later blocks frozen, a readout of h_n − Δ_L
    tol = _prob_tol(lens, ids)
    np.testing.assert_allclose(check["direct"], _direct(lens, ids, token), rtol=0, atol=tol)
    # the last block: nothing after it, so total = direct = its contribution
    assert check["direct"][-1] == pytest.approx(check["drops"][-1], abs=tol)
    assert check["direct"][-1] == pytest.approx(result.contributions[3, -1], abs=tol)
    # the default of the command and of the Python API is the answer position
    assert page.ask("ablation", position=3)["ok"]
    np.testing.assert_array_equal(w.ablation["drops"], check["drops"])
    assert w.causal_check(3)["positions"] == "target"


def test_all_positions_keeps_the_old_check_and_the_same_direct_effect(lens):
    w = show(lens, None, PROMPT)
    page = Page(w)
    assert page.ask("ablation", position=4, positions="target")["ok"]
    target = w.ablation
    assert page.ask("ablation", position=4, positions="all")["ok"]
    check, result = w.ablation, w.attribution
    ids, token = result.input_ids[:5], int(result.target_ids[4])
    want, _ = _drops(lens, ids, token, "all")
    np.testing.assert_array_equal(check["drops"], want)  # the same ablate() calls
    assert check["positions"] == "all"
    np.testing.assert_array_equal(check["direct"], target["direct"])


def test_direct_effect_of_groups_sublayers_and_with_a_contrast(lens):
    w = show(lens, None, PROMPT, boundaries="every:2")
    check = w.causal_check(3)
    ids, token = w.attribution.input_ids[:4], int(w.attribution.target_ids[3])
    per_block = _direct(lens, ids, token)
    tol = _prob_tol(lens, ids)
    # a group's update is the sum of its blocks' updates (not the sum of their effects)
    assert len(check["direct"]) == 2
    assert check["direct"][1] != pytest.approx(per_block[2] + per_block[3], abs=tol)
    w.recompute(boundaries="sublayer")
    halves = w.causal_check(3)
    assert len(halves["direct"]) == 8 and halves["parts"] == ["attn", "mlp"] * 4
    assert halves["direct"][-1] == pytest.approx(w.attribution.contributions[3, -1], abs=tol)
    w.recompute(boundaries="all", contrast="w4")
    both = w.causal_check(3)
    minus = _direct(lens, ids, token) - _direct(lens, ids, 4)
    np.testing.assert_allclose(both["direct"], minus, rtol=0, atol=2 * tol)


def test_counterfactual_patching_equals_patch(lens):
    w = show(lens, None, PROMPT)
    page = Page(w)
    answer = page.ask(
        "ablation", position=3, positions="target", counterfactual=CORRUPT, contrast="w48"
    )
    assert answer["ok"], answer
    got, result = w.ablation["patching"], w.attribution
    clean = [int(i) for i in result.input_ids[:4]]
    corrupt = [int(i) for i in lens.input_ids(CORRUPT)[:4]]
    assert got["tokens"] == ["w3", "w5", "w8", "w9"] and got["contrast_id"] == 48
    assert got["contrast"] == "w48" and got["metric"] == "logit_diff"
    for effect in ("total", "direct"):
        want = patch(
            lens.model,
            lens.tokenizer,
            clean,
            corrupt,
            target=int(result.target_ids[3]),
            contrast=48,
            positions="target",
            direction="noising",
            effect=effect,
            metric="logit_diff",
        )
        np.testing.assert_array_equal(got[effect], want.effects)  # the same patch() call
        assert got["clean_metric"] == pytest.approx(want.clean_metric)
        assert got["corrupt_metric"] == pytest.approx(want.corrupt_metric)
    assert got["direct"][-1] == pytest.approx(got["total"][-1], abs=_logit_tol(lens, clean))
    # digits are a token id; no contrast: the model's top-1 on the corrupt prompt
    assert page.ask("ablation", position=3, counterfactual=CORRUPT, contrast="48")["ok"]
    assert w.ablation["patching"]["contrast_id"] == 48
    assert page.ask("ablation", position=3, counterfactual=CORRUPT)["ok"]
    top = lens.model(input_ids=torch.as_tensor([corrupt])).logits[0, -1].argmax()
    assert w.ablation["patching"]["contrast_id"] == int(top)
    # an empty prompt box is no counterfactual
    assert page.ask("ablation", position=3, counterfactual="", contrast=None)["ok"]
    assert w.ablation["patching"] is None


def test_counterfactual_of_the_whole_input_is_cut_at_the_position(lens):
    w = show(lens, None, PROMPT)
    whole = w.causal_check(2, counterfactual=CORRUPT, contrast="w48")
    cut = w.causal_check(2, counterfactual="w3 w5 w8", contrast="w48")
    assert whole["patching"]["tokens"] == cut["patching"]["tokens"] == ["w3", "w5", "w8"]
    np.testing.assert_allclose(whole["patching"]["total"], cut["patching"]["total"], atol=0)


def test_counterfactual_sublayers_are_patched_part_by_part(lens):
    w = show(lens, None, PROMPT, boundaries="sublayer")
    got = w.causal_check(3, counterfactual=CORRUPT, contrast="w48")["patching"]
    result = w.attribution
    clean = [int(i) for i in result.input_ids[:4]]
    corrupt = [int(i) for i in lens.input_ids(CORRUPT)[:4]]
    for offset, part in enumerate(("attn", "mlp")):
        want = patch(
            lens.model,
            lens.tokenizer,
            clean,
            corrupt,
            target=int(result.target_ids[3]),
            contrast=48,
            parts=part,
        )
        np.testing.assert_array_equal(got["total"][offset::2], want.effects)


@pytest.mark.parametrize(
    "wish, message",
    [
        ({"counterfactual": "w3 w5 w8 w9 w11"}, "has 5 tokens, the clean prompt 4"),
        ({"counterfactual": "w3 w5 w8 w9 w11"}, "the whole input 6"),
        ({"counterfactual": "w3"}, "has 1 tokens"),
        ({"counterfactual": CORRUPT, "contrast": "w1 w2"}, "contrast"),
        ({"contrast": "w48"}, "without a counterfactual prompt"),
        ({"positions": "all_but_first"}, "'target' (the answer position only) or 'all'"),
        ({"positions": 3}, "positions is 'target'"),
        ({"counterfactual": 5}, "counterfactual is a prompt"),
        ({"contrast": -1}, "contrast is a token"),
    ],
)
def test_bad_causal_check_fields_answer_an_error(lens, wish, message):
    w = show(lens, None, PROMPT)
    page = Page(w)
    answer = page.ask("ablation", position=3, **wish)
    assert message in error_of(answer), error_of(answer)
    assert w.ablation == {} and w.running == {}


def test_counterfactual_needs_single_block_or_sublayer_segments(lens):
    w = show(lens, None, PROMPT, boundaries="every:2")
    answer = Page(w).ask("ablation", position=3, counterfactual=CORRUPT, contrast="w48")
    assert "boundaries 'all' or 'sublayer'" in error_of(answer)
