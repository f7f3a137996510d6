"""The prompt box's ``ask`` command and the compare box's ``versus``, in process.

The page's messages go through the widget's comm entry (tests/support/widget_page.py), so the
parsing, the dispatch and the answers are the ones a browser gets. Every new result is checked
against an independent ``IGLens(...).attribute(...)`` of the same request on a fresh lens over a
model built from the same seed; Cancel is checked inside generation (no chunk of points runs
there) and inside a plain forward pass.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from iglens_viz import IGLens
from iglens_viz.errors import InvalidRequestError
from iglens_viz.protocol.commands import MAX_ASK_NEW_TOKENS, MAX_PROMPT_LENGTH, parse_command
from iglens_viz.widget import IGLensWidget
from iglens_viz.widget.commands import runs_threaded
from iglens_viz.widget.widget import ASK_NEW_TOKENS, RecomputeCancelled
from tests.support import HANG_S, ROOT
from tests.support.tiny_models import tiny_model, tiny_tokenizer
from tests.support.widget_page import Page, error_of


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama")


def fresh_lens() -> IGLens:
    return IGLens(tiny_model("llama"), tiny_tokenizer())


def same(a, b) -> None:
    """Two results of the same request: the same ids and the same numbers."""
    assert a.input_ids.tolist() == b.input_ids.tolist()
    assert a.target_ids.tolist() == b.target_ids.tolist()
    np.testing.assert_allclose(a.lens_probs, b.lens_probs, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(a.contributions, b.contributions, rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"kind": "ask", "id": "a", "result_id": "r1"}, "an ask command needs prompt"),
        (
            {"kind": "ask", "id": "a", "result_id": "r1", "prompt": 7},
            "needs a prompt: the question as text, got 7",
        ),
        ({"kind": "ask", "id": "a", "result_id": "r1", "prompt": "   "}, "needs a prompt"),
        (
            {"kind": "ask", "id": "a", "result_id": "r1", "prompt": "x" * (MAX_PROMPT_LENGTH + 1)},
            f"the prompt is {MAX_PROMPT_LENGTH + 1} characters long; an ask takes at most",
        ),
        (
            {"kind": "ask", "id": "a", "result_id": "r1", "prompt": "w3", "versus": 5},
            "versus is an answer to compare with (text) or null, got 5",
        ),
        (
            {"kind": "recompute", "id": "a", "result_id": "r1", "controls": {}, "versus": ["x"]},
            "a recompute command's versus is an answer",
        ),
        (
            {
                "kind": "recompute",
                "id": "a",
                "result_id": "r1",
                "controls": {},
                "versus": "y" * (MAX_PROMPT_LENGTH + 1),
            },
            "the versus answer is",
        ),
        ({"kind": "ask", "id": "", "result_id": "r1", "prompt": "w3"}, "ask command's id"),
        *(
            (
                {"kind": "ask", "id": "a", "result_id": "r1", "prompt": "w3", "max_new_tokens": n},
                f"max_new_tokens is the answer's length, an integer 1 … {MAX_ASK_NEW_TOKENS}, "
                f"or null (as the shown question), got {n!r}",
            )
            for n in (0, MAX_ASK_NEW_TOKENS + 1, True, "5", 2.0)
        ),
    ],
)
def test_parse_errors(message, error):
    with pytest.raises(InvalidRequestError) as err:
        parse_command(message)
    assert error in str(err.value)


def test_parse_ok():
    c = parse_command({"kind": "ask", "id": "a", "result_id": "r1", "prompt": " w3 ", "versus": ""})
    assert c.fields == {"result_id": "r1", "prompt": " w3 ", "versus": None}
    c = parse_command({"kind": "recompute", "id": "a", "result_id": "r1", "controls": {}})
    assert "versus" not in c.fields  # absent: the request keeps its own
    c = parse_command({"kind": "ask", "id": "a", "result_id": "r1", "prompt": "w3"})
    assert "max_new_tokens" not in c.fields  # absent: generated as the shown request does
    c = parse_command(
        {"kind": "ask", "id": "a", "result_id": "r1", "prompt": "w3", "max_new_tokens": 256}
    )
    assert c.fields["max_new_tokens"] == MAX_ASK_NEW_TOKENS


def test_the_page_checks_the_same_limits():
    """js/views/prompt.js refuses in the page what Python refuses: the limits it imports
    from the generated js/model/protocol.js (tests/protocol/test_protocol_mirror.py keeps it
    fresh)."""
    import re

    source = (ROOT / "js" / "views" / "prompt.js").read_text()
    assert 'import { MAX_ASK_NEW_TOKENS, MAX_PROMPT_LENGTH } from "../model/protocol.js";' in source
    protocol = (ROOT / "js" / "model" / "protocol.js").read_text()
    mirrored = dict(re.findall(r"export const (MAX_\w+) = (\d+);", protocol))
    assert int(mirrored["MAX_PROMPT_LENGTH"]) == MAX_PROMPT_LENGTH
    assert int(mirrored["MAX_ASK_NEW_TOKENS"]) == MAX_ASK_NEW_TOKENS


# ---------------------------------------------------------------- ask


def test_ask_generates_as_the_shown_request(model):
    lens = IGLens(model, tiny_tokenizer())
    w = IGLensWidget(None, lens, "w3 w5 w7", max_new_tokens=3)
    page = Page(w)
    old_id = w.result_id
    answer = page.ask("ask", prompt="w9 w11 w13 w15")
    assert answer["ok"], answer
    assert w.result_id != old_id and answer["result_id"] == w.result_id
    want = fresh_lens().attribute("w9 w11 w13 w15", max_new_tokens=3)
    same(w.attribution, want)
    assert w.attribution.request.prompt == "w9 w11 w13 w15"
    assert w.attribution.answer is not None and want.answer is not None
    np.testing.assert_allclose(w.attribution.answer.lens_logprobs, want.answer.lens_logprobs)
    assert w.running == {} and w.progress == -1.0
    # it opens on the new question's point, as a new widget of it does
    assert w.selected == IGLensWidget(want, fresh_lens()).selected
    # the page saw the progress climb (never backwards) while it ran
    shares = [u["progress"] for u in page.updates if u.get("progress", -1) >= 0]
    assert shares and shares == sorted(shares) and shares[-1] <= 1.0


def test_ask_with_an_answer_length(model):
    """The prompt box's length field: the new answer has that many tokens, not the shown
    request's, and the next question without one keeps the length it set."""
    w = IGLensWidget(None, IGLens(model, tiny_tokenizer()), "w3 w5 w7", max_new_tokens=3)
    page = Page(w)
    answer = page.ask("ask", prompt="w9 w11", max_new_tokens=5)
    assert answer["ok"], answer
    want = fresh_lens().attribute("w9 w11", max_new_tokens=5)
    same(w.attribution, want)
    assert w.attribution.request.max_new_tokens == 5 and w.attribution.answer is not None
    assert page.ask("ask", prompt="w13", max_new_tokens=None)["ok"]
    same(w.attribution, fresh_lens().attribute("w13", max_new_tokens=5))


