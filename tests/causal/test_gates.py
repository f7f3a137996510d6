"""The block-gate game's identities, each against an independent computation.

* The removal game's forward staircase is IG-Lens: its entries equal ``attribute``'s
  contributions at the gated position, on every family.
* The counterfactual game's reverse staircase is state patching: its corners equal
  ``patch(parts="state", metric="prob")``'s patched probabilities, on every family.
* G(0) and G(1) equal plain runs (the counterfactual's and the clean prompt's own output).
* The diagonal's exact split sums to the total at m = 1, 2, 16 and converges to the path
  integral of ∂G/∂a computed here with hooks of this file's own (full-sequence runs, no key/value
  cache, the model's own logits) by a fine midpoint rule.
* Segment gates and sub-layer gates: a staircase's corners at block ends are the block game's,
  so segment entries are sums of block entries; the component split sums to its gate.

Everything runs in float64 (model and readout): the gated runs continue a key/value cache with
one token while ``attribute`` and ``patch`` run whole sequences, so the two sides use kernels of
other shapes and round apart by at most two forward passes' worth (tolerances.forward_tol at
the precision the family computes in, as test_batching).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import iglens_viz as ig
from iglens_viz import IGLensError
from iglens_viz.causal.gates import GATE_PATHS
from tests.support.tiny_models import FAMILY_NAMES, random_ids, tiny_model
from tests.support.tolerances import eps, forward_dtype, forward_tol, readout_size, sum_tol

CLEAN = random_ids(12, seed=1)
CORRUPT = CLEAN.clone()
CORRUPT[3] = (CORRUPT[3] + 5) % 97
CORRUPT[4] = (CORRUPT[4] + 7) % 97


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family(request):
    model = tiny_model(request.param, dtype=torch.float64)
    size = readout_size(model, CLEAN)
    return model, forward_tol(size, model.config.num_hidden_layers, forward_dtype(model))


def test_removal_forward_staircase_is_ig_lens(family):
    model, tol = family
    for position in (5, -1):
        led = ig.gate_ledger(model, None, CLEAN.tolist(), position=position, path="forward")
        att = ig.attribute(model, None, CLEAN.tolist(), dtype=torch.float64)
        t = led.position
        assert led.target_id == att.target_ids[t]
        np.testing.assert_allclose(led.entries["forward"], att.contributions[t], atol=tol, rtol=0)
        np.testing.assert_allclose(led.corners["forward"], att.lens_probs[t], atol=tol, rtol=0)
        # the readable ledger is IG-Lens's own, read from the plain run
        np.testing.assert_allclose(led.readable, att.contributions[t], atol=tol, rtol=0)
        assert abs(led.start - led.start_reference) <= tol
        assert abs(led.end - led.end_reference) <= tol


def test_counterfactual_reverse_staircase_is_state_patching(family):
    model, tol = family
    led = ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist())
    patched = ig.patch(
        model,
        None,
        CLEAN.tolist(),
        CORRUPT.tolist(),
        target=led.target_id,
        parts="state",
        metric="prob",
    )
    # reverse[L] has gates L+1…n open: the clean run with h_L[t] := the counterfactual's
    np.testing.assert_allclose(led.corners["reverse"][1:], patched.patched, atol=tol, rtol=0)
    assert abs(led.end - patched.clean_metric) <= tol
    assert abs(led.start - patched.corrupt_metric) <= tol
    assert abs(led.start - led.start_reference) <= tol
    assert abs(led.end - led.end_reference) <= tol
    # every path splits the same total: a sum of k float64 differences of values ≤ 1
    k = len(led.labels)
    for path in GATE_PATHS:
        assert abs(led.entries[path].sum() - led.total) <= sum_tol(torch.float64, 2 * k + 2)


@pytest.mark.parametrize("steps", [1, 2, 16])
def test_diagonal_sums_to_the_total_at_any_step_count(steps):
    model = tiny_model("llama", dtype=torch.float64)
    led = ig.gate_ledger(
        model, None, CLEAN.tolist(), CORRUPT.tolist(), path="diagonal", steps=steps
    )
    assert led.diagonal_values is not None and len(led.diagonal_values) == steps + 1
    # m step changes, each split by weights summing to 1: m + k roundings of values ≤ 1
    tol = sum_tol(torch.float64, 2 * steps + len(led.labels))
    assert abs(led.entries["diagonal"].sum() - led.total) <= tol
    assert abs(led.entries["diagonal"].sum() - (led.end - led.start)) <= tol


def _independent_gradients(model, clean, corrupt, t, target, points):
    """∂G/∂a at rows of ``points [R, n]`` with this file's own hooks on a Llama's layers:
    whole sequences (no cache), gates at position t, G from the model's own logits."""
    layers = model.model.layers
    n = len(layers)
    base = {}

    def keep(i):
        def hook(module, args, kwargs, output):
            h_in = args[0] if args else kwargs["hidden_states"]
            out = output[0] if isinstance(output, tuple) else output
            base[i] = (out - h_in)[0, t].detach()

        return hook

    handles = [
        layer.register_forward_hook(keep(i), with_kwargs=True) for i, layer in enumerate(layers)
    ]
    try:
        with torch.no_grad():
            model(input_ids=corrupt[None])
    finally:
        for h in handles:
            h.remove()
    gates = points.clone().requires_grad_(True)
    R = gates.shape[0]

    def gate(i):
        def hook(module, args, kwargs, output):
            h_in = args[0] if args else kwargs["hidden_states"]
            out = output[0] if isinstance(output, tuple) else output
            write = out[:, t] - h_in[:, t]
            new_t = h_in[:, t] + base[i] + gates[:, i, None] * (write - base[i])
            new = torch.cat([out[:, :t], new_t[:, None], out[:, t + 1 :]], dim=1)
            return (new, *output[1:]) if isinstance(output, tuple) else new

        return hook

    handles = [
        layer.register_forward_hook(gate(i), with_kwargs=True) for i, layer in enumerate(layers)
    ]
    try:
        logits = model(input_ids=clean[None].expand(R, -1)).logits[:, t]
    finally:
        for h in handles:
            h.remove()
    G = torch.softmax(logits, dim=-1)[:, target]
    (grad,) = torch.autograd.grad(G.sum(), gates)
    assert n == points.shape[1]
    return grad.detach().numpy()


