"""Activation patching (``iglens_viz.causal.patch``), attribution patching and ablate's
``positions=`` / reference-set mean mode, against independent implementations written here.

The references are plain forward hooks on the model's own modules, one patched run per block
and batch size one, with the metric read from the model's own logits (or, for the direct
effect, from the model's own final norm and head, ``tiny_models.reference_readout_logits``).
Where the sub-layer writes enter the stream is this file's own map (the attention or MLP
module; Gemma-2/3: the norm after it), not the library's family table.

Every model runs in float64. The library's batched passes and the single-row references may
use other kernels, so values agree up to tolerances.forward_tol, a bound on |Δp| between two
forward passes (at the precision the model really rounds in, tolerances.forward_dtype). It
bounds a logit change by ``|Δp| ≤ ½ ‖δl‖∞``, so a logit moves by at most 2·forward_tol and
a logit difference by 4·forward_tol; that is :func:`_tol`.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest
import torch

from iglens_viz import InvalidRequestError
from iglens_viz.causal import PatchResult, ablate, attribution_patch, patch
from iglens_viz.causal.positions import resolve_positions
from tests.support.tiny_models import FAMILY_NAMES, reference_readout_logits, tiny_model
from tests.support.tolerances import eps, forward_dtype, forward_tol, readout_size

CLEAN = [1, 5, 7, 9, 11, 5, 7, 9, 3]
CORRUPT = [1, 5, 8, 9, 11, 5, 7, 9, 3]  # one token differs (position 2): same template
TARGET, CONTRAST = 4, 6
FAST = "llama"  # the family kept in the fast suite; the all-family sweep is marked slow

# The test's own map of where each family's modules are.
BLOCKS = {
    "gpt2": "transformer.h",
    "gpt_neo": "transformer.h",
    "gptj": "transformer.h",
    "gpt_neox": "gpt_neox.layers",
    "opt": "model.decoder.layers",
}  # else model.layers
ATTN_WRITE = {
    "gpt2": "attn",
    "gpt_neo": "attn",
    "gptj": "attn",
    "gpt_neox": "attention",
    "opt": "self_attn",
    "gemma2": "post_attention_layernorm",  # the write as it enters the stream
    "gemma3_text": "post_attention_layernorm",
}  # else self_attn
MLP_WRITE = {
    "opt": "fc2",  # OPT's MLP is fc1 → activation → fc2 inside the block
    "gemma2": "post_feedforward_layernorm",
    "gemma3_text": "post_feedforward_layernorm",
}  # else mlp


@functools.cache
def _model(name: str):
    return tiny_model(name, dtype=torch.float64)


def _blocks(name: str):
    return _model(name).get_submodule(BLOCKS.get(name, "model.layers"))


def _module(name: str, part: str, block: int):
    """The module whose output is block ``block``'s (0-based) update source for ``part``."""
    if part == "block":
        return _blocks(name)[block]
    table, default = (ATTN_WRITE, "self_attn") if part == "attn" else (MLP_WRITE, "mlp")
    return _blocks(name)[block].get_submodule(table.get(name, default))


def _first(output):
    return output if isinstance(output, torch.Tensor) else output[0]


def _put(output, new):
    return new if isinstance(output, torch.Tensor) else (new, *output[1:])


def _input(args, kwargs):
    return args[0] if args else kwargs["hidden_states"]


@functools.cache
def _tol(name: str) -> float:
    """|Δ metric| (logit units) between the library's and a reference's forward passes."""
    model = _model(name)
    size = readout_size(model, torch.tensor(CLEAN))
    return 4 * forward_tol(size, len(_blocks(name)), forward_dtype(model))


def _metric(logits: torch.Tensor, metric: str = "logit_diff") -> float:
    logits = logits.double()
    if metric == "prob":
        return float(torch.softmax(logits, -1)[TARGET])
    return float(logits[TARGET] - logits[CONTRAST])


@torch.no_grad()
def _run(name: str, ids, hooks=()) -> torch.Tensor:
    """The model's own last-position logits of ``ids`` with ``hooks`` [(module, fn)]."""
    handles = [m.register_forward_hook(fn, with_kwargs=True) for m, fn in hooks]
    try:
        return _model(name)(torch.tensor([ids]), use_cache=False).logits[0, -1]
    finally:
        for h in handles:
            h.remove()


