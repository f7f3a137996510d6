"""Numerics of the readout: accurate softmax, half-precision heads kept in their dtype, memory
budget for any number of steps, and the self-check at every position.

Tolerances come from tolerances.py (each derived there from the dtype and the size).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import iglens_viz
from iglens_viz import IGLens, ModelOutputError, ReadoutMismatchError
from iglens_viz.adapters import adapter_for
from iglens_viz.causal.ablation import target_probs
from iglens_viz.core import estimators
from iglens_viz.core.capture import capture_states, checked_positions
from iglens_viz.core.readout import Readout
from tests.support.tiny_models import FAMILY_NAMES, model_logits, random_ids, tiny_model
from tests.support.tolerances import eps, readout_size, readout_tol, softmax_tol, sum_tol

IDS = random_ids(10, seed=5)


def _wide_logits(rows: int = 16, vocab: int = 49152, seed: int = 0) -> torch.Tensor:
    """float32 logits shaped like a real LM's (V = 49152, spread ~5): where float32
    ``log_softmax`` is least accurate on AVX2 CPUs."""
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed)) * 5


# --- 1. softmax without log_softmax ----------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ablation_target_probs_are_accurate_for_every_token(dtype):
    logits = _wide_logits().to(dtype)[None]  # [B=1, T, V]
    exact = torch.log_softmax(logits.double(), -1)[0]  # of the same (rounded) logits
    tol = softmax_tol(torch.float32, logits.shape[-1], float(logits.abs().max()))
    for target in (exact.argmax(-1), exact.argmin(-1), torch.arange(exact.shape[0]) * 7):
        got = target_probs(logits, target)[0].double()
        want = exact.gather(-1, target[:, None])[:, 0]
        # |Δ log p| <= softmax_tol; log of the float64 result recovers log p.
        np.testing.assert_allclose(got.log().numpy(), want.numpy(), rtol=0, atol=tol)


def _wide_readout(dtype=torch.float32, vocab: int = 49152):
    """A readout over a tiny Llama whose head has V = 49152 rows and logits spread ~5."""
    model = tiny_model("llama", vocab_size=vocab, dtype=dtype)
    with torch.no_grad():
        model.lm_head.weight.mul_(2.5)
    return model, Readout(adapter_for(model), torch.float32)


def test_readout_probability_is_accurate_for_every_token():
    """Path points and Riemann values: exp(l_y − logsumexp), not float32 log_softmax."""
    model, readout = _wide_readout()
    h = torch.randn(8, 32, generator=torch.Generator().manual_seed(1)) * 3
    z = readout.features(h)
    logits = readout.logits_from_features(z)  # the logits probability() normalises over
    lse = torch.logsumexp(logits.double(), -1)  # ... in float64
    tol = softmax_tol(torch.float32, readout.vocab_size, float(logits.abs().max()))
    assert float(logits.std()) > 3  # a spread where float32 log_softmax loses accuracy
    for target in (logits.argmax(-1), logits.argmin(-1), torch.arange(8) * 1001):
        got = readout.probability(h, target).double()
        want = torch.exp(readout.target_logits(z, target).double() - lse)
        # relative to p: |Δ log p| <= tol, plus the float32 rounding of p itself
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol + eps(torch.float32), atol=0)


def test_streamed_probability_and_analytic_gradient_match_autograd():
    """Blockwise f and ∂f/∂z against autograd through the full logits, float64, with
    soft-capping (Gemma-2), a head bias (Phi), a projection (OPT) and a contrast."""
    for family in ("gemma2", "phi", "opt", "llama"):
        model = tiny_model(family).double()
        readout = Readout(adapter_for(model), torch.float64)
        size = readout_size(model, IDS)
        h = torch.randn(
            6,
            model.config.hidden_size,
            dtype=torch.float64,
            generator=torch.Generator().manual_seed(2),
        )
        z = readout.features(h).detach().requires_grad_(True)
        ids, contrast = torch.tensor([0, 3, 5, 7, 11, 13]), torch.tensor([1, 2, 4, 6, 8, 9])
        p = torch.softmax(readout.logits_from_features(z), -1)
        ref = p.gather(-1, ids[:, None])[:, 0] - p.gather(-1, contrast[:, None])[:, 0]
        (ref_grad,) = torch.autograd.grad(ref.sum(), z)
        for cols in (None, 1, 10):
            value, grad = readout.probability_and_gradient(
                z.detach(), ids, contrast, cols, gradient=True
            )
            blocks = 1 if cols is None else -(-readout.vocab_size // cols)
            tol = 2 * readout_tol(size, torch.float64, blocks)  # a difference of two p's
            np.testing.assert_allclose(value.numpy(), ref.detach().numpy(), rtol=0, atol=tol)
            # ∂f/∂z = Σ_v (∂f/∂l_v) post'_v W_v, Σ_v |∂f/∂l_v| <= 4: errors scale by max|W|
            w_max = float(readout.head_weight.abs().max())
            np.testing.assert_allclose(grad.numpy(), ref_grad.numpy(), rtol=0, atol=4 * tol * w_max)
        # ... and through autograd, as the Riemann estimator takes it (norm included)
        hh = h.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(readout.probability(hh, ids, contrast).sum(), hh)
        hr = h.clone().requires_grad_(True)
        pr = torch.softmax(readout.logits(hr), -1)
        fr = pr.gather(-1, ids[:, None])[:, 0] - pr.gather(-1, contrast[:, None])[:, 0]
        (gr,) = torch.autograd.grad(fr.sum(), hr)
        scale = float(gr.abs().max())
        np.testing.assert_allclose(
            g.numpy(), gr.numpy(), rtol=0, atol=4 * readout_tol(size, torch.float64) * max(1, scale)
        )


# --- 2. bf16/fp16 heads stay in their dtype ---------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_head_is_not_copied(monkeypatch, dtype):
    model = tiny_model("llama", vocab_size=4096, dtype=dtype)
    lens = IGLens(model, memory_budget=64 * 2**10)
    head = lens.readout.head_weight
    assert head.dtype == dtype
    assert head.data_ptr() == model.lm_head.weight.data_ptr()  # the model's own storage
    blocks = []
    original = Readout.head_block

    def record(self, columns=slice(None)):
        block = original(self, columns)
        if block.data_ptr() != head.data_ptr():  # an upcast temporary
            blocks.append(block.numel() * block.element_size())
        return block

    monkeypatch.setattr(Readout, "head_block", record)
    lens.attribute(IDS, steps=4)
    lens.attribute(IDS, steps=4, estimator="riemann")
    full_copy = head.numel() * 4
    assert blocks and max(blocks) <= lens.memory_budget < full_copy


@pytest.mark.parametrize("estimator", ["prediction_aware", "riemann"])
def test_bfloat16_paths_match_a_float64_readout(estimator):
    """float32 readout of a bf16 model (head upcast per block) against float64 (exact: bf16
    states and weights are exact in float64), small budget so the vocabulary streams."""
    model = tiny_model("llama", dtype=torch.bfloat16)
    size = readout_size(model, IDS)
    kwargs = dict(steps=8, estimator=estimator, target="next", contrast=3)
    r32 = IGLens(model, memory_budget=2048).attribute(IDS, **kwargs)
    r64 = IGLens(model, dtype=torch.float64).attribute(IDS, **kwargs)
    blocks = -(-size.vocab // 8)  # at least ~8 columns per block at this budget
    tol = 2 * readout_tol(size, torch.float32, blocks)  # differences of two probabilities
    ok = slice(0, -1)
    np.testing.assert_allclose(r32.path_probs[ok], r64.path_probs[ok], rtol=0, atol=tol)
    np.testing.assert_allclose(r32.lens_probs[ok], r64.lens_probs[ok], rtol=0, atol=tol)
    np.testing.assert_allclose(r32.contributions[ok], r64.contributions[ok], rtol=0, atol=tol)


@torch.no_grad()
def test_float64_readout_of_a_bfloat16_model_is_exact():
    """The float64 readout upcasts bf16 blocks to float64, never through float32."""
    model = tiny_model("llama", dtype=torch.bfloat16)
    trace = IGLens(model, dtype=torch.float64).trace(IDS)
    # RMSNorm and head written out in float64 (HF's RMSNorm computes in float32).
    h = trace.states[1]
    norm = model.model.norm
    z = h * torch.rsqrt(h.square().mean(-1, keepdim=True) + norm.variance_epsilon)
    z = z * norm.weight.double()
    ref = torch.log_softmax(z @ model.lm_head.weight.double().T, -1)
    size = readout_size(model, IDS)
    lse = trace.log_normalizer[1]
    ours = trace.top_logprobs[1]
    np.testing.assert_allclose(
        ours.numpy(),
        ref.gather(-1, trace.top_ids[1]).numpy(),
        rtol=0,
        atol=readout_tol(size, torch.float64),
    )
    assert lse.dtype == torch.float64


# --- 3. the memory budget holds for any number of steps ----------------------------------------


def _record_logit_blocks(monkeypatch):
    sizes = []
    original = Readout.logits_from_features

    def record(self, z, *args, **kwargs):
        out = original(self, z, *args, **kwargs)
        sizes.append(out.numel() * out.element_size())
        return out

    monkeypatch.setattr(Readout, "logits_from_features", record)
    return sizes


@pytest.mark.parametrize("estimator", ["prediction_aware", "riemann"])
def test_many_steps_stay_within_the_memory_budget(monkeypatch, estimator):
    model = tiny_model("llama")
    budget = 64 * 2**10  # a sixth of one pair's 1000 × 97 float32 logits
    lens = IGLens(model, memory_budget=budget)
    lens.trace(IDS)
    sizes = _record_logit_blocks(monkeypatch)
    result = lens.attribute(IDS, steps=1000, estimator=estimator)
    assert sizes and max(sizes) <= budget
    k = result.contributions.shape[1]
    assert np.isfinite(result.contributions).all()
    if estimator == "prediction_aware":
        np.testing.assert_allclose(
            result.contributions.sum(1), result.delta_p, rtol=0, atol=sum_tol(torch.float32, k)
        )


def test_path_values_chunk_along_the_steps_axis(monkeypatch):
    """Any number of α's (beyond the request cap): chunks hold part of one pair's α's."""
    model = tiny_model("llama")
    readout = Readout(adapter_for(model))
    lens = IGLens(model)
    trace = lens.trace(IDS)
    h_a, h_b = trace.states[0, :2], trace.states[1, :2]
    ids = torch.tensor([3, 4])
    alphas = torch.linspace(0, 1, 3001)
    pairs = estimators.SegmentPairs(h_a, h_b, ids, None)
    whole = estimators.path_values(readout, pairs, alphas, 2**30)
    sizes = _record_logit_blocks(monkeypatch)
    budget = 16 * 2**10  # well under one pair's 3001 × 97 float32 logits (1.2 MB)
    chunked = estimators.path_values(readout, pairs, alphas, budget)
    assert max(sizes) <= budget and len(sizes) > 2 * 3001 * 97 * 4 // budget
    tol = readout_tol(readout_size(model, IDS), torch.float32, blocks=1)
    np.testing.assert_allclose(chunked.numpy(), whole.numpy(), rtol=0, atol=tol)
    totals = estimators.riemann_totals(readout, pairs, 3000, budget)
    assert totals.shape == (2,) and torch.isfinite(totals).all()


