"""Whole answers (``answer=`` / ``versus=``): the ledgers of a multi-token answer.

Every number is checked against the test's own computation from the model's own modules:
log p(answer) from ``log_softmax(model(ids).logits)`` at the answer positions (teacher
forcing), the per-token lens probabilities from ``tiny_models.reference_lens_probs``
(``output_hidden_states`` read by the model's own norm and head).

Tolerances: :func:`tolerances.logprob_tol` (log p of n tokens, two readouts of the same
states), :func:`tolerances.readout_tol` per factor of a product of n probabilities ≤ 1
(|Π a_i − Π b_i| ≤ Σ |a_i − b_i|), and completeness: k first differences of float64 numbers
whose magnitude is at most M, summed in float64 (``sum_tol(float64, 2k) · M``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import iglens_viz
from iglens_viz import IGLens, InvalidRequestError
from iglens_viz.protocol.payload import result_payload
from tests.support.tiny_models import (
    FAMILY_NAMES,
    model_logits,
    random_ids,
    reference_lens_probs,
    tiny_model,
    tiny_tokenizer,
)
from tests.support.tolerances import (
    eps,
    forward_dtype,
    forward_tol,
    logprob_tol,
    readout_size,
    readout_tol,
    sum_tol,
)

IDS = random_ids(12)
PROMPT, ANSWER, OTHER = IDS[:7], IDS[7:10].tolist(), IDS[9:12].tolist()[::-1] + [5]


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family_model(request):
    return request.param, tiny_model(request.param)


def completeness_tol(values: np.ndarray) -> float:
    """k first differences of float64 values ≤ M in magnitude, summed in float64."""
    return sum_tol(torch.float64, 2 * values.size) * float(np.nanmax(np.abs(values)))


def reference_answer(model, prompt: torch.Tensor, answer: list[int]):
    """log p(answer) teacher-forced and the ``(n, n_blocks+1)`` per-token lens probabilities,
    computed with the model's own modules."""
    ids = torch.cat([prompt, torch.as_tensor(answer)])
    start = prompt.numel()
    positions = torch.arange(start - 1, ids.numel() - 1)
    logp = torch.log_softmax(model_logits(model, ids), -1)
    logprob = float(logp[positions, ids[start:]].sum())
    targets = torch.zeros(ids.numel(), dtype=torch.long)
    targets[positions] = ids[start:]
    lens = reference_lens_probs(model, ids, targets)[:, positions].T.numpy()  # [n, n+1]
    return logprob, lens, ids


def test_answer_ledgers_match_the_model_on_every_family(family_model):
    name, model = family_model
    result = IGLens(model).attribute(PROMPT, answer=ANSWER, versus=OTHER)
    size = readout_size(model, torch.cat([PROMPT, torch.as_tensor(OTHER)]))
    for ledger, answer in ((result.answer, ANSWER), (result.versus, OTHER)):
        logprob, lens, ids = reference_answer(model, PROMPT, answer)
        n = len(answer)
        assert ledger.ids.tolist() == answer
        assert ledger.positions.tolist() == list(range(PROMPT.numel() - 1, ids.numel() - 1))
        # log p(answer) at the output is the model's own, teacher-forced
        assert abs(ledger.logprob - logprob) <= logprob_tol(size, torch.float32, n), name
        # the joint lens probability is the product of the per-token lens probabilities
        np.testing.assert_allclose(
            ledger.lens_probs, lens.prod(0), rtol=0, atol=n * readout_tol(size)
        )
        # each token's share of a segment is its own log-lens difference (two log p's)
        log_lens = np.log(lens)
        expected = (log_lens[:, 1:] - log_lens[:, :-1]).T
        np.testing.assert_allclose(
            ledger.logprob_split, expected, rtol=0, atol=2 * logprob_tol(size, torch.float32)
        )
        # both ledgers add up to their measured change at float precision
        lp, p = ledger.lens_logprobs, ledger.lens_probs
        assert ledger.logprob_completeness_error <= completeness_tol(lp)
        assert abs(ledger.prob_contributions.sum() - (p[-1] - p[0])) <= completeness_tol(p)
        assert ledger.logprob_split.shape == (model.config.num_hidden_layers, n)
    comparison = result.comparison
    gap = comparison.lens_logprob_gaps
    assert comparison.completeness_error <= 2 * completeness_tol(gap)
    np.testing.assert_array_equal(
        comparison.logprob_contributions,
        result.answer.logprob_contributions - result.versus.logprob_contributions,
    )
    assert comparison.logprob_gap == result.answer.logprob - result.versus.logprob
    # its onset: the block moving the log gap most towards the output's preference
    towards = np.sign(comparison.logprob_gap) * comparison.logprob_contributions
    assert comparison.onset == int(np.argmax(towards)) + 1