@torch.no_grad()
def _writes(name: str, ids, part: str) -> torch.Tensor:
    """``[n, T, d]`` each block's update (output − input) or each sub-layer's write."""
    n = len(_blocks(name))
    seen: dict[int, torch.Tensor] = {}

    def keep(i):
        def hook(module, args, kwargs, output):
            out = _first(output)
            value = out - _input(args, kwargs) if part == "block" else out
            seen[i] = value.reshape(len(ids), -1)  # OPT's fc2 sees [T, d]

        return hook

    _run(name, ids, [(_module(name, part, i), keep(i)) for i in range(n)])
    return torch.stack([seen[i] for i in range(n)])


def _patched(name, base, part, block, donor_write, positions, metric="logit_diff") -> float:
    """M of ``base`` with block ``block``'s (0-based) part replaced by ``donor_write`` at
    ``positions``: one plain patched run."""

    def hook(module, args, kwargs, output):
        out = _first(output)
        flat = out.reshape(len(base), -1)
        new = flat.clone()
        if part == "block":
            new[positions] = _input(args, kwargs).reshape(len(base), -1)[positions]
            new[positions] += donor_write[positions]
        else:
            new[positions] = donor_write[positions]
        return _put(output, new.reshape(out.shape))

    return _metric(_run(name, base, [(_module(name, part, block), hook)]), metric)


def _reference(name, part="block", positions="all", direction="noising", metric="logit_diff"):
    """(M_clean, M_corrupt, M_patched per block) from plain runs, one block at a time."""
    base, donor = (CLEAN, CORRUPT) if direction == "noising" else (CORRUPT, CLEAN)
    where = resolve_positions(positions, len(CLEAN))
    donor_writes = _writes(name, donor, part)
    patched = [
        _patched(name, base, part, b, donor_writes[b], where, metric)
        for b in range(len(_blocks(name)))
    ]
    return _metric(_run(name, CLEAN), metric), _metric(_run(name, CORRUPT), metric), patched


def _effects(m_clean, m_corrupt, patched, direction):
    patched = np.asarray(patched)
    raw = m_clean - patched if direction == "noising" else patched - m_corrupt
    return raw / (m_clean - m_corrupt)


def _check(res: PatchResult, ref, direction: str, tol: float) -> None:
    m_clean, m_corrupt, patched = ref
    assert res.clean_metric == pytest.approx(m_clean, abs=tol)
    assert res.corrupt_metric == pytest.approx(m_corrupt, abs=tol)
    np.testing.assert_allclose(res.patched, patched, atol=tol)
    # the effects move by (two metric errors) / |M_clean − M_corrupt|
    denom = abs(m_clean - m_corrupt)
    assert denom > 100 * tol  # the normalisation is well defined here
    np.testing.assert_allclose(
        res.effects, _effects(m_clean, m_corrupt, patched, direction), atol=3 * tol / denom
    )


# --- activation patching against one patched run per block ----------------------------------


def _sweep(name):
    return pytest.param(name, marks=[] if name == FAST else [pytest.mark.slow])


@pytest.mark.parametrize("name", [_sweep(n) for n in FAMILY_NAMES])
@pytest.mark.parametrize("direction", ["noising", "denoising"])
@pytest.mark.parametrize("part", ["block", "attn", "mlp"])
def test_total_effect_equals_one_patched_run_per_block(name, direction, part):
    positions = "all" if direction == "noising" else "target"
    res = patch(
        _model(name),
        None,
        CLEAN,
        CORRUPT,
        target=TARGET,
        contrast=CONTRAST,
        parts=part,
        positions=positions,
        direction=direction,
    )
    n = len(_blocks(name))
    assert res.layers == list(range(1, n + 1)) and res.n_blocks == n
    assert res.labels == [str(b) if part == "block" else f"L{b}.{part}" for b in res.layers]
    assert (res.parts, res.direction, res.effect, res.method) == (
        part,
        direction,
        "total",
        "activation",
    )
    ref = _reference(name, part, positions, direction)
    _check(res, ref, direction, _tol(name))
    assert np.abs(res.raw_effects).max() > 100 * _tol(name)  # not vacuous


def _last_state(name, ids) -> torch.Tensor:
    """``[d]`` h_n (the last block's output, before the final norm) at the last position."""
    kept = {}

    def keep(module, args, kwargs, output):
        kept["h"] = _first(output)[0, -1]

    _run(name, ids, [(_blocks(name)[-1], keep)])
    return kept["h"]


