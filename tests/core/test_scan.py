"""The fused, tiled readout scan (``Readout.scan``) against an independent float64 computation
on the full logits: logsumexp, top-k and the gradient's softmax-weighted head rows, over
many tiles (ragged last ones included); the cache-size probe and the tile plan.

Tolerances (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3–4; see
tolerances.py): a float32 logit ``z · W_v + b_v`` of a d'-term dot product is within
``√d' · eps · S`` of exact (Wilkinson's √n growth on the cancellation-free magnitude
S = max_v Σ_i |z_i W_vi| + |b_v|) plus its own rounding ``eps · L`` (L = max |logit|):
``logit_tol``. The logsumexp of those logits, streamed over b tiles, carries
``softmax_tol(float32, V, L, b)`` on top (its V-term sum, exp/log roundings and the b
partial results combined in sequence), and moves by at most ``logit_tol`` with the logits.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import iglens_viz.core.readout as readout_module
from iglens_viz.adapters import adapter_for
from iglens_viz.core.readout import Readout, cache_sizes, tile_plan
from tests.support.tiny_models import tiny_model
from tests.support.tolerances import eps, softmax_tol

VOCAB = 5003  # prime: every tile width leaves a ragged last block


def _readout(family: str = "llama", vocab: int = VOCAB):
    model = tiny_model(family, vocab_size=vocab)
    with torch.no_grad():  # logits spread ~5, as a real LM's
        model.get_output_embeddings().weight.mul_(4.0)
    return Readout(adapter_for(model))


def _features(readout: Readout, rows: int = 300, seed: int = 3) -> torch.Tensor:
    h = (
        torch.randn(
            rows, readout.norm_weight.shape[0], generator=torch.Generator().manual_seed(seed)
        )
        * 2
    )
    return readout.features(h)


def _exact(readout: Readout, z: torch.Tensor):
    """float64 logits of float32 features ``z`` (full vocabulary at once), and S, L."""
    w = readout.head_weight.double()
    logits = z.double() @ w.T
    magnitude = z.double().abs() @ w.abs().T
    if readout.head_bias is not None:
        logits = logits + readout.head_bias.double()
        magnitude = magnitude + readout.head_bias.double().abs()
    if readout.softcap is not None:
        logits = torch.tanh(logits / readout.softcap) * readout.softcap
    return logits, float(magnitude.max()), float(logits.abs().max())


def _logit_tol(width: int, scale: float, logit_max: float) -> float:
    return math.sqrt(width) * eps(torch.float32) * scale + eps(torch.float32) * logit_max


@pytest.mark.parametrize("family", ["llama", "phi", "gemma2"])  # plain, head bias, soft-cap
@pytest.mark.parametrize("online", [False, True])
@pytest.mark.parametrize("tiles", [(64, 700), (300, 128), (None, None)])
def test_scan_matches_float64_logsumexp_and_topk(family, online, tiles):
    readout = _readout(family)
    z = _features(readout)
    max_rows, max_columns = tiles
    k = 5
    got = readout.scan(z, k, online=online, max_rows=max_rows, max_columns=max_columns)
    logits, scale, logit_max = _exact(readout, z)
    _, cols = tile_plan(
        z.shape[0], VOCAB, z.shape[-1], readout.dtype, readout.device, max_rows, max_columns
    )
    blocks = -(-VOCAB // cols)
    logit_tol = _logit_tol(z.shape[-1], scale, logit_max)
    lse_tol = softmax_tol(torch.float32, VOCAB, logit_max, blocks) + logit_tol
    want_lse = torch.logsumexp(logits, -1)
    np.testing.assert_allclose(
        got.log_normalizer.double().numpy(), want_lse.numpy(), rtol=0, atol=lse_tol
    )
    want_values, want_ids = logits.topk(k + 1, dim=-1)
    # values: each within one logit's error of the exact k largest
    np.testing.assert_allclose(
        got.top_values.double().numpy(), want_values[:, :k].numpy(), rtol=0, atol=logit_tol
    )
    # ids: exact wherever the exact top k + 1 are further apart than two logits' errors
    # (elsewhere rounding may swap neighbours); without a soft-cap, most rows are such rows
    # (the tiny Gemma-2's cap of 2 squeezes its largest logits together)
    separated = (want_values.diff(dim=-1).abs() > 2 * logit_tol).all(-1)
    if readout.softcap is None:
        assert separated.float().mean() > 0.9
    assert torch.equal(got.top_ids[separated], want_ids[separated, :k])
    assert got.weighted is None


def test_filtered_topk_equals_the_tile_by_tile_merge(monkeypatch):
    """The CPU's filtered top-k (only rows whose tile maximum reaches the k-th value) gives
    exactly what merging every tile gives (the path other devices take)."""
    readout = _readout()
    z = _features(readout, rows=200)
    filtered = readout.scan(z, 7, max_rows=50, max_columns=256)
    real = readout_module.fold_top
    monkeypatch.setattr(readout_module, "fold_top", lambda *args: real(*args[:-1], False))
    merged = readout.scan(z, 7, max_rows=50, max_columns=256)
    assert torch.equal(filtered.top_values, merged.top_values)
    assert torch.equal(filtered.top_ids, merged.top_ids)
    assert torch.equal(filtered.log_normalizer, merged.log_normalizer)


@pytest.mark.parametrize("family", ["llama", "gemma2"])  # post' = 1 with and without soft-cap
def test_scan_gradient_sum_matches_float64(family):
    """``Σ_v softmax_v · post'_v · W_v`` over many row and column tiles, against float64."""
    readout = _readout(family)
    z = _features(readout, rows=130)
    got = readout.scan(z, gradient=True, max_rows=40, max_columns=300).weighted
    logits, scale, logit_max = _exact(readout, z)
    p = torch.softmax(logits, -1)
    slope = 1.0 if readout.softcap is None else 1 - (logits / readout.softcap).square()
    want = (p * slope) @ readout.head_weight.double()
    # Σ_v |Δ(p_v post'_v)| |W_v| ≤ max|W| · (|Δ log p| + |Δpost'|) with |Δ log p| ≤ the
    # logit and logsumexp errors; plus the float32 accumulation of V products (√V eps).
    blocks = -(-VOCAB // 300)
    w_max = float(readout.head_weight.abs().max())
    logit_tol = _logit_tol(z.shape[-1], scale, logit_max)
    tol = w_max * (
        2 * logit_tol
        + softmax_tol(torch.float32, VOCAB, logit_max, blocks)
        + math.sqrt(VOCAB) * eps(torch.float32)
    )
    if readout.softcap is not None:  # post' = 1 − (l/c)²: moves by 2 |l| |δl| / c²
        tol += w_max * 2 * logit_max * logit_tol / readout.softcap**2
    np.testing.assert_allclose(got.double().numpy(), want.numpy(), rtol=0, atol=tol)


def test_tile_plan_stays_within_its_bounds_and_one_cache_sized_tile():
    for n, vocab, width in [
        (15872, 49152, 576),
        (992, 128256, 2048),
        (7, 97, 32),
        (100_000, 256_000, 4096),
    ]:
        for dtype in (torch.float32, torch.float64):
            rows, cols = tile_plan(n, vocab, width, dtype)
            itemsize = torch.finfo(dtype).bits // 8
            assert 1 <= rows <= n and 1 <= cols <= vocab
            assert rows * cols * itemsize <= readout_module.MAX_TILE_BYTES
            rows, cols = tile_plan(n, vocab, width, dtype, max_rows=3, max_columns=5)
            assert rows <= 3 and cols <= 5
    # other devices: the memory plan's bounds are the tile
    assert tile_plan(5000, 97, 32, torch.float32, "meta", 4000, 50) == (4000, 50)


def test_cache_sizes_fall_back_when_the_machine_does_not_say(monkeypatch):
    def missing(*args):
        raise OSError("no such file")

    monkeypatch.setattr(readout_module.os, "listdir", missing)
    monkeypatch.setattr(readout_module.os, "sysconf", lambda name: -1)
    cache_sizes.cache_clear()
    try:
        assert cache_sizes() == (readout_module.FALLBACK_L2, readout_module.FALLBACK_L3)
    finally:
        cache_sizes.cache_clear()
    l2, l3 = cache_sizes()
    assert 0 < l2 <= l3
