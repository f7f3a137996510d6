"""IG-Lens in fitted-lens coordinates: the path points are h̃_L = T_L(h_L), T_n the identity.

Every check is against a computation of the test's own: the translators applied by hand in
float64 (h·Aᵀ + b) to the model's own ``output_hidden_states`` (and to the hooked h_L.attn
states for ``"sublayer"``), read out with the model's own final norm and head
(``tiny_models.reference_readout_logits``), gradients of that readout by autograd.

Tolerances (besides those of ``tolerances.py``):

* :func:`transform_tol` — the library applies T_L in the readout dtype (a dot product of d
  terms plus a bias: at most √(d+1)·u·(Σ_j |A_ij h_j| + |b_i|) per entry, Wilkinson's rule),
  the test rounds its float64 transform to that dtype once (u·|h̃_i|). Those input changes
  δ move f by at most Σ_i |∂f/∂h̃_i|·δ_i to first order (the gradient from the model's own
  readout); doubled for second-order terms. Added to :func:`tolerances.readout_tol` (the two
  readouts' own rounding) on the transformed states.
* Completeness: k first differences of float32 probabilities, summed in float64
  (:func:`tolerances.sum_tol`), plus the independent ends (f(h_n): ``readout_tol``; f(h̃_0):
  the transform tolerance).
* Shares: the bounds of ``test_components.py`` (each step's change is split by weights that
  sum to 1 up to per-cell roundings relative to the cell's Σ|share|), in float64.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import iglens_viz
from iglens_viz import IGLens, IGLensError, InvalidRequestError
from iglens_viz.core.coordinates import LOGIT, Lens
from iglens_viz.core.request import AttributionRequest
from tests.support.tiny_models import (
    FAMILY_NAMES,
    SEQUENTIAL,
    hooked_mid_states,
    model_logits,
    random_ids,
    random_lens,
    reference_readout_logits,
    sublayer_model,
    tiny_model,
)
from tests.support.tolerances import eps, readout_size, readout_tol, sum_tol

IDS = random_ids(12)


def by_hand(lens: Lens, h: torch.Tensor, depth: float) -> torch.Tensor:
    """T_L(h) in float64, written out (not through the Lens's methods); L = ⌊depth⌋."""
    at = math.floor(depth)
    if at == lens.n_blocks:
        return h.double()
    return h.double() @ lens.matrices[at].double().T + lens.biases[at].double()


@torch.no_grad()
def hidden_states(model, ids) -> list[torch.Tensor]:
    """h_0 … h_{n−1} ``[T, d]`` from the model's own ``output_hidden_states`` (pre-norm)."""
    out = model(input_ids=ids[None], output_hidden_states=True)
    return [h[0] for h in out.hidden_states[:-1]]


def reference_probs(model, points: torch.Tensor, ids: torch.Tensor, dtype) -> torch.Tensor:
    """``[..., T]`` softmax(head(norm(points)))[ids] with the model's own modules; points
    ``[..., T, d]`` in float64, rounded to ``dtype`` once."""
    with torch.no_grad():
        p = torch.softmax(reference_readout_logits(model, points.to(dtype)).double(), -1)
    return p.gather(-1, ids.expand(p.shape[:-1])[..., None])[..., 0]


def transform_delta(lens: Lens, h: torch.Tensor, depth: float, dtype) -> torch.Tensor:
    """``[T, d]`` how far the library's T_L(h) in ``dtype`` and the test's float64 T_L(h)
    rounded to ``dtype`` can differ per entry: (√(d+1) + 1)·u·(Σ_j |A_ij h_j| + |b_i|)
    (zero at depth n, read as it is on both sides)."""
    at = math.floor(depth)
    if at == lens.n_blocks:
        return torch.zeros(h.shape, dtype=torch.float64)
    A, b = lens.matrices[at].double(), lens.biases[at].double()
    size = h.double().abs() @ A.abs().T + b.abs()
    return (math.sqrt(h.shape[-1] + 1) + 1) * eps(dtype) / 2 * size


def sensitivity_tol(model, points: torch.Tensor, ids, delta: torch.Tensor, dtype) -> np.ndarray:
    """``[...]`` 2·Σ_i |∂f/∂x_i|·δ_i at float64 ``points`` ``[..., T, d]``: how far input
    changes of at most ``delta`` move f (first order, doubled), the gradient by autograd
    through the model's own norm and head."""
    x = points.to(dtype).requires_grad_(True)
    p = torch.softmax(reference_readout_logits(model, x).double(), -1)
    chosen = p.gather(-1, ids.expand(p.shape[:-1])[..., None])
    (grad,) = torch.autograd.grad(chosen.sum(), x)
    return 2 * (grad.double().abs() * delta).sum(-1).numpy()


def transform_tol(model, lens, h: torch.Tensor, depth: float, ids, dtype) -> np.ndarray:
    """``[T]`` how far rounding the transform of ``h`` ``[T, d]`` can move f."""
    delta = transform_delta(lens, h, depth, dtype)
    return sensitivity_tol(model, by_hand(lens, h, depth), ids, delta, dtype)


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family(request):
    model = tiny_model(request.param)
    return request.param, model, random_lens(model)


def lens_references(model, lens, ids, targets):
    """``[n+1, T]`` f(T_L(h_L)) by hand (the last row the model's own output) and the
    ``[n+1, T]`` tolerance of each row against a float32 library readout."""
    hidden = hidden_states(model, ids)
    points = torch.stack([by_hand(lens, h, L) for L, h in enumerate(hidden)])
    size = readout_size(model, ids, points.float())
    rows = list(reference_probs(model, points, targets, torch.float32))
    final = torch.softmax(model_logits(model, ids), -1)
    rows.append(final[torch.arange(ids.numel()), targets])
    base = readout_tol(size, torch.float32)
    tols = [
        base + transform_tol(model, lens, h, L, targets, torch.float32)
        for L, h in enumerate(hidden)
    ]
    tols.append(np.full(ids.numel(), base))
    return torch.stack(rows).numpy(), np.stack(tols)


# ----------------------------------------------------------------------------- every family


def test_lens_probs_equal_an_independent_readout_of_the_transformed_states(family):
    name, model, lens = family
    result = iglens_viz.attribute(model, None, IDS, lens=lens)
    targets = torch.as_tensor(result.target_ids)
    expected, tol = lens_references(model, lens, IDS, targets)
    assert result.lens_name == "random"
    np.testing.assert_array_less(np.abs(result.lens_probs - expected.T), tol.T)
    # Sensitive: the lens moves the probabilities far beyond the tolerance.
    logit = iglens_viz.attribute(model, None, IDS)
    assert np.abs(result.lens_probs[:, :-1] - logit.lens_probs[:, :-1]).max() > 100 * tol.max()
    np.testing.assert_array_equal(result.lens_probs[:, -1], logit.lens_probs[:, -1])  # T_n = I


@pytest.mark.parametrize("steps", [1, 4])
def test_completeness_under_a_lens(family, steps):
    name, model, lens = family
    result = IGLens(model).attribute(IDS, lens=lens, steps=steps)
    k = result.contributions.shape[1]
    sums = result.contributions.sum(axis=1)
    np.testing.assert_allclose(sums, result.delta_p, rtol=0, atol=sum_tol(torch.float32, k))
    # … and Δp is f(h_n) − f(h̃_0), both ends computed independently.
    expected, tol = lens_references(model, lens, IDS, torch.as_tensor(result.target_ids))
    np.testing.assert_array_less(
        np.abs(sums - (expected[-1] - expected[0])), tol[-1] + tol[0] + sum_tol(torch.float32, k)
    )
    # The prediction-aware totals do not depend on m: the same numbers.
    np.testing.assert_array_equal(
        result.contributions, IGLens(model).attribute(IDS, lens=lens).contributions
    )


def test_riemann_converges_to_the_prediction_aware_totals_under_a_lens(family):
    name, model, lens = family
    ig = IGLens(model)
    exact = ig.attribute(IDS, lens=lens).contributions
    errors = [
        np.abs(
            ig.attribute(IDS, lens=lens, estimator="riemann", steps=m).contributions - exact
        ).max()
        for m in (2, 16, 128)
    ]
    assert errors[2] < errors[1] < errors[0]
    assert errors[2] < 0.25 * errors[1]  # the midpoint rule's O(1/m²) (a rate, see test_arch…)


def test_interior_path_interpolates_the_transformed_ends(family):
    name, model, lens = family
    ig = IGLens(model)
    steps, t = 4, 5
    result = ig.attribute(IDS, lens=lens, steps=steps)
    interior = ig.interior_path(result, t)  # the readout of this position's points alone
    hidden = hidden_states(model, IDS)
    for j in (0, len(hidden) - 1):  # the first segment and the last (into T_n = I)
        h_a = hidden[j][t : t + 1]
        a, delta = by_hand(lens, h_a, j), transform_delta(lens, h_a, j, torch.float32)
        if j + 1 < len(hidden):
            h_b = hidden[j + 1][t : t + 1]
            b = by_hand(lens, h_b, j + 1)
            delta = delta + transform_delta(lens, h_b, j + 1, torch.float32)
        else:  # h_n (pre-norm; HF's last hidden state is normed): the captured block output
            b = ig.trace(IDS).states[-1][t : t + 1].double()
        alphas = torch.arange(steps + 1, dtype=torch.float64)[:, None] / steps
        points = a + alphas * (b - a)  # [m+1, d]
        y = torch.as_tensor(result.target_ids[t : t + 1])
        expected = reference_probs(model, points[:, None], y, torch.float32)[:, 0].numpy()
        size = readout_size(model, IDS, points.float()[:, None])
        # Both ends' transform rounding carries into every point, plus the interpolation's
        # own (a + α(b − a): three roundings of values ≤ |a| + |b|, one more in the test).
        delta = delta + 4 * eps(torch.float32) / 2 * (a.abs() + b.abs())
        tol = readout_tol(size) + sensitivity_tol(model, points[:, None], y, delta, torch.float32)
        np.testing.assert_array_less(np.abs(result.path_probs[t, j] - expected), tol[:, 0])
        # interior_path reads the same float32 points in other kernel shapes: one readout's
        # rounding each
        assert np.abs(interior[j] - result.path_probs[t, j]).max() <= readout_tol(size)


def test_contrast_under_a_lens(family):
    name, model, lens = family
    result = IGLens(model).attribute(IDS, lens=lens, target=3, contrast=5)
    ids = torch.arange(IDS.numel())
    p3, tol3 = lens_references(model, lens, IDS, torch.full_like(ids, 3))
    p5, tol5 = lens_references(model, lens, IDS, torch.full_like(ids, 5))
    np.testing.assert_array_less(np.abs(result.lens_probs - (p3 - p5).T), (tol3 + tol5).T)
    k = result.contributions.shape[1]
    np.testing.assert_allclose(
        result.contributions.sum(1), result.delta_p, rtol=0, atol=sum_tol(torch.float32, k)
    )


# ----------------------------------------------------------------------------- sub-layers


@pytest.mark.parametrize("name", SEQUENTIAL)
def test_sublayer_states_are_read_with_the_translator_of_their_block_input(name):
    model = sublayer_model(name)
    lens = random_lens(model, seed=2)
    ids = random_ids(8)
    result = IGLens(model).attribute(ids, boundaries="sublayer", lens=lens)
    mids = hooked_mid_states(model, ids)  # h_L.attn, L = 1 … n, read by the test's hooks
    y = torch.as_tensor(result.target_ids)
    expected = reference_probs(
        model,
        torch.stack([by_hand(lens, m, L - 0.5) for L, m in enumerate(mids, 1)]),
        y,
        torch.float32,
    ).numpy()  # h_L.attn through T_{L−1}
    size = readout_size(model, ids, mids)
    tol = readout_tol(size) + np.stack(
        [transform_tol(model, lens, m, L - 0.5, y, torch.float32) for L, m in enumerate(mids, 1)]
    )
    np.testing.assert_array_less(np.abs(result.lens_probs[:, 1::2] - expected.T), tol.T)
    assert result.completeness_error <= sum_tol(torch.float32, 2 * result.n_blocks)
    # The whole depths are the block boundaries' lens probabilities.
    blocks = IGLens(model).attribute(ids, lens=lens)
    np.testing.assert_allclose(
        result.lens_probs[:, 0::2], blocks.lens_probs, rtol=0, atol=2 * tol.max()
    )


# ----------------------------------------------------------------------------- components


def _cell_sums(result):
    """``(T, k)`` the shares summed per (position, segment), Σ|share| per cell, and the most
    shares in one cell (as test_components)."""
    df = result.components
    grouped = df.assign(size=df.share.abs()).groupby(["position", "segment"])
    T, k = result.contributions.shape
    sums, sizes = np.full((T, k), np.nan), np.full((T, k), np.nan)
    index = grouped.share.sum().index
    where = index.get_level_values(0), index.get_level_values(1)
    sums[where], sizes[where] = grouped.share.sum(), grouped["size"].sum()
    return sums, sizes, grouped.size().max()


@pytest.mark.parametrize(
    "name,boundaries",
    [("llama", "sublayer"), ("llama", "every:2"), ("gpt2", "all"), ("gptj", "all"),
     ("gemma2", "sublayer"), ("opt", "every:2")],
)  # fmt: skip
@pytest.mark.parametrize("steps", [1, 4])
def test_shares_with_the_coordinate_change_sum_to_the_segment(name, boundaries, steps):
    model = tiny_model(name, dtype=torch.float64)
    lens = random_lens(model, dtype=torch.float64)
    ig = IGLens(model, None, dtype=torch.float64)
    result = ig.attribute(random_ids(7), boundaries=boundaries, steps=steps, components=True,
                          lens=lens)  # fmt: skip
    assert result.component_names[-1] == "coordinate"
    sums, sizes, per_cell = _cell_sums(result)
    tol = (per_cell + steps + per_cell) * eps(torch.float64) * sizes
    assert (np.abs(sums - result.contributions) <= tol).all()
    # The coordinate change is a share of its own: present, and not zero.
    df = result.components
    coordinate = df[df.component == "coordinate"]
    assert coordinate.share.abs().max() > 1e-3
    if boundaries == "sublayer":  # attention halves are read with T_{L−1} at both ends
        assert (coordinate.segment % 2 == 1).all()
    # lens.components() (one position) gives the same split
    np.testing.assert_allclose(
        ig.components(result, [3])[0], result.component_shares[3], rtol=0, atol=tol.max()
    )


def test_riemann_coordinate_share_is_the_gradient_times_the_change_of_coordinates():
    """The coordinate share of a segment a → b under Riemann is (1/m) Σ_s ∇f(x_s)·
    [(A_b − A_a) h_a + (c_b − c_a)], the gradient by autograd through the model's own norm
    and head (GPT-2: LayerNorm, float64 throughout)."""
    model = tiny_model("gpt2", dtype=torch.float64)
    lens = random_lens(model, dtype=torch.float64)
    ids, steps = random_ids(6), 4
    result = IGLens(model, None, dtype=torch.float64).attribute(
        ids, boundaries=[0, 2, 3], estimator="riemann", steps=steps, components=True, lens=lens
    )
    hidden = hidden_states(model, ids)
    h_n = IGLens(model, None, dtype=torch.float64).trace(ids).states[-1]
    hidden.append(h_n)
    t, y = 2, int(result.target_ids[2])
    for a, b in [(0, 2), (2, 3)]:
        h_a, h_b = hidden[a][t], hidden[b][t]
        x_a, x_b = by_hand(lens, h_a, a), by_hand(lens, h_b, b)
        change = (x_b - x_a) - (by_hand(lens, h_b - h_a, b) - by_hand(lens, 0 * h_a, b))
        total, size = 0.0, 0.0
        for s in range(steps):
            x = (x_a + (s + 0.5) / steps * (x_b - x_a)).requires_grad_(True)
            p = torch.softmax(reference_readout_logits(model, x), -1)[y]
            (grad,) = torch.autograd.grad(p, x)
            total += float(grad @ change) / steps
            size += float((grad * change).abs().sum()) / steps
        share = result.component_shares[t, b - 1, -1]  # at the segment's last block
        d = h_a.numel()
        assert share == pytest.approx(
            total, abs=4 * (math.sqrt(d) + steps) * eps(torch.float64) * size
        )
        assert abs(total) > 1e-4
        # No coordinate share at a block inside a segment.
        assert result.component_shares[t, 0, -1] == 0


# ----------------------------------------------------------------------------- logit lens


def test_the_logit_lens_is_todays_method_bit_for_bit():
    model = tiny_model("llama")
    kw = dict(boundaries="sublayer", steps=3, components=True)
    today = IGLens(model).attribute(IDS, **kw)
    ig = IGLens(model)
    ig.attribute(IDS, lens=random_lens(model), **kw)  # a lens in the same cache first
    identity = Lens("tuned", model.config.num_hidden_layers, model.config.hidden_size)
    for lens in ("logit", LOGIT, None, identity):
        again = ig.attribute(IDS, lens=lens, **kw)
        assert again.lens_name == ("tuned" if lens is identity else "logit")
        assert again.component_names == today.component_names  # no coordinate column
        for field in ("lens_probs", "contributions", "path_probs", "component_shares"):
            np.testing.assert_array_equal(getattr(again, field), getattr(today, field))
    assert "lens" not in today.request.to_dict() and "lens" not in today.request.controls()


def test_lenses_share_the_forward_pass():
    model = tiny_model("gpt2")
    ig = IGLens(model)
    ig.attribute(IDS)
    calls = []
    model.register_forward_hook(lambda *args: calls.append(1))
    lens = random_lens(model)
    lensed = ig.attribute(IDS, lens=lens)
    assert calls == []  # the map under the lens, from the cached states
    fresh = IGLens(model).attribute(IDS, lens=lens)
    np.testing.assert_array_equal(lensed.lens_probs, fresh.lens_probs)
    assert ig.trace(IDS, lens=lens).hidden is ig.trace(IDS).states  # one copy of the states


# ----------------------------------------------------------------------------- the request


def test_the_request_names_the_lens():
    model = tiny_model("llama")
    lens = random_lens(model)
    request = AttributionRequest(IDS.tolist(), lens=lens)
    assert request.lens is lens and request.lens_name == "random"
    assert request.to_dict()["lens"] == "random"
    assert request.controls()["lens"] == "random"
    assert request.with_controls(request.controls()) == request  # the same Lens object kept
    assert request.with_controls({}).lens is lens  # controls without a lens switch keep it
    assert request.with_controls({"lens": ""}).lens == "logit"
    assert request.replace(lens="tuned").lens == "tuned"
    result = IGLens(model).run(request)
    assert result.lens_name == "random" and result.to_dict()["lens_name"] == "random"
    for bad in (42, "", "no-such-lens-file"):
        with pytest.raises(InvalidRequestError, match="lens"):
            AttributionRequest("hi", lens=bad)


def test_a_lens_of_another_model_is_refused():
    model = tiny_model("llama")
    other = tiny_model("llama", seed=1)  # the same shape, other weights
    with pytest.raises(IGLensError, match="another model of the same shape"):
        IGLens(model).attribute(IDS, lens=random_lens(other))
    wider = tiny_model("llama", hidden_size=48, num_attention_heads=4)
    with pytest.raises(IGLensError, match="4 blocks of width 48.*not on this one"):
        IGLens(model).attribute(IDS, lens=random_lens(wider))
    deeper = tiny_model("llama", num_hidden_layers=5)
    with pytest.raises(IGLensError, match="5 blocks"):
        IGLens(model).attribute(IDS, lens=random_lens(deeper))


def test_plot_titles_name_the_lens():
    pytest.importorskip("matplotlib")
    model = tiny_model("llama")
    ig = IGLens(model)
    lensed = ig.attribute(IDS, lens=random_lens(model), components=True)
    plain = ig.attribute(IDS, components=True)

    def titles(figure):
        return " ".join(
            [figure._suptitle.get_text() if figure._suptitle else ""]
            + [ax.get_title(loc) for ax in figure.axes for loc in ("center", "left")]
        )

    for plot in (
        lambda r: r.plot_heatmap(),
        lambda r: r.plot_token(3),
        lambda r: r.plot_components(3),
    ):
        assert "random lens" in titles(plot(lensed))
        assert "random lens" not in titles(plot(plain))
    assert "(c) random lens: top-1" in titles(lensed.plot_token(3))
    assert "(c) logit lens: top-1" in titles(plain.plot_token(3))