@pytest.mark.parametrize("name", [_sweep(n) for n in FAMILY_NAMES])
def test_direct_effect_is_a_readout_of_the_patched_last_state(name):
    """Later blocks frozen: f(h_n − Δ_L + Δ′_L) at the last position, read here with the
    model's own final norm and head."""
    model = _model(name)
    parts = ["block", "attn", "mlp"] if name == FAST else ["block"]
    for part in parts:
        for direction in ("noising", "denoising"):
            base, donor = (CLEAN, CORRUPT) if direction == "noising" else (CORRUPT, CLEAN)
            res = patch(
                model,
                None,
                CLEAN,
                CORRUPT,
                target=TARGET,
                contrast=CONTRAST,
                parts=part,
                effect="direct",
                direction=direction,
            )
            h_n = _last_state(name, base)
            delta, delta_donor = _writes(name, base, part), _writes(name, donor, part)
            with torch.no_grad():
                states = h_n - delta[:, -1] + delta_donor[:, -1]  # [n, d]
                patched = [_metric(row) for row in reference_readout_logits(model, states)]
            ref = (_metric(_run(name, CLEAN)), _metric(_run(name, CORRUPT)), patched)
            _check(res, ref, direction, _tol(name))


@pytest.mark.parametrize("name", [FAST, pytest.param("gemma2", marks=pytest.mark.slow)])
def test_last_block_direct_and_total_effects_agree(name):
    """Nothing follows the last block: its direct and total effects are one quantity."""
    for direction in ("noising", "denoising"):
        for positions in ("target", "all"):
            kw = dict(target=TARGET, contrast=CONTRAST, direction=direction, positions=positions)
            total = patch(_model(name), None, CLEAN, CORRUPT, **kw)
            direct = patch(_model(name), None, CLEAN, CORRUPT, effect="direct", **kw)
            assert total.patched[-1] == pytest.approx(direct.patched[-1], abs=_tol(name))
            assert abs(direct.raw_effects[-1]) > 100 * _tol(name)


def test_probability_metric():
    res = patch(_model(FAST), None, CLEAN, CORRUPT, target=TARGET, metric="prob", positions="all")
    assert res.contrast_id is None and res.metric == "prob"
    ref = _reference(FAST, "block", "all", "noising", metric="prob")
    tol = _tol(FAST) / 4  # forward_tol bounds |Δp| itself
    m_clean, m_corrupt, patched = ref
    np.testing.assert_allclose(res.patched, patched, atol=tol)
    assert res.clean_metric == pytest.approx(m_clean, abs=tol)
    np.testing.assert_allclose(
        res.effects,
        _effects(m_clean, m_corrupt, patched, "noising"),
        atol=3 * tol / abs(m_clean - m_corrupt),
    )


# --- the residual state (resid-post patching) -----------------------------------------------


@torch.no_grad()
def _states(name: str, ids) -> torch.Tensor:
    """``[n, T, d]`` each block's output h_L, kept by a plain forward hook."""
    n = len(_blocks(name))
    seen: dict[int, torch.Tensor] = {}

    def keep(i):
        def hook(module, args, kwargs, output):
            seen[i] = _first(output)[0].clone()

        return hook

    _run(name, ids, [(_blocks(name)[i], keep(i)) for i in range(n)])
    return torch.stack([seen[i] for i in range(n)])


def _state_reference(name, positions, direction):
    """(M_clean, M_corrupt, M_patched per block): the base run with block L's output
    replaced by the donor's h_L at the positions, one plain run per block."""
    base, donor = (CLEAN, CORRUPT) if direction == "noising" else (CORRUPT, CLEAN)
    where = resolve_positions(positions, len(CLEAN))
    donor_states = _states(name, donor)
    patched = []
    for b in range(len(_blocks(name))):

        def hook(module, args, kwargs, output, b=b):
            new = _first(output).clone()
            new[0, where] = donor_states[b][where]
            return _put(output, new)

        patched.append(_metric(_run(name, base, [(_blocks(name)[b], hook)])))
    return _metric(_run(name, CLEAN)), _metric(_run(name, CORRUPT)), patched


@pytest.mark.parametrize("name", [_sweep(n) for n in FAMILY_NAMES])
def test_state_patching_equals_one_patched_run_per_block(name):
    """parts='state': h_L itself replaced by the other run's h_L, against a plain hook."""
    model = _model(name)
    for direction, positions in (("denoising", "target"), ("noising", "all_but_first")):
        res = patch(
            model,
            None,
            CLEAN,
            CORRUPT,
            target=TARGET,
            contrast=CONTRAST,
            parts="state",
            positions=positions,
            direction=direction,
        )
        n = len(_blocks(name))
        assert res.labels == [f"h{b}" for b in range(1, n + 1)] and res.parts == "state"
        ref = _state_reference(name, positions, direction)
        _check(res, ref, direction, _tol(name))
        assert np.abs(res.raw_effects).max() > 100 * _tol(name)  # not vacuous
        if positions == "target":
            # the last block's state at the last position is h_n there: M is the donor's,
            # the effect 1 (the same captured vector, read out in a batch of another size:
            # a BLAS may round that matmul apart by a readout's rounding, e.g. OPT's
            # projection on an AMD EPYC)
            tol = _tol(name)
            assert abs(res.patched[-1] - res.clean_metric) <= tol
            assert abs(res.effects[-1] - 1.0) <= tol / abs(res.clean_metric - res.corrupt_metric)


