"""Sub-block ablation (``part="attn"``, ``"mlp"``, ``"head"``) of every family's tiny model,
each column against a plain forward pass with a hook written here.

The references are independent of the library's family table where the model allows it:
Gemma-2/3's attention write is removed here by zeroing the attention module's output (their
RMS post-norm maps 0 to 0) while the library hooks the post-norm. (Mean ablation against a
reference set is tested in tests/causal/test_patching.py.) All models run in
float64: the library's batched passes and the single-row references may use other kernels,
whose rounding is bounded by tolerances.forward_tol and lies far below any ablation effect.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from torch import nn

from iglens_viz import InvalidRequestError, UnsupportedModelError
from iglens_viz.adapters import adapter_for
from iglens_viz.causal import ABLATION_PARTS, AblationPart, ablate
from iglens_viz.causal import ablation as ablation_module
from iglens_viz.core.hooks import projection_input
from tests.support.tiny_models import FAMILY_NAMES, tiny_model
from tests.support.tolerances import forward_tol, readout_size

IDS = [1, 5, 7, 9, 11, 5, 7, 9, 3]
SEQUENTIAL_NEOX = "gpt_neox/sequential"  # GPT-NeoX with use_parallel_residual=False
PARALLEL = ["gptj", "gpt_neox", "phi"]
ALL = FAMILY_NAMES + [SEQUENTIAL_NEOX]
SEQUENTIAL = [n for n in ALL if n not in PARALLEL]
NOT_HEAD_SPLIT = ["gemma2", "gemma3_text"]  # a norm after the output projection
FLOAT32_SCORES = ["gpt_neo"]  # computes its attention scores in float32 whatever the dtype

# The test's own map of where each family's modules are (checked against the models below).
BLOCKS = {
    "gpt2": "transformer.h",
    "gpt_neo": "transformer.h",
    "gptj": "transformer.h",
    "gpt_neox": "gpt_neox.layers",
    "opt": "model.decoder.layers",
}  # else model.layers
ATTENTION = {
    "gpt2": "attn",
    "gpt_neo": "attn",
    "gptj": "attn",
    "gpt_neox": "attention",
    "opt": "self_attn",
}  # else self_attn (Gemma-2/3: before their post-norm)
MLP = {"opt": "fc2"}  # else mlp (OPT's MLP is fc1 → activation → fc2 inside the block)
O_PROJ = {
    "gpt2": "attn.c_proj",
    "gpt_neo": "attn.attention.out_proj",
    "gptj": "attn.out_proj",
    "gpt_neox": "attention.dense",
    "opt": "self_attn.out_proj",
    "phi": "self_attn.dense",
}  # else self_attn.o_proj
# Families whose attention output projection has no bias: zeroing its whole input zeroes
# the attention's write (Gemma-2/3 too: their RMS post-norm maps 0 to 0).
NO_O_PROJ_BIAS = ["gemma", "gemma2", "gemma3_text", "llama", "mistral", "phi3", "qwen2", "qwen3"]


def _kind(name: str) -> str:
    return "gpt_neox" if name == SEQUENTIAL_NEOX else name


@functools.cache
def _model(name: str):
    if name == SEQUENTIAL_NEOX:
        return tiny_model("gpt_neox", dtype=torch.float64, use_parallel_residual=False)
    return tiny_model(name, dtype=torch.float64)


@functools.cache
def _tol(name: str) -> float:
    """|Δp| between two float64 forward passes that may batch differently (forward_tol).

    GPT-Neo casts Q and K to float32 for its attention scores even in a float64 model, so its
    passes may differ by float32 rounding: forward_tol at float32's eps (an upper bound: only
    the scores are float32)."""
    model = _model(name)
    dtype = torch.float32 if name in FLOAT32_SCORES else torch.float64
    return forward_tol(readout_size(model, torch.tensor(IDS)), len(_blocks(name)), dtype)


def _blocks(name: str):
    return _model(name).get_submodule(BLOCKS.get(_kind(name), "model.layers"))


def _sub(name: str, block: int, table: dict, default: str) -> nn.Module:
    """Module ``table[family]`` (or ``default``) of 1-based block ``block``."""
    return _blocks(name)[block - 1].get_submodule(table.get(_kind(name), default))


def _first(output):
    return output if isinstance(output, torch.Tensor) else output[0]


def _with_first(output, new):
    return new if isinstance(output, torch.Tensor) else (new, *output[1:])


@torch.no_grad()
def _probs(name: str, targets, hooks=()) -> np.ndarray:
    """The model's own probability of ``targets`` [T], with ``hooks`` (callables that
    register a hook and return its handle) in place for one plain single-row pass."""
    handles = [register() for register in hooks]
    try:
        logits = _model(name)(torch.tensor([IDS]), use_cache=False).logits[0]
    finally:
        for handle in handles:
            handle.remove()
    p = torch.softmax(logits.double(), -1)
    return p[torch.arange(len(IDS)), torch.as_tensor(targets)].numpy()


def _zero_output(module: nn.Module):
    """A hook that zeroes ``module``'s output (its first element when a tuple)."""
    return lambda: module.register_forward_hook(
        lambda m, args, out: _with_first(out, torch.zeros_like(_first(out)))
    )


