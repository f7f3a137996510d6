"""Cancel in a real kernel: a recompute asked for by the page must not block the kernel.

The browser's requests reach Python in a comm handler, outside any cell. This test starts
an ipykernel with ``jupyter_client``, builds a widget in a cell, and then — after that cell
has finished — talks to the widget's comm exactly as the front end does (``comm_msg`` with
``method: "custom"``, what anywidget's ``model.send`` sends): the controls' Apply (a
``recompute`` command), then Cancel (a ``cancel`` command naming it). While the recompute
runs, the kernel must answer an ``execute_request``, and the Cancel must stop it; the worker
thread's trait updates and answer envelopes must reach the front end (iopub).
"""

from __future__ import annotations

import json
import textwrap

from tests.support import HANG_S

SETUP = textwrap.dedent("""
    import json, time
    from tests.support.tiny_models import tiny_model, tiny_tokenizer
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
    _report = w._server.report
    def slow_report(done, total):
        chunks.append((done, total))
        time.sleep(0.08)
        _report(done, total)
    w._server.report = slow_report
    print(json.dumps({"comm_id": w.model_id}))
""")

# What the controls' Apply sends (iglens_viz.protocol.commands: a recompute command).
CONTROLS = {
    "target": "predicted",
    "contrast": "",
    "boundaries": "all",
    "estimator": "riemann",
    "steps": 100,
}

STATE = (
    "print(json.dumps({'running': w.running, 'progress': w.progress, 'result_id': w.result_id, "
    "'chunks': len(chunks), 'total': chunks[-1][1] if chunks else None, "
    "'same_result': w.result is shown, 'steps': w.attribution.request.steps, "
    "'alive': w._server.worker is not None and w._server.worker.is_alive()}))"
)


def test_cancel_from_the_page_reaches_a_running_recompute(kernel):
    comm_id = json.loads(kernel.execute(SETUP))["comm_id"]
    before = json.loads(kernel.execute(STATE))
    assert before["running"] == {} and before["steps"] == 1 and before["chunks"] == 0
    shown = before["result_id"]

    def answer_to(request_id):
        return lambda content: content.get("request_id") == request_id

    # The cell has finished: the page's hello and Apply arrive in a comm handler.
    mark = kernel.comm_send(comm_id, {"kind": "hello", "id": "v-1"})
    hello = kernel.wait_comm(comm_id, "custom", answer_to("v-1"), mark)
    assert hello["ok"] and hello["result_id"] == shown
    recompute = {"kind": "recompute", "id": "v-2", "result_id": shown, "controls": CONTROLS}
    mark = kernel.comm_send(comm_id, recompute)
    # The recompute runs: it is named in `running`, and its progress reaches the front end.
    kernel.wait_comm(comm_id, "update", lambda s: s.get("running", {}).get("id") == "v-2", mark)
    kernel.wait_comm(comm_id, "update", lambda s: s.get("progress", -1) >= 0, mark)

    # The kernel answers a cell while the recompute is still running ...
    during = json.loads(kernel.execute(STATE))
    assert during["running"] == {"id": "v-2", "command": "recompute"}, during
    assert during["alive"] is True and 0 < during["chunks"] < during["total"], during
    assert kernel.execute("print(1 + 1)").strip() == "2"

    # ... and the page's Cancel, naming it, stops it at its next chunk; the old result stays.
    mark = kernel.comm_send(comm_id, {"kind": "cancel", "id": "v-3", "request_id": "v-2"})
    assert kernel.wait_comm(comm_id, "custom", answer_to("v-3"), mark)["ok"]
    ended = kernel.wait_comm(comm_id, "custom", answer_to("v-2"), mark)
    assert ended["error"]["type"] == "RecomputeCancelled" and ended["result_id"] == shown
    assert ended["error"]["message"].startswith("cancelled")
    kernel.execute(f"w._server.worker.join({HANG_S})")
    after = json.loads(kernel.execute(STATE))
    assert after["running"] == {} and after["progress"] == -1.0, after
    assert after["alive"] is False and after["same_result"] is True and after["steps"] == 1
    assert after["chunks"] < after["total"], after  # it stopped before the last chunk

    # A recompute that is not cancelled still lands, and its result reaches the page.
    again = {**recompute, "id": "v-4", "controls": {**CONTROLS, "steps": 2}}
    mark = kernel.comm_send(comm_id, again)
    landed = kernel.wait_comm(comm_id, "update", lambda s: "result" in s, mark)
    assert landed["result"]["steps"] == 2 and landed["result"]["controls"]["steps"] == 2
    done = kernel.wait_comm(comm_id, "custom", answer_to("v-4"), mark)
    assert done["ok"] and done["result_id"] == landed["result"]["id"] != shown
    kernel.execute(f"w._server.worker.join({HANG_S})")
    final = json.loads(kernel.execute(STATE))
    assert final["running"] == {} and final["steps"] == 2, final