def test_state_patching_all_positions_and_equal_prompts():
    model = _model(FAST)
    kw = dict(target=TARGET, contrast=CONTRAST, parts="state")
    # every position replaced: the run is the donor's from block L on, at every block
    every = patch(model, None, CLEAN, CORRUPT, positions="all", **kw)
    np.testing.assert_allclose(every.effects, 1.0, atol=3 * _tol(FAST) / abs(every.raw_effects[0]))
    with pytest.warns(RuntimeWarning, match="undefined"):
        same = patch(model, None, CLEAN, CLEAN, positions="all", **kw)
    np.testing.assert_allclose(same.raw_effects, 0.0, atol=_tol(FAST))
    for bad in (dict(effect="direct"), dict(method="attribution")):
        with pytest.raises(InvalidRequestError, match="parts='state'"):
            patch(model, None, CLEAN, CORRUPT, **kw, **bad)


# --- heads -----------------------------------------------------------------------------------

O_PROJ = {
    "gpt2": "attn.c_proj",
    "gpt_neo": "attn.attention.out_proj",
    "gptj": "attn.out_proj",
    "gpt_neox": "attention.dense",
    "opt": "self_attn.out_proj",
    "phi": "self_attn.dense",
}  # else self_attn.o_proj


def _o_proj(name, block):
    return _blocks(name)[block].get_submodule(O_PROJ.get(name, "self_attn.o_proj"))


@torch.no_grad()
def _head_inputs(name, ids):
    """``[n, T, H·d_head]`` each output projection's input (the concatenated head outputs)."""
    seen = {}
    n = len(_blocks(name))
    handles = [
        _o_proj(name, i).register_forward_pre_hook(
            lambda m, a, i=i: seen.__setitem__(i, a[0].reshape(len(ids), -1))
        )
        for i in range(n)
    ]
    try:
        _run(name, ids)
    finally:
        for h in handles:
            h.remove()
    return torch.stack([seen[i] for i in range(n)])


@pytest.mark.parametrize(
    "name", [FAST, "gpt2", "opt", pytest.param("gptj", marks=pytest.mark.slow)]
)
def test_head_patching_replaces_one_heads_slice(name):
    """parts='head': every (block, head), against a pre-hook here that swaps the head's
    slice of the output projection's input (total), and the readout of
    h_n + W_o[:, head] (z′ − z) at the last position (direct)."""
    model = _model(name)
    n_heads = model.config.num_attention_heads
    kw = dict(target=TARGET, contrast=CONTRAST, parts="head")
    total = patch(model, None, CLEAN, CORRUPT, positions="all_but_first", **kw)
    direct = patch(model, None, CLEAN, CORRUPT, effect="direct", **kw)
    n = len(_blocks(name))
    assert total.heads == [h for _ in range(n) for h in range(n_heads)]
    assert total.labels[:2] == ["L1.h0", "L1.h1"] and total.layers[-1] == n
    z, z_donor = _head_inputs(name, CLEAN), _head_inputs(name, CORRUPT)
    width = z.shape[-1] // n_heads
    where = resolve_positions("all_but_first", len(CLEAN))
    h_n = _last_state(name, CLEAN)
    patched, patched_direct = [], []
    for block, head in zip(total.layers, total.heads):
        cols = slice(head * width, (head + 1) * width)
        donor = z_donor[block - 1]

        def swap(module, args, donor=donor, cols=cols):
            x = args[0].reshape(len(CLEAN), -1).clone()
            x[where, cols] = donor[where, cols]
            return (x.reshape(args[0].shape), *args[1:])

        proj = _o_proj(name, block - 1)
        handle = proj.register_forward_pre_hook(swap)
        try:
            patched.append(_metric(_run(name, CLEAN)))
        finally:
            handle.remove()
        w = proj.weight[:, cols].T if isinstance(proj, torch.nn.Linear) else proj.weight[cols, :]
        with torch.no_grad():
            state = h_n + (donor[-1, cols] - z[block - 1][-1, cols]) @ w
            patched_direct.append(_metric(reference_readout_logits(model, state[None])[0]))
    ends = (_metric(_run(name, CLEAN)), _metric(_run(name, CORRUPT)))
    _check(total, (*ends, patched), "noising", _tol(name))
    _check(direct, (*ends, patched_direct), "noising", _tol(name))
    assert np.abs(total.raw_effects).max() > 100 * _tol(name)
    lin = attribution_patch(model, None, CLEAN, CORRUPT, positions="target", **kw)
    block = attribution_patch(
        model,
        None,
        CLEAN,
        CORRUPT,
        positions="target",
        target=TARGET,
        contrast=CONTRAST,
        parts="attn",
    )
    # the linear estimate is linear in the write: the heads' changes add up to the
    # attention's (two gradient passes of one computation: the forward tolerance apart)
    by_block = (lin.patched - lin.clean_metric).reshape(n, n_heads).sum(1)
    np.testing.assert_allclose(by_block, block.patched - block.clean_metric, atol=_tol(name))


