"""A started ipykernel and its blocking client, driven as a front end drives it: run a cell,
send the page's comm messages, wait for the widget's answers on iopub.

The limits only bound a hang (nothing is timed): a cell of these tests runs in seconds
unloaded (measured: under 40 s, the slowest being a 250-step tuned fit slowed to ~30 s on
purpose); each limit is :data:`tests.support.HANG_S`.
"""

from __future__ import annotations

import os
import queue

import jupyter_client
import pytest

from . import HANG_S, ROOT

START_S = CELL_S = MSG_S = HANG_S
"""Seconds to wait for the kernel to start, a cell's reply, and the next iopub message."""


class Kernel:
    """A started ipykernel, its blocking client, and every iopub message seen so far."""

    def __init__(self):
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "MPLBACKEND": "Agg",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        self.km = jupyter_client.KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(ROOT), env=env)
        self.client = self.km.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=START_S)
        self.iopub: list[dict] = []

    def close(self):
        self.client.stop_channels()
        self.km.shutdown_kernel(now=True)

    def _pump(self, timeout: float) -> dict | None:
        try:
            msg = self.client.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            return None
        self.iopub.append(msg)
        return msg

    def execute(self, code: str) -> str:
        """Run ``code`` and return its stdout; a traceback fails the test."""
        msg_id = self.client.execute(code)
        reply = self.client.get_shell_msg(timeout=CELL_S)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.client.get_shell_msg(timeout=CELL_S)
        out = []
        while True:  # the cell's output ends with its idle status on iopub
            msg = self._pump(MSG_S)
            assert msg is not None, "no idle status after the cell"
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                pytest.fail("\n".join(msg["content"]["traceback"]))
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                break
        assert reply["content"]["status"] == "ok", reply["content"]
        return "".join(out)

    def comm_send(self, comm_id: str, message: dict) -> int:
        """Send what the page's ``model.send(message)`` sends (a ``custom`` comm message);
        the number of iopub messages seen before it."""
        msg = self.client.session.msg(
            "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": message}}
        )
        self.client.shell_channel.send(msg)
        return len(self.iopub)

    def wait_comm(self, comm_id: str, method: str, accept, since: int) -> dict:
        """The first iopub ``method`` message (``update``: its state, ``custom``: its
        content) of ``comm_id`` after message ``since`` that ``accept``s."""
        key = "state" if method == "update" else "content"
        seen = since
        while True:
            for msg in self.iopub[seen:]:
                content = msg["content"]
                data = content.get("data", {})
                if (
                    msg["msg_type"] == "comm_msg"
                    and content.get("comm_id") == comm_id
                    and data.get("method") == method
                    and accept(data[key])
                ):
                    return data[key]
            seen = len(self.iopub)
            assert self._pump(MSG_S) is not None, f"the widget sent no such {method}"
