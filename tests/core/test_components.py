"""Sub-layer boundaries and the component split (heads, MLP, remainder) of each segment.

Every check is against something the test computes itself: lens probabilities of the
stream between attention and MLP read with a hook of its own on the attention's write, head
writes from a forward pass that zeroes the other heads, and the per-component integrals
the prediction-aware shares converge to (a fine Riemann sum).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iglens_viz import IGLens, InvalidRequestError, UnsupportedModelError
from iglens_viz.adapters import adapter_for
from iglens_viz.core.components import component_segments
from tests.support.tiny_models import (
    FAMILY_CONFIGS,
    PARALLEL,
    SEQUENTIAL,
    hooked_mid_states,
    random_ids,
    reference_readout_logits,
    sublayer_model,
    tiny_model,
)
from tests.support.tolerances import eps, readout_size, readout_tol

NOT_HEAD_SPLIT = ("gemma2", "gemma3_text")  # a norm after the attention's output projection

# ----------------------------------------------------------------------------- sub-layers


@pytest.mark.parametrize("name", SEQUENTIAL + ["gpt_neox"])
def test_sublayer_lens_matches_hooked_states_and_sums_to_delta_p(name):
    model = sublayer_model(name)
    ids = random_ids(8)
    result = IGLens(model, None).attribute(ids, boundaries="sublayer")
    n = result.n_blocks
    assert result.boundaries == [x / 2 if x % 2 else x // 2 for x in range(2 * n + 1)]
    assert result.segment_labels[:2] == ["1.attn", "1.mlp"]
    mids = hooked_mid_states(model, ids)
    with torch.no_grad():
        probs = torch.softmax(reference_readout_logits(model, mids).double(), -1)
    targets = torch.as_tensor(result.target_ids)
    expected = probs[:, torch.arange(len(ids)), targets].T.numpy()  # [T, n]
    # Both sides are float32 readouts of the same states: one readout's rounding each.
    tol = readout_tol(readout_size(model, ids, mids))
    np.testing.assert_allclose(result.lens_probs[:, 1::2], expected, rtol=0, atol=tol)
    # Contributions are the first differences of the lens; they telescope to Δp in float64
    # (2n float64 differences of values ≤ 1: the bound 1e-6 with room to spare).
    np.testing.assert_array_equal(result.contributions, np.diff(result.lens_probs, axis=1))
    assert result.completeness_error <= 1e-6
    # Block boundaries of the same lens agree with the sub-layer trace at whole depths.
    blocks = IGLens(model, None).attribute(ids)
    np.testing.assert_allclose(result.lens_probs[:, 0::2], blocks.lens_probs, rtol=0, atol=tol)
    # The onset is a half block; its block is the one the half lies in.
    j = result.onset_segment
    np.testing.assert_array_equal(result.onset, (j + 2) // 2)


@pytest.mark.parametrize("name", list(PARALLEL) + ["gpt_neox"])
def test_parallel_blocks_refuse_sublayers_and_point_to_components(name):
    with pytest.raises(UnsupportedModelError, match="in parallel.*component"):
        IGLens(tiny_model(name), None).attribute(random_ids(5), boundaries="sublayer")


def test_sublayer_request_forms():
    model = tiny_model("llama")
    lens = IGLens(model, None)
    a = lens.attribute(random_ids(5), boundaries="sublayer")
    b = lens.attribute(random_ids(5), boundaries=" SUBLAYERS ")
    assert a.request.boundaries == b.request.boundaries == "sublayer"
    assert a.request.controls()["boundaries"] == "sublayer"
    np.testing.assert_array_equal(a.contributions, b.contributions)
    df = a.to_dataframe()
    assert df.label.tolist()[:4] == ["1.attn", "1.mlp", "2.attn", "2.mlp"]
    assert df.block_start.tolist()[:4] == df.block_end.tolist()[:4] == [1, 1, 2, 2]


# ----------------------------------------------------------------------------- shares


def _cell_sums(result):
    """``(T, k)`` the shares summed per (position, segment), and Σ |share| per cell."""
    df = result.components
    grouped = df.assign(size=df.share.abs()).groupby(["position", "segment"])
    T, k = result.contributions.shape
    sums = np.full((T, k), np.nan)
    sizes = np.full((T, k), np.nan)
    index = grouped.share.sum().index
    sums[index.get_level_values(0), index.get_level_values(1)] = grouped.share.sum()
    sizes[index.get_level_values(0), index.get_level_values(1)] = grouped["size"].sum()
    return sums, sizes, grouped.size().max()


def _boundaries(name):
    return "all" if name in PARALLEL or name == "gpt_neox" else "sublayer"


@pytest.mark.parametrize("steps", [1, 4, 16])
@pytest.mark.parametrize("name", sorted(FAMILY_CONFIGS))
def test_shares_sum_to_the_segment_contribution(name, steps):
    model = tiny_model(name, dtype=torch.float64)
    lens = IGLens(model, None, dtype=torch.float64)
    for boundaries in {_boundaries(name), "every:2"}:
        result = lens.attribute(random_ids(7), boundaries=boundaries, steps=steps, components=True)
        sums, sizes, per_cell = _cell_sums(result)
        # Each step's change is split by weights w_c / Σ w that sum to 1 up to per_cell
        # roundings relative to Σ|w_c| / |Σ w|, i.e. relative to the cell's Σ|share|; the
        # m steps and the sum over the cell add m + per_cell more roundings.
        tol = (per_cell + steps + per_cell) * eps(torch.float64) * sizes
        valid = np.isfinite(result.contributions)
        assert (np.abs(sums - result.contributions)[valid] <= tol[valid]).all()
        assert (np.abs(sums[valid]) > 0).any()


def test_prediction_aware_shares_converge_to_per_component_ig():
    model = tiny_model("llama", dtype=torch.float64)
    lens = IGLens(model, None, dtype=torch.float64)
    ids = random_ids(6)
    # The per-component integrals ∫ ∇f·d_c: a midpoint sum fine enough that its own error
    # (O(1/m²)) is far below the differences measured here.
    reference = lens.attribute(
        ids, boundaries="every:2", estimator="riemann", steps=512, components=True
    ).component_shares
    errors = []
    for steps in (1, 4, 16):
        shares = lens.attribute(
            ids, boundaries="every:2", steps=steps, components=True
        ).component_shares
        errors.append(float(np.nanmax(np.abs(shares - reference))))
    print("max |prediction-aware share − per-component IG| at m = 1, 4, 16:", errors)
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < errors[0] / 16  # the midpoint rule's O(1/m²): 1/256 at best


def test_riemann_shares_sum_to_riemann_contribution():
    model = tiny_model("gpt2", dtype=torch.float64)
    result = IGLens(model, None, dtype=torch.float64).attribute(
        random_ids(6), estimator="riemann", steps=8, components=True
    )
    sums, sizes, per_cell = _cell_sums(result)
    tol = (per_cell + 8) * eps(torch.float64) * np.maximum(sizes, 1e-3)
    assert (np.abs(sums - result.contributions) <= tol).all()


@pytest.mark.parametrize("name", ["llama", "gpt2", "gptj", "opt", "qwen2"])
def test_head_write_from_stored_outputs_equals_the_projection_with_one_head(name):
    model = tiny_model(name)
    adapter = adapter_for(model)
    ids = random_ids(7)
    lens = IGLens(model, None)
    trace = lens.trace(ids, components=True)
    H = adapter.n_heads
    block = adapter.n_blocks - 1
    projection = adapter.attn_out_modules[block]
    weight = adapter.output_projection(block).detach()  # [d, H·d_head]
    z = trace.head_inputs[block]
    width = z.shape[-1] // H

    @torch.no_grad()
    def projected(keep):  # the projection's output with only head ``keep`` (None: none)
        out = {}

        def zero_others(module, args):
            x = args[0].clone()
            for head in range(H):
                if head != keep:
                    x[..., head * width : (head + 1) * width] = 0
            return (x,)

        handles = [
            projection.register_forward_pre_hook(zero_others),
            projection.register_forward_hook(
                lambda m, a, o: out.__setitem__("y", o.reshape(-1, o.shape[-1]))
            ),
        ]
        try:
            model(input_ids=ids[None])
        finally:
            for handle in handles:
                handle.remove()
        return out["y"]

    bias = projected(None)
    for head in range(H):
        cols = slice(head * width, (head + 1) * width)
        ours = z[:, cols] @ weight[:, cols].T
        hooked = projected(head) - bias
        # Ours: a dot product of d_head float32 terms; the hooked side: the projection's sum
        # over all H·d_head inputs (the others zero) plus the bias, minus the bias again.
        scale = float((z[:, cols].abs() @ weight[:, cols].abs().T).max()) + float(bias.abs().max())
        tol = (width + z.shape[-1] + 2) * eps(torch.float32) * scale
        torch.testing.assert_close(ours, hooked, rtol=0, atol=tol)
        print(
            f"{name} head {head}: max |error| {float((ours - hooked).abs().max()):.1e}, "
            f"tolerance {tol:.1e}"
        )


def test_components_for_a_few_positions_equal_the_whole_prompt_split():
    model = tiny_model("qwen2", dtype=torch.float64)
    lens = IGLens(model, None, dtype=torch.float64)
    ids = random_ids(8)
    plain = lens.attribute(ids, steps=4)
    assert plain.component_shares is None
    with pytest.raises(AttributeError, match="components=True"):
        _ = plain.components
    some = lens.components(plain, [2, -1])
    whole = IGLens(model, None, dtype=torch.float64).attribute(ids, steps=4, components=True)
    # The same arithmetic per row; only the chunking of rows may differ.
    tol = 64 * eps(torch.float64) * np.nanmax(np.abs(whole.component_shares))
    np.testing.assert_allclose(some, whole.component_shares[[2, 7]], rtol=0, atol=tol)
    with pytest.raises(InvalidRequestError, match="positions"):
        lens.components(plain, [8])


def test_component_axis_and_segments():
    llama = IGLens(tiny_model("llama"), None)
    r = llama.attribute(random_ids(5), boundaries="sublayer", components=True)
    assert r.component_names == ["head:0", "head:1", "head:2", "head:3", "mlp", "rest"]
    seg = r.component_segments
    assert seg.shape == (r.n_blocks, 6)
    np.testing.assert_array_equal(seg[:, 4], 2 * np.arange(r.n_blocks) + 1)  # L.mlp
    np.testing.assert_array_equal(seg[:, 0], 2 * np.arange(r.n_blocks))  # L.attn
    np.testing.assert_array_equal(
        component_segments([0, 2, 4], r.component_names, 4)[:, 0], [0, 0, 1, 1]
    )
    df = r.components
    assert list(df.columns) == ["position", "segment", "block", "component", "share"]
    assert set(df[df.segment == 1].component) == {"mlp"} and set(df[df.segment == 1].block) == {1}
    joined = r.to_dataframe(components=True)
    assert len(joined) == len(df) and {"token", "contribution", "label"} <= set(joined.columns)
    for name in NOT_HEAD_SPLIT:
        g = IGLens(tiny_model(name), None).attribute(random_ids(5), components=True)
        assert g.component_names == ["attn", "mlp"]
    post = tiny_model("opt", do_layer_norm_before=False)
    assert IGLens(post, None).component_names == ["attn", "mlp"]
    with pytest.raises(InvalidRequestError, match="components must be True or False"):
        llama.attribute(random_ids(5), components="yes")


def test_plot_components_draws_the_share_matrix():
    from iglens_viz.views import static

    r = IGLens(tiny_model("llama"), None).attribute(
        random_ids(5), boundaries="every:2", components=True
    )
    fig = r.plot_components(3, segment=1)
    mesh = next(c for c in fig.axes[0].collections if c.get_gid() == static.GID_COMPONENTS)
    data = np.ma.filled(mesh.get_array(), np.nan).reshape(2, len(r.component_names))
    np.testing.assert_allclose(data, r.component_shares[3, 2:4])  # blocks 3 and 4
    assert np.isclose(np.nansum(data), r.contributions[3, 1])
    assert "largest: L" in fig.axes[0].get_title()
    with pytest.raises(IndexError):
        r.plot_components(3, segment=5)


def test_the_first_split_of_a_prompt_reuses_its_checked_map(monkeypatch):
    import iglens_viz.core.traces as lens_module

    lens = IGLens(tiny_model("llama"), None)
    ids = random_ids(6)
    result = lens.attribute(ids)
    maps = []
    real = lens_module.readout_map
    monkeypatch.setattr(
        lens_module, "readout_map", lambda *args, **kw: maps.append(1) or real(*args, **kw)
    )
    lens.components(result, [2])  # runs the model again to keep head outputs, not the map
    assert maps == [] and lens.trace(ids).head_inputs is not None
    lens.attribute(ids, boundaries="sublayer")  # h_L.attn rows need reading out: a new map
    assert maps == [1]
    lens.components(lens.attribute(ids, boundaries="sublayer"), [3])
    assert maps == [1]


def test_a_few_positions_split_at_more_steps_than_the_result():
    model = tiny_model("llama", dtype=torch.float64)
    lens = IGLens(model, None, dtype=torch.float64)
    ids = random_ids(7)
    coarse = lens.attribute(ids, boundaries="every:2")
    fine = lens.attribute(ids, boundaries="every:2", steps=8, components=True)
    # The same path points (α = s/8) and gradients, for two rows instead of seven.
    np.testing.assert_allclose(
        lens.components(coarse, [1, 5], steps=8),
        fine.component_shares[[1, 5]],
        rtol=0,
        atol=64 * eps(torch.float64) * np.nanmax(np.abs(fine.component_shares)),
    )
    shown = lens.with_components(coarse, [5], steps=8)
    assert np.isnan(shown.component_shares[[0, 1, 2, 3, 4, 6]]).all()
    assert set(shown.components.position) == {5}
    assert shown.plot_components(5) is not None
    with pytest.raises(InvalidRequestError, match="steps"):
        lens.components(coarse, [1], steps=0)