def test_head_patching_refused_where_heads_do_not_split():
    with pytest.raises(TypeError, match="part='head' is not available"):
        patch(
            _model("gemma2"), None, CLEAN, CORRUPT, target=TARGET, contrast=CONTRAST, parts="head"
        )


# --- positions -------------------------------------------------------------------------------


def test_position_masks_change_exactly_the_positions():
    model = _model(FAST)
    T = len(CLEAN)
    kw = dict(target=TARGET, contrast=CONTRAST, direction="denoising")
    for spec, expected in (
        ("target", [T - 1]),
        ("all", list(range(T))),
        ("all_but_first", list(range(1, T))),
        ([2, -1], [2, T - 1]),
    ):
        res = patch(model, None, CLEAN, CORRUPT, positions=spec, **kw)
        assert res.positions == expected
        # the same positions named as a list: the same passes, the same numbers
        again = patch(model, None, CLEAN, CORRUPT, positions=expected, **kw)
        np.testing.assert_array_equal(res.patched, again.patched)
    # a list of positions against one patched run per block at exactly those positions
    res = patch(model, None, CLEAN, CORRUPT, positions=[2, 5], **kw)
    _check(res, _reference(FAST, "block", [2, 5], "denoising"), "denoising", _tol(FAST))
    # the prompts agree before position 2, so their updates do too (causal attention):
    # patching positions 0 and 1 changes nothing (up to the rounding of another batch shape)
    same = patch(model, None, CLEAN, CORRUPT, positions=[0, 1], **kw)
    np.testing.assert_allclose(same.raw_effects, 0.0, atol=_tol(FAST))
    # a patch that leaves out the last position has no direct effect
    direct = patch(model, None, CLEAN, CORRUPT, positions=[2, 5], effect="direct", **kw)
    np.testing.assert_array_equal(direct.raw_effects, 0.0)
    total = patch(model, None, CLEAN, CORRUPT, positions=[2], **kw)
    assert total.raw_effects[-1] == pytest.approx(0.0, abs=_tol(FAST))  # nothing after block n
    assert np.abs(total.raw_effects[:-1]).max() > 100 * _tol(FAST)  # earlier blocks carry it


def test_resolve_positions_errors():
    assert resolve_positions([3, 1, 3], 5) == [1, 3]
    for bad, match in (
        ([5], "outside the prompt"),
        ([], "empty"),
        ("first", "unknown positions"),
        ([1.5], "integer"),
        (3, "list of 0-based"),
    ):
        with pytest.raises(InvalidRequestError, match=match):
            resolve_positions(bad, 5)
    with pytest.raises(InvalidRequestError, match="one-token"):
        resolve_positions("all_but_first", 1)


# --- normalisation ---------------------------------------------------------------------------


def test_normalisation_is_the_stated_formula():
    model = _model(FAST)
    kw = dict(target=TARGET, contrast=CONTRAST, positions="all")
    noise = patch(model, None, CLEAN, CORRUPT, direction="noising", **kw)
    denoise = patch(model, None, CLEAN, CORRUPT, direction="denoising", **kw)
    for res in (noise, denoise):  # the same arithmetic: exact
        denom = res.clean_metric - res.corrupt_metric
        np.testing.assert_array_equal(res.effects, res.raw_effects / denom)
        assert res.normalized and not res.warnings
    np.testing.assert_array_equal(noise.raw_effects, noise.clean_metric - noise.patched)
    np.testing.assert_array_equal(denoise.raw_effects, denoise.patched - denoise.corrupt_metric)
    assert noise.clean_metric == denoise.clean_metric  # the same capture pass
    assert noise.argmax == noise.layers[int(np.argmax(noise.effects))]
    frame = noise.to_frame()
    assert list(frame.columns) == ["label", "layer", "effect", "raw_effect", "patched"]
    np.testing.assert_array_equal(frame["effect"], noise.effects)


