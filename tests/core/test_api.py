"""The public API: inputs, targets, contrast, caching, precision, devices and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import iglens_viz
from iglens_viz import IGLens, InvalidRequestError
from tests.support.tiny_models import (
    VOCAB,
    model_logits,
    random_ids,
    reference_lens_probs,
    tiny_model,
    tiny_tokenizer,
)
from tests.support.tolerances import (
    half_readout_tol,
    midpoint_tol,
    readout_size,
    readout_tol,
    sum_tol,
)

IDS = random_ids(10, seed=3)


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def lens(llama, tokenizer):
    return IGLens(llama, tokenizer)


@pytest.fixture(scope="module")
def size(llama):
    """Width, vocabulary and logit magnitudes of the tiny Llama's readout (tolerances.py)."""
    return readout_size(llama, IDS)


def test_text_and_id_inputs_agree(lens):
    text = " ".join(f"w{i}" for i in IDS.tolist())
    from_text = lens.attribute(text)
    for ids in (IDS.tolist(), IDS, IDS[None], IDS.numpy()):
        other = lens.attribute(ids)
        np.testing.assert_array_equal(other.input_ids, from_text.input_ids)
        # One cached trace, the same arithmetic: the same numbers.
        np.testing.assert_array_equal(other.contributions, from_text.contributions)
    assert from_text.tokens == [f"w{i}" for i in IDS.tolist()]


def test_result_fields(lens, llama, size):
    result = lens.attribute(IDS)
    T, n, K = IDS.numel(), lens.n_blocks, 5
    assert result.boundaries == list(range(n + 1))
    assert result.lens_probs.shape == (T, n + 1) and result.contributions.shape == (T, n)
    assert result.top_ids.shape == result.top_probs.shape == (T, n + 1, K)
    assert result.path_probs is None
    assert result.target_tokens == [f"w{i}" for i in result.target_ids]
    # Top-k at the last boundary is the model's own top-k, in order.
    probs = torch.softmax(model_logits(llama, IDS), -1)
    values, ids = probs.topk(K, dim=-1)
    np.testing.assert_array_equal(result.top_ids[:, -1], ids.numpy())
    np.testing.assert_allclose(
        result.top_probs[:, -1], values.numpy(), atol=readout_tol(size)
    )  # norm+head recomputed
    # The onset is the last block of the largest-contribution segment.
    np.testing.assert_array_equal(result.onset, np.argmax(result.contributions, axis=1) + 1)
    assert (
        len(result.top_tokens[0][0]) == K
        and result.top_tokens[0][-1][0] == f"w{result.top_ids[0, -1, 0]}"
    )


def test_int_string_and_sequence_targets(lens, llama, size):
    by_id = lens.attribute(IDS, target=7)
    by_text = lens.attribute(IDS, target="w7")
    np.testing.assert_array_equal(by_id.target_ids, np.full(IDS.numel(), 7))
    np.testing.assert_array_equal(by_text.lens_probs, by_id.lens_probs)  # same target id
    seq = (np.arange(IDS.numel()) * 5) % VOCAB
    by_seq = lens.attribute(IDS, target=seq)
    expected = reference_lens_probs(llama, IDS, torch.as_tensor(seq)).T.numpy()
    np.testing.assert_allclose(by_seq.lens_probs, expected, atol=readout_tol(size))


def test_contrast_attributes_probability_difference(lens, llama, size):
    result = lens.attribute(IDS, target="next", contrast=11)
    targets = torch.as_tensor(np.where(result.target_ids < 0, 0, result.target_ids))
    expected = (
        reference_lens_probs(llama, IDS, targets)
        - reference_lens_probs(llama, IDS, torch.full_like(IDS, 11))
    ).T.numpy()
    # A difference of two recomputed probabilities: twice the readout tolerance.
    np.testing.assert_allclose(result.lens_probs[:-1], expected[:-1], atol=2 * readout_tol(size))
    k = result.contributions.shape[1]
    np.testing.assert_allclose(
        result.contributions[:-1].sum(1), result.delta_p[:-1], atol=sum_tol(torch.float32, 2 * k)
    )  # 2k float32 probabilities
    np.testing.assert_array_equal(result.contrast_ids, np.full(IDS.numel(), 11))
    steps = 64
    riemann = lens.attribute(IDS, target="next", contrast=11, estimator="riemann", steps=steps)
    # The midpoint rule's discretisation bound, from f's third derivative along a fine
    # float64 path, plus the rounding of the exact totals it is compared with.
    fine = IGLens(llama, dtype=torch.float64).attribute(IDS, target="next", contrast=11, steps=256)
    tol = midpoint_tol(fine.path_probs[:-1], steps) + 2 * readout_tol(size)  # per segment
    assert np.all(np.abs(riemann.contributions[:-1] - result.contributions[:-1]) <= tol)


