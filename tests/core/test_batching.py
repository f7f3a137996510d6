"""Padded multi-prompt batches equal one prompt at a time, on every family: the traces (one
right-padded forward pass with an attention mask, one readout map over every prompt's rows)
and the batched block ablations (rows of several prompts per pass, stopped at h_n).

Everything runs in float64 (model and readout): the batched and single computations use
kernels of other shapes, so they round differently, by at most two forward passes' worth of
rounding (tolerances.forward_tol, at the precision the family really computes in:
tolerances.forward_dtype). The batched ablations read f(h_n) with the readout, ablate the
model's own logits; a float32-norm family's model side rounds like one float32 readout,
within the same budget. A pad
read by a real position, or a position shifted by the padding, moves probabilities by far
more (the tiny models' targets are not near-certain: see test_architectures)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iglens_viz import IGLens, ablate
from iglens_viz.causal.batched import AblationJob, ablated_probabilities
from tests.support.tiny_models import FAMILY_NAMES, random_ids, tiny_model
from tests.support.tolerances import forward_dtype, forward_tol, readout_size

# Three lengths, so two of the three prompts are padded in a batch.
PROMPTS = [random_ids(7, seed=2), random_ids(12, seed=3), random_ids(4, seed=4)]


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family(request):
    model = tiny_model(request.param, dtype=torch.float64)
    size = readout_size(model, PROMPTS[1])
    return model, forward_tol(size, model.config.num_hidden_layers, forward_dtype(model))


def test_batched_traces_equal_one_prompt_at_a_time(family):
    model, tol = family
    lens = IGLens(model, dtype=torch.float64, cache_size=len(PROMPTS))
    batched = lens.traces(PROMPTS)
    depths = list(range(lens.n_blocks + 1))
    for ids, trace in zip(PROMPTS, batched):
        alone = IGLens(model, dtype=torch.float64).trace(ids)
        assert trace.states.shape == alone.states.shape
        assert torch.equal(trace.input_ids, ids)
        y = alone.predicted
        np.testing.assert_allclose(
            trace.lens_probs(lens.readout, depths, y),
            alone.lens_probs(lens.readout, depths, y),
            rtol=0,
            atol=tol,
        )
        np.testing.assert_allclose(
            trace.top_logprobs.exp(), alone.top_logprobs.exp(), rtol=0, atol=tol
        )
    # attribute() finds the batched traces in the cache: no further forward pass.
    calls = []
    handle = model.register_forward_hook(lambda *args: calls.append(1))
    try:
        lens.attribute(PROMPTS[0])
    finally:
        handle.remove()
    assert calls == []


def test_batched_ablations_equal_ablate(family):
    """Every prompt's rows in one padded pass."""
    _check_ablations(*family)


def test_one_row_per_pass_equals_ablate():
    """A budget of one row per pass: no padding, rows of one prompt split across passes."""
    model = tiny_model("gpt2", dtype=torch.float64)
    size = readout_size(model, PROMPTS[1])
    _check_ablations(
        model, forward_tol(size, model.config.num_hidden_layers, torch.float64), memory_budget=1
    )


def _check_ablations(model, tol, **kwargs):
    lens = IGLens(model, dtype=torch.float64)
    n, d = lens.n_blocks, model.config.hidden_size
    generator = torch.Generator().manual_seed(0)
    jobs, expected = [], []
    for k, ids in enumerate(PROMPTS):
        targets = lens.trace(ids).predicted.numpy().copy()
        targets[k % len(targets)] = -1  # a position without a target stays NaN
        updates = 0.1 * torch.randn(n, ids.numel(), d, generator=generator, dtype=torch.float64)
        for given in (None, updates):
            jobs.append(AblationJob(ids, targets, given))
            expected.append(
                ablate(model, None, ids, target=targets.tolist(), updates=given).ablated_probs
            )
    got = ablated_probabilities(model, lens.adapter, lens.readout, jobs, **kwargs)
    for job, mine, theirs in zip(jobs, got, expected):
        assert mine.shape == (job.input_ids.numel(), n)
        no_target = np.broadcast_to(job.target_ids[:, None] < 0, mine.shape)
        np.testing.assert_array_equal(np.isnan(mine), no_target)
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=tol)