class _Zeros(nn.Module):
    """Stands in for an MLP: returns zeros of ``width`` features."""

    def __init__(self, width: int):
        super().__init__()
        self.width = width

    def forward(self, x, *args, **kwargs):
        return x.new_zeros(*x.shape[:-1], self.width)


def _replaced_mlp(name: str, block: int):
    """A "hook" that swaps block ``block``'s MLP (OPT: fc2) for zeros; its handle swaps back."""

    def register():
        parent = _blocks(name)[block - 1]
        attr = MLP.get(_kind(name), "mlp")
        original = getattr(parent, attr)
        width = _model(name).config.hidden_size
        setattr(parent, attr, _Zeros(width))

        class Handle:
            def remove(self):
                setattr(parent, attr, original)

        return Handle()

    return register


def _head_slice(name: str, head: int) -> slice:
    width = _o_proj_width(name)
    d_head = width // _model(name).config.num_attention_heads
    return slice(head * d_head, (head + 1) * d_head)


def _o_proj_width(name: str) -> int:
    proj = _sub(name, 1, O_PROJ, "self_attn.o_proj")
    return proj.in_features if isinstance(proj, nn.Linear) else proj.weight.shape[0]


def _zero_o_proj_input(name: str, block: int, cols: slice):
    """A pre-hook that zeroes features ``cols`` of block ``block``'s output projection input."""

    def hook(m, args):
        x = args[0].clone()
        x[..., cols] = 0
        return (x, *args[1:])

    module = _sub(name, block, O_PROJ, "self_attn.o_proj")
    return lambda: module.register_forward_pre_hook(hook)


def _check_columns(name, res, reference, min_effect=True):
    """Every column of ``res`` equals ``reference(column)`` (the hooks for that column)."""
    tol = _tol(name)
    clean = _probs(name, res.target_ids)
    np.testing.assert_allclose(res.clean_probs, clean, atol=tol)
    effect = 0.0
    for col in range(len(res.layers)):
        ref = _probs(name, res.target_ids, reference(col))
        np.testing.assert_allclose(
            res.ablated_probs[:, col],
            ref,
            atol=tol,
            err_msg=f"{name} column {res.column_labels[col]}",
        )
        effect = max(effect, float(np.abs(clean - ref).max()))
    if min_effect:
        assert effect > 100 * tol, f"{name}: the ablations change nothing; the check is vacuous"


# --- the family table ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_write_modules_are_resolved_per_block(name):
    adapter = adapter_for(_model(name))
    n = len(_blocks(name))
    assert len(adapter.attn_write_modules) == len(adapter.mlp_write_modules) == n
    expected_attn = {
        "gemma2": "post_attention_layernorm",
        "gemma3_text": "post_attention_layernorm",
    }.get(name, ATTENTION.get(_kind(name), "self_attn"))
    expected_mlp = {
        "gemma2": "post_feedforward_layernorm",
        "gemma3_text": "post_feedforward_layernorm",
    }.get(name, MLP.get(_kind(name), "mlp"))
    for i, block in enumerate(_blocks(name)):
        assert adapter.attn_write_modules[i] is block.get_submodule(expected_attn)
        assert adapter.mlp_write_modules[i] is block.get_submodule(expected_mlp)


