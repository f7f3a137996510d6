"""Cancel in a real kernel: a recompute asked for by the page must not block the kernel.

The browser's requests reach Python in a comm handler, outside any cell. This test starts
an ipykernel with ``jupyter_client``, builds a widget in a cell, and then — after that cell
has finished — talks to the widget's comm exactly as the front end does (``comm_msg`` with
``method: "update"``): the controls' Apply (``request``), then Cancel (``cancel_request``).
While the recompute runs, the kernel must answer an ``execute_request``, and the Cancel
must stop it; the worker thread's trait updates must reach the front end (iopub).
"""

from __future__ import annotations

import json
import os
import queue
import textwrap
from pathlib import Path

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# Generous limits for a loaded machine (they bound a hang; nothing is timed).
START_S, CELL_S, MSG_S = 240, 240, 240

SETUP = textwrap.dedent(f"""
    import json, sys, time
    sys.path.insert(0, {str(TESTS)!r})
    from tiny_models import tiny_model, tiny_tokenizer
    from iglens_viz import IGLens
    from iglens_viz.widget import IGLensWidget

    lens = IGLens(tiny_model("llama"), tiny_tokenizer())
    w = IGLensWidget(None, lens, "w3 w5 w7 w9 w11 w13")
    shown = w.result
    # Many small chunks (a small memory budget), each made slow: the recompute reports
    # ~150 chunks and sleeps 80 ms after each, about 12 s uncancelled. The widget's own
    # progress hook (where it checks for Cancel) runs after every sleep.
    lens.memory_budget = 1 << 16
    chunks = []
    _report = w._report
    def slow_report(done, total):
        chunks.append((done, total))
        time.sleep(0.08)
        _report(done, total)
    w._report = slow_report
    print(json.dumps({{"comm_id": w.model_id}}))
""")

# What the controls' Apply writes (js/views/controls.js: makeRequest + the _n counter).
REQUEST = {
    "target": "predicted",
    "contrast": "",
    "boundaries": "all",
    "estimator": "riemann",
    "steps": 100,
    "_n": 1,
}

STATE = (
    "print(json.dumps({'busy': w.busy, 'progress': w.progress, 'error': w.error, "
    "'chunks': len(chunks), 'total': chunks[-1][1] if chunks else None, "
    "'same_result': w.result is shown, 'steps': w.attribution.request.steps, "
    "'alive': w._worker is not None and w._worker.is_alive()}))"
)


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
        self.km.start_kernel(cwd=str(TESTS), env=env)
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

    def comm_update(self, comm_id: str, state: dict) -> int:
        """Send what the front end sends when the page writes traits (ipywidgets 8); the
        number of iopub messages seen before it."""
        msg = self.client.session.msg(
            "comm_msg",
            {"comm_id": comm_id, "data": {"method": "update", "state": state, "buffer_paths": []}},
        )
        self.client.shell_channel.send(msg)
        return len(self.iopub)

    def wait_comm_state(self, comm_id: str, accept, since: int) -> dict:
        """The first iopub ``update`` of ``comm_id`` after message ``since`` whose state
        ``accept``s."""
        seen = since
        while True:
            for msg in self.iopub[seen:]:
                content = msg["content"]
                data = content.get("data", {})
                if (
                    msg["msg_type"] == "comm_msg"
                    and content.get("comm_id") == comm_id
                    and data.get("method") == "update"
                    and accept(data["state"])
                ):
                    return data["state"]
            seen = len(self.iopub)
            assert self._pump(MSG_S) is not None, "the widget sent no such update"


@pytest.fixture
def kernel():
    k = Kernel()
    try:
        yield k
    finally:
        k.close()


def test_cancel_from_the_page_reaches_a_running_recompute(kernel):
    comm_id = json.loads(kernel.execute(SETUP))["comm_id"]
    before = json.loads(kernel.execute(STATE))
    assert before["busy"] is False and before["steps"] == 1 and before["chunks"] == 0

    # The cell has finished: the page's Apply arrives in a comm handler, as in Jupyter.
    mark = kernel.comm_update(comm_id, {"request": REQUEST})
    # The recompute runs: its progress reaches the front end.
    kernel.wait_comm_state(comm_id, lambda s: s.get("progress", -1) >= 0, mark)

    # The kernel answers a cell while the recompute is still running ...
    during = json.loads(kernel.execute(STATE))
    assert during["busy"] is True and during["alive"] is True, during
    assert 0 < during["chunks"] < during["total"], during
    assert kernel.execute("print(1 + 1)").strip() == "2"

    # ... and the page's Cancel stops it at its next chunk; the old result stays.
    mark = kernel.comm_update(comm_id, {"cancel_request": {"_n": 1}})
    ended = kernel.wait_comm_state(comm_id, lambda s: s.get("busy") is False, mark)
    assert ended["error"].startswith("cancelled") and ended["progress"] == -1.0
    kernel.execute("w._worker.join(60)")
    after = json.loads(kernel.execute(STATE))
    assert after["error"].startswith("cancelled") and after["busy"] is False, after
    assert after["alive"] is False and after["same_result"] is True and after["steps"] == 1
    assert after["chunks"] < after["total"], after  # it stopped before the last chunk

    # A request that is not cancelled still lands, and its result reaches the page.
    mark = kernel.comm_update(comm_id, {"request": {**REQUEST, "steps": 2, "_n": 2}})
    landed = kernel.wait_comm_state(comm_id, lambda s: "result" in s, mark)
    assert landed["result"]["steps"] == 2 and landed["result"]["controls"]["steps"] == 2
    kernel.execute("w._worker.join(60)")
    final = json.loads(kernel.execute(STATE))
    assert final["error"] == "" and final["steps"] == 2 and final["busy"] is False, final
