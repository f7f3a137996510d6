"""The site's ONNX graphs (issue 38, first stage): body and readout, run with onnxruntime,
against the model's own modules.

Oracles: ``reference_lens_probs`` and ``reference_readout_logits`` (tests/support/tiny_models:
the model's own modules, softmax in float64), never iglens_viz's readout. Tolerances
(tests/support/tolerances): the readout on the same states, :func:`readout_tol` (each side's
logits carry 3 √w u S, the softmax its own rounding); the log-normaliser, :func:`logprob_tol`
(a bound on ‖δl‖∞ plus the logsumexp's rounding); the body then readout, :func:`forward_tol`
over the n blocks (two float32 forward passes with different kernels, onnxruntime's and
torch's: each block re-rounds the stream at most as much as one readout of that width and
magnitude). The states themselves: each block re-rounds the stream, of magnitude at most
max|h|, by at most 3 √w u of it, w the widest reduction (the MLP's inner width), so state L
moves by at most ``L · 3 √w eps max|h|`` (first order, like forward_tol).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch

from iglens_viz.export.site_graphs import export_site_graphs, run_body, run_readout
from tests.support.tiny_models import (
    random_ids,
    reference_lens_probs,
    reference_readout_logits,
    tiny_model,
)
from tests.support.tolerances import eps, forward_tol, logprob_tol, readout_size, readout_tol

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

TOP_K = 5


def state_tol(model, states: np.ndarray) -> np.ndarray:
    """``(n+1, T)``: per boundary L and position t, the bound ``L · 3 √w eps M_t + eps M_t`` on
    |Δh_L[t]|, M_t = max over boundaries of |h[:, t]| (module docstring; per position, because
    one position, the first, carries states a thousand times larger than the others)."""
    width = max(model.config.hidden_size, getattr(model.config, "intermediate_size", 0))
    magnitude = np.abs(states).max(axis=(0, 2))  # (T,)
    depth = np.arange(states.shape[0])[:, None]
    return (depth * 3 * math.sqrt(width) + 1) * eps(torch.float32) * magnitude


@torch.no_grad()
def reference_states(model, ids: torch.Tensor) -> np.ndarray:
    """``(n+1, T, d)`` h_0 … h_n from the model itself with no cache: its hidden states (block
    inputs) and the last block's output, read with a hook."""
    last = []
    handle = model.model.layers[-1].register_forward_hook(
        lambda module, args, out: last.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        hidden = model(input_ids=ids[None], output_hidden_states=True).hidden_states
    finally:
        handle.remove()
    return torch.cat([*hidden[:-1], last[0]]).numpy()


def check_cached_steps(model, paths, ids: torch.Tensor, prefix: int) -> float:
    """The prompt's first ``prefix`` ids, then the rest one id per call through the KV cache:
    the states equal one uncached run's within :func:`state_tol`; the max difference."""
    step = run_body(paths.body, ids[:prefix].numpy())
    parts = [step.states]
    for position in range(prefix, ids.numel()):
        step = run_body(paths.body, ids[position : position + 1].numpy(), past=step)
        assert step.keys.shape[3] == step.values.shape[3] == position + 1
        parts.append(step.states)
    reference = reference_states(model, ids)
    diff = np.abs(np.concatenate(parts, axis=1) - reference).max(axis=2)
    assert (diff <= state_tol(model, reference)).all(), diff
    return float(diff.max())


def check_graphs(model, paths, ids: torch.Tensor) -> dict[str, float]:
    """Run both graphs on ``ids`` and assert them against the model's own modules; the max
    differences measured, by name."""
    n = model.config.num_hidden_layers
    reference = reference_states(model, ids)
    states = run_body(paths.body, ids.numpy()).states
    assert states.shape == (n + 1, ids.numel(), model.config.hidden_size)
    state_diff = np.abs(states - reference).max(axis=2)  # (n+1, T)
    assert (state_diff <= state_tol(model, reference)).all(), state_diff

    size = readout_size(model, ids)
    targets = torch.roll(ids, -1)  # next token; the last row reads the first id
    grid = np.tile(targets.numpy(), (n + 1, 1))
    # the readout on the model's own states, against the model's own modules in float64
    same = run_readout(paths.readout, reference, grid, tile_rows=7)  # 7, …, 7 and the rest
    with torch.no_grad():
        logits = reference_readout_logits(model, torch.from_numpy(reference)).double()
    expected = torch.softmax(logits, -1)
    lse = torch.logsumexp(logits, -1).numpy()
    target_p = expected.gather(-1, torch.from_numpy(grid)[..., None])[..., 0].numpy()
    top = torch.topk(expected, TOP_K, -1).values.numpy()
    at_top = expected.gather(-1, torch.from_numpy(same["top_ids"]))
    readout_diff = float(np.abs(same["target_prob"] - target_p).max())
    assert readout_diff <= readout_tol(size)
    assert np.abs(same["log_normalizer"] - lse).max() <= logprob_tol(size, torch.float32)
    assert np.abs(same["top_probs"] - top).max() <= readout_tol(size)  # the K largest …
    assert np.abs(same["top_probs"] - at_top.numpy()).max() <= readout_tol(size)  # … theirs
    # body then readout, against the model's own logit lens (HF hidden states, own head)
    rows = grid.size - 1 if grid.size > 1 else 1  # two tiles, the last of one row
    full = run_readout(paths.readout, states, grid, tile_rows=rows)
    lens = reference_lens_probs(model, ids, targets).numpy()
    full_diff = float(np.abs(full["target_prob"] - lens).max())
    assert full_diff <= forward_tol(size, n, torch.float32)
    return {"states": float(state_diff.max()), "readout": readout_diff, "full": full_diff}


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    model = tiny_model("llama")
    return model, export_site_graphs(model, tmp_path_factory.mktemp("site"), top_k=TOP_K)


def test_tiny_llama_graphs_match_the_model(tiny_export):
    """Two prompt lengths through one export (the token axis is dynamic), one of one token."""
    model, paths = tiny_export
    check_graphs(model, paths, random_ids(12))
    check_graphs(model, paths, random_ids(1, seed=3))


def test_tiny_llama_kv_cache_steps_match_one_run(tiny_export):
    """A prompt of 5 ids, then 7 generated one at a time: the states of one 12-id run."""
    model, paths = tiny_export
    check_cached_steps(model, paths, random_ids(12), prefix=5)


def test_export_writes_graphs_and_external_weights(tiny_export):
    """The weight matrices are in the .data files, in float32: the body's holds the embedding
    and every block's linear weights, the readout's the head (small vectors, the norms' weights,
    may stay inside the graph files)."""
    from iglens_viz.export.site_graphs import file_sizes

    model, paths = tiny_export
    sizes = file_sizes(paths.body.parent)
    assert set(sizes) == {"body.onnx", "body.onnx.data", "readout.onnx", "readout.onnx.data"}
    linear = sum(
        m.weight.numel() for m in model.model.layers.modules() if hasattr(m, "in_features")
    )
    embedding = model.model.embed_tokens.weight.numel()
    assert sizes["body.onnx.data"] >= 4 * (embedding + linear)
    assert sizes["readout.onnx.data"] >= 4 * model.lm_head.weight.numel()


@pytest.mark.real_model
def test_default_model_graphs_match_the_model(tmp_path):
    """The converted default model (SmolLM2-135M, 30 blocks) on three short prompts."""
    from iglens_viz import IGLens
    from tests.support.real_model import default_model

    model, tokenizer = default_model()
    paths = export_site_graphs(model, tmp_path, top_k=TOP_K)
    for prompt in ["The capital of France is", "One, two, three,", "Water boils at"]:
        ids = torch.tensor(tokenizer(prompt)["input_ids"])
        check_graphs(model, paths, ids)
    check_cached_steps(model, paths, ids, prefix=ids.numel() - 2)  # two steps after the prompt
    # … and the library's own per-boundary lens probabilities of its predicted targets
    result = IGLens(model, tokenizer).attribute("Water boils at")  # ids: the last prompt's
    assert result.boundaries == list(range(len(model.model.layers) + 1))
    has = result.target_ids >= 0
    grid = np.tile(np.where(has, result.target_ids, 0), (len(result.boundaries), 1))
    probs = run_readout(paths.readout, run_body(paths.body, result.input_ids).states, grid)
    diff = np.abs(probs["target_prob"].T - result.lens_probs)[has]
    assert diff.max() <= forward_tol(
        readout_size(model, ids), len(model.model.layers), torch.float32
    )


@pytest.mark.parametrize("missing", ["onnx", "onnxscript", "onnxruntime"])
def test_missing_onnx_names_the_extra(monkeypatch, missing):
    """Without one of the three packages, an IGLensError names it and the site extra."""
    from iglens_viz import IGLensError

    monkeypatch.setitem(sys.modules, missing, None)  # import raises ModuleNotFoundError
    with pytest.raises(IGLensError, match=rf"{missing} package.*iglens_viz\[site\]"):
        export_site_graphs(tiny_model("llama"), "unused")
