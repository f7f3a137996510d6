"""Where a result opens (issue 23, "opens on the point"): a widget, an exported page and
``compare()`` select the answer's first content token — the first answer position whose
target token does not occur (case-insensitively, without its leading space marker) among
the prompt's tokens — unless ``selected=`` says otherwise.

The expected positions are computed here, independently of ``iglens_viz.protocol.opening``,
from the result's tokens."""

from __future__ import annotations

import re

import pytest

import iglens_viz
from iglens_viz.export.html import page_state
from iglens_viz.protocol.opening import opening_position
from iglens_viz.widget import IGLensWidget


def expected_opening(result) -> int:
    """The first answer position whose target, as a lower-case word, is not a prompt word."""

    def word(token: str) -> str:
        return re.sub(r"^[\sĠ▁]+", "", token).strip().lower()

    prompt = {word(t) for t in result.tokens[: result.prompt_length]}
    for i in range(result.prompt_length - 1, len(result.tokens) - 1):
        w = word(result.target_tokens[i])
        if re.search(r"[^\W_]", w) and not re.fullmatch(r"<[^<>]*>", w) and w not in prompt:
            return i
    return result.prompt_length - 1


# ------------------------------------------------------------------------ the rule, by hand


def test_the_first_answer_target_missing_from_the_prompt():
    tokens = ["What", " is", " the", " capital", "?", "\n", "The", " capital", " is", " Ho"]
    targets = tokens[1:] + ["i"]
    # answer_start 5: the prompt is tokens[:6]; "The" and " capital" and " is" repeat it
    assert opening_position(tokens, targets, 5) == 8


def test_case_space_markers_punctuation_and_special_tokens_do_not_count():
    tokens = ["Ġwhat", "Ġis", "Ġit", "?", "<|im_end|>", "<|im_start|>", "The", "!", "ĠWHAT", "x"]
    targets = ["", "", "", "", "", "<|im_end|>", "!", "ĠWHAT", "▁Ocean", ""]
    # "<|im_end|>" is special, "!" has no letter, "ĠWHAT" is the prompt's "what"
    assert opening_position(tokens, targets, 5) == 8


def test_without_a_content_token_the_first_answer_position_else_the_last_with_a_target():
    tokens = ["a", "b", "c", "a", "b"]
    assert opening_position(tokens, ["b", "c", "a", "b", "c"], 2) == 2
    assert opening_position(tokens, ["b"] * 5, 5) == 4  # no answer: the last position
    assert opening_position(tokens, ["b"] * 5, 5, [True] * 4 + [False]) == 3
    assert opening_position([], [], 0) == -1


# ------------------------------------------------------------------------ the tiny model


def test_the_widget_and_the_page_open_on_the_answers_content_token(lens):
    result = lens.attribute("w5 w17 w3 w42 w8", answer=" w8 w9 w11")
    # " w8" repeats the prompt's last word: the first content token is " w9", at T - 3
    assert result.target_tokens[result.answer_start].strip() == "w8"
    want = expected_opening(result)
    assert want == len(result.tokens) - 3 and result.target_tokens[want].strip() == "w9"
    assert IGLensWidget(result).selected == want
    assert page_state(result)["selected"] == want
    assert IGLensWidget(result, selected=1).selected == 1  # selected= wins
    assert page_state(result, selected=2)["selected"] == 2


# ------------------------------------------------------------------------ the real model

PROMPTS = {
    "What is the capital of Vietnam?": " Ho",
    "What is the capital of France?": " Paris",
    "What is the largest planet in our solar system?": None,
}


@pytest.fixture(scope="module")
def real_results():
    model, tokenizer = iglens_viz.load_model()
    lens = iglens_viz.IGLens(model, tokenizer)
    # as tests/test_real_model.py attributes the teaching case
    return {p: lens.attribute(p, chat=True, max_new_tokens=12) for p in PROMPTS}


@pytest.mark.real_model
@pytest.mark.parametrize("prompt", list(PROMPTS))
def test_real_results_open_on_the_answers_content_token(real_results, prompt):
    result = real_results[prompt]
    want = expected_opening(result)
    assert want >= result.answer_start, result.tokens[result.prompt_length :]
    if PROMPTS[prompt] is not None:
        assert result.target_tokens[want] == PROMPTS[prompt]
    if prompt.endswith("Vietnam?"):
        assert (want, result.tokens[want]) == (41, " is")  # [41] ␣is → ␣Ho
    assert result.widget().selected == want
    assert page_state(result)["selected"] == want
    other = real_results["What is the capital of France?"]
    w = iglens_viz.compare(result, other)
    assert w.selected == want
    assert w.pinned == [[0, want], [1, expected_opening(other)]]