def test_retargeting_reuses_the_forward_pass(llama):
    calls = []
    handle = llama.register_forward_hook(lambda *args: calls.append(1))
    try:
        lens = IGLens(llama)
        lens.attribute(IDS)
        lens.attribute(IDS, target=3, contrast=4, boundaries=[0, 2, lens.n_blocks])
        lens.attribute(IDS, estimator="riemann", steps=3)
        assert len(calls) == 1
        lens.attribute(IDS[:5])
        assert len(calls) == 2
    finally:
        handle.remove()


def test_float64_readout_matches_float32(llama, size):
    r32 = iglens_viz.attribute(llama, None, IDS)
    r64 = iglens_viz.attribute(llama, None, IDS, dtype=torch.float64)
    np.testing.assert_allclose(r64.lens_probs, r32.lens_probs, atol=readout_tol(size))
    k = r64.contributions.shape[1]
    np.testing.assert_allclose(
        r64.contributions.sum(1), r64.delta_p, atol=sum_tol(torch.float64, k)
    )  # k float64 differences


def test_bfloat16_model_is_read_out_in_float32():
    model = tiny_model("llama", dtype=torch.bfloat16)
    lens = IGLens(model)
    trace = lens.trace(IDS)
    assert trace.states.dtype == torch.float32
    # The head is not copied: it stays bf16, in the model's own storage (upcast per block).
    assert lens.readout.head_weight.dtype == torch.bfloat16
    assert lens.readout.head_weight.data_ptr() == model.lm_head.weight.data_ptr()
    result = lens.attribute(IDS)
    probs = torch.softmax(model_logits(model, IDS), -1)
    expected = probs[torch.arange(IDS.numel()), torch.as_tensor(result.target_ids)].numpy()
    # The model's own logits are rounded to bf16 (its head inputs and outputs).
    tol = half_readout_tol(readout_size(model, IDS), torch.bfloat16)
    np.testing.assert_allclose(result.final_probs, expected, atol=tol)
    k = result.contributions.shape[1]
    np.testing.assert_allclose(
        result.contributions.sum(1), result.delta_p, atol=sum_tol(torch.float32, k)
    )


def test_accelerate_cpu_offload_gives_same_result(llama):
    from accelerate import cpu_offload

    expected = iglens_viz.attribute(llama, None, IDS, steps=3)
    offloaded = tiny_model("llama")
    cpu_offload(offloaded, execution_device=torch.device("cpu"))
    assert offloaded.lm_head.weight.device.type == "meta"  # weights really are offloaded
    result = iglens_viz.attribute(offloaded, None, IDS, steps=3)
    # The same weights and the same arithmetic, offloaded or not: the same numbers.
    np.testing.assert_array_equal(result.lens_probs, expected.lens_probs)
    np.testing.assert_array_equal(result.path_probs, expected.path_probs)


@pytest.mark.parametrize("budget, blocks", [(1, VOCAB), (360, 4)])  # 1 column per block; 4
def test_small_memory_budget_chunks_without_changing_results(llama, size, budget, blocks):
    whole = IGLens(llama).attribute(IDS, steps=3, estimator="riemann")
    # The planners below the lens's floor (IGLens raises a smaller budget to
    # min_memory_budget, see test_user_errors): set on the lens, not passed to it.
    chunked = IGLens(llama)
    chunked.memory_budget = budget
    chunked = chunked.attribute(IDS, steps=3, estimator="riemann")
    np.testing.assert_array_equal(chunked.top_ids, whole.top_ids)
    # The same readout, its logsumexp streamed over `blocks` vocabulary blocks (and its dot
    # products possibly by other kernels); the Riemann slopes are formed from the same
    # logits and softmax.
    tol = readout_tol(size, torch.float32, blocks)
    np.testing.assert_allclose(chunked.top_probs, whole.top_probs, atol=tol)
    np.testing.assert_allclose(chunked.lens_probs, whole.lens_probs, atol=tol)
    np.testing.assert_allclose(chunked.contributions, whole.contributions, atol=tol)
    np.testing.assert_allclose(chunked.path_probs, whole.path_probs, atol=tol)


