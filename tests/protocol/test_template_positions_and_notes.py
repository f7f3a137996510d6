"""Issue 23's chat-template positions and teacher notes, on the Python side.

Template positions (``iglens_viz.core.prompting.chat_template_positions``) are checked
against independent computations: the user's message tokenised on its own must be exactly
the tokens left unfolded, and the template's tokens must be the text around the message (the
rendered prompt split on the message itself, not on the sentinel the code uses) tokenised
separately. The default model's tokenizer (SmolLM2) is checked on the Vietnam prompt, where
the strip's first line ("You are a helpful AI assistant named SmolLM…"), ``<|im_start|>`` and
``ass`` + ``istant`` must fold. Notes: the validator's errors, the widget's API, the page's
writes (refused when bad) and the exported page's state.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from iglens_viz.core.prompting import chat_prompt_ids, chat_template_positions
from iglens_viz.errors import InvalidRequestError
from iglens_viz.protocol import DEFAULT_STATE, result_payload
from iglens_viz.protocol.notes import MAX_NOTE_CHARS, MAX_NOTES, check_notes
from iglens_viz.widget import IGLensWidget
from iglens_viz.widget.widget import InvalidTraitError
from tests.support.tiny_models import tiny_tokenizer

TEMPLATE = "{% for m in messages %}w1 w2 {{ m['content'] }} w3{% endfor %} w4 w6"
SMOLLM = Path.home() / ".cache/iglens_viz/models/SmolLM2-135M-Instruct.Q4_1"


def chat_tokenizer(template: str = TEMPLATE):
    tok = tiny_tokenizer()
    tok.chat_template = template
    return tok


def around(tok, message: str) -> tuple[str, str]:
    """The rendered prompt's text before and after the message, split on the message."""
    text = tok.apply_chat_template(
        [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
    )
    before, after = text.split(message)  # the message occurs once in these prompts
    return before, after


def check_split(tok, message: str) -> list[int]:
    ids = chat_prompt_ids(tok, message)
    template = chat_template_positions(tok, message)
    assert template is not None
    user = [t for t in range(len(ids)) if t not in set(template)]
    # the user's tokens are exactly the message tokenised on its own
    assert [ids[t] for t in user] == tok(message, add_special_tokens=False)["input_ids"]
    # the template's tokens are the text around the message tokenised on its own
    before, after = around(tok, message)
    head = tok(before, add_special_tokens=False)["input_ids"]
    tail = tok(after, add_special_tokens=False)["input_ids"]
    assert [ids[t] for t in template] == head + tail
    assert template == list(range(len(head))) + list(range(len(ids) - len(tail), len(ids)))
    return template


def test_template_positions_are_the_tokens_around_the_message():
    tok = chat_tokenizer()
    assert check_split(tok, "w5 w17 w3 w42") == [0, 1, 6, 7, 8]


class NoOffsets:
    """A tokenizer without offset mappings (a slow tokenizer's behaviour)."""

    def __init__(self, tok):
        self._tok = tok
        self.chat_template = tok.chat_template

    def apply_chat_template(self, *args, **kwargs):
        return self._tok.apply_chat_template(*args, **kwargs)

    def __call__(self, text, **kwargs):
        if kwargs.pop("return_offsets_mapping", False):
            raise NotImplementedError("return_offsets_mapping needs a fast tokenizer")
        return self._tok(text, **kwargs)


def test_without_offsets_the_template_parts_are_matched_at_the_ends():
    tok = chat_tokenizer()
    assert check_split(NoOffsets(tok), "w5 w17 w3 w42") == [0, 1, 6, 7, 8]


def test_a_template_that_repeats_the_message_has_no_positions():
    tok = chat_tokenizer(
        "{% for m in messages %}w1 {{ m['content'] }} w2 {{ m['content'] }}{% endfor %}"
    )
    assert chat_template_positions(tok, "w5 w17") is None


def test_the_result_and_payload_carry_the_template_positions(lens):
    lens.tokenizer.chat_template = TEMPLATE
    try:
        result = lens.attribute("w5 w17 w3", chat=True, max_new_tokens=2)
        plain = lens.attribute("w5 w17 w3", chat=False)
    finally:
        lens.tokenizer.chat_template = None
    expected = chat_template_positions(chat_tokenizer(), "w5 w17 w3")
    assert result.template_positions.tolist() == expected == [0, 1, 5, 6, 7]
    assert [result.tokens[t] for t in expected] == ["w1", "w2", "w3", "w4", "w6"]
    assert result_payload(result)["template_positions"] == expected
    assert json.loads(json.dumps(result.to_dict()))["template_positions"] == expected
    assert plain.template_positions is None
    assert result_payload(plain)["template_positions"] is None


@pytest.mark.real_model
@pytest.mark.skipif(not SMOLLM.is_dir(), reason="the default model is not converted")
def test_the_default_models_template_folds_the_system_prompt_and_headers():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(SMOLLM)
    message = "What is the capital of Vietnam?"
    template = check_split(tok, message)
    ids = chat_prompt_ids(tok, message)
    pieces = tok.convert_ids_to_tokens(ids)
    folded = [pieces[t] for t in template]
    assert folded[:4] == ["<|im_start|>", "system", "Ċ", "You"]
    assert "Ġhelpful" in folded and "ĠSm" in folded
    assert folded[-4:] == ["<|im_start|>", "ass", "istant", "Ċ"]
    assert tok.decode([ids[t] for t in range(len(ids)) if t not in template]) == message


# ---------------------------------------------------------------------- notes


@pytest.mark.parametrize(
    ("notes", "message"),
    [
        ("x", "notes must be a list"),
        ([{"position": 1}], "note 0: text must be a non-blank string"),
        ([{"position": 1, "text": "  "}], "note 0: text must be a non-blank string"),
        ([{"text": "hi"}], "note 0: pin it to a position=, a block= or both"),
        ([{"position": 5, "text": "hi"}], "note 0: position=5 must be an integer 0 … 4"),
        ([{"position": True, "text": "hi"}], "position=True must be an integer"),
        (
            [{"block": 3, "text": "a"}, {"block": 9, "text": "b"}],
            "note 1: block=9 must be an integer 0 … 4",
        ),
        ([{"block": 1, "text": "a", "color": "red"}], "unknown keys ['color']"),
        ([{"block": 1, "text": "a" * (MAX_NOTE_CHARS + 1)}], f"at most {MAX_NOTE_CHARS}"),
        ([{"block": 1, "text": "a"}] * (MAX_NOTES + 1), f"at most {MAX_NOTES}"),
        (["hello"], "note 0 must be a dict"),
    ],
)
def test_bad_notes_are_refused_with_what_is_wrong(notes, message):
    with pytest.raises(InvalidRequestError, match=re.escape(message)):
        check_notes(notes, positions=5, blocks=4)


def test_good_notes_are_kept_in_order_with_their_keys():
    notes = [{"text": "<b>look</b>", "block": 4, "position": 0}, {"block": 0, "text": "emb"}]
    assert check_notes(notes, positions=5, blocks=4) == [
        {"position": 0, "block": 4, "text": "<b>look</b>"},
        {"block": 0, "text": "emb"},
    ]


EVIL = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'


def test_the_widget_keeps_notes_and_exports_them(lens):
    result = lens.attribute("w5 w17 w3 w42 w8", boundaries=[0, 1, 4])
    w = IGLensWidget(result)
    assert w.notes == [] and w.template == "auto"
    assert {"notes": [], "template": "auto"}.items() <= DEFAULT_STATE.items()
    assert w.add_note(EVIL, position=3) == 0
    assert w.add_note("the last block", block=int(result.n_blocks)) == 1
    with pytest.raises(InvalidTraitError, match="position=9 must be an integer 0 … 4"):
        w.add_note("far", position=9)
    with pytest.raises(InvalidTraitError, match="pin it to"):
        w.add_note("nowhere")
    assert w.remove_note(1) == {"block": int(result.n_blocks), "text": "the last block"}
    with pytest.raises(InvalidTraitError, match="no note 5"):
        w.remove_note(5)
    # the page's writes go through the same check: a bad one is refused, a good one kept
    w.set_state({"notes": [{"position": 99, "text": "x"}]})
    assert w.notes == [{"position": 3, "text": EVIL}]
    w.set_state({"notes": [*w.notes, {"block": 1, "text": "page"}], "template": "shown"})
    assert w.notes[-1] == {"block": 1, "text": "page"} and w.template == "shown"
    html = w.to_html()
    state = json.loads(re.search(r'id="iglens-state">(.*?)</script>', html, re.S).group(1))
    assert state["notes"] == w.notes and state["template"] == "shown"
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    # a recompute on the same tokens keeps the notes; a new prompt's result clears them
    w._show(lens.attribute("w5 w17 w3 w42 w8", boundaries=[0, 2, 4]))
    assert len(w.notes) == 2
    w._show(lens.attribute("w5 w17 w3", boundaries=[0, 2, 4]))
    assert w.notes == []