def test_clean_equal_to_corrupt_gives_zero_and_flags_the_normalisation():
    model = _model(FAST)
    with pytest.warns(RuntimeWarning, match="undefined"):
        res = patch(model, None, CLEAN, CLEAN, target=TARGET, contrast=CONTRAST, positions="all")
    assert not res.normalized and res.warnings and "undefined" in res.warnings[0]
    assert np.isnan(res.effects).all() and res.argmax is None
    np.testing.assert_allclose(res.raw_effects, 0.0, atol=_tol(FAST))
    assert res.clean_metric == pytest.approx(res.corrupt_metric, abs=_tol(FAST))
    with pytest.warns(RuntimeWarning, match="undefined"):
        lin = attribution_patch(model, None, CLEAN, CLEAN, target=TARGET, contrast=CONTRAST)
    np.testing.assert_allclose(lin.raw_effects, 0.0, atol=_tol(FAST))  # Δ′ − Δ ≈ 0


# --- attribution patching --------------------------------------------------------------------


def _autograd_estimate(name, part, direction, positions, effect):
    """M_run + Σ_t ∇_{stream after the part}[t] M · (Δ′ − Δ)[t], by autograd on the
    model's own logits (retain_grad on each module's output)."""
    model = _model(name)
    base, donor = (CLEAN, CORRUPT) if direction == "noising" else (CORRUPT, CLEAN)
    where = resolve_positions(positions, len(CLEAN))
    n = len(_blocks(name))
    outs: dict[int, torch.Tensor] = {}

    def keep(i):
        def hook(module, args, kwargs, output):
            out = _first(output)
            out.retain_grad()
            outs[i] = out

        return hook

    handles = [
        _module(name, part, i).register_forward_hook(keep(i), with_kwargs=True) for i in range(n)
    ]
    last = {}

    def keep_last(module, args, kwargs, output):
        out = _first(output)
        out.retain_grad()
        last["h"] = out

    handles.append(_blocks(name)[-1].register_forward_hook(keep_last, with_kwargs=True))
    try:
        logits = model(torch.tensor([base]), use_cache=False).logits[0, -1].double()
        m = logits[TARGET] - logits[CONTRAST]
        model.zero_grad()
        m.backward()
    finally:
        for h in handles:
            h.remove()
    diff = _writes(name, donor, part) - _writes(name, base, part)  # [n, T, d]
    estimate, scale = [], []
    for i in range(n):
        if effect == "direct":
            g = torch.zeros_like(diff[i])
            g[-1] = last["h"].grad.reshape(len(base), -1)[-1]
        else:
            g = outs[i].grad.reshape(len(base), -1)
        terms = (g[where] * diff[i][where]).detach()
        estimate.append(float(m.detach()) + float(terms.sum()))
        scale.append(float(terms.abs().sum()))
    return float(m.detach()), np.asarray(estimate), np.asarray(scale)


@pytest.mark.parametrize(
    "name",
    [FAST, "gpt2", *[pytest.param(n, marks=pytest.mark.slow) for n in ("gemma2", "opt", "gptj")]],
)
def test_attribution_patching_is_gradient_times_difference(name):
    for part in ("block", "attn", "mlp"):
        for direction, positions, effect in (
            ("noising", "all", "total"),
            ("denoising", "all_but_first", "total"),
            ("noising", "target", "direct"),
        ):
            res = attribution_patch(
                _model(name),
                None,
                CLEAN,
                CORRUPT,
                target=TARGET,
                contrast=CONTRAST,
                parts=part,
                positions=positions,
                direction=direction,
                effect=effect,
            )
            assert res.method == "attribution"
            m_run, estimate, scale = _autograd_estimate(name, part, direction, positions, effect)
            # M_run: two forward passes; the linear term: gradients through the same
            # computation with each term's relative rounding ≤ depth·√d·eps of the
            # precision the model rounds in (Higham's √n rule for the chained products).
            d = _model(name).config.hidden_size if name != "gpt2" else 32
            depth = len(_blocks(name)) + 2
            lin_tol = 4 * depth * math.sqrt(d) * eps(forward_dtype(_model(name))) * scale
            np.testing.assert_allclose(res.patched, estimate, atol=_tol(name) + lin_tol.max())
            assert np.abs(estimate - m_run).max() > 100 * (_tol(name) + lin_tol.max())
            denom = res.clean_metric - res.corrupt_metric
            np.testing.assert_array_equal(res.effects, res.raw_effects / denom)


