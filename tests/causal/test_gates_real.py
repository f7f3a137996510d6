"""The block-gate game's identities on the default model (SmolLM2-135M-Instruct): the Vietnam
chat answer gated at its " Ho" against "What is the capital of Italy?".

Tolerance: the gated runs continue a key/value cache with one token while ``attribute`` and
``patch`` run whole sequences in float32, so the two sides round apart by at most two forward
passes' worth (tolerances.forward_tol at float32, the model's dtype: each of the 30 blocks
re-rounds the stream as much as one readout of the same width and magnitude). That worst case
is 3.7e-2 here, loose beside the 1e-6 the two sides measure apart (printed): the tight checks
are the tiny families' in float64 (tests/causal/test_gates.py); these add the real model's named
blocks and exact sums, which rounding cannot move.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import iglens_viz as ig
from iglens_viz.protocol.opening import opening_position
from tests.support.tolerances import forward_tol, readout_size, sum_tol

pytestmark = pytest.mark.real_model

QUESTION, OTHER = "What is the capital of Vietnam?", "What is the capital of Italy?"


@pytest.fixture(scope="module")
def game():
    model, tokenizer = ig.load_model()
    lens = ig.IGLens(model, tokenizer)
    result = lens.attribute(QUESTION, chat=True, max_new_tokens=12)
    t = opening_position(result.tokens, result.target_tokens, result.prompt_length - 1)
    answer = result.input_ids[result.prompt_length :].tolist()
    counterfactual = lens.gate_ledger(QUESTION, OTHER, chat=True, answer=answer, position=t)
    removal = lens.gate_ledger(QUESTION, chat=True, answer=answer, position=t, path="forward")
    size = readout_size(model, torch.as_tensor(result.input_ids))
    tol = forward_tol(size, model.config.num_hidden_layers, torch.float32)
    return model, tokenizer, result, t, counterfactual, removal, tol


def test_the_removal_games_forward_staircase_is_ig_lens(game):
    _, _, result, t, _, removal, tol = game
    assert removal.target_id == result.target_ids[t] and result.tokens[t] == " is"
    np.testing.assert_allclose(
        removal.entries["forward"], result.contributions[t], atol=tol, rtol=0
    )
    np.testing.assert_allclose(removal.corners["forward"], result.lens_probs[t], atol=tol, rtol=0)
    assert abs(removal.end - removal.end_reference) <= tol
    measured = np.abs(removal.corners["forward"] - result.lens_probs[t]).max()
    print(f"forward corners against lens_probs: {measured:.1e} (bound {tol:.1e})")


def test_the_counterfactual_reverse_staircase_is_state_patching(game):
    model, tokenizer, _, t, led, _, tol = game
    patched = ig.patch(
        model,
        tokenizer,
        led.clean_ids[: t + 1].tolist(),
        led.corrupt_ids[: t + 1].tolist(),
        target=led.target_id,
        parts="state",
        metric="prob",
    )
    np.testing.assert_allclose(led.corners["reverse"][1:], patched.patched, atol=tol, rtol=0)
    assert abs(led.start - led.start_reference) <= tol and abs(led.end - led.end_reference) <= tol
    k = len(led.labels)
    for path in ("forward", "reverse", "diagonal"):
        assert abs(led.entries[path].sum() - led.total) <= sum_tol(torch.float64, 2 * k + 2)
    # what the figure in docs/method.md shows: readable 30, arrives 24, shared credit 24
    assert (led.argmax("readable"), led.argmax("reverse"), led.argmax("diagonal")) == (
        "30",
        "24",
        "24",
    )
    print(f"tolerance {tol:.2e}; {led.sentences()}")