def test_a_one_token_answer_is_the_single_token_result():
    model = tiny_model("llama")
    lens = IGLens(model)
    (token,) = ANSWER[:1]
    whole = lens.attribute(PROMPT, answer=[token])
    # the same sequence (a forward pass of another length rounds differently), its token
    single = lens.attribute(torch.cat([PROMPT, torch.as_tensor([token])]), target=token)
    last = PROMPT.numel() - 1
    # the same readout of the same states: equal to the bit
    np.testing.assert_array_equal(whole.answer.prob_contributions, single.contributions[last])
    np.testing.assert_array_equal(whole.answer.lens_probs, single.lens_probs[last])
    assert whole.answer.onset == single.onset[last]
    # and the per-token ledger at the answer position is the answer token's
    assert whole.target_ids[last] == token


def test_the_answer_token_rows_keep_the_per_token_ledgers():
    lens = IGLens(tiny_model("gpt2"))
    result = lens.attribute(PROMPT, answer=ANSWER)
    plain = lens.attribute(torch.cat([PROMPT, torch.as_tensor(ANSWER)]), target="next")
    rows = result.answer.positions
    np.testing.assert_array_equal(result.target_ids[rows], ANSWER)
    np.testing.assert_array_equal(result.contributions[rows], plain.contributions[rows])
    assert result.prompt_length == PROMPT.numel()
    np.testing.assert_array_equal(result.answer_positions, rows)


def test_sublayer_boundaries_fitted_lens_and_components():
    from tests.support.tiny_models import random_lens

    model = tiny_model("llama")
    lens = IGLens(model)
    blocks = lens.attribute(PROMPT, answer=ANSWER)
    halves = lens.attribute(PROMPT, answer=ANSWER, boundaries="sublayer")
    # the half-block boundaries refine the block ones: every other boundary is the same state
    np.testing.assert_allclose(
        halves.answer.lens_logprobs[0::2], blocks.answer.lens_logprobs, rtol=0, atol=1e-6
    )
    assert halves.answer.logprob_completeness_error <= completeness_tol(halves.answer.lens_logprobs)
    tuned = lens.attribute(PROMPT, answer=ANSWER, lens=random_lens(model))
    # T_n is the identity: the output is the model's under every lens
    assert tuned.answer.logprob == blocks.answer.logprob
    assert tuned.answer.lens_logprobs[0] != blocks.answer.lens_logprobs[0]
    assert tuned.answer.logprob_completeness_error <= completeness_tol(tuned.answer.lens_logprobs)
    split = lens.attribute(PROMPT, answer=ANSWER, components=True, boundaries=[0, 1, 4])
    shares, names = split.answer.component_shares, split.answer.component_names
    assert shares.shape == (4, len(names))
    segments = split.component_segments
    for j, total in enumerate(split.answer.logprob_contributions):
        got = np.nansum(np.where(segments == j, shares, 0.0))
        # the per-token shares sum to each token's contribution within the component tests'
        # float64 bound; scaled by Δlog f / Δf, relative to the segment's Σ|share|
        scale = np.nansum(np.abs(np.where(segments == j, shares, 0.0)))
        assert abs(got - total) <= 64 * eps(torch.float64) * max(scale, 1.0)


