"""IG-Lens on the real embedded model (SmolLM2-135M-Instruct, Llama architecture)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import iglens_viz
from iglens_viz import IGLens
from tests.support.tolerances import readout_size, readout_tol, softmax_tol, sum_tol

pytestmark = pytest.mark.real_model

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def default_model():
    return iglens_viz.load_model()


@pytest.fixture(scope="module")
def lens(default_model):
    return IGLens(*default_model)


@pytest.fixture(scope="module")
def size(default_model):
    """Width, vocabulary and logit magnitudes of SmolLM2's readout on PROMPT (tolerances.py)."""
    model, tokenizer = default_model
    return readout_size(model, torch.as_tensor(tokenizer(PROMPT)["input_ids"]))


def test_paris_probability_equals_the_models_own(default_model, lens, size):
    model, tokenizer = default_model
    result = lens.attribute(PROMPT, target=" Paris")
    ids = torch.as_tensor(tokenizer(PROMPT)["input_ids"])
    with torch.no_grad():
        probs = torch.softmax(model(ids[None]).logits[0].double(), -1)
    paris = tokenizer.encode(" Paris", add_special_tokens=False)[0]
    np.testing.assert_allclose(
        result.final_probs, probs[:, paris].numpy(), atol=readout_tol(size)
    )  # norm+head recomputed
    assert result.final_probs[-1] > 0.5  # the model does know it
    np.testing.assert_allclose(
        result.contributions.sum(1), result.delta_p, atol=sum_tol(torch.float32, result.n_blocks)
    )  # n differences
    assert result.n_blocks == 30 and result.family == "Llama / SmolLM"


def test_logit_lens_matches_hidden_states(default_model, lens, size):
    """Intermediate lens probabilities equal norm+head applied to HF's hidden states."""
    model, tokenizer = default_model
    result = lens.attribute(PROMPT, target="next")
    ids = torch.as_tensor(tokenizer(PROMPT)["input_ids"])
    with torch.no_grad():
        hidden = model(ids[None], output_hidden_states=True).hidden_states
        for layer in (0, 10, 21, 29):
            probs = torch.softmax(model.lm_head(model.model.norm(hidden[layer][0])).double(), -1)
            expected = probs[torch.arange(len(ids) - 1), ids[1:]].numpy()
            np.testing.assert_allclose(
                result.lens_probs[:-1, layer], expected, atol=readout_tol(size)
            )  # norm+head recomputed


def test_vietnam_answer_has_non_monotone_tokens(lens):
    """The issue's teaching case: the generated answer and a build-then-undo trajectory."""
    result = lens.attribute("What is the capital of Vietnam?", chat=True, max_new_tokens=12)
    answer = "".join(result.tokens[result.prompt_length :])
    assert answer.startswith("The capital of Vietnam is")
    # Somewhere along the answer a segment works against the final change by > 0.1.
    rows = result.contributions[result.answer_positions]
    against = -np.sign(result.delta_p[result.answer_positions])[:, None] * rows
    assert against.max() > 0.1


def test_ablation_drops_match_an_independent_ablation(default_model, size):
    from iglens_viz.causal import ablate

    model, tokenizer = default_model
    layers = [1, 12, 30]
    # One ablation per forward pass, called as the reference below calls the model: the same
    # shapes and arguments run the same kernels, so both sides get the same logits and differ
    # only in the softmax. (Batching is checked against separate passes in test_causal.py.)
    result = ablate(model, tokenizer, PROMPT, target=" Paris", layers=layers, batch_size=1)
    ids = torch.as_tensor(tokenizer(PROMPT)["input_ids"])[None]
    paris = tokenizer.encode(" Paris", add_special_tokens=False)[0]
    logit_max = []

    def p_paris():
        with torch.no_grad():
            logits = (
                model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
                .logits[0]
                .double()
            )
        logit_max.append(float(logits.abs().max()))
        return torch.softmax(logits, -1)[:, paris].numpy()

    clean = p_paris()
    # float32 logsumexp against float64 softmax of the same logits.
    tol = softmax_tol(torch.float32, size.vocab, max(logit_max))
    np.testing.assert_allclose(result.clean_probs, clean, atol=tol)
    for column, layer in enumerate(layers):

        def skip(module, args, kwargs, output):  # block `layer` adds nothing
            hidden = args[0] if args else kwargs["hidden_states"]
            return hidden if isinstance(output, torch.Tensor) else (hidden, *output[1:])

        handle = model.model.layers[layer - 1].register_forward_hook(skip, with_kwargs=True)
        try:
            ablated = p_paris()
        finally:
            handle.remove()
        tol = softmax_tol(torch.float32, size.vocab, max(logit_max))
        np.testing.assert_allclose(result.drop[:, column], clean - ablated, atol=2 * tol)
    assert result.drop[-1].max() > 0.3  # some block really matters for " Paris"