def test_diagonal_converges_to_the_path_integral():
    """The exact split's entries approach ∫₀¹ ∂G/∂a_j(s·1) ds (a 400-point midpoint rule of an
    independent autograd) as m grows; the ledger's own Riemann sum approaches it too."""
    model = tiny_model("llama", dtype=torch.float64)
    t = CLEAN.numel() - 1
    led = {
        m: ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist(), path="diagonal", steps=m)
        for m in (4, 16, 64)
    }
    n = model.config.num_hidden_layers
    M = 400
    points = ((torch.arange(M, dtype=torch.float64) + 0.5) / M)[:, None].expand(M, n)
    integral = _independent_gradients(model, CLEAN, CORRUPT, t, led[4].target_id, points).mean(0)
    error = {m: np.abs(r.entries["diagonal"] - integral).max() for m, r in led.items()}
    riemann = {m: np.abs(r.riemann - integral).max() for m, r in led.items()}
    # The midpoint rule is second order in 1/m (16× less error per 4× more steps), and so is
    # the split (each step's remainder beyond first order is O(1/m³)); demand 4× with slack
    # for the constants. The 400-point rule's own error is (64/400)² ≈ 2.6% of the 64-step
    # Riemann sum's, beneath every figure compared.
    assert error[16] <= error[4] / 4 and error[64] <= error[16] / 4, error
    assert riemann[16] <= riemann[4] / 4 and riemann[64] <= riemann[16] / 4, riemann
    assert error[64] <= 1e-3 * abs(led[64].total), (error, led[64].total)


