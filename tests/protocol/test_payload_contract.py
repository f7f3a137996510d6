"""The committed JS contract payload (js/testing/payload.json) is what Python makes today.

js/testing/make_payload.py builds it from a tiny random Llama with the functions the widget
calls; js/model/payload-contract.test.js decodes and renders it in ``npm test``. This test
rebuilds it in memory: a change of the payload (a field added, renamed, retyped, a value
computed differently) that is not regenerated fails here. Regenerate with
``.venv/bin/python js/testing/make_payload.py`` (CONTRIBUTING.md, golden files).
"""

from __future__ import annotations

import base64
import importlib.util
import json
from typing import Any

import numpy as np

from tests.support import ROOT

SCRIPT = ROOT / "js" / "testing" / "make_payload.py"
REGENERATE = "regenerate it: .venv/bin/python js/testing/make_payload.py"


def _script():
    spec = importlib.util.spec_from_file_location("make_payload", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _same(got: Any, want: Any, where: str) -> None:
    """Equal structure, keys, strings, ints and dtypes; floats (and float buffers) equal up to
    float32 rounding: the payload is computed in float64 and sent as float32, so a rebuild on
    another BLAS differs by about one float32 ulp (1.2e-7 relative); rtol 1e-5 leaves room
    for a value next to a rounding boundary while any real change fails."""
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        if "buffer" in want and "dtype" in want and isinstance(want["buffer"], str):
            assert got["dtype"] == want["dtype"] and got["shape"] == want["shape"], where
            a = np.frombuffer(base64.b64decode(got["buffer"]), dtype=got["dtype"])
            b = np.frombuffer(base64.b64decode(want["buffer"]), dtype=want["dtype"])
            if b.dtype.kind == "f":
                np.testing.assert_allclose(
                    a, b, rtol=1e-5, atol=1e-7, equal_nan=True, err_msg=where
                )
            else:
                np.testing.assert_array_equal(a, b, err_msg=where)
            return
        for key in want:
            _same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
        for n, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{n}]")
    elif isinstance(want, float):
        assert np.isclose(got, want, rtol=1e-5, atol=1e-7), f"{where}: {got} != {want}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def test_committed_payload_is_what_python_makes_now():
    script = _script()
    committed = json.loads(script.OUT.read_text(encoding="utf-8"))
    fresh = json.loads(script.dumps(script.build()))  # through JSON, as the file is
    try:
        _same(fresh, committed, "payload")
    except AssertionError as err:
        raise AssertionError(f"js/testing/payload.json is stale ({err}); {REGENERATE}") from None


def test_payload_file_is_small_and_plain_json():
    text = (ROOT / "js" / "testing" / "payload.json").read_text(encoding="utf-8")
    assert len(text.encode()) < 100_000

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in payload.json: JSON.parse would refuse it")

    json.loads(text, parse_constant=refuse)
