"""Sub-layer states (issue 9 groundwork): the stream between each block's attention and MLP.

For every sequential family the captured h_L.attn must be a real residual state: the block's
own modules, applied to it (the MLP half of the block, written out per family here as an
independent computation), must give h_L; and the block outputs must be the plain capture's.
"""

from __future__ import annotations

import pytest
import torch

from iglens_viz import UnsupportedModelError
from iglens_viz.adapters import adapter_for
from iglens_viz.core.capture import Keep, capture_states
from tests.support.tiny_models import FAMILY_CONFIGS, random_ids, tiny_model

PARALLEL = {"gptj", "phi"}  # GPT-NeoX is parallel by default too: see the test below


def mlp_half(name: str, block, h_mid: torch.Tensor) -> torch.Tensor:
    """h_L from h_L.attn with the block's own MLP modules, as each family's block does it."""
    if name in ("gpt2", "gpt_neo"):
        return h_mid + block.mlp(block.ln_2(h_mid))
    if name in ("gemma2", "gemma3_text"):
        return h_mid + block.post_feedforward_layernorm(
            block.mlp(block.pre_feedforward_layernorm(h_mid))
        )
    if name == "opt":
        return h_mid + block.fc2(block.activation_fn(block.fc1(block.final_layer_norm(h_mid))))
    if name == "gpt_neox":
        return h_mid + block.mlp(block.post_attention_layernorm(h_mid))
    return h_mid + block.mlp(block.post_attention_layernorm(h_mid))  # Llama-like


def mlp_tol(model, h: torch.Tensor) -> float:
    """Two float64 evaluations of one MLP half (the block's, and ``mlp_half``'s with another
    batch shape): each output is a sum over d and then the FFN width, each sum within
    (terms)·eps of its magnitude (worst case), on values no larger than the states'."""
    config = model.config
    d = h.shape[-1]
    widths = [getattr(config, a, None) for a in ("intermediate_size", "n_inner", "ffn_dim")]
    ffn = next((w for w in widths if w), 4 * d)  # GPT-2's n_inner None means 4d
    return (d + ffn) * torch.finfo(torch.float64).eps * float(h.abs().max())


def capture(model, ids, sublayers):
    return capture_states(
        model,
        adapter_for(model),
        ids,
        device=torch.device("cpu"),
        dtype=torch.float64,
        keep=Keep(sublayers=sublayers),
    )[0]


@pytest.mark.parametrize("name", sorted(set(FAMILY_CONFIGS) - PARALLEL - {"gpt_neox"}))
def test_mid_state_is_the_stream_before_the_mlp(name):
    model = tiny_model(name, dtype=torch.float64)
    ids = random_ids(7)
    plain = capture(model, ids, sublayers=False)
    both = capture(model, ids, sublayers=True)
    n = adapter_for(model).n_blocks
    assert both.shape == (2 * n + 1, *plain.shape[1:])
    torch.testing.assert_close(both[0::2], plain, rtol=0, atol=0)  # the same forward pass
    blocks = adapter_for(model).blocks
    with torch.no_grad():
        for L in range(1, n + 1):
            # float64 throughout: only the MLP's own rounding separates the two sides.
            tol = mlp_tol(model, both[2 * L])
            torch.testing.assert_close(
                mlp_half(name, blocks[L - 1], both[2 * L - 1][None])[0],
                both[2 * L],
                rtol=0,
                atol=tol,
            )
            assert not torch.equal(both[2 * L - 1], both[2 * L - 2])  # attention wrote


def test_neox_mid_state_only_when_sequential():
    sequential = tiny_model("gpt_neox", dtype=torch.float64, use_parallel_residual=False)
    both = capture(sequential, random_ids(6), sublayers=True)
    block = adapter_for(sequential).blocks[0]
    with torch.no_grad():
        torch.testing.assert_close(
            mlp_half("gpt_neox", block, both[1][None])[0],
            both[2],
            rtol=0,
            atol=mlp_tol(sequential, both[2]),
        )
    with pytest.raises(UnsupportedModelError, match="in parallel"):
        capture(tiny_model("gpt_neox"), random_ids(6), sublayers=True)


def test_post_norm_opt_reads_the_stream_at_fc1():
    model = tiny_model("opt", dtype=torch.float64, do_layer_norm_before=False)
    assert adapter_for(model).mid_modules[0] is adapter_for(model).blocks[0].fc1
    both = capture(model, random_ids(6), sublayers=True)
    block = adapter_for(model).blocks[0]
    with torch.no_grad():  # post-norm: the MLP's write is normed as it enters the stream
        h_mid = both[1][None]
        mlp = block.fc2(block.activation_fn(block.fc1(h_mid)))
        expected = block.final_layer_norm(h_mid + mlp)
    torch.testing.assert_close(expected[0], both[2], rtol=0, atol=mlp_tol(model, both[1]))


@pytest.mark.parametrize("name", sorted(PARALLEL))
def test_parallel_blocks_have_no_sublayer_state(name):
    with pytest.raises(UnsupportedModelError, match="in parallel.*component"):
        capture(tiny_model(name), random_ids(5), sublayers=True)
