"""Every supported family: the readout reproduces the model, and the decomposition is exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import iglens_viz
from iglens_viz import IGLens

from tiny_models import (FAMILY_NAMES, model_logits, random_ids, reference_lens_probs,
                         reference_readout_logits, tiny_model)

IDS = random_ids(12)


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family_model(request):
    return request.param, tiny_model(request.param)


def test_final_readout_equals_model_probability(family_model):
    name, model = family_model
    result = iglens_viz.attribute(model, None, IDS)
    probs = torch.softmax(model_logits(model, IDS), -1)
    expected = probs[torch.arange(IDS.numel()), torch.as_tensor(result.target_ids)].numpy()
    np.testing.assert_allclose(result.final_probs, expected, atol=1e-5)
    # "predicted" is the model's own argmax.
    np.testing.assert_array_equal(result.target_ids, probs.argmax(-1).numpy())
    # The target is not trivially certain: the check is sensitive.
    assert expected.min() < 0.9


def test_lens_probs_match_independent_logit_lens(family_model):
    name, model = family_model
    result = iglens_viz.attribute(model, None, IDS, target="next")
    targets = torch.as_tensor(np.where(result.target_ids < 0, 0, result.target_ids))
    expected = reference_lens_probs(model, IDS, targets).T.numpy()  # [T, n+1]
    np.testing.assert_allclose(result.lens_probs[:-1], expected[:-1], atol=1e-5)
    assert np.isnan(result.lens_probs[-1]).all()


@pytest.mark.parametrize("steps", [1, 3, 16])
def test_completeness_and_step_independence(family_model, steps):
    name, model = family_model
    lens = IGLens(model)
    base = lens.attribute(IDS)
    result = lens.attribute(IDS, steps=steps)
    sums = result.contributions.sum(axis=1)
    np.testing.assert_allclose(sums, result.delta_p, atol=1e-6, rtol=0)
    np.testing.assert_allclose(result.contributions, base.contributions, atol=1e-7)
    assert result.delta_p.shape == (IDS.numel(),)
    assert np.abs(result.contributions).max() > 1e-3  # not a degenerate all-zero map


def test_path_endpoints_and_interior_point(family_model):
    name, model = family_model
    steps = 4
    result = iglens_viz.attribute(model, None, IDS, steps=steps)
    n = result.n_blocks
    assert result.path_probs.shape == (IDS.numel(), n, steps + 1)
    np.testing.assert_allclose(result.path_probs[:, :, 0], result.lens_probs[:, :-1], atol=1e-7)
    np.testing.assert_allclose(result.path_probs[:, :, -1], result.lens_probs[:, 1:], atol=1e-7)
    # An interior point against the model's own modules on the interpolated state.
    with torch.no_grad():
        hidden = model(input_ids=IDS[None], output_hidden_states=True).hidden_states
        t, segment, s = 5, 0, 1
        h_a, h_b = hidden[segment][0, t], hidden[segment + 1][0, t]
        point = h_a + (s / steps) * (h_b - h_a)
        p = torch.softmax(reference_readout_logits(model, point).double(), -1)
    assert result.path_probs[t, segment, s] == pytest.approx(
        float(p[result.target_ids[t]]), abs=1e-6)


def test_riemann_error_shrinks_with_steps(family_model):
    name, model = family_model
    lens = IGLens(model)
    exact = lens.attribute(IDS).contributions
    errors = [np.abs(lens.attribute(IDS, estimator="riemann", steps=m).contributions - exact).max()
              for m in (2, 16, 128)]
    assert errors[2] < errors[1] < errors[0]
    # The midpoint rule is second order: 8x the steps cuts the error about 64x.
    assert errors[2] < 0.25 * errors[1]


def test_custom_boundaries_sum_per_block_contributions(family_model):
    name, model = family_model
    lens = IGLens(model)
    n = lens.n_blocks
    bounds = [0, 1, n] if n > 2 else [0, n]
    per_block = lens.attribute(IDS).contributions
    coarse = lens.attribute(IDS, boundaries=bounds)
    expected = np.stack([per_block[:, a:b].sum(axis=1) for a, b in zip(bounds, bounds[1:])], 1)
    np.testing.assert_allclose(coarse.contributions, expected, atol=1e-7)
    assert coarse.boundaries == bounds


def test_target_next_shifts_input(family_model):
    name, model = family_model
    result = iglens_viz.attribute(model, None, IDS, target="next")
    np.testing.assert_array_equal(result.target_ids[:-1], IDS[1:].numpy())
    assert result.target_ids[-1] == -1 and result.onset[-1] == -1


def test_states_match_hidden_states(family_model):
    """h_0 … h_{n-1} captured by hooks equal HF's (pre-norm) hidden states."""
    name, model = family_model
    trace = IGLens(model).trace(IDS)
    with torch.no_grad():
        hidden = model(input_ids=IDS[None], output_hidden_states=True).hidden_states
    for layer in range(len(hidden) - 1):
        torch.testing.assert_close(trace.states[layer], hidden[layer][0].float())
