"""The browser's end of a widget's comm, in process: the messages the page sends and the
ones it receives, through the same ``_handle_msg`` entry ipywidgets calls for a real comm.

* :meth:`Page.ask` sends a command as the page's ``model.send`` does (a ``custom`` message
  with a fresh id and the shown result's id) and returns Python's answer envelope.
* :meth:`Page.write` sends a state update as the page's ``model.save_changes`` does.
"""

from __future__ import annotations

import itertools
from typing import Any

from iglens_viz.protocol.commands import COMMANDS


class Page:
    """Drives one widget as its page would; commands run in the caller's thread."""

    def __init__(self, widget: Any) -> None:
        self.widget = widget
        self.answers: list[dict[str, Any]] = []
        """Every answer envelope the page received, oldest first."""
        self.updates: list[dict[str, Any]] = []
        """Every state update Python sent back, oldest first."""
        self._ids = itertools.count(1)
        widget.threaded = False
        send = widget._send

        def record(msg: dict[str, Any], buffers: Any = None) -> Any:
            if msg.get("method") == "custom":
                self.answers.append(msg["content"])
            elif msg.get("method") == "update":
                self.updates.append(dict(msg["state"]))
            return send(msg, buffers=buffers)

        widget._send = record

    def send(self, message: Any) -> dict[str, Any] | None:
        """Send any message (well-formed or not); the answer it got, if one came."""
        before = len(self.answers)
        self.widget._handle_msg(
            {"content": {"data": {"method": "custom", "content": message}}, "buffers": []}
        )
        return self.answers[-1] if len(self.answers) > before else None

    def ask(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send the command ``kind`` with ``fields`` (``result_id`` defaults to the shown
        result's) and return its answer envelope."""
        message = {"kind": kind, "id": f"p{next(self._ids)}", **fields}
        if kind in COMMANDS and "result_id" in COMMANDS[kind].fields:
            message.setdefault("result_id", self.widget.result_id)
        answer = self.send(message)
        assert answer is not None and answer["request_id"] == message["id"], answer
        return answer

    def recompute(self, **controls: Any) -> dict[str, Any]:
        """The controls' Apply with these fields; the answer envelope."""
        return self.ask("recompute", controls=controls)

    def write(self, **state: Any) -> None:
        """The page writes traits: an ipywidgets 8 ``update``."""
        self.widget._handle_msg(
            {
                "content": {"data": {"method": "update", "state": state, "buffer_paths": []}},
                "buffers": [],
            }
        )


def error_of(answer: dict[str, Any]) -> str:
    """The message of an error envelope ("" for a successful one)."""
    return "" if answer["ok"] else answer["error"]["message"]