def test_post_norm_opt_has_no_write_modules():
    model = tiny_model("opt", do_layer_norm_before=False)
    adapter = adapter_for(model)
    assert adapter.attn_write_modules == adapter.mlp_write_modules == ()
    for part in ("attn", "mlp", "head"):
        with pytest.raises(UnsupportedModelError, match="post-norm"):
            ablate(model, None, IDS, part=part)
    assert ablate(model, None, IDS, part="block").drop.shape == (len(IDS), 3)


# --- attention and MLP writes ----------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_attn_zero_equals_zeroing_the_attention_output(name):
    """Also Gemma-2/3, where the library hooks the post-norm and this test the attention."""
    res = ablate(_model(name), None, IDS, part="attn", batch_size=2)  # chunks of 2 blocks
    assert res.part == "attn" and res.heads is None
    assert res.layers == list(range(1, len(_blocks(name)) + 1))
    _check_columns(
        name, res, lambda col: [_zero_output(_sub(name, res.layers[col], ATTENTION, "self_attn"))]
    )


@pytest.mark.parametrize("name", NO_O_PROJ_BIAS)
def test_all_heads_zero_equals_attn_zero(name):
    """Without an output-projection bias, zeroing every head's input zeroes the write."""
    assert getattr(_sub(name, 1, O_PROJ, "self_attn.o_proj"), "bias", None) is None
    res = ablate(_model(name), None, IDS, part="attn", batch_size=3)
    _check_columns(name, res, lambda col: [_zero_o_proj_input(name, res.layers[col], slice(None))])


@pytest.mark.parametrize("name", ALL)
def test_mlp_zero_equals_replacing_the_mlp_by_zeros(name):
    res = ablate(_model(name), None, IDS, part="mlp", batch_size=2)
    assert res.part == "mlp"
    _check_columns(name, res, lambda col: [_replaced_mlp(name, res.layers[col])])


@pytest.mark.parametrize("name", ["llama", "gemma2", "gptj", "opt"])
@pytest.mark.parametrize("part", ["attn", "mlp"])
def test_write_groups_ablate_every_block_of_the_group(name, part):
    res = ablate(_model(name), None, IDS, part=part, layers=[(1, 2), 2])
    assert res.layers == [(1, 2), 2]
    assert res.column_labels == [f"L1\u20132.{part}", f"L2.{part}"]

    def hooks(block):
        return (
            _zero_output(_sub(name, block, ATTENTION, "self_attn"))
            if part == "attn"
            else _replaced_mlp(name, block)
        )

    _check_columns(name, res, lambda col: [hooks(b) for b in ((1, 2) if col == 0 else (2,))])


# --- heads -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in ALL if n not in NOT_HEAD_SPLIT])
def test_head_zero_equals_zeroing_its_slice(name):
    """Every (block, head) column, chunks of 3 mixing heads of different blocks; GPT-2's
    Conv1D, OPT and the parallel families included."""
    model = _model(name)
    n_heads = model.config.num_attention_heads
    res = ablate(model, None, IDS, part="head", batch_size=3)
    n = len(_blocks(name))
    assert res.part == "head"
    assert res.layers == [b for b in range(1, n + 1) for _ in range(n_heads)]
    assert res.heads == [h for _ in range(n) for h in range(n_heads)]
    assert res.drop.shape == (len(IDS), n * n_heads)
    _check_columns(
        name,
        res,
        lambda col: [_zero_o_proj_input(name, res.layers[col], _head_slice(name, res.heads[col]))],
    )
    # other chunkings give the same columns
    for size in (1, None):
        other = ablate(model, None, IDS, part="head", batch_size=size)
        np.testing.assert_allclose(other.drop, res.drop, atol=2 * _tol(name))


