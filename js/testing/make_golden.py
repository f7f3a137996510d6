"""Write js/testing/golden.json: expected outputs of the Python modules the JS mirrors.

Run from the repository root with the project's Python: ``python js/testing/make_golden.py``.
The JS tests (lib/tokens.test.js, lib/nonmonotone.test.js) compare the JS mirrors against it.
"""

import json
import pathlib

import numpy as np

from iglens_viz.core.trajectory import NONMONOTONE_THRESHOLD, against_segments, against_steps
from iglens_viz.views.token_format import format_token

TOKENS = [
    "",
    " ",
    "  ",
    " the",
    "the ",
    " a b ",
    "\n",
    "\n\n",
    "\t",
    "\r\n",
    " \n ",
    "x\ty",
    "internationalisation",
    "Ġhello",
    "▁world",
    "\u200b",
    "\u202e",
    "\u2066x",
    "x\u00a0y",
    "\u3000",
    "\x07",
    "\x00",
    "\x7f",
    "\u2028",
    "\u2029",
    "\ue000",
    "\U000f0000",
    "😀",
    " 😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀",
    "\u0378",
    "é",
    "e\u0301",
    "<img src=x onerror=alert(1)>",
    "$x^2$",
    "\\",
    '"quoted"',
    "a" * 15,
    "a" * 16,
    "a" * 17,
    " " * 20,
    "\x07" * 5,
    "ab\u200bcd",
    "\ud800",
    "x\udfff",
]
OPTIONS = [
    {},
    {"max_len": 3},
    {"max_len": 1},
    {"max_len": 6},
    {"max_len": None},
    {"space": "\u00b7"},
    {"all_spaces": True},
    {"newline": "\\n"},
    {"max_len": 5, "all_spaces": True, "space": "\u00b7"},
]
# the default threshold (the one the widget uses) among the ones the mirrors are checked at
THRESHOLDS = [NONMONOTONE_THRESHOLD, 0.05, 0.0, 0.3, 1.0]


def js_opts(o):
    names = {"max_len": "maxLen", "all_spaces": "allSpaces"}
    return {names.get(k, k): v for k, v in o.items()}


def main():
    tokens = [
        {"text": t, "opts": js_opts(o), "expected": format_token(t, **o)}
        for t in TOKENS
        for o in OPTIONS
    ]
    rng = np.random.default_rng(0)
    segments = []
    for trial in range(60):
        k = int(rng.integers(1, 9))
        c = rng.normal(size=k) * (10.0 ** rng.integers(-4, 1))
        if trial % 5 == 0:
            c[rng.integers(0, k)] = np.nan
        if trial % 7 == 0:
            c[rng.integers(0, k)] = 0.0
        d = float(c[np.isfinite(c)].sum()) if trial % 11 else 0.0
        if trial % 13 == 0:
            d = float("nan")
        thr = THRESHOLDS[trial % len(THRESHOLDS)]
        segments.append(
            {
                "contributions": [None if not np.isfinite(x) else float(x) for x in c],
                "delta_p": None if not np.isfinite(d) else d,
                "threshold": thr,
                "expected": [bool(x) for x in against_segments(c, d, thr)],
            }
        )
    steps = []
    for trial in range(60):
        k = int(rng.integers(1, 6))
        m = int(rng.integers(1, 6))
        p = np.cumsum(rng.normal(size=(k, m + 1)), axis=-1) * 0.1
        if trial % 6 == 0:
            p[rng.integers(0, k), rng.integers(0, m + 1)] = np.nan
        if trial % 9 == 0:
            p[0, :] = 0.25
        thr = THRESHOLDS[trial % len(THRESHOLDS)]
        steps.append(
            {
                "k": k,
                "path": [None if not np.isfinite(x) else float(x) for x in p.ravel()],
                "threshold": thr,
                "expected": [[bool(x) for x in row] for row in against_steps(p, thr)],
            }
        )
    out = pathlib.Path(__file__).with_name("golden.json")
    out.write_text(
        json.dumps(
            {"format_token": tokens, "against_segments": segments, "against_steps": steps}, indent=0
        )
        + "\n",
        encoding="utf-8",
    )
    print(
        f"wrote {out}: {len(tokens)} token cases, {len(segments)} + {len(steps)} trajectory cases"
    )


if __name__ == "__main__":
    main()