# --- 4. the self-check compares every position ---------------------------------------------


def test_self_check_catches_a_mismatch_at_the_first_position(monkeypatch):
    model = tiny_model("llama")
    lens = IGLens(model)
    n, T = lens.n_blocks, IDS.numel()
    original = Readout.features

    def wrong_at_position_0(self, h):
        z = original(self, h)
        if z.shape[0] == (n + 1) * T:  # the full map: perturb h_n at position 0 only
            z = z.clone()
            z[n * T] *= 1.5
        return z

    monkeypatch.setattr(Readout, "features", wrong_at_position_0)
    with pytest.raises(ReadoutMismatchError, match=r"1 of 10 positions; worst at position 0"):
        lens.trace(IDS)


def test_self_check_catches_a_mismatch_between_the_checked_positions(monkeypatch):
    """Position 7 of 10 is not among the positions where the model computes its logits: the
    feature-space bound flags it, and the logit comparison against post(head(z̃)) fails it."""
    model = tiny_model("llama")
    lens = IGLens(model)
    n, T = lens.n_blocks, IDS.numel()
    assert 7 not in checked_positions(T).tolist()
    original = Readout.features

    def wrong_at_position_7(self, h):
        z = original(self, h)
        if z.shape[0] == (n + 1) * T:
            z = z.clone()
            z[n * T + 7] *= 1.5
        return z

    monkeypatch.setattr(Readout, "features", wrong_at_position_7)
    with pytest.raises(ReadoutMismatchError, match=r"1 of 10 positions; worst at position 7"):
        lens.trace(IDS)