def test_post_norm_opt_is_supported():
    model = tiny_model("opt", do_layer_norm_before=False)
    result = iglens_viz.attribute(model, None, IDS)
    probs = torch.softmax(model_logits(model, IDS), -1)
    expected = probs[torch.arange(IDS.numel()), torch.as_tensor(result.target_ids)].numpy()
    np.testing.assert_allclose(
        result.final_probs, expected, atol=readout_tol(readout_size(model, IDS))
    )  # norm+head


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_property_random_boundaries_steps_targets(lens, data):
    n = lens.n_blocks
    inner = data.draw(st.lists(st.integers(1, n - 1), unique=True, max_size=n - 1))
    bounds = [0, *sorted(inner), n]
    steps = data.draw(st.integers(1, 6))
    target = data.draw(
        st.one_of(
            st.just("predicted"),
            st.just("next"),
            st.integers(0, VOCAB - 1),
            st.lists(st.integers(0, VOCAB - 1), min_size=IDS.numel(), max_size=IDS.numel()),
        )
    )
    estimator = data.draw(st.sampled_from(["prediction_aware", "riemann"]))
    result = lens.attribute(IDS, target=target, boundaries=bounds, steps=steps, estimator=estimator)
    full = lens.attribute(IDS, target=target)
    ok = result.target_ids >= 0
    k = len(bounds) - 1
    assert result.contributions.shape == (IDS.numel(), k)
    # The same rows of the same cached map: the same numbers.
    np.testing.assert_array_equal(result.lens_probs[ok], full.lens_probs[ok][:, bounds])
    if estimator == "prediction_aware":
        np.testing.assert_allclose(
            result.contributions[ok].sum(1), result.delta_p[ok], atol=sum_tol(torch.float32, k)
        )  # k differences
    if steps > 1:
        assert result.path_probs.shape == (IDS.numel(), k, steps + 1)
        assert np.all((result.path_probs[ok] >= 0) & (result.path_probs[ok] <= 1))
    onset_ok = result.onset[ok]
    assert np.all(np.isin(onset_ok, bounds[1:]))


# --- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, match",
    [
        ("", "empty"),
        ("  \n\t", "empty \\(only whitespace\\)"),
        ([], "empty"),
        (torch.zeros(2, 3, dtype=torch.long), "one sequence"),
        ([0.5, 1.5], "integers"),
        ([VOCAB + 3], "out of range"),
        ([3, -1], ">= 0"),
        (list(range(40)) * 2, "context is 64"),
        (3.0, "string, a sequence"),
    ],
)
def test_bad_prompts(lens, bad, match):
    with pytest.raises(InvalidRequestError, match=match):
        lens.attribute(bad)


def test_multi_token_target_string_shows_its_tokenisation(lens):
    with pytest.raises(
        InvalidRequestError, match=r"not a single token: it tokenises to 2 tokens \['w1', 'w2'\]"
    ):
        lens.attribute(IDS, target="w1 w2")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(boundaries=[0, 3, 2, 4]), "strictly increasing"),
        (dict(boundaries=[0, 2, 9]), "end at n=4"),
        (dict(boundaries=[1, 4]), "start at 0"),
        (dict(boundaries="0,2,x"), "not 'all', 'every:5'"),
        (dict(boundaries=[0, 1.5, 4]), "must be integers"),
        (dict(boundaries=np.array([0.0, 2.0, 4.0])), "must be integers"),
        (dict(estimator="simpson"), "unknown estimator"),
        (dict(steps=0), "steps must be an integer from 1 to 1000"),
        (dict(steps=2.5), "steps must be an integer from 1 to 1000"),
        (dict(steps=10_000_000), "steps must be an integer from 1 to 1000"),
        (dict(target=VOCAB), "out of range"),
        (dict(target=[1, 2]), "one id per position"),
        (dict(target=None), "target must be"),
        (dict(target=""), "empty string"),
        (dict(contrast=-5), "contrast token id must be >= 0"),
        (dict(chat="yes"), "chat must be"),
        (dict(max_new_tokens=-1), "max_new_tokens must be"),
    ],
)
def test_bad_arguments(lens, kwargs, match):
    with pytest.raises(InvalidRequestError, match=match):
        lens.attribute(IDS, **kwargs)