def test_ask_drops_what_belonged_to_the_old_question(model):
    w = IGLensWidget(None, IGLens(model, tiny_tokenizer()), "w3 w5 w7", answer=" w9", target="w4")
    request = w.ask_request("w20 w21")
    assert request.answer is None and request.max_new_tokens == ASK_NEW_TOKENS
    assert request.target == "predicted" and request.contrast is None and request.versus is None
    new = w.ask("w20 w21", versus="w30")
    want = fresh_lens().attribute(
        "w20 w21", max_new_tokens=ASK_NEW_TOKENS, versus="w30", target="predicted"
    )
    same(new, want)
    assert new.versus is not None and want.versus is not None
    np.testing.assert_allclose(new.versus.lens_logprobs, want.versus.lens_logprobs)


def test_a_new_question_drops_the_old_tokens_pins(model):
    w = IGLensWidget(None, IGLens(model, tiny_tokenizer()), "w3 w5 w7 w9 w11 w13", target="next")
    w.pinned = [[0, 1], [0, 4]]
    w.recompute(target="predicted")  # the same tokens: the pins stay
    assert w.pinned == [[0, 1], [0, 4]]
    w.ask("w20 w21")  # two tokens: position 4 would name nothing
    assert w.pinned == []
    w.pinned = [[0, 1]]  # the new result's positions take pins again
    assert w.pinned == [[0, 1]]