def test_self_check_catches_a_wrong_post_head_transform_at_the_checked_positions():
    """A soft-cap left out changes no feature: only the model's own logits catch it."""
    lens = IGLens(tiny_model("gemma2"))
    lens.readout.softcap = None
    with pytest.raises(ReadoutMismatchError, match="self-check"):
        lens.trace(IDS)


@pytest.mark.parametrize("family", ["llama", "opt", "gemma2"])  # plain, projected, soft-capped
def test_capture_keeps_the_head_input_everywhere_and_logits_at_a_few_positions(family):
    """The capture's head input is what the head receives in a plain forward pass (the same
    computation: equal); its logits, at :func:`checked_positions` only, are the plain pass's
    there, up to the head matmul's rounding at another row count (√d' eps S + eps L, per
    tolerances.py). No ``[T × V]`` logits are kept."""
    model = tiny_model(family)
    adapter = adapter_for(model)
    received = []
    handle = adapter.head.register_forward_pre_hook(lambda m, args: received.append(args[0]))
    try:
        want = model_logits(model, IDS)
    finally:
        handle.remove()
    captured = capture_states(model, adapter, IDS, device=torch.device("cpu"), dtype=torch.float32)
    checked = checked_positions(IDS.numel())
    assert torch.equal(captured.checked, checked) and len(set(checked.tolist())) == 8
    assert torch.equal(captured.unembed_input, received[0][0])
    assert captured.logits.shape == (8, want.shape[-1])
    size = readout_size(model, IDS)
    tol = eps(torch.float32) * (np.sqrt(size.width) * size.scale + size.logit_max)
    np.testing.assert_allclose(captured.logits.double(), want[checked], rtol=0, atol=tol)