def test_paris_inside_the_block(default_model, lens, size):
    """Sub-layer lens at h_L.attn (read with a hook of the test's own on each attention's
    output) and head shares that add up to each half block's contribution."""
    model, tokenizer = default_model
    result = lens.attribute(PROMPT, target=" Paris", boundaries="sublayer", components=True)
    ids = torch.as_tensor(tokenizer(PROMPT)["input_ids"])
    inputs, writes = {}, {}
    handles = []
    for i, block in enumerate(model.model.layers):
        handles.append(
            block.register_forward_pre_hook(
                lambda m, args, kwargs, i=i: inputs.__setitem__(
                    i, args[0] if args else kwargs["hidden_states"]
                ),
                with_kwargs=True,
            )
        )
        handles.append(
            block.self_attn.register_forward_hook(
                lambda m, args, out, i=i: writes.__setitem__(i, out[0])
            )
        )
    try:
        with torch.no_grad():
            model(ids[None])
            mids = [inputs[i][0] + writes[i][0] for i in (0, 14, 29)]
            expected = [
                torch.softmax(model.lm_head(model.model.norm(h)).double(), -1)[
                    :, result.target_ids[0]
                ].numpy()
                for h in mids
            ]
    finally:
        for handle in handles:
            handle.remove()
    for got, layer in zip(expected, (1, 15, 30)):
        np.testing.assert_allclose(
            result.lens_probs[:, 2 * layer - 1], got, atol=readout_tol(size)
        )  # norm+head recomputed
    np.testing.assert_allclose(
        result.contributions.sum(1),
        result.delta_p,
        atol=sum_tol(torch.float32, 2 * result.n_blocks),
    )
    df = result.components
    cells = df.assign(size=df.share.abs()).groupby(["position", "segment"])
    sums = cells.share.sum().unstack().to_numpy()
    sizes = cells["size"].sum().unstack().to_numpy()
    # m = 1: the step's change times C float32 weights w_c / Σw, which sum to 1 up to C
    # roundings relative to Σ|w_c| / |Σw| — i.e. relative to the cell's Σ|share| — plus the
    # float64 sum of the cell's C shares.
    tol = 2 * len(result.component_names) * torch.finfo(torch.float32).eps * sizes
    assert (np.abs(sums - result.contributions) <= tol).all()
    last = df[df.position == len(ids) - 1]
    top = last.loc[last.share.abs().idxmax()]
    assert (top.block, top.component) == (30, "mlp")  # the README's figure: +0.672


def test_whole_answer_coordinate_parts_as_quoted(lens):
    """The whole-answer findings (docs/findings/whole-answers.md): under the shortcut, the
    differential log ledger of "Hoi An" against "Hanoi" has its largest entries at blocks
    13, 9 and 4, and the lens's change of coordinates (the ``coordinate`` component) is most
    of blocks 9's and 4's."""
    from pathlib import Path

    result = lens.attribute(
        "What is the capital of Vietnam?",
        chat=True,
        answer="The capital of Vietnam is Hoi An.",
        versus="The capital of Vietnam is Hanoi.",
        lens="shortcut",
        components=True,
    )
    a, b = result.answer, result.versus
    entries = a.logprob_split.sum(1) - b.logprob_split.sum(1)
    column = a.component_names.index("coordinate")
    coordinate = a.component_shares[:, column] - b.component_shares[:, column]
    # the components add up to each entry (the split is exact, float64 sums of float32
    # terms: 1e-6 of their total size), so "most of" is a fair word
    both = a.component_shares.sum(1) - b.component_shares.sum(1)
    np.testing.assert_allclose(both, entries, atol=1e-6 * np.abs(a.component_shares).sum())
    largest = [int(j) + 1 for j in np.argsort(-np.abs(entries))[:3]]
    assert largest == [13, 9, 4]
    page = Path(__file__).parents[1] / "docs" / "findings" / "whole-answers.md"
    readme = page.read_text(encoding="utf-8")
    quoted = {13: 0.1, 9: 11.5, 4: 6.6}  # the page's sentence, to one decimal
    sentence = (
        f"is +{quoted[9]} of block 9's entry and +{quoted[4]} of block 4's, against "
        f"+{quoted[13]} of block 13's"
    )
    assert sentence in " ".join(readme.split())
    # 0.05: the page rounds to one decimal; 1e-3: float32 states on another CPU move these
    # nats-sized entries by ~1e-5 (the ledger's float32 rounding times ~30 blocks), well below
    for block, figure in quoted.items():
        assert abs(coordinate[block - 1] - figure) < 0.05 + 1e-3, (block, coordinate[block - 1])
    assert coordinate[8] > 0.5 * entries[8] and coordinate[3] > 0.5 * entries[3]
