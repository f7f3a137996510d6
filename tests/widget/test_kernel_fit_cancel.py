"""Cancel reaches a lens fit in a real kernel (issue 32, item 1).

Choosing "tuned lens (fitted)" in the controls starts a fit on the lens's first use; a Cancel
sent at step 20 of 250 was lost (the fit ran to its end and the page got ``ok: true``). Here,
as in test_kernel_cancel.py, an ipykernel runs the widget and the test talks to its comm as
the front end does: Apply with ``lens: "tuned"``, then — once ``running.fit`` reports step
20 or later — Cancel. The fit must stop within one step, answer ``RecomputeCancelled``
naming the checkpoint it kept, keep the shown result; the next Apply resumes from that
checkpoint and lands. The tiny model's steps are slowed down by a test-only patch of
``iglens_viz.lenses.tuned.kl_to_final`` (a machine slower than this one).
"""

from __future__ import annotations

import json
import re
import textwrap

from tests.support import HANG_S

SETUP = textwrap.dedent("""
    import json, os, time, tempfile
    os.environ["IGLENS_CACHE"] = tempfile.mkdtemp(prefix="iglens-fit-cancel-")
    from tests.support.tiny_models import tiny_model, tiny_tokenizer
    from iglens_viz import IGLens
    from iglens_viz.lenses import tuned
    from iglens_viz.widget import IGLensWidget
    from iglens_viz.widget.commands import HANDLERS, Handler

    lens = IGLens(tiny_model("llama"), tiny_tokenizer())
    w = IGLensWidget(None, lens, "w3 w5 w7 w9 w11 w13")
    shown = w.result
    real_kl, pause = tuned.kl_to_final, [0.03]

    def slow_kl(*args, **kwargs):  # 4 depths: ~0.12 s a step, ~30 s for 250
        time.sleep(pause[0])
        return real_kl(*args, **kwargs)

    tuned.kl_to_final = slow_kl
    steps, at_cancel = [], []  # the fit's steps reported; the step when Cancel arrived
    _fit_report, _cancel = w._server.fit_report, HANDLERS["cancel"].run

    def fit_report(report):
        if report.phase == "fit":
            steps.append(report.done)
        _fit_report(report)

    def command_cancel(server, command):
        at_cancel.append(steps[-1] if steps else None)
        _cancel(server, command)

    w._server.fit_report = fit_report
    HANDLERS["cancel"] = Handler(command_cancel)  # this kernel's only widget
    print(json.dumps({"comm_id": w.model_id, "cached": w.cached_lenses}))
""")

CONTROLS = {
    "target": "predicted",
    "contrast": "",
    "boundaries": "all",
    "estimator": "prediction_aware",
    "steps": 1,
    "lens": "tuned",
}

STATE = textwrap.dedent("""
    import glob, torch
    partial = glob.glob(os.environ["IGLENS_CACHE"] + "/lenses/tuned-*.partial.pt")
    print(json.dumps({
        "running": w.running, "progress": w.progress, "result_id": w.result_id,
        "same_result": w.result is shown, "lens": w.attribution.request.lens,
        "steps": steps, "at_cancel": at_cancel, "cached": w.cached_lenses,
        "partial": [(p, torch.load(p, weights_only=True)["step"]) for p in partial],
        "alive": w._server.worker is not None and w._server.worker.is_alive(),
    }))
""")

CANCELLED = re.compile(
    r"^cancelled: the tuned lens's checkpoint at step (\d+)/250 is kept, so choosing the tuned "
    r"lens again resumes its fit; the previous result is still shown$"
)


def test_cancel_stops_a_lens_fit_within_a_step_and_the_next_apply_resumes_it(kernel):
    setup = json.loads(kernel.execute(SETUP))
    comm_id = setup["comm_id"]
    assert setup["cached"] == []  # no fitted lens yet: the page says a first fit is long
    shown = json.loads(kernel.execute(STATE))["result_id"]

    def answer_to(request_id):
        return lambda content: content.get("request_id") == request_id

    apply = {"kind": "recompute", "id": "f-1", "result_id": shown, "controls": CONTROLS}
    mark = kernel.comm_send(comm_id, apply)
    # the fit's progress reaches the page: its phase, count and time left, in `running`
    fitting = kernel.wait_comm(
        comm_id,
        "update",
        lambda s: (
            (s.get("running", {}).get("fit") or {}).get("phase") == "fit"
            and s["running"]["fit"]["done"] >= 20
        ),
        mark,
    )["running"]
    assert fitting["id"] == "f-1" and fitting["command"] == "recompute"
    fit = fitting["fit"]
    assert (fit["kind"], fit["unit"], fit["total"]) == ("tuned", "steps", 250)
    assert fit["remaining_s"] is not None and fit["remaining_s"] > 0

    mark = kernel.comm_send(comm_id, {"kind": "cancel", "id": "f-2", "request_id": "f-1"})
    assert kernel.wait_comm(comm_id, "custom", answer_to("f-2"), mark)["ok"]
    ended = kernel.wait_comm(comm_id, "custom", answer_to("f-1"), mark)
    assert not ended["ok"] and ended["error"]["type"] == "RecomputeCancelled", ended
    found = CANCELLED.match(ended["error"]["message"])
    assert found, ended["error"]["message"]
    kept = int(found.group(1))
    kernel.execute(f"w._server.worker.join({HANG_S})")
    after = json.loads(kernel.execute(STATE))
    assert after["running"] == {} and after["progress"] == -1.0 and after["alive"] is False
    assert after["same_result"] is True and after["result_id"] == shown
    (at_cancel,) = after["at_cancel"]
    # stopped within one step of the Cancel, at the step the checkpoint holds
    assert at_cancel >= 20 and kept - at_cancel <= 1 and after["steps"][-1] == kept
    ((_, on_disk),) = after["partial"]
    assert on_disk == kept
    assert after["cached"] == []

    # Apply again (the machine is fast again): the fit resumes at the kept step and lands
    kernel.execute("pause[0] = 0.0; steps.clear()")
    again = {**apply, "id": "f-3"}
    mark = kernel.comm_send(comm_id, again)
    landed = kernel.wait_comm(comm_id, "update", lambda s: "result" in s, mark)
    done = kernel.wait_comm(comm_id, "custom", answer_to("f-3"), mark)
    assert done["ok"] and done["result_id"] == landed["result"]["id"] != shown
    kernel.execute(f"w._server.worker.join({HANG_S})")
    final = json.loads(kernel.execute(STATE))
    assert final["lens"] == "tuned" and final["partial"] == [] and final["cached"] == ["tuned"]
    assert final["steps"][0] == kept and final["steps"][-1] == 250  # from the checkpoint on
