"""The public API: inputs, targets, contrast, caching, precision, devices and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import iglens_viz
from iglens_viz import IGLens

from tiny_models import (VOCAB, model_logits, random_ids, reference_lens_probs, tiny_model,
                         tiny_tokenizer)

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


def test_text_and_id_inputs_agree(lens):
    text = " ".join(f"w{i}" for i in IDS.tolist())
    from_text = lens.attribute(text)
    for ids in (IDS.tolist(), IDS, IDS[None], IDS.numpy()):
        other = lens.attribute(ids)
        np.testing.assert_array_equal(other.input_ids, from_text.input_ids)
        np.testing.assert_allclose(other.contributions, from_text.contributions, atol=1e-12)
    assert from_text.tokens == [f"w{i}" for i in IDS.tolist()]


def test_result_fields(lens, llama):
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
    np.testing.assert_allclose(result.top_probs[:, -1], values.numpy(), atol=1e-6)
    # The onset is the last block of the largest-contribution segment.
    np.testing.assert_array_equal(result.onset, np.argmax(result.contributions, axis=1) + 1)
    assert len(result.top_tokens[0][0]) == K and result.top_tokens[0][-1][0] == \
        f"w{result.top_ids[0, -1, 0]}"


def test_int_string_and_sequence_targets(lens, llama):
    by_id = lens.attribute(IDS, target=7)
    by_text = lens.attribute(IDS, target="w7")
    np.testing.assert_array_equal(by_id.target_ids, np.full(IDS.numel(), 7))
    np.testing.assert_allclose(by_text.lens_probs, by_id.lens_probs)
    seq = (np.arange(IDS.numel()) * 5) % VOCAB
    by_seq = lens.attribute(IDS, target=seq)
    expected = reference_lens_probs(llama, IDS, torch.as_tensor(seq)).T.numpy()
    np.testing.assert_allclose(by_seq.lens_probs, expected, atol=1e-5)


def test_contrast_attributes_probability_difference(lens, llama):
    result = lens.attribute(IDS, target="next", contrast=11)
    targets = torch.as_tensor(np.where(result.target_ids < 0, 0, result.target_ids))
    expected = (reference_lens_probs(llama, IDS, targets)
                - reference_lens_probs(llama, IDS, torch.full_like(IDS, 11))).T.numpy()
    np.testing.assert_allclose(result.lens_probs[:-1], expected[:-1], atol=1e-5)
    np.testing.assert_allclose(result.contributions[:-1].sum(1), result.delta_p[:-1], atol=1e-7)
    np.testing.assert_array_equal(result.contrast_ids, np.full(IDS.numel(), 11))
    riemann = lens.attribute(IDS, target="next", contrast=11, estimator="riemann", steps=64)
    np.testing.assert_allclose(riemann.contributions[:-1], result.contributions[:-1], atol=2e-3)


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


def test_float64_readout_matches_float32(llama):
    r32 = iglens_viz.attribute(llama, None, IDS)
    r64 = iglens_viz.attribute(llama, None, IDS, dtype=torch.float64)
    np.testing.assert_allclose(r64.lens_probs, r32.lens_probs, atol=1e-6)
    np.testing.assert_allclose(r64.contributions.sum(1), r64.delta_p, atol=1e-12)


def test_bfloat16_model_is_read_out_in_float32():
    model = tiny_model("llama", dtype=torch.bfloat16)
    lens = IGLens(model)
    trace = lens.trace(IDS)
    assert trace.states.dtype == torch.float32 and lens.readout.head_weight.dtype == torch.float32
    result = lens.attribute(IDS)
    probs = torch.softmax(model_logits(model, IDS), -1)
    expected = probs[torch.arange(IDS.numel()), torch.as_tensor(result.target_ids)].numpy()
    np.testing.assert_allclose(result.final_probs, expected, atol=2e-2)  # bf16 logits vs fp32
    np.testing.assert_allclose(result.contributions.sum(1), result.delta_p, atol=1e-6)


def test_accelerate_cpu_offload_gives_same_result(llama):
    from accelerate import cpu_offload

    expected = iglens_viz.attribute(llama, None, IDS, steps=3)
    offloaded = tiny_model("llama")
    cpu_offload(offloaded, execution_device=torch.device("cpu"))
    assert offloaded.lm_head.weight.device.type == "meta"  # weights really are offloaded
    result = iglens_viz.attribute(offloaded, None, IDS, steps=3)
    np.testing.assert_allclose(result.lens_probs, expected.lens_probs, atol=1e-6)
    np.testing.assert_allclose(result.path_probs, expected.path_probs, atol=1e-6)


@pytest.mark.parametrize("budget", [1, 360])  # 1 column per block; ~4 vocabulary blocks
def test_small_memory_budget_chunks_without_changing_results(llama, budget):
    whole = IGLens(llama).attribute(IDS, steps=3, estimator="riemann")
    chunked = IGLens(llama, memory_budget=budget).attribute(IDS, steps=3, estimator="riemann")
    np.testing.assert_array_equal(chunked.top_ids, whole.top_ids)
    np.testing.assert_allclose(chunked.top_probs, whole.top_probs, atol=1e-6)
    np.testing.assert_allclose(chunked.lens_probs, whole.lens_probs, atol=1e-6)
    np.testing.assert_allclose(chunked.contributions, whole.contributions, atol=1e-6)
    np.testing.assert_allclose(chunked.path_probs, whole.path_probs, atol=1e-6)


def test_post_norm_opt_is_supported():
    model = tiny_model("opt", do_layer_norm_before=False)
    result = iglens_viz.attribute(model, None, IDS)
    probs = torch.softmax(model_logits(model, IDS), -1)
    expected = probs[torch.arange(IDS.numel()), torch.as_tensor(result.target_ids)].numpy()
    np.testing.assert_allclose(result.final_probs, expected, atol=1e-5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_random_boundaries_steps_targets(lens, data):
    n = lens.n_blocks
    inner = data.draw(st.lists(st.integers(1, n - 1), unique=True, max_size=n - 1))
    bounds = [0, *sorted(inner), n]
    steps = data.draw(st.integers(1, 6))
    target = data.draw(st.one_of(st.just("predicted"), st.just("next"),
                                 st.integers(0, VOCAB - 1),
                                 st.lists(st.integers(0, VOCAB - 1), min_size=IDS.numel(),
                                          max_size=IDS.numel())))
    estimator = data.draw(st.sampled_from(["prediction_aware", "riemann"]))
    result = lens.attribute(IDS, target=target, boundaries=bounds, steps=steps,
                            estimator=estimator)
    full = lens.attribute(IDS, target=target)
    ok = result.target_ids >= 0
    k = len(bounds) - 1
    assert result.contributions.shape == (IDS.numel(), k)
    np.testing.assert_allclose(result.lens_probs[ok], full.lens_probs[ok][:, bounds], atol=1e-7)
    if estimator == "prediction_aware":
        np.testing.assert_allclose(result.contributions[ok].sum(1), result.delta_p[ok], atol=1e-6)
    if steps > 1:
        assert result.path_probs.shape == (IDS.numel(), k, steps + 1)
        assert np.all((result.path_probs[ok] >= 0) & (result.path_probs[ok] <= 1))
    onset_ok = result.onset[ok]
    assert np.all(np.isin(onset_ok, bounds[1:]))


# --- bad input -------------------------------------------------------------------------

@pytest.mark.parametrize("bad, error, match", [
    ("", ValueError, "empty"),
    ([], ValueError, "empty"),
    (torch.zeros(2, 3, dtype=torch.long), ValueError, "one sequence"),
    ([0.5, 1.5], TypeError, "integers"),
    ([VOCAB + 3], ValueError, "out of range"),
    (list(range(40)) * 2, ValueError, "context is 64"),
    (3.0, TypeError, "string, a sequence"),
])
def test_bad_prompts(lens, bad, error, match):
    with pytest.raises(error, match=match):
        lens.attribute(bad)


def test_multi_token_target_string_shows_its_tokenisation(lens):
    with pytest.raises(ValueError, match=r"not a single token: it tokenises to 2 tokens \['w1', 'w2'\]"):
        lens.attribute(IDS, target="w1 w2")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(boundaries=[0, 3, 2, 4]), ValueError, "strictly increasing"),
    (dict(boundaries=[0, 2, 9]), ValueError, "end at n=4"),
    (dict(boundaries=[1, 4]), ValueError, "start at 0"),
    (dict(boundaries="0,2,4"), TypeError, "list of ints"),
    (dict(estimator="simpson"), ValueError, "unknown estimator"),
    (dict(steps=0), ValueError, "steps must be an integer >= 1"),
    (dict(steps=2.5), ValueError, "steps must be an integer >= 1"),
    (dict(target=VOCAB), ValueError, "out of range"),
    (dict(target=[1, 2]), ValueError, "one id per position"),
    (dict(target=None), TypeError, "target must be"),
    (dict(contrast=-5), ValueError, "contrast ids out of range"),
])
def test_bad_arguments(lens, kwargs, error, match):
    with pytest.raises(error, match=match):
        lens.attribute(IDS, **kwargs)


def test_encoder_only_model_is_refused():
    import transformers as tf

    bert = tf.BertForMaskedLM(tf.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                            num_attention_heads=2, intermediate_size=32))
    with pytest.raises(TypeError, match="not a causal language model.*Supported families"):
        iglens_viz.attribute(bert, None, [1, 2, 3])


def test_unknown_causal_architecture_is_refused_with_guidance():
    import transformers as tf

    model = tf.BloomForCausalLM(tf.BloomConfig(vocab_size=50, hidden_size=16, n_layer=1, n_head=2))
    with pytest.raises(TypeError, match=r"BloomForCausalLM \(model_type='bloom'\) is not in the "
                                        r"adapter table.*families\.py"):
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
    np.testing.assert_allclose(result.contributions.sum(1), result.delta_p, atol=1e-6)
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
