"""Every supported family: the readout reproduces the model, and the decomposition is exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import iglens_viz
from iglens_viz import IGLens
from tests.support.tiny_models import (
    FAMILY_NAMES,
    model_logits,
    random_ids,
    reference_lens_probs,
    reference_readout_logits,
    tiny_model,
)
from tests.support.tolerances import readout_size, readout_tol, sum_tol

IDS = random_ids(12)


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family_model(request):
    return request.param, tiny_model(request.param)


@pytest.fixture(scope="module")
def tol(family_model):
    """|Δp| between the library's float32 readout and the model's own norm+head (tolerances.py)."""
    return readout_tol(readout_size(family_model[1], IDS), torch.float32)


def test_final_readout_equals_model_probability(family_model, tol):
    name, model = family_model
    result = iglens_viz.attribute(model, None, IDS)
    probs = torch.softmax(model_logits(model, IDS), -1)
    expected = probs[torch.arange(IDS.numel()), torch.as_tensor(result.target_ids)].numpy()
    np.testing.assert_allclose(result.final_probs, expected, atol=tol)  # norm+head recomputed
    # "predicted" is the model's own argmax.
    np.testing.assert_array_equal(result.target_ids, probs.argmax(-1).numpy())
    # The target is not trivially certain: the check is sensitive.
    assert expected.min() < 0.9


def test_lens_probs_match_independent_logit_lens(family_model, tol):
    name, model = family_model
    result = iglens_viz.attribute(model, None, IDS, target="next")
    targets = torch.as_tensor(np.where(result.target_ids < 0, 0, result.target_ids))
    expected = reference_lens_probs(model, IDS, targets).T.numpy()  # [T, n+1]
    np.testing.assert_allclose(result.lens_probs[:-1], expected[:-1], atol=tol)  # norm+head
    assert np.isnan(result.lens_probs[-1]).all()


@pytest.mark.parametrize("steps", [1, 3, 16])
def test_completeness_and_step_independence(family_model, steps):
    name, model = family_model
    lens = IGLens(model)
    base = lens.attribute(IDS)
    result = lens.attribute(IDS, steps=steps)
    sums = result.contributions.sum(axis=1)
    k = result.contributions.shape[1]
    # k differences of float32 probabilities telescope: k roundings at most.
    np.testing.assert_allclose(sums, result.delta_p, atol=sum_tol(torch.float32, k), rtol=0)
    # The totals are first differences of the endpoints whatever m is: the same numbers.
    np.testing.assert_array_equal(result.contributions, base.contributions)
    assert result.delta_p.shape == (IDS.numel(),)
    assert np.abs(result.contributions).max() > 1e-3  # not a degenerate all-zero map


def test_path_endpoints_and_interior_point(family_model, tol):
    name, model = family_model
    steps = 4
    result = iglens_viz.attribute(model, None, IDS, steps=steps)
    n = result.n_blocks
    assert result.path_probs.shape == (IDS.numel(), n, steps + 1)
    # The path's endpoints are the lens probabilities themselves.
    np.testing.assert_array_equal(result.path_probs[:, :, 0], result.lens_probs[:, :-1])
    np.testing.assert_array_equal(result.path_probs[:, :, -1], result.lens_probs[:, 1:])
    # An interior point against the model's own modules on the interpolated state.
    with torch.no_grad():
        hidden = model(input_ids=IDS[None], output_hidden_states=True).hidden_states
        t, segment, s = 5, 0, 1
        h_a, h_b = hidden[segment][0, t], hidden[segment + 1][0, t]
        point = h_a + (s / steps) * (h_b - h_a)
        p = torch.softmax(reference_readout_logits(model, point).double(), -1)
    assert result.path_probs[t, segment, s] == pytest.approx(
        float(p[result.target_ids[t]]), abs=tol
    )  # norm+head on the same float32 point


def test_riemann_error_shrinks_with_steps(family_model):
    name, model = family_model
    lens = IGLens(model)
    exact = lens.attribute(IDS).contributions
    errors = [
        np.abs(lens.attribute(IDS, estimator="riemann", steps=m).contributions - exact).max()
        for m in (2, 16, 128)
    ]
    assert errors[2] < errors[1] < errors[0]
    # The midpoint rule is second order: 8x the steps cuts the error about 64x. (A rate, not
    # a tolerance: 0.25 only asks for better than first order, 1/8.)
    assert errors[2] < 0.25 * errors[1]


def test_custom_boundaries_sum_per_block_contributions(family_model):
    name, model = family_model
    lens = IGLens(model)
    n = lens.n_blocks
    bounds = [0, 1, n] if n > 2 else [0, n]
    per_block = lens.attribute(IDS).contributions
    coarse = lens.attribute(IDS, boundaries=bounds)
    expected = np.stack([per_block[:, a:b].sum(axis=1) for a, b in zip(bounds, bounds[1:])], 1)
    # A coarse segment's total is the sum of its ≤ n per-block differences.
    np.testing.assert_allclose(coarse.contributions, expected, atol=sum_tol(torch.float32, n))
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
        # The same forward computation, captured by hooks: bitwise equal.
        torch.testing.assert_close(trace.states[layer], hidden[layer][0].float(), rtol=0, atol=0)