def test_encoder_only_model_is_refused():
    import transformers as tf

    bert = tf.BertForMaskedLM(
        tf.BertConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
    )
    with pytest.raises(TypeError, match="not a causal language model.*Supported families"):
        iglens_viz.attribute(bert, None, [1, 2, 3])


def test_unknown_causal_architecture_is_refused_with_guidance():
    import transformers as tf

    model = tf.BloomForCausalLM(tf.BloomConfig(vocab_size=50, hidden_size=16, n_layer=1, n_head=2))
    with pytest.raises(
        TypeError,
        match=r"BloomForCausalLM \(model_type='bloom'\) is not in the "
        r"adapter table.*families\.py",
    ):
        iglens_viz.attribute(model, None, [1, 2, 3])


def test_wrong_adapter_is_caught_by_the_self_check(llama, monkeypatch):
    """A readout that does not reproduce the model (here: norm skipped) fails loudly."""
    lens = IGLens(tiny_model("llama"))
    lens.readout.has_norm = False
    with pytest.raises(iglens_viz.ReadoutMismatchError, match="self-check"):
        lens.attribute(IDS)


# --- chat template and generated answers ------------------------------------------------


def test_generation_attributes_prompt_and_answer_in_one_pass(llama):
    prompt = IDS[:6]
    lens = IGLens(llama)
    result = lens.attribute(prompt, max_new_tokens=4)
    assert result.prompt_length == 6 and len(result.input_ids) == 10
    # The answer is the model's greedy continuation, written independently here.
    ids = prompt.clone()
    for _ in range(4):
        ids = torch.cat([ids, model_logits(llama, ids)[-1].argmax()[None]])
    np.testing.assert_array_equal(result.input_ids, ids.numpy())
    np.testing.assert_array_equal(result.answer_positions, [5, 6, 7, 8])
    np.testing.assert_array_equal(result.target_ids[5:9], ids[6:].numpy())
    np.testing.assert_allclose(
        result.contributions.sum(1), result.delta_p, atol=sum_tol(torch.float32, lens.n_blocks)
    )  # n differences
    assert IGLens(llama).attribute(prompt).answer_positions.size == 0


def test_chat_template_wraps_the_user_message(llama):
    tokenizer = tiny_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}w1 {{ m['content'] }} w2{% endfor %} w3"
    lens = IGLens(llama, tokenizer)
    wrapped = lens.attribute("w7 w8", chat=True)
    assert wrapped.tokens == ["w1", "w7", "w8", "w2", "w3"]
    assert lens.attribute("w7 w8", chat="auto").tokens == wrapped.tokens
    assert lens.attribute("w7 w8").tokens == ["w7", "w8"]  # the API default is raw text
    with pytest.raises(ValueError, match="no chat template"):
        IGLens(llama, tiny_tokenizer()).attribute("w7", chat=True)
    with pytest.raises(ValueError, match="max_new_tokens"):
        lens.attribute("w7", max_new_tokens=-1)


@pytest.mark.parametrize("top_k", [0, 1, 3])
def test_top_k_setting(llama, top_k):
    result = IGLens(llama, top_k=top_k).attribute(IDS)
    assert result.top_ids.shape == (IDS.numel(), 5, top_k)
    reference = IGLens(llama).attribute(IDS)
    np.testing.assert_array_equal(result.target_ids, reference.target_ids)
    np.testing.assert_array_equal(result.top_ids, reference.top_ids[..., :top_k])