def test_segment_gates_are_sums_of_block_gates():
    model = tiny_model("llama", dtype=torch.float64)
    size = readout_size(model, CLEAN)
    tol = forward_tol(size, model.config.num_hidden_layers, forward_dtype(model))
    blocks = ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist())
    pairs = ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist(), boundaries="every:2")
    assert pairs.labels == ["1–2", "3–4"]
    for path in ("forward", "reverse"):
        np.testing.assert_allclose(pairs.corners[path], blocks.corners[path][::2], atol=tol, rtol=0)
    # along the diagonal a segment's first-order term is the sum of its blocks' terms
    np.testing.assert_allclose(
        pairs.entries["diagonal"],
        blocks.entries["diagonal"].reshape(2, 2).sum(1),
        atol=tol,
        rtol=0,
    )


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_sublayer_staircases_sum_to_their_blocks(name):
    model = tiny_model(name, dtype=torch.float64)
    size = readout_size(model, CLEAN)
    tol = forward_tol(size, model.config.num_hidden_layers, forward_dtype(model))
    blocks = ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist())
    halves = ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist(), boundaries="sublayer")
    n = model.config.num_hidden_layers
    assert halves.labels[:2] == ["1.attn", "1.mlp"] and len(halves.labels) == 2 * n
    for path in ("forward", "reverse"):
        np.testing.assert_allclose(
            halves.corners[path][::2], blocks.corners[path], atol=tol, rtol=0
        )
        np.testing.assert_allclose(
            halves.entries[path].reshape(n, 2).sum(1), blocks.entries[path], atol=2 * tol, rtol=0
        )
    # the readable ledger is IG-Lens's with sub-layer boundaries
    att = ig.attribute(model, None, CLEAN.tolist(), boundaries="sublayer", dtype=torch.float64)
    np.testing.assert_allclose(halves.readable, att.contributions[-1], atol=tol, rtol=0)
    assert abs(halves.entries["diagonal"].sum() - halves.total) <= sum_tol(torch.float64, 64)


@pytest.mark.parametrize("name", ["llama", "gpt2", "gemma2", "gpt_neox"])
def test_components_split_each_diagonal_entry_exactly(name):
    model = tiny_model(name, dtype=torch.float64)
    plain = ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist(), path="diagonal")
    split = ig.gate_ledger(
        model, None, CLEAN.tolist(), CORRUPT.tolist(), path="diagonal", components=True
    )
    frame = split.components
    assert frame is not None
    assert set(frame["component"]) == set(ig.IGLens(model).component_names)
    by_gate = frame.groupby("gate", sort=False)["entry"].sum()
    # each gate's weights sum to 1 (C + 1 roundings), times its entry
    C = frame["component"].nunique()
    tol = eps(torch.float64) * (C + 2) * np.abs(split.entries["diagonal"]).max()
    np.testing.assert_allclose(by_gate.to_numpy(), split.entries["diagonal"], atol=tol, rtol=0)
    np.testing.assert_array_equal(split.entries["diagonal"], plain.entries["diagonal"])


def test_a_position_inside_the_answer():
    """With ``answer=``, the counterfactual is its prompt followed by the clean answer, and a
    position inside the answer is gated: the same identities hold there."""
    model = tiny_model("llama", dtype=torch.float64)
    answer = random_ids(4, seed=9).tolist()
    led = ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist(), answer=answer, position=-2)
    np.testing.assert_array_equal(led.clean_ids, CLEAN.tolist() + answer)
    np.testing.assert_array_equal(led.corrupt_ids, CORRUPT.tolist() + answer)
    assert led.prompt_length == CLEAN.numel() and led.position == CLEAN.numel() + 2
    patched = ig.patch(
        model,
        None,
        led.clean_ids[: led.position + 1].tolist(),
        led.corrupt_ids[: led.position + 1].tolist(),
        target=led.target_id,
        parts="state",
        metric="prob",
    )
    size = readout_size(model, torch.as_tensor(led.clean_ids))
    tol = forward_tol(size, model.config.num_hidden_layers, forward_dtype(model))
    np.testing.assert_allclose(led.corners["reverse"][1:], patched.patched, atol=tol, rtol=0)