def test_bad_question_keeps_the_result(model):
    w = IGLensWidget(None, IGLens(model, tiny_tokenizer()), "w3 w5 w7", max_new_tokens=2)
    page, shown = Page(w), w.result
    answer = page.ask("ask", prompt="")
    assert "needs a prompt" in error_of(answer)
    answer = page.ask("ask", prompt="w3", result_id="r999")
    assert "is about result 'r999'" in error_of(answer)
    assert w.result is shown and w.running == {}


def test_compare_box_recompute_with_versus(model):
    lens = IGLens(model, tiny_tokenizer())
    w = IGLensWidget(None, lens, "w5 w17 w3 w42 w8", answer=" w9 w11")
    page = Page(w)
    answer = page.ask("recompute", controls=w.result["controls"], versus=" w7")
    assert answer["ok"], answer
    want = fresh_lens().attribute("w5 w17 w3 w42 w8", answer=" w9 w11", versus=" w7")
    assert w.attribution.versus is not None
    np.testing.assert_allclose(w.attribution.versus.lens_logprobs, want.versus.lens_logprobs)
    assert w.result["versus"] is not None
    # null drops the comparison; absent keeps it
    assert page.ask("recompute", controls=w.result["controls"], versus=None)["ok"]
    assert w.attribution.versus is None
    # the versus answer equal to the answer: Python's message, the result stays
    shown = w.result
    answer = page.ask("recompute", controls=w.result["controls"], versus=" w9 w11")
    assert "versus is the answer itself" in error_of(answer)
    assert w.result is shown


# ---------------------------------------------------------------- cancel


def slow_blocks(lens: IGLens, on_block) -> list:
    """A pre-hook on every block calling ``on_block(n)`` (n: blocks run so far)."""
    count = [0]

    def hook(module, args):
        count[0] += 1
        on_block(count[0])

    return [b.register_forward_pre_hook(hook) for b in lens.adapter.blocks]


def test_cancel_stops_generation(model):
    """Cancel in the middle of generation (no chunk of points runs there): the ask stops at
    the next block, the old result stays, ``running`` and ``progress`` clear."""
    lens = IGLens(model, tiny_tokenizer())
    w = IGLensWidget(None, lens, "w3 w5", max_new_tokens=40)
    w.threaded = True
    shown = w.result
    answers = []
    send = w.send
    w.send = lambda content, buffers=None: (answers.append(content), send(content, buffers))[1]
    n, cancelled_at = lens.n_blocks, []

    def on_block(count):
        if count == 3 * n:  # in the third generation step: the page's Cancel arrives
            cancelled_at.append(count)
            w.dispatch({"kind": "cancel", "id": "c1", "request_id": "a1"})

    hooks = slow_blocks(lens, on_block)
    try:
        message = {"kind": "ask", "id": "a1", "result_id": w.result_id, "prompt": "w9"}
        assert w.dispatch(message) is None  # in the widget's thread
        w._server.worker.join(HANG_S)
        assert not w._server.worker.is_alive()
    finally:
        for h in hooks:
            h.remove()
    by_id = {a["request_id"]: a for a in answers}
    assert by_id["c1"]["ok"], by_id
    assert by_id["a1"]["error"]["type"] == RecomputeCancelled.__name__, by_id
    assert by_id["a1"]["error"]["message"].startswith("cancelled")
    assert cancelled_at == [3 * n]
    assert w.result is shown and w.running == {} and w.progress == -1.0
    # stopped inside generation: the question's answer was never finished (nor cached)
    cached = lens.answer_cache.keys()
    assert not any(key[0] == (9,) for key in cached), cached


def test_cancel_stops_a_forward_pass(model):
    """A recompute whose forward pass is not cached (here: a new versus answer's
    continuation) stops in that pass, at the next block."""
    lens = IGLens(model, tiny_tokenizer())
    w = IGLensWidget(None, lens, "w5 w17 w3", answer=" w9 w11")
    w.threaded = True
    shown, answers, send = w.result, [], w.send
    w.send = lambda content, buffers=None: (answers.append(content), send(content, buffers))[1]
    seen = []

    def on_block(count):
        seen.append(count)
        if count == 1:
            w.dispatch({"kind": "cancel", "id": "c1", "request_id": "r1"})

    hooks = slow_blocks(lens, on_block)
    try:
        message = {
            "kind": "recompute",
            "id": "r1",
            "result_id": w.result_id,
            "controls": w.result["controls"],
            "versus": " w7",
        }
        assert w.dispatch(message) is None
        w._server.worker.join(HANG_S)
    finally:
        for h in hooks:
            h.remove()
    by_id = {a["request_id"]: a for a in answers}
    assert by_id["r1"]["error"]["type"] == RecomputeCancelled.__name__, by_id
    assert seen == [1]  # the next block checked and stopped
    assert w.result is shown and w.running == {}


