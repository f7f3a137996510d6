"""Causal validation: batched block ablation and the onset-vs-ablation check (tiny models)."""

from __future__ import annotations

import copy
import json
import math
from importlib import resources

import numpy as np
import pytest
import torch
import transformers

from iglens_viz import IGLens, InvalidRequestError
from iglens_viz.causal import (
    COLUMNS,
    AblationResult,
    ValidationResult,
    ablate,
    is_monotone,
    load_prompts,
    prompt_categories,
    spearman,
    validate_onset,
)
from iglens_viz.core.hooks import replace_block_output
from iglens_viz.core.trajectory import against_segments
from tests.support.tolerances import forward_tol, readout_size, readout_tol, sum_tol

IDS = [1, 5, 7, 9, 11, 5, 7, 9, 3]
# Mean ablation's reference set: prompts of IDS's length (the same "template", other tokens).
REFS = [[2, 5, 7, 9, 11, 5, 7, 9, 3], [1, 6, 7, 9, 11, 5, 7, 8, 3], [4, 5, 7, 10, 11, 6, 7, 9, 3]]
# The test models run in float64: ablation results are compared with independent forward
# passes that may use other kernels (another batch size), whose rounding has no tight a-priori
# bound in float32; in float64 it is far below anything an ablation bug would change.


def _tol(model):
    """|Δp| between two float64 forward passes of ``model`` (tolerances.forward_tol)."""
    return forward_tol(readout_size(model, torch.tensor(IDS)), len(_blocks(model)), torch.float64)


def _readout_tol(model):
    """|Δp| of IGLens's float32 readout against the model's own output (readout_tol)."""
    return readout_tol(readout_size(model, torch.tensor(IDS)), torch.float32)


def _llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=101,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        initializer_range=0.3,
    )  # large weights: drops of ~0.1
    return transformers.LlamaForCausalLM(config).eval().double()