# --- several pairs, errors -------------------------------------------------------------------


def test_pairs_of_different_lengths_share_passes():
    model = _model(FAST)
    short_clean, short_corrupt = CLEAN[:6], CORRUPT[:6]
    both = patch(
        model,
        None,
        [CLEAN, short_clean],
        [CORRUPT, short_corrupt],
        target=[TARGET, CONTRAST],
        contrast=[CONTRAST, TARGET],
        positions="all",
        memory_budget=1,  # one row per pass: chunking reaches across the pairs
    )
    assert isinstance(both, list) and len(both) == 2
    padded = patch(
        model,
        None,
        [CLEAN, short_clean],
        [CORRUPT, short_corrupt],
        target=[TARGET, CONTRAST],
        contrast=[CONTRAST, TARGET],
        positions="all",
    )  # every row in one right-padded pass
    alone = [
        patch(model, None, CLEAN, CORRUPT, target=TARGET, contrast=CONTRAST, positions="all"),
        patch(
            model,
            None,
            short_clean,
            short_corrupt,
            target=CONTRAST,
            contrast=TARGET,
            positions="all",
        ),
    ]
    for a, b, c in zip(both, padded, alone):
        np.testing.assert_allclose(a.patched, c.patched, atol=_tol(FAST))
        np.testing.assert_allclose(b.patched, c.patched, atol=_tol(FAST))
        assert a.positions == c.positions
    assert both[1].target_id == CONTRAST and len(both[1].clean_ids) == 6


def test_bad_arguments():
    model = _model(FAST)
    with pytest.raises(InvalidRequestError, match="clean one has 9 tokens, the corrupt one 8"):
        patch(model, None, CLEAN, CORRUPT[:8], target=TARGET, contrast=CONTRAST)
    with pytest.raises(InvalidRequestError, match="of pair 1"):
        patch(model, None, [CLEAN, CLEAN], [CORRUPT, CORRUPT[:3]], target=TARGET, contrast=CONTRAST)
    with pytest.raises(InvalidRequestError, match="needs a contrast"):
        patch(model, None, CLEAN, CORRUPT, target=TARGET)
    with pytest.raises(InvalidRequestError, match="target itself"):
        patch(model, None, CLEAN, CORRUPT, target=TARGET, contrast=TARGET)
    with pytest.raises(InvalidRequestError, match="direction"):
        patch(model, None, CLEAN, CORRUPT, target=TARGET, contrast=CONTRAST, direction="up")
    with pytest.raises(InvalidRequestError, match="effect"):
        patch(model, None, CLEAN, CORRUPT, target=TARGET, contrast=CONTRAST, effect="indirect")
    with pytest.raises(InvalidRequestError, match="out of range"):
        patch(model, None, CLEAN, CORRUPT, target=1000, contrast=CONTRAST)
    with pytest.raises(InvalidRequestError, match="one token"):
        patch(model, None, CLEAN, CORRUPT, target=[TARGET], contrast=CONTRAST)
    with pytest.raises(InvalidRequestError, match="2 tokens for 1 pairs"):
        patch(model, None, [CLEAN], [CORRUPT], target=[1, 2], contrast=CONTRAST)
    with pytest.raises(InvalidRequestError, match="both"):
        patch(model, None, [CLEAN], CORRUPT, target=TARGET, contrast=CONTRAST)


# --- ablate: positions= and the reference-set mean -------------------------------------------

REFS = [[2, 5, 7, 9, 11, 5, 7, 9, 3], [1, 6, 7, 9, 11, 5, 7, 8, 3], [4, 5, 7, 10, 11, 6, 7, 9, 3]]


def _ablation_reference(name, part, block, positions, mean=None):
    """The model's own target probabilities [T] with block ``block``'s part zeroed (block:
    its update skipped) or replaced by ``mean [T, d]`` at ``positions``."""

    def hook(module, args, kwargs, output):
        out = _first(output)
        flat = out.reshape(len(CLEAN), -1)
        new = flat.clone()
        if part == "block":
            new[positions] = _input(args, kwargs).reshape(len(CLEAN), -1)[positions]
            if mean is not None:
                new[positions] += mean[positions]
        else:
            new[positions] = 0.0 if mean is None else mean[positions]
        return _put(output, new.reshape(out.shape))

    handle = _module(name, part, block).register_forward_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            logits = _model(name)(torch.tensor([CLEAN]), use_cache=False).logits[0].double()
    finally:
        handle.remove()
    return torch.softmax(logits, -1)[:, TARGET].numpy()


