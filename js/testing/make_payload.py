"""Write js/testing/payload.json: a widget state and its answers made by the Python side.

Run from the repository root with the project's Python: ``.venv/bin/python
js/testing/make_payload.py``. It attributes a short prompt on a tiny random Llama
(tests/support/tiny_models.py, fixed seed) with a teacher-forced answer and a second answer to
compare it with (``answer=``, ``versus=``: the payload's ``answer``, ``versus``, ``comparison`` and
``lens_logprobs``), shows it in an ``IGLensWidget`` and sends it the page's commands through its
dispatcher (``hello``, ``components``, ``ablation``, ``path``, a ``path`` with a bad position,
and ``gates``): it keeps the model state (buffers as base64 as in the exported page), the
``components``, ``ablation``, ``path`` and ``gates`` traits those commands set, their answer
envelopes (``answers``, one an error), and a few values computed here with numpy (``expected``;
``expected["answers"]``: the whole answers' figures as sent, and the ledger of a span of
positions summed here from the float32 ``lens_logprobs`` the page gets).

The JS contract test (js/model/payload-contract.test.js) decodes it with the real codec and
renders it; tests/protocol/test_payload_contract.py rebuilds it in memory and compares it with the
committed file, so a change of the Python payload that is not regenerated fails pytest, and
a regenerated one that the JS cannot read fails ``npm test``.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = pathlib.Path(__file__).with_name("payload.json")
PROMPT = "w5 w17 w3 w42 w8"
STEPS = 1  # no path in the result: the lazy path answer is the one drawn
PATH_STEPS = 4
ANSWER = " w9 w11"  # teacher-forced after the prompt: the payload's answer (two tokens)
VERSUS = " w7"  # the answer it is compared with (one token, its own pass)
SPAN = (1, 3)  # a span of prompt positions whose ledger the JS sums from lens_logprobs
COUNTERFACTUAL = "w5 w18 w3 w42 w8"  # the gate game's: the prompt with its second word changed


def build() -> dict[str, Any]:
    """The payload file's content (deterministic: seconds are zeroed)."""
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    from tiny_models import tiny_model, tiny_tokenizer

    from iglens_viz import IGLens
    from iglens_viz.protocol import DEFAULT_STATE
    from iglens_viz.protocol.serializers import to_base64_state
    from iglens_viz.widget import IGLensWidget

    # float64 throughout, sent as float32 (as every payload is): a rebuild on another CPU,
    # BLAS or thread count differs from the file by float32 rounding only. In float32 the
    # component shares (ratios of small first-order terms) moved by 3e-5 between runs.
    model = tiny_model("llama").double()
    lens = IGLens(model, tiny_tokenizer(), dtype="float64", name="tiny-llama <b>")
    result = lens.attribute(PROMPT, answer=ANSWER, versus=VERSUS, boundaries=[0, 1, 4], steps=STEPS)
    # The answers as the page gets them: commands through the widget's dispatcher.
    widget = IGLensWidget(result, lens)
    widget.threaded = False
    widget.send = lambda content, buffers=None: None  # no comm: the envelopes are returned
    position = int(widget.selected)
    asked = {"result_id": widget.result_id, "position": position}
    answers = [
        widget.dispatch({"kind": "hello", "id": "t-1"}),
        widget.dispatch({"kind": "components", "id": "t-2", **asked}),
        widget.dispatch({"kind": "ablation", "id": "t-3", **asked}),
        widget.dispatch({"kind": "path", "id": "t-4", **asked, "steps": PATH_STEPS}),
        widget.dispatch({"kind": "path", "id": "t-5", **asked, "position": 99, "steps": 4}),
        widget.dispatch({"kind": "gates", "id": "t-6", **asked, "counterfactual": COUNTERFACTUAL}),
    ]
    ablation = {**widget.ablation, "seconds": 0.0}  # wall time: not part of the contract
    path = {**widget.path, "seconds": 0.0}
    gates = {**widget.gates, "seconds": 0.0}
    state = {key: getattr(widget, key) for key in ("result", *DEFAULT_STATE)}
    contributions = np.asarray(result.contributions, dtype=np.float32)
    delta_p = np.asarray(result.delta_p, dtype=np.float32)
    expected = {
        "position": position,
        "tokens": [str(t) for t in result.tokens],
        "target_tokens": [str(t) for t in result.target_tokens],
        "segment_labels": list(result.segment_labels),
        "contributions": [float(v) for v in contributions[position]],
        "sum": float(contributions[position].astype(np.float64).sum()),
        "delta_p": float(delta_p[position]),
        "n_blocks": int(result.n_blocks),
        "answers": _answers_expected(result),
    }
    return {
        "about": "made by js/testing/make_payload.py; do not edit by hand",
        "state": to_base64_state({**state, "components": widget.components}),
        "ablation": ablation,
        "path": path,
        "gates": gates,
        "answers": answers,
        "expected": expected,
    }


def _f32(values: Any) -> list[float]:
    """Values as the page gets them: float32, written as exact float64 numbers."""
    return [float(v) for v in np.asarray(values, dtype=np.float32).ravel()]


def _answers_expected(result: Any) -> dict[str, Any]:
    """The whole answers' figures as the payload sends them (float32), and a span's ledger
    summed here in float64 from the float32 ``lens_logprobs`` (what the JS must get)."""
    answer, versus, comparison = result.answer, result.versus, result.comparison
    lp = np.asarray(result.lens_logprobs, dtype=np.float32).astype(np.float64)
    rows = lp[SPAN[0] : SPAN[1] + 1]
    span_lens_logprobs = rows.sum(axis=0)
    split = np.diff(rows, axis=1).T  # (k, n)
    return {
        "answer_text": answer.text,
        "answer_tokens": list(answer.tokens),
        "answer_positions": [int(t) for t in answer.positions],
        "answer_logprob_contributions": _f32(answer.logprob_contributions),
        "answer_logprob_split": _f32(answer.logprob_split),
        "answer_lens_probs": _f32(answer.lens_probs),
        "answer_logprob": float(answer.logprob),  # JSON scalars travel as float64
        "answer_lens_logprob0": _f32(answer.lens_logprobs[:1])[0],
        "versus_text": versus.text,
        "versus_lens_probs": _f32(versus.lens_probs),
        "comparison_logprob_contributions": _f32(comparison.logprob_contributions),
        "comparison_prob_contributions": _f32(comparison.prob_contributions),
        "comparison_logprob_gap": float(comparison.logprob_gap),
        "comparison_prob_gap": float(comparison.prob_gap),
        "comparison_onset": int(comparison.onset),
        "comparison_prob_onset": int(comparison.prob_onset),
        "span": list(SPAN),
        "span_contributions": [float(v) for v in split.sum(axis=1)],
        "span_split": [float(v) for v in split.ravel()],
        "span_lens_probs": [float(v) for v in np.exp(span_lens_logprobs)],
        "span_logprob": float(span_lens_logprobs[-1]),
        "span_logprob0": float(span_lens_logprobs[0]),
    }


def dumps(content: dict[str, Any]) -> str:
    """The file's text (the committed file is exactly this)."""
    return json.dumps(content, indent=1, sort_keys=True, allow_nan=False) + "\n"


def main() -> None:
    text = dumps(build())
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}: {len(text.encode())} bytes")


if __name__ == "__main__":
    main()