def _gpt2():
    torch.manual_seed(1)
    config = transformers.GPT2Config(
        vocab_size=101,
        n_embd=32,
        n_layer=3,
        n_head=4,
        n_positions=64,
        initializer_range=0.3,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(config).eval().double()


@pytest.fixture(scope="module")
def llama():
    return _llama()


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def model(request):
    return _llama() if request.param == "llama" else _gpt2()


def _blocks(model):
    return model.model.layers if hasattr(model, "model") else model.transformer.h


@torch.no_grad()
def _probs(model, ids, targets=None):
    """The model's own softmax probabilities [T, V] (or of ``targets`` [T])."""
    p = torch.softmax(model(torch.tensor([ids]), use_cache=False).logits[0].double(), -1)
    if targets is None:
        return p
    return p[torch.arange(len(ids)), torch.as_tensor(targets)].numpy()


@torch.no_grad()
def _mean_update(model, layer, refs=REFS):
    """``[T, d]`` block ``layer``'s (1-based) update h_L − h_(L-1), averaged over the
    reference prompts position by position (one plain pass per reference)."""
    seen = []

    def hook(module, args, kwargs, output):
        h_in = args[0] if args else kwargs["hidden_states"]
        out = output if isinstance(output, torch.Tensor) else output[0]
        seen.append((out - h_in)[0])

    handle = _blocks(model)[layer - 1].register_forward_hook(hook, with_kwargs=True)
    try:
        for ref in refs:
            model(torch.tensor([ref]), use_cache=False)
    finally:
        handle.remove()
    return torch.stack(seen).mean(0)


@torch.no_grad()
def _single_pass_ablation(model, ids, targets, layer, mode):
    """Reference: one plain forward pass with one hook on block ``layer`` (1-based); mean
    mode replaces the update by the references' mean update at each position."""
    mean = _mean_update(model, layer) if mode == "mean" else None

    def hook(module, args, kwargs, output):
        h_in = args[0] if args else kwargs["hidden_states"]
        new = h_in if mean is None else h_in + mean
        return new if isinstance(output, torch.Tensor) else (new, *output[1:])

    handle = _blocks(model)[layer - 1].register_forward_hook(hook, with_kwargs=True)
    try:
        return _probs(model, ids, targets)
    finally:
        handle.remove()


@torch.no_grad()
def _without_blocks(model, ids, targets, layers):
    """Reference for zero mode: a copy of the model with the blocks deleted."""
    twin = copy.deepcopy(model)
    blocks = _blocks(twin)
    for layer in sorted(layers, reverse=True):
        del blocks[layer - 1]
    for attr in ("num_hidden_layers", "n_layer"):
        if hasattr(twin.config, attr):
            setattr(twin.config, attr, len(blocks))
    return _probs(twin, ids, targets)


# --- ablation --------------------------------------------------------------------------------


def test_clean_probs_are_the_models_own(model):
    res = ablate(model, None, IDS)
    p = _probs(model, IDS)
    assert isinstance(res, AblationResult)
    np.testing.assert_array_equal(res.target_ids, p.argmax(-1).numpy())
    np.testing.assert_allclose(res.clean_probs, p.max(-1).values.numpy(), atol=_tol(model))
    n = len(_blocks(model))
    assert res.layers == list(range(1, n + 1)) and res.n_blocks == n
    assert res.drop.shape == res.ablated_probs.shape == (len(IDS), n)
    np.testing.assert_array_equal(res.drop, res.clean_probs[:, None] - res.ablated_probs)
    # ablating nothing: no columns, clean probabilities unchanged
    empty = ablate(model, None, IDS, layers=[])
    assert empty.drop.shape == (len(IDS), 0)
    np.testing.assert_array_equal(empty.clean_probs, res.clean_probs)  # the same clean pass


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_batched_ablation_equals_separate_passes(model, mode):
    refs = REFS if mode == "mean" else None
    res = ablate(model, None, IDS, target="next", mode=mode, batch_size=2, references=refs)
    targets = np.where(res.target_ids < 0, 0, res.target_ids)
    clean = _probs(model, IDS, targets)
    tol = _tol(model)
    for layer in res.layers:
        ref = _single_pass_ablation(model, IDS, targets, layer, mode)
        col = res.column(layer)
        np.testing.assert_allclose(res.ablated_probs[:-1, col], ref[:-1], atol=tol)
        np.testing.assert_allclose(res.drop[:-1, col], clean[:-1] - ref[:-1], atol=2 * tol)
    assert np.isnan(res.drop[-1]).all() and res.target_ids[-1] == -1
    # the check above is not vacuous (a reference mean moves p less than a zero update)
    assert np.abs(res.drop[:-1]).max() > (1e-2 if mode == "zero" else 1e-3)
    # chunking does not change anything
    for size in (1, None):
        other = ablate(model, None, IDS, target="next", mode=mode, batch_size=size, references=refs)
        np.testing.assert_allclose(other.drop, res.drop, atol=2 * tol)  # other batch sizes


def test_zero_mode_equals_deleting_the_block(model):
    n = len(_blocks(model))
    res = ablate(model, None, IDS, target=7, layers=[1, n, (1, 2)])
    assert res.layers == [1, n, (1, 2)]
    targets = np.full(len(IDS), 7)
    for label, deleted in ((1, [1]), (n, [n]), ((1, 2), [1, 2])):
        ref = _without_blocks(model, IDS, targets, deleted)
        np.testing.assert_allclose(res.ablated_probs[:, res.column(label)], ref, atol=_tol(model))


def test_last_block_drop_equals_its_iglens_contribution(model):
    """Zero-ablating block n sets h_n := h_(n-1), so its drop is f(h_n) − f(h_(n-1))."""
    att = IGLens(model).attribute(IDS)
    res = ablate(model, None, IDS)
    # Two probabilities read out in float32 from the float64 states, against the model's own.
    tol = 2 * (_readout_tol(model) + _tol(model))
    np.testing.assert_allclose(res.drop[:, -1], att.contributions[:, -1], atol=tol)
    assert np.abs(att.contributions[:, -1]).max() > 1e-2


def test_mean_mode_differs_from_zero(llama):
    zero = ablate(llama, None, IDS, mode="zero")
    mean = ablate(llama, None, IDS, mode="mean", references=REFS)
    assert mean.n_references == len(REFS) and mean.mode == "mean"
    np.testing.assert_array_equal(zero.clean_probs, mean.clean_probs)  # the same clean pass
    assert np.abs(zero.drop - mean.drop).max() > 1e-3


def test_mean_mode_needs_references_of_the_prompts_length(llama):
    """The mean over the prompt's own positions is gone: mean mode without a reference set
    is refused, saying what to pass; references of another length are refused too."""
    with pytest.raises(InvalidRequestError, match="references="):
        ablate(llama, None, IDS, mode="mean")
    with pytest.raises(InvalidRequestError, match=r"token length \(9\).*#1: 4"):
        ablate(llama, None, IDS, mode="mean", references=[REFS[0], [1, 2, 3, 4]])
    with pytest.raises(InvalidRequestError, match="empty"):
        ablate(llama, None, IDS, mode="mean", references=[])
    with pytest.raises(InvalidRequestError, match="mode='mean'"):
        ablate(llama, None, IDS, references=REFS)  # zero mode takes no references


def test_targets_resolve_like_iglens(llama):
    att = IGLens(llama).attribute(IDS)
    res = ablate(llama, None, IDS)
    np.testing.assert_array_equal(res.target_ids, att.target_ids)
    np.testing.assert_allclose(res.clean_probs, att.final_probs, atol=_readout_tol(llama))
    seq = ablate(llama, None, IDS, target=list(range(len(IDS))))
    np.testing.assert_array_equal(seq.target_ids, np.arange(len(IDS)))
    nxt = ablate(llama, None, IDS, target="next")
    np.testing.assert_array_equal(nxt.target_ids[:-1], IDS[1:])
    with pytest.raises(ValueError, match="tokenizer"):
        ablate(llama, None, IDS, target="hello")
    with pytest.raises(ValueError, match="out of range"):
        ablate(llama, None, IDS, target=1000)


def test_bad_arguments(llama):
    with pytest.raises(ValueError, match="numbered 1"):
        ablate(llama, None, IDS, layers=[0])
    with pytest.raises(ValueError, match="numbered 1"):
        ablate(llama, None, IDS, layers=[5])
    with pytest.raises(ValueError, match="mode"):
        ablate(llama, None, IDS, mode="resample")
    with pytest.raises(ValueError, match="batch_size"):
        ablate(llama, None, IDS, batch_size=0)
    with pytest.raises(InvalidRequestError, match="layers must be"):
        ablate(llama, None, IDS, layers=3)
    with pytest.raises(InvalidRequestError, match="token id must be >= 0"):
        ablate(llama, None, IDS, target=-1)
    with pytest.raises(KeyError):
        ablate(llama, None, IDS, layers=[2]).column(3)


def test_replace_first_keeps_the_return_structure():
    old, new, extra = torch.zeros(1, 2, 3), torch.ones(1, 2, 3), torch.full((2,), 5.0)
    assert replace_block_output(old, new) is new
    out = replace_block_output((old, extra), new)
    assert isinstance(out, tuple) and out[0] is new and out[1] is extra
    out = replace_block_output([old, extra], new)
    assert isinstance(out, list) and out[0] is new and out[1] is extra
    with pytest.raises(TypeError):
        replace_block_output({"hidden_states": old}, new)


def test_tuple_returning_blocks_are_ablated_too(llama):
    """A transformers-4.x style block (tuple output) is ablated the same way."""
    expected = ablate(llama, None, IDS)
    for mode in ("zero", "mean"):
        refs = REFS if mode == "mean" else None
        expected_mode = (
            expected if mode == "zero" else ablate(llama, None, IDS, mode=mode, references=refs)
        )
        block, following = _blocks(llama)[1], _blocks(llama)[2]
        cls = type(block)

        class TupleBlock(cls):
            def forward(self, *args, **kwargs):
                return (super().forward(*args, **kwargs), None)

        def unwrap(module, args, kwargs):  # the next block gets the tensor back
            value = args[0] if args else kwargs["hidden_states"]
            assert isinstance(value, tuple)
            if args:
                return (value[0], *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": value[0]}

        block.__class__ = TupleBlock
        handle = following.register_forward_pre_hook(unwrap, with_kwargs=True)
        try:
            got = ablate(llama, None, IDS, mode=mode, references=refs)
        finally:
            handle.remove()
            block.__class__ = cls
        np.testing.assert_allclose(got.drop, expected_mode.drop, atol=2 * _tol(llama))


# --- validation ------------------------------------------------------------------------------


def test_spearman_hand_made():
    tol = sum_tol(torch.float64, 3 * 4)  # three float64 sums of ≤ 4 ranks (Pearson on ranks)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8, abs=tol)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(math.sqrt(0.9), abs=tol)
    assert spearman([3, 2, 1], [10, 20, 30]) == pytest.approx(-1.0, abs=tol)
    assert spearman([0.1, 5, 7], [1, 100, 1000]) == pytest.approx(1.0, abs=tol)  # ranks only
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert spearman([1, np.nan, 2, 3], [1, 5, 2, 3]) == pytest.approx(1.0, abs=tol)  # NaN dropped


def test_is_monotone_hand_made():
    assert is_monotone([0.5, 0.01, 0.3], 0.81)
    assert is_monotone([0.5, -0.01, 0.3], 0.79, 0.05)  # below 5% of 0.5
    assert not is_monotone([0.5, -0.1, 0.3], 0.7, 0.05)
    assert not is_monotone([-0.5, 0.1, -0.3], -0.7, 0.05)
    # the default, 60% of the largest move: a fall of 0.25 after 0.5 is not enough, 0.35 is
    assert is_monotone([0.5, -0.25, 0.3], 0.55)
    assert not is_monotone([0.5, -0.35, 0.3], 0.45)
    assert not is_monotone([-0.5, 0.35, -0.3], -0.45)
    assert is_monotone([-0.5, -0.1], -0.6)
    # Δp = 0 has no net direction: nothing goes "against" it (as in the views and the JS).
    assert is_monotone([0.2, -0.2], 0.0)
    assert is_monotone([0.0, 0.0], 0.0)


def test_is_monotone_is_the_views_definition():
    """One definition: monotone exactly when the views flag no segment (Δp = 0 included)."""
    rng = np.random.default_rng(3)
    c = rng.normal(size=(200, 6))
    c[:20, 3:] = -c[:20, :3]  # 20 rows whose contributions cancel: Δp = 0 exactly
    dp = c.sum(1)
    dp[:20] = 0.0
    expected = ~against_segments(c, dp).any(axis=1)
    np.testing.assert_array_equal(is_monotone(c, dp), expected)
    assert [is_monotone(row, d) for row, d in zip(c, dp)] == expected.tolist()
    assert expected[:20].all()


def test_validate_onset_table(llama):
    prompts = [[1, 5, 7, 9, 11], [3, 4, 3, 4, 3, 4], [8, 2, 6]]
    val = validate_onset(llama, None, prompts, progress=False)
    assert isinstance(val, ValidationResult)
    t = val.table
    assert list(t.columns) == list(COLUMNS)
    assert len(t) == sum(len(p) for p in prompts)
    assert t["prompt"].tolist() == [i for i, p in enumerate(prompts) for _ in p]
    assert t["position"].tolist() == [j for p in prompts for j in range(len(p))]
    assert val.contributions.shape == val.drops.shape == (len(t), 4)
    assert ((t["p_final"] >= 0) & (t["p_final"] <= 1)).all()
    assert t["onset"].between(1, 4).all()
    rho = t["spearman"].dropna()
    assert len(rho) > 0 and rho.between(-1, 1).all()
    assert t["hit"].dtype == bool and t["monotone"].dtype == bool
    assert (t["hit"] == (t["onset_drop"] > t["median_low_drop"])).all()
    # rows agree with a direct attribution and ablation of the same prompt
    att = IGLens(llama).attribute(prompts[1])
    abl = ablate(llama, None, prompts[1])
    rows = t[t["prompt"] == 1]
    # The same attribution, and ablations that may batch differently.
    np.testing.assert_array_equal(val.contributions[rows.index], att.contributions)
    tol = 2 * _tol(llama)
    np.testing.assert_allclose(val.drops[rows.index], abl.drop, atol=tol)
    np.testing.assert_array_equal(rows["onset"], att.onset)
    onset_cols = att.onset - 1
    np.testing.assert_allclose(rows["onset_drop"], abl.drop[np.arange(6), onset_cols], atol=tol)
    order = np.argsort(att.contributions, axis=1)[:, :2]  # lower half: 2 smallest of 4
    expect_low = np.median(np.take_along_axis(abl.drop, order, axis=1), axis=1)
    np.testing.assert_allclose(rows["median_low_drop"], expect_low, atol=tol)
    expect_rho = [spearman(c, d) for c, d in zip(att.contributions, abl.drop)]
    np.testing.assert_allclose(
        rows["spearman"], expect_rho, atol=sum_tol(torch.float64, 3 * 4)
    )  # as in the hand-made test

    summary = val.summary()
    assert list(summary.index) == ["all", "monotone", "non-monotone"]
    assert summary.loc["all", "n_tokens"] == len(t)
    assert summary.loc["monotone", "n_tokens"] + summary.loc["non-monotone", "n_tokens"] == len(t)
    mean_tol = sum_tol(torch.float64, len(t))  # means of ≤ len(t) values in [0, 1]
    assert summary.loc["all", "hit_rate"] == pytest.approx(t["hit"].mean(), abs=mean_tol)
    assert 0 <= summary.loc["all", "hit_rate"] <= 1
    chance = (val.drops > t["median_low_drop"].to_numpy()[:, None]).mean(axis=1).mean()
    assert summary.loc["all", "chance_hit_rate"] == pytest.approx(chance, abs=mean_tol)


def test_validate_onset_options(llama):
    prompts = [[1, 5, 7, 9, 11], [3, 4, 3, 4, 3, 4], [8, 2, 6]]
    nxt = validate_onset(llama, None, prompts, target="next", progress=False)
    assert len(nxt.table) == sum(len(p) - 1 for p in prompts)
    assert (nxt.table["target_id"] >= 0).all()
    strict = validate_onset(llama, None, prompts, min_prob=0.3, progress=False)
    assert (strict.table["p_final"] >= 0.3).all()
    assert 0 < len(strict.table) < sum(len(p) for p in prompts)
    seg = validate_onset(llama, None, prompts[:1], boundaries=[0, 2, 4], progress=False)
    assert seg.drops.shape == (5, 2) and set(seg.table["onset"]) <= {2, 4}
    abl = ablate(llama, None, prompts[0], layers=[(1, 2), (3, 4)])
    np.testing.assert_allclose(seg.drops, abl.drop, atol=2 * _tol(llama))
    # validate_onset has no reference set to pass on: its mean mode is refused by ablate
    with pytest.raises(InvalidRequestError, match="references="):
        validate_onset(llama, None, prompts[:1], mode="mean", progress=False)
    with pytest.raises(ValueError, match="two segments"):
        validate_onset(llama, None, prompts, boundaries=[0, 4], progress=False)


@pytest.mark.parametrize("mode", ["zero"])  # mean mode needs references validate_onset lacks
def test_validate_onset_sublayer_boundaries(llama, mode):
    """Regression: boundaries="sublayer" raised a bare TypeError (validate_onset derived the
    segment → block mapping itself). Each half block is ablated as its part, as ablate()
    called directly on the same parts measures it."""
    prompts = [[1, 5, 7, 9, 11], [3, 4, 3, 4, 3, 4]]
    val = validate_onset(llama, None, prompts, boundaries="sublayer", mode=mode, progress=False)
    n = 4
    assert val.boundaries == [x / 2 for x in range(2 * n + 1)]
    assert val.drops.shape == val.contributions.shape == (11, 2 * n)
    tol = 2 * _tol(llama)
    for index, prompt in enumerate(prompts):
        rows = val.table.index[val.table["prompt"] == index]
        att = IGLens(llama).attribute(prompt, boundaries="sublayer")
        np.testing.assert_array_equal(val.contributions[rows], att.contributions)
        np.testing.assert_array_equal(val.table.loc[rows, "onset"], att.onset)
        for first, part in enumerate(("attn", "mlp")):  # segments alternate attn, mlp
            abl = ablate(llama, None, prompt, part=part, mode=mode)
            np.testing.assert_allclose(val.drops[rows][:, first::2], abl.drop, atol=tol)
            np.testing.assert_allclose(val.table.loc[rows, "p_final"], abl.clean_probs, atol=tol)


def test_plots(llama):
    import matplotlib
    import matplotlib.figure
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")

    val = validate_onset(llama, None, [[1, 5, 7, 9]], progress=False)
    fig = val.plot()
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes[0].collections) >= 1
    att = IGLens(llama).attribute([1, 5, 7, 9])
    abl = ablate(llama, None, [1, 5, 7, 9])
    fig2 = abl.plot_vs(att, position=2)
    assert isinstance(fig2, matplotlib.figure.Figure) and len(fig2.axes[0].patches) >= 8
    coarse = IGLens(llama).attribute([1, 5, 7, 9], boundaries=[0, 2, 4])
    with pytest.raises(ValueError, match="no ablation column"):
        abl.plot_vs(coarse, position=0)
    plt.close("all")


def test_causal_plots_escape_tokens_and_leave_pyplot_alone(llama):
    """Regression: the ablation plot put raw token text into a mathtext title, and both causal
    plots went through pyplot (figures piling up in its global state)."""
    import dataclasses

    import matplotlib.pyplot as plt

    plt.close("all")
    att = IGLens(llama).attribute([1, 5, 7, 9])
    abl = ablate(llama, None, [1, 5, 7, 9])
    text = {**abl.token_text, int(abl.input_ids[2]): "$x^2$ \\frac{a}{b}"}
    tokens = [text[int(i)] for i in abl.input_ids]
    fig = dataclasses.replace(abl, token_text=text, tokens=tokens).plot_vs(att, position=2)
    fig.canvas.draw()  # mathtext would fail or typeset here
    title = fig.axes[0].get_title()
    assert r"\$x^2\$" in title and title.count("$") == title.count(r"\$")
    validate_onset(llama, None, [[1, 5, 7, 9]], progress=False).plot()
    assert plt.get_fignums() == []


# --- prompts ---------------------------------------------------------------------------------


def test_load_prompts():
    prompts = load_prompts()
    assert len(prompts) >= 36 and all(isinstance(p, str) and p.strip() for p in prompts)
    assert len(set(prompts)) == len(prompts)
    cats = prompt_categories()
    assert {"factual_recall", "agreement", "induction"} <= set(cats)
    assert sum(len(load_prompts(c)) for c in cats) == len(prompts)
    assert "The capital of France is" in load_prompts("factual_recall")
    with pytest.raises(ValueError, match="unknown prompt category"):
        load_prompts("arithmetic")
    # shipped inside the package directory (hatchling packages = ["iglens_viz"])
    path = resources.files("iglens_viz").joinpath("data").joinpath("prompts.json")
    assert json.loads(path.read_text("utf-8"))["categories"]
