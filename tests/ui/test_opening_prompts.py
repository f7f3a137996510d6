"""Issue 23's "opens on the point" for prompts other than Vietnam's, in headless Chromium: the
real default model's chat answer (``chat=True, max_new_tokens=16``, as ``make demo``) to
:data:`PROMPTS`, exported with no ``selected=``, opens (student view and default view) on the
answer's first content token.

The expected position is computed here from the tokenizer alone, not from
:mod:`iglens_viz.protocol.opening`: the chat prompt's ids from
``tokenizer.apply_chat_template``, the answer's tokens decoded one by one, and the rule
written out again — the first answer token that is not a special token, has a letter or a
digit, and whose word (stripped, lower-cased) is not among the prompt's words; the page
opens on the position *before* it (the position that predicts it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import iglens_viz
from iglens_viz.views.token_format import format_token

from .helpers import PageRecorder

pytestmark = [pytest.mark.browser, pytest.mark.real_model]

PROMPTS = {
    "france": "What is the capital of France?",
    # not a capital; its answer ("The story of Romeo and Juliet by William Shakespeare …")
    # starts with a word the question lacks, so it opens on the answer's first position
    "romeo": "Who wrote Romeo and Juliet?",
}


def expected_opening(tokenizer, input_ids: list[int], prompt: str) -> tuple[int, str]:
    """(position, the answer token it predicts), from the tokenizer and the ids alone."""
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_dict=True
    )
    chat = [int(i) for i in chat["input_ids"]]
    assert input_ids[: len(chat)] == chat, "the result's ids start with the chat prompt"
    special = set(tokenizer.all_special_ids)
    words = {tokenizer.decode([i]).strip().lower() for i in chat}
    for j in range(len(chat), len(input_ids)):
        token = input_ids[j]
        word = tokenizer.decode([token]).strip().lower()
        if token in special or not any(ch.isalnum() for ch in word) or word in words:
            continue
        return j - 1, tokenizer.decode([token])
    raise AssertionError(f"no content token in the answer to {prompt!r}")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from iglens_viz.loading import DEFAULT_MODEL_NAME

    model, tokenizer = iglens_viz.load_model()
    lens = iglens_viz.IGLens(model, tokenizer, name=DEFAULT_MODEL_NAME)
    folder = tmp_path_factory.mktemp("opening")
    out = {}
    for key, prompt in PROMPTS.items():
        result = lens.attribute(prompt, chat=True, max_new_tokens=16)
        result = dataclasses.replace(result, model_name=DEFAULT_MODEL_NAME)
        ids = [int(i) for i in result.input_ids]
        position, token = expected_opening(tokenizer, ids, prompt)
        lesson = result.widget()  # no selected=
        lesson.view = "lesson"
        lesson.to_html(folder / f"{key}-lesson.html")
        result.widget().to_html(folder / f"{key}-default.html")
        out[key] = (result, position, token, folder)
    return out


def _open(browser, path: Path, ready: str):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(60_000)
    recorder = PageRecorder().attach(page)
    page.goto(path.as_uri())
    page.wait_for_selector(ready)
    return context, page, recorder


@pytest.mark.parametrize("key", list(PROMPTS))
def test_the_page_opens_on_the_answers_content_token(browser, pages, key):
    result, position, token, folder = pages[key]
    assert result.target_tokens[position] == token  # the position predicts that token
    answer = [int(i) for i in result.answer_positions]
    assert answer and answer[0] <= position <= answer[-1], (answer, position)

    context, page, recorder = _open(
        browser, folder / f"{key}-lesson.html", "[data-view=lesson] svg.iglens-lesson-curve"
    )
    assert page.get_attribute("[data-view=lesson]", "data-position") == str(position)
    selected = page.get_attribute(".iglens-strip [aria-selected=true]", "data-token-index")
    assert selected == str(position)
    # the top-5 header is about that position: "Its guesses after “<token>”"
    header = page.text_content("[data-view=lesson] [data-lesson-top5]")
    shown = format_token(result.tokens[position], max_len=16)  # as the page writes it
    assert shown in header, (shown, header)
    assert recorder.console_errors == [] and recorder.page_errors == []
    assert recorder.network == []
    context.close()

    context, page, recorder = _open(browser, folder / f"{key}-default.html", "[data-view=heatmap]")
    page.wait_for_selector(f"[data-selected-index='{position}']")
    selected = page.get_attribute(".iglens-strip [aria-selected=true]", "data-token-index")
    assert selected == str(position)
    assert recorder.console_errors == [] and recorder.page_errors == []
    context.close()