def test_cancel_of_a_command_that_is_not_running(model):
    w = IGLensWidget(None, IGLens(model, tiny_tokenizer()), "w3 w5")
    answer = Page(w).ask("cancel", request_id="nope")
    assert "nothing to cancel: 'nope' is not running" in error_of(answer)


# ---------------------------------------------------------------- marimo


def test_threaded_by_default_under_marimo(model, monkeypatch):
    w = IGLensWidget(None, IGLens(model, tiny_tokenizer()), "w3 w5")
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    monkeypatch.delitem(sys.modules, "marimo", raising=False)
    assert runs_threaded(w.threaded) is False
    fake = types.ModuleType("marimo")
    fake.running_in_notebook = lambda: True
    monkeypatch.setitem(sys.modules, "marimo", fake)
    assert runs_threaded(w.threaded) is True
    fake.running_in_notebook = lambda: False  # imported, but a script
    assert runs_threaded(w.threaded) is False
    w.threaded = False  # told: obeyed
    fake.running_in_notebook = lambda: True
    assert runs_threaded(w.threaded) is False


# ---------------------------------------------------------------- the real model


@pytest.mark.real_model
def test_real_model_question_compare_and_cancel():
    """SmolLM2 with its chat template: a new question generates as the shown request does
    (chat, max_new_tokens) and equals an independent lens's result; the compare box's versus
    equals it too; a Cancel from another thread stops a long generation within its token."""
    import threading

    import iglens_viz

    model, tokenizer = iglens_viz.load_model()
    lens = IGLens(model, tokenizer)
    w = IGLensWidget(None, lens, "What is the capital of Vietnam?", chat=True, max_new_tokens=6)
    new = w.ask("What is the capital of France?")
    other = IGLens(*iglens_viz.load_model())  # its own model, tokenizer and caches
    want = other.attribute("What is the capital of France?", chat=True, max_new_tokens=6)
    same(new, want)
    assert new.answer is not None and new.request.chat is True

    versus = "The capital of France is Lyon."
    answer = Page(w).ask("recompute", controls=w.result["controls"], versus=versus)
    assert answer["ok"], answer
    want = other.attribute(
        "What is the capital of France?", chat=True, max_new_tokens=6, versus=versus
    )
    np.testing.assert_allclose(
        w.attribution.versus.lens_logprobs, want.versus.lens_logprobs, rtol=1e-6, atol=1e-6
    )

    # Cancel from another thread while it generates: the worker pauses at the first block of
    # the third generated token until this thread has sent the page's Cancel, so what is
    # checked (how far the ask went after it) does not depend on the machine's speed or load.
    n, paused, sent, blocks = lens.n_blocks, threading.Event(), threading.Event(), []

    def on_block(count):
        blocks.append(count)
        if count == 3 * n:
            paused.set()
            assert sent.wait(HANG_S), "the Cancel was never sent"  # bounds a hang only

    hooks = slow_blocks(lens, on_block)
    w.threaded = True
    shown, answers, send = w.result, [], w.send
    w.send = lambda content, buffers=None: (answers.append(content), send(content, buffers))[1]
    w.dispatch(
        {"kind": "ask", "id": "a1", "result_id": w.result_id, "prompt": "Tell me about Hanoi."}
    )
    try:
        assert paused.wait(HANG_S), "generation never reached its third token"
        w.dispatch({"kind": "cancel", "id": "c1", "request_id": "a1"})
        sent.set()
        w._server.worker.join(HANG_S)
        assert not w._server.worker.is_alive()
    finally:
        sent.set()
        for h in hooks:
            h.remove()
    by_id = {a["request_id"]: a for a in answers}
    assert by_id["a1"]["error"]["type"] == RecomputeCancelled.__name__, by_id
    assert w.result is shown and w.running == {}
    # stopped within the token it was generating: at most n more blocks, never the rest
    assert 3 * n <= blocks[-1] <= 4 * n, (blocks[-1], n)