def test_bad_requests_say_what_is_wrong():
    model = tiny_model("llama")
    clean = CLEAN.tolist()
    with pytest.raises(IGLensError, match=r"12 tokens and the counterfactual 13.*position 3"):
        ig.gate_ledger(model, None, clean, clean[:3] + [5] + clean[3:])
    other = list(clean)
    other[-1] = (other[-1] + 1) % 97
    with pytest.raises(IGLensError, match="differ at the gated position 11 itself"):
        ig.gate_ledger(model, None, clean, other)
    with pytest.raises(IGLensError, match="the counterfactual is the clean sequence itself"):
        ig.gate_ledger(model, None, clean, clean)
    with pytest.raises(IGLensError, match="needs a counterfactual prompt"):
        ig.gate_ledger(model, None, clean, baseline="counterfactual")
    with pytest.raises(IGLensError, match="drop corrupt"):
        ig.gate_ledger(model, None, clean, CORRUPT.tolist(), baseline="removal")
    for steps in (0, 1001, 2.5, True):
        with pytest.raises(IGLensError, match="steps must be an integer from 1 to 1000"):
            ig.gate_ledger(model, None, clean, steps=steps)
    with pytest.raises(IGLensError, match="position 12 is outside the sequence of 12 tokens"):
        ig.gate_ledger(model, None, clean, position=12)
    with pytest.raises(IGLensError, match="unknown path 'sideways'"):
        ig.gate_ledger(model, None, clean, path="sideways")
    with pytest.raises(IGLensError, match="not 'sublayer'"):
        ig.gate_ledger(model, None, clean, boundaries="sublayer", components=True)
    for err in (ValueError,):  # every error is also the built-in a caller would expect
        with pytest.raises(err):
            ig.gate_ledger(model, None, clean, position="last")


def test_the_engine_method_reuses_its_model():
    model = tiny_model("llama", dtype=torch.float64)
    lens = ig.IGLens(model, dtype=torch.float64)
    led = lens.gate_ledger(CLEAN.tolist(), CORRUPT.tolist(), steps=4)
    direct = ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist(), steps=4)
    for path in GATE_PATHS:
        np.testing.assert_array_equal(led.entries[path], direct.entries[path])
    frame = led.to_frame()
    assert list(frame.columns) == ["gate", "readable", "forward", "reverse", "diagonal", "riemann"]
    assert led.argmax("reverse") == led.labels[int(np.argmax(led.entries["reverse"]))]


def test_sentences_plot_and_json_read_the_same_numbers():
    import json

    model = tiny_model("llama", dtype=torch.float64)
    led = ig.gate_ledger(model, None, CLEAN.tolist(), CORRUPT.tolist())
    words = led.sentences()
    for key, path in (("readable", "readable"), ("arrives", "reverse"), ("shared", "diagonal")):
        j = int(np.argmax(led.readable if path == "readable" else led.entries[path]))
        assert f"block {led.labels[j]} " in words[key] + " "
        share = led.shares(path)[j]
        assert f"{100 * share:.0f}%" in words[key]
    assert set(led.sentences(plain=True)) == set(words)
    for sentence in [*words.values(), *led.sentences(plain=True).values()]:
        assert "comput" not in sentence and "decide" not in sentence
    fig = led.plot()
    bars = [p.get_height() for p in fig.axes[0].patches]
    k = len(led.labels)
    expected = [*led.readable, *led.entries["reverse"], *led.entries["diagonal"]]
    np.testing.assert_allclose(bars, expected, rtol=0, atol=0)
    assert len(bars) == 3 * k
    out = json.loads(json.dumps(led.to_dict(), allow_nan=False))
    np.testing.assert_array_equal(out["entries"]["diagonal"], led.entries["diagonal"])
    assert out["sentences"] == words and out["total"] == led.total
    # the removal game has no "arrives" sentence (its reverse staircase is no patching)
    removal = ig.gate_ledger(model, None, CLEAN.tolist())
    assert set(removal.sentences()) == {"readable", "shared"}