def test_riemann_ledgers_converge_to_the_exact_ones():
    lens = IGLens(tiny_model("llama"))
    exact = lens.attribute(PROMPT, answer=ANSWER).answer
    errors = []
    for m in (2, 16, 128):
        riemann = lens.attribute(PROMPT, answer=ANSWER, estimator="riemann", steps=m).answer
        assert riemann.estimator == "riemann"
        errors.append(
            (
                np.abs(riemann.logprob_split - exact.logprob_split).max(),
                np.abs(riemann.prob_contributions - exact.prob_contributions).max(),
            )
        )
    for kind in (0, 1):  # log and probability ledgers
        assert errors[2][kind] < errors[1][kind] < errors[0][kind]
        assert errors[2][kind] < 0.25 * errors[1][kind]  # second order (1/64), not first (1/8)


def test_the_generated_answer_is_the_answer():
    lens = IGLens(tiny_model("llama"), tiny_tokenizer())
    result = lens.attribute("w3 w5 w7", max_new_tokens=3)
    generated = result.input_ids[result.prompt_length :].tolist()
    assert result.answer.ids.tolist() == generated
    teacher = lens.attribute("w3 w5 w7", answer=generated)
    assert teacher.answer.logprob == result.answer.logprob
    assert result.answer.text == lens.tokenizer.decode(generated)
    no_answer = lens.attribute("w3 w5 w7")
    assert no_answer.answer is None and no_answer.comparison is None


def test_text_answers_follow_the_chat_template_and_serialise():
    tok = tiny_tokenizer()
    tok.chat_template = "{% for m in messages %}w1 {{ m['content'] }} w2{% endfor %} w90"
    lens = IGLens(tiny_model("llama"), tok)
    result = lens.attribute("w3 w5", chat=True, answer="w7 w9", versus="w11")
    assert result.tokens[-3:] == ["w90", "w7", "w9"]  # after the assistant turn's start
    assert result.answer.tokens == ["w7", "w9"] and result.versus.tokens == ["w11"]
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["answer"]["ids"] == [7, 9] and data["versus"]["ids"] == [11]
    assert data["comparison"]["logprob_gap"] == pytest.approx(result.comparison.logprob_gap)
    assert data["request"]["answer"] == "w7 w9"
    table = result.to_dataframe(answer=True)
    k = lens.n_blocks
    assert len(table) == k * 2 + k * 1  # (segment, token) rows: two tokens, then one
    by_segment = table[table.answer == "answer"].groupby("segment").logprob_contribution.sum()
    np.testing.assert_allclose(by_segment, result.answer.logprob_contributions, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"answer": ""}, "answer is an empty string"),
        ({"answer": []}, "answer has no tokens"),
        ({"answer": [1, 2], "versus": [1, 2]}, "versus is the answer itself"),
        ({"versus": [3]}, "there is no first one"),
        ({"answer": [3], "max_new_tokens": 2}, "pass one of them"),
        ({"answer": [500]}, "out of range"),
        ({"answer": list(range(60))}, "exceed the model's context of 64"),
        ({"answer": "w7", "versus": [7]}, "tokenises to the answer itself"),
    ],
)
def test_bad_answers_are_clear_errors(kwargs, message):
    lens = IGLens(tiny_model("llama"), tiny_tokenizer())
    with pytest.raises(InvalidRequestError, match=message):
        lens.attribute(PROMPT, **kwargs)


@pytest.mark.parametrize(
    ("prompt", "kwargs", "what"),
    [
        ("w3 w5", {"answer": "\ud800"}, "answer"),
        ("w3 w5", {"answer": "w7", "versus": "w9 \udcff"}, "versus answer"),
        ("w3 \udfff w5", {}, "prompt"),
        ("w3 w5", {"target": "\ud800"}, "target"),
        ("w3 w5", {"contrast": "w4\ud83d"}, "contrast"),
    ],
)
def test_a_lone_surrogate_is_one_line_naming_the_text(prompt, kwargs, what):
    # A lone surrogate (JSON's "\ud800", a file read with errors="surrogateescape") is not
    # text: the tokenizer's own error is a TypeError that names neither the field nor a fix.
    lens = IGLens(tiny_model("llama"), tiny_tokenizer())
    with pytest.raises(InvalidRequestError) as caught:
        lens.attribute(prompt, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"the {what} holds a lone surrogate")
    bad = next(c for c in prompt + "".join(kwargs.values()) if 0xD800 <= ord(c) <= 0xDFFF)
    assert ascii(bad) in message and "valid Unicode" in message
    message.encode("utf-8")  # the message itself prints anywhere (the surrogate escaped)