def test_head_columns_labels_and_lookup():
    model = _model("llama")
    res = ablate(model, None, IDS, part="head", layers=[3, 1], heads=[2, 0])
    assert res.layers == [3, 3, 1, 1] and res.heads == [2, 0, 2, 0]
    assert res.column_labels == ["L3.h2", "L3.h0", "L1.h2", "L1.h0"]
    assert res.column(1, 2) == 2 and res.column(3, head=0) == 1
    np.testing.assert_array_equal(res.drop_at(1, 0), res.drop[:, 3])
    with pytest.raises(InvalidRequestError, match="column\\(layer, head\\)"):
        res.column(1)
    with pytest.raises(KeyError):
        res.column(2, 0)
    with pytest.raises(KeyError):
        res.column(1, 1)
    single = ablate(model, None, IDS, part="head", layers=[3], heads=[2])
    np.testing.assert_allclose(single.drop[:, 0], res.drop_at(3, 2), atol=2 * _tol("llama"))
    assert ablate(model, None, IDS, part="head", heads=[]).drop.shape == (len(IDS), 0)


def test_block_part_is_the_default_and_keeps_its_labels():
    model = _model("llama")
    default = ablate(model, None, IDS, layers=[1, (1, 2), (1, 3), 4])
    explicit = ablate(model, None, IDS, layers=[1, (1, 2), (1, 3), 4], part="block")
    np.testing.assert_array_equal(default.drop, explicit.drop)  # the same passes
    assert default.part == "block" and default.heads is None
    assert default.column_labels == ["1", "1\u20132", "1+3", "4"]
    assert default.column((1, 2)) == 1
    with pytest.raises(InvalidRequestError, match="part='head'"):
        default.column(1, head=0)
    attn = ablate(model, None, IDS, part="attn", layers=[2])
    assert attn.column_labels == ["L2.attn"] and attn.column(2) == 0
    with pytest.raises(InvalidRequestError, match="plot_vs"):
        attn.plot_vs(None, position=0)


# --- errors ----------------------------------------------------------------------------------


def test_bad_parts_and_heads():
    model = _model("llama")
    assert ABLATION_PARTS == ("block", "attn", "mlp", "head")
    assert set(AblationPart.__args__) == set(ABLATION_PARTS)
    assert {"ABLATION_PARTS", "AblationPart"} <= set(ablation_module.__all__)
    with pytest.raises(InvalidRequestError, match="block, attn, mlp, head"):
        ablate(model, None, IDS, part="residual")
    with pytest.raises(InvalidRequestError, match="group"):
        ablate(model, None, IDS, part="head", layers=[(1, 2)])
    with pytest.raises(InvalidRequestError, match="group"):
        ablate(model, None, IDS, part="head", layers=[(1,)])
    with pytest.raises(InvalidRequestError, match="0 … 3"):
        ablate(model, None, IDS, part="head", heads=[4])
    with pytest.raises(InvalidRequestError, match="0 … 3"):
        ablate(model, None, IDS, part="head", heads=[-1])
    with pytest.raises(InvalidRequestError, match="heads must be"):
        ablate(model, None, IDS, part="head", heads=2)
    with pytest.raises(InvalidRequestError, match="head index"):
        ablate(model, None, IDS, part="head", heads=[True])
    with pytest.raises(InvalidRequestError, match="part='head'"):
        ablate(model, None, IDS, part="attn", heads=[0])
    with pytest.raises(InvalidRequestError, match="numbered 1"):
        ablate(model, None, IDS, part="mlp", layers=[5])


@pytest.mark.parametrize("name", NOT_HEAD_SPLIT)
def test_heads_of_normed_attention_are_refused(name):
    with pytest.raises(UnsupportedModelError, match="part='attn'") as err:
        ablate(_model(name), None, IDS, part="head")
    assert adapter_for(_model(name)).family.name in str(err.value)


def test_head_hook_finds_a_keyword_input():
    """The output projection may be called with its input as a keyword (``input`` / ``x``)."""
    x, new = torch.zeros(1, 2, 4), torch.ones(1, 2, 4)
    for key in ("input", "x", "hidden_states"):
        got, put = projection_input((), {key: x, "other": 1})
        assert got is x
        args, kwargs = put(new)
        assert args == () and kwargs[key] is new and kwargs["other"] == 1
    got, put = projection_input((x, 5), {})
    assert got is x and put(new) == ((new, 5), {})
    with pytest.raises(TypeError, match="output projection"):
        projection_input((), {"y": x})