@pytest.mark.parametrize("name", [FAST, "gpt2", pytest.param("opt", marks=pytest.mark.slow)])
@pytest.mark.parametrize("part", ["block", "attn", "mlp"])
def test_ablate_positions_and_reference_mean(name, part):
    model = _model(name)
    T = len(CLEAN)
    tol = _tol(name) / 4  # probabilities: forward_tol itself
    everywhere = ablate(model, None, CLEAN, target=TARGET, part=part)
    np.testing.assert_array_equal(
        ablate(model, None, CLEAN, target=TARGET, part=part, positions="all").drop,
        everywhere.drop,
    )  # "all" is the default, the same passes
    assert everywhere.positions == list(range(T))
    means = _writes(name, REFS[0], part) * 0
    for ref in REFS:
        means = means + _writes(name, ref, part)
    means = means / len(REFS)
    for spec in ("target", "all_but_first", [3, 6]):
        where = resolve_positions(spec, T)
        zero = ablate(model, None, CLEAN, target=TARGET, part=part, positions=spec)
        mean = ablate(
            model,
            None,
            CLEAN,
            target=TARGET,
            part=part,
            positions=spec,
            mode="mean",
            references=REFS,
        )
        assert zero.positions == mean.positions == where and mean.n_references == len(REFS)
        for col, block in enumerate(zero.layers):
            ref_zero = _ablation_reference(name, part, block - 1, where)
            ref_mean = _ablation_reference(name, part, block - 1, where, means[block - 1])
            np.testing.assert_allclose(zero.ablated_probs[:, col], ref_zero, atol=tol)
            np.testing.assert_allclose(mean.ablated_probs[:, col], ref_mean, atol=tol)
            # positions before the first ablated one are untouched (causal attention)
            np.testing.assert_allclose(zero.drop[: where[0], col], 0.0, atol=tol)
        assert np.abs(mean.drop - zero.drop).max() > 100 * tol  # mean is not zero


@pytest.mark.parametrize("name", [FAST, "gpt2", pytest.param("opt", marks=pytest.mark.slow)])
def test_ablate_head_mean_uses_the_references(name):
    """Head mean ablation: the head's slice of the output projection's input := its mean
    over the references at each position, rebuilt here on the output side (the
    projection's output gains ``W_o[:, head] (mean z − z)``; GPT-2's Conv1D stores W_o
    transposed)."""
    model = _model(name)
    n_heads = model.config.num_attention_heads
    block, head, where = 1, 0, [1, 4, 8]
    z_mean = sum(_head_inputs(name, ref)[block - 1] for ref in REFS) / len(REFS)  # [T, H·d_h]
    width = z_mean.shape[-1] // n_heads
    cols = slice(head * width, (head + 1) * width)
    res = ablate(
        model,
        None,
        CLEAN,
        target=TARGET,
        part="head",
        layers=[block],
        heads=[head],
        positions=where,
        mode="mean",
        references=REFS,
    )
    proj = _o_proj(name, block - 1)
    w = proj.weight[:, cols].T if isinstance(proj, torch.nn.Linear) else proj.weight[cols, :]
    seen = {}

    def keep(module, args):
        seen["z"] = args[0].reshape(len(CLEAN), -1)

    def shift(module, args, output):
        z = seen.pop("z")
        delta = torch.zeros(len(CLEAN), w.shape[1], dtype=z.dtype)
        delta[where] = (z_mean[where, cols] - z[where, cols]) @ w
        return output + delta.reshape(output.shape)

    handles = [proj.register_forward_pre_hook(keep), proj.register_forward_hook(shift)]
    try:
        with torch.no_grad():
            logits = model(torch.tensor([CLEAN]), use_cache=False).logits[0].double()
    finally:
        for h in handles:
            h.remove()
    ref = torch.softmax(logits, -1)[:, TARGET].numpy()
    tol = _tol(name) / 4  # probabilities: forward_tol itself
    np.testing.assert_allclose(res.ablated_probs[:, 0], ref, atol=tol)
    assert np.abs(res.drop[where[0] :, 0]).max() > 100 * tol  # not vacuous
    np.testing.assert_allclose(res.drop[: where[0], 0], 0.0, atol=tol)


def test_warning_free_on_a_defined_normalisation():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        patch(_model(FAST), None, CLEAN, CORRUPT, target=TARGET, contrast=CONTRAST)