def test_text_answer_without_a_tokenizer_is_refused():
    with pytest.raises(InvalidRequestError, match="needs a tokenizer"):
        iglens_viz.attribute(tiny_model("llama"), None, PROMPT, answer=" w7")


def test_lens_logprobs_are_the_log_of_the_lens_probabilities():
    model = tiny_model("llama")
    result = IGLens(model).attribute(IDS, target="next")
    size = readout_size(model, IDS)
    finite = ~np.isnan(result.lens_probs)
    np.testing.assert_array_equal(np.isnan(result.lens_logprobs), ~finite)
    # both from the same logits; log of the float32 probability is within one rounding
    tol = logprob_tol(size, torch.float32) + eps(torch.float32)
    logp = np.log(result.lens_probs[finite])
    assert (np.abs(result.lens_logprobs[finite] - logp) <= tol * np.maximum(1, np.abs(logp))).all()
    assert IGLens(model).attribute(IDS, contrast=3).lens_logprobs is None


def _forward_lengths(model) -> tuple[list[int], object]:
    """The input length of every forward pass of ``model`` from now on, and the hook."""
    lengths: list[int] = []
    handle = model.register_forward_pre_hook(
        lambda module, args, kwargs: lengths.append(kwargs["input_ids"].shape[-1]),
        with_kwargs=True,
    )
    return lengths, handle


def test_versus_runs_the_model_on_its_own_answer_only():
    model = tiny_model("llama")
    lens = IGLens(model)
    lengths, handle = _forward_lengths(model)
    try:
        lens.attribute(PROMPT, answer=ANSWER, versus=OTHER)
        first = list(lengths)
        lengths.clear()
        # a first answer traced earlier, without its key/value cache: the prompt runs once
        # more (alone, for its keys and values), then the second answer
        fresh = IGLens(model)
        fresh.attribute(PROMPT, answer=ANSWER)
        lengths.clear()
        fresh.attribute(PROMPT, answer=ANSWER, versus=OTHER)
        again = list(lengths)
    finally:
        handle.remove()
    # the prompt and first answer once, then the second answer's tokens alone
    assert first == [PROMPT.numel() + len(ANSWER), len(OTHER)]
    assert again == [PROMPT.numel(), len(OTHER)]


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_a_continued_trace_is_the_trace_of_the_whole_sequence(name):
    """The continuation from the prefix's key/value cache against a pass over the whole
    sequence, in float64: the same computation with attention kernels of another shape, so
    within two forward passes' rounding (tolerances.forward_tol, as test_batching)."""
    from tests.support.tiny_models import random_lens

    model = tiny_model(name, dtype=torch.float64)
    lens = IGLens(model, dtype=torch.float64)
    sequential = lens.adapter.mid_modules is not None
    coordinates = random_lens(model, dtype=torch.float64)
    first = lens.trace(
        torch.cat([PROMPT, torch.as_tensor(ANSWER)]),
        sublayers=sequential,
        components=True,
        lens=coordinates,
        keep_cache=True,
    )
    start = PROMPT.numel()
    continued = lens.continued(first, start, torch.as_tensor(OTHER))
    whole = torch.cat([PROMPT, torch.as_tensor(OTHER)])
    alone = IGLens(model, dtype=torch.float64).trace(
        whole, sublayers=sequential, components=True, lens=coordinates
    )
    size = readout_size(model, whole)
    tol = forward_tol(size, model.config.num_hidden_layers, forward_dtype(model))
    assert torch.equal(continued.input_ids, whole)
    for what in ("states", "features", "head_inputs", "mid_states", "attn_writes", "residual"):
        mine, theirs = getattr(continued, what), getattr(alone, what)
        assert (mine is None) == (theirs is None), what
        if mine is not None:
            assert mine.shape == theirs.shape, what
            # the prompt's rows are the first trace's, not recomputed
            assert torch.equal(mine[:, :start], getattr(first, what)[:, :start]), what
    depths = [d / 2 for d in range(2 * lens.n_blocks + 1)] if sequential else None
    depths = depths or list(range(lens.n_blocks + 1))
    y = alone.predicted
    np.testing.assert_allclose(
        continued.lens_probs(lens.readout, depths, y),
        alone.lens_probs(lens.readout, depths, y),
        rtol=0,
        atol=tol,
    )
    np.testing.assert_allclose(
        continued.top_logprobs.exp(), alone.top_logprobs.exp(), rtol=0, atol=tol
    )
    # the component split reads the head outputs: the versus answer's shares are those of a
    # pass over the whole sequence. Each share of Δf moves by at most tol; scaled by Δlog f /
    # Δf (at most 1 / f) and summed over the answer's tokens.
    mine = lens.attribute(PROMPT, answer=ANSWER, versus=OTHER, components=True, lens=coordinates)
    reference = IGLens(model, dtype=torch.float64).attribute(
        PROMPT, answer=OTHER, components=True, lens=coordinates
    )
    np.testing.assert_allclose(
        mine.versus.component_shares,
        reference.answer.component_shares,
        rtol=0,
        atol=tol * len(OTHER) / reference.answer.token_probs.min(),
    )