def test_self_check_warns_for_a_half_precision_mismatch(monkeypatch):
    model = tiny_model("llama", dtype=torch.bfloat16)
    lens = IGLens(model)
    lens.readout.has_norm = False  # a broken adapter
    with pytest.warns(UserWarning, match="self-check"):  # a warning, not an error
        lens.trace(IDS)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_self_check_passes_quietly_for_every_family_and_dtype(family, dtype):
    model = tiny_model(family, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        IGLens(model).trace(IDS)
        IGLens(model, dtype=torch.float64).trace(IDS)


def test_nan_weights_are_blamed_on_the_model_not_the_adapter():
    model = tiny_model("llama")
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
    with pytest.raises(ModelOutputError, match=r"forward pass produced NaN/Inf .*block 2"):
        IGLens(model).trace(IDS)


def test_nan_head_is_blamed_on_the_model_not_the_adapter():
    model = tiny_model("llama")
    with torch.no_grad():
        model.lm_head.weight[5, 0] = float("nan")
    with pytest.raises(ModelOutputError, match="NaN/Inf logits.*not the Llama"):
        IGLens(model).trace(IDS)
    assert issubclass(ModelOutputError, iglens_viz.IGLensError)


def test_fp16_overflow_is_blamed_on_the_model():
    model = tiny_model("llama", dtype=torch.float16)
    with torch.no_grad():
        model.lm_head.weight.mul_(3e4)  # logits beyond float16's 65504
    with pytest.raises(ModelOutputError, match="overflowed"):
        IGLens(model).trace(IDS)
