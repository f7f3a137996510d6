"""Write js/testing/payload.json: a widget state and its answers made by the Python side.

Run from the repository root with the project's Python:
``.venv/bin/python js/testing/make_payload.py``. It attributes a short prompt on a tiny
random Llama (tests/tiny_models.py, fixed seed), shows it in an ``IGLensWidget`` and sends it
the page's commands through its dispatcher (``hello``, ``components``, ``ablation``,
``path``, and a ``path`` with a bad position): it keeps the model state (buffers as base64
as in the exported page), the ``components``, ``ablation`` and ``path`` traits those
commands set, their answer envelopes (``answers``, one an error), and a few values computed
here with numpy (``expected``).

The JS contract test (js/payload-contract.test.js) decodes it with the real codec and
renders it; tests/test_payload_contract.py rebuilds it in memory and compares it with the
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
    result = lens.attribute(PROMPT, boundaries=[0, 1, 4], steps=STEPS)
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
    ]
    ablation = {**widget.ablation, "seconds": 0.0}  # wall time: not part of the contract
    path = {**widget.path, "seconds": 0.0}
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
    }
    return {
        "about": "made by js/testing/make_payload.py; do not edit by hand",
        "state": to_base64_state({**state, "components": widget.components}),
        "ablation": ablation,
        "path": path,
        "answers": answers,
        "expected": expected,
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