@pytest.mark.parametrize(
    "start, ids", [(0, [5]), (99, [5]), (3, []), (3, [[5, 6]])], ids=["none", "long", "empty", "2d"]
)
def test_a_continuation_of_nothing_is_refused(start, ids):
    lens = IGLens(tiny_model("llama"))
    trace = lens.trace(PROMPT)
    with pytest.raises(InvalidRequestError, match="continued\\(\\) takes a prefix length"):
        lens.continued(trace, start, torch.as_tensor(ids, dtype=torch.long))


def test_a_long_answer_whose_probability_underflows_names_no_onset():
    # 400 random tokens of a 97-word model: log F_L ≈ −400 · log 97 ≈ −1,800 at every depth, far
    # below the smallest normal float64 (log ≈ −708): the probability ledger is all zeros, and
    # the onset rule would name block 1 (the first of equal entries) for no reason.
    model = tiny_model("llama", max_position_embeddings=512)
    answer = random_ids(400, seed=3).tolist()
    versus = answer[:-1] + [(answer[-1] + 1) % 97]
    result = IGLens(model).attribute(PROMPT, answer=answer, versus=versus)
    _, lens, ids = reference_answer(model, PROMPT, answer)
    log_f = np.log(lens).sum(0)  # the test's own log F_L (float64, the model's own modules)
    assert log_f.max() < np.log(np.finfo(np.float64).tiny)  # zero at float precision, independently
    ledger = result.answer
    assert ledger.prob_underflow and ledger.onset == -1
    assert not ledger.prob_contributions.any()
    # the log ledger still holds the answer: the test's own log F_L differences, and its onset
    tol = 2 * logprob_tol(readout_size(model, ids), torch.float32, len(answer))
    np.testing.assert_allclose(ledger.logprob_contributions, np.diff(log_f), rtol=0, atol=tol)
    assert np.diff(log_f)[ledger.logprob_onset - 1] >= np.diff(log_f).max() - 2 * tol
    comparison = result.comparison
    assert comparison.prob_underflow and comparison.prob_onset == -1 and comparison.onset > 0
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["answer"]["prob_underflow"] is True and data["answer"]["onset"] == -1
    assert data["comparison"]["prob_underflow"] is True and data["comparison"]["prob_onset"] == -1
    # the page's payload: onset −1 and F = 0 at every depth, what its answer view reads
    # (js/model/answers.js probUnderflow; js/views/answers/answers-view.test.js)
    sent = result_payload(result)["answer"]
    assert sent["onset"] == -1 and not np.frombuffer(sent["lens_probs"]["buffer"], "<f4").any()
    # a short answer's probability is a number: its onset is named by the rule, as before
    short = IGLens(model).attribute(PROMPT, answer=ANSWER)
    _, lens, _ = reference_answer(model, PROMPT, ANSWER)
    assert not short.answer.prob_underflow
    assert short.answer.onset == int(np.argmax(np.diff(lens.prod(0)))) + 1
