"""The widget's command server (iglens_viz.widget.commands): its handler table is complete,
and a new command needs, Python-side, its spec and one handler — nothing in the widget.

The worked example of docs/developing/where-things-go.md ("A new widget command"): a
``select`` command (move the selection to a position, as a teacher's remote might) is declared
in ``COMMANDS`` and given one ``Handler`` in ``HANDLERS``; a real widget then parses,
dispatches, runs and answers it, in its worker thread when the spec says background, with
``running``, ``progress`` and Cancel working as for the built-in commands.
"""

from __future__ import annotations

import threading
from typing import get_args

import pytest

from iglens_viz import IGLensError
from iglens_viz.protocol.commands import COMMANDS, CommandKind, CommandSpec
from iglens_viz.widget import show
from iglens_viz.widget.commands import HANDLERS, Handler, check_handlers
from tests.support import HANG_S
from tests.support.widget_page import Page, error_of

PROMPT = "w3 w5 w7 w9 w11 w13"


def test_every_command_has_one_handler():
    assert list(HANDLERS) == list(COMMANDS) == list(get_args(CommandKind))
    cancellable = {kind for kind, handler in HANDLERS.items() if handler.cancellable}
    assert cancellable == {"recompute", "ask", "gates"}
    # every one a background command: a Cancel is heard only while the worker computes
    assert all(COMMANDS[kind].background for kind in cancellable)


def test_a_command_without_a_handler_is_named():
    without_path = {kind: h for kind, h in HANDLERS.items() if kind != "path"}
    with pytest.raises(LookupError, match=r"no handler for \['path'\]; a handler of no command"):
        check_handlers(without_path)
    extra = {**HANDLERS, "select": Handler(lambda server, command: None)}
    with pytest.raises(LookupError, match=r"no handler for none; a handler of no command: \['sel"):
        check_handlers(extra)
    check_handlers(HANDLERS)  # the table as shipped passes


def _select(server, command):
    """The example command's handler: the selection moves to the asked position."""
    widget = server.widget
    position = command.fields["position"]
    if position >= len(widget.attribution.input_ids):
        raise IGLensError(f"position {position} is past the result's last token")
    with server.lock:
        widget.selected = position


@pytest.fixture
def select_command(monkeypatch):
    """The ``select`` command registered as a new command is: its spec and its handler."""
    spec = CommandSpec(
        ("result_id", "position"), False, "Move the selection to ``position``.", answer="selected"
    )
    monkeypatch.setitem(COMMANDS, "select", spec)
    monkeypatch.setitem(HANDLERS, "select", Handler(_select))
    return spec


def test_a_new_command_needs_its_spec_and_one_handler(lens, select_command):
    w = show(lens, None, PROMPT)
    page = Page(w)
    assert w.selected != 1
    answer = page.ask("select", position=1)
    assert answer["ok"] and answer["command"] == "select" and answer["result_id"] == w.result_id
    assert w.selected == 1
    # its fields are checked by the spec's rules, its errors answered as any command's
    assert "needs a position" in error_of(page.ask("select", position=-2))
    failed = page.ask("select", position=99)
    assert error_of(failed) == "position 99 is past the result's last token"
    assert failed["error"]["type"] == "IGLensError" and w.selected == 1
    # not answered while a background command runs (it is not while_running)
    w.running = {"id": "other", "command": "recompute"}
    assert "recompute 'other' is running" in error_of(page.ask("select", position=3))
    assert w.selected == 1


def test_a_new_background_command_runs_in_the_worker_and_is_cancellable(lens, monkeypatch):
    """Declared background and cancellable, the new command gets the server's machinery:
    ``running`` names it, it runs in the worker thread, its progress is published, and a
    Cancel stops it with the RecomputeCancelled answer."""
    spec = CommandSpec(("result_id", "position"), True, "A slow select.")
    started, release = threading.Event(), threading.Event()
    seen = {}

    def slow_select(server, command):
        seen["thread"] = threading.current_thread().name
        seen["running"] = dict(server.widget.running)
        server.report(1, 4)  # a quarter done
        seen["progress"] = server.widget.progress
        started.set()
        assert release.wait(HANG_S)
        server.report(2, 4)  # where a Cancel stops it

    monkeypatch.setitem(COMMANDS, "slow_select", spec)
    monkeypatch.setitem(HANDLERS, "slow_select", Handler(slow_select, cancellable=True))
    w = show(lens, None, PROMPT)
    page = Page(w)
    w.threaded = True  # as in a kernel
    message = {"kind": "slow_select", "id": "s1", "result_id": w.result_id, "position": 1}
    assert w.dispatch(message) is None  # not computed in the caller
    assert started.wait(HANG_S)
    assert seen == {
        "thread": "iglens-slow_select",
        "running": {"id": "s1", "command": "slow_select"},
        "progress": 0.25,
    }
    cancel = w.dispatch({"kind": "cancel", "id": "c1", "request_id": "s1"})
    assert cancel is not None and cancel["ok"]
    release.set()
    w._server.worker.join(HANG_S)
    (ended,) = [a for a in page.answers if a["request_id"] == "s1"]
    assert not ended["ok"] and ended["error"]["type"] == "RecomputeCancelled"
    assert w.running == {} and w.progress == -1.0
