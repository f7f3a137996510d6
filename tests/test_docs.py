"""The docs: the API reference builds, and the figures the prose quotes come from the committed
data, not from memory.

* Lens quality: every "A–B× smaller/larger" KL range in the README and docs/lenses.md is the
  min and max over depths of a ratio of two lenses' KL columns in
  ``docs/data/lens_quality_<model>.json`` (at the precision written), and the claim it makes
  ("at every depth below the last") holds for every depth of the range. A KL range the tests
  do not know fails too, so a new one is checked, not typed.
* The counterfactual study: the patching site, the strict top-1 and the ±2-window hit rates
  the README and docs/study.md quote are recomputed from ``docs/study-pairs-*/table.parquet``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_api_reference_builds(tmp_path):
    pytest.importorskip("pdoc")
    out = tmp_path / "api"
    script = ROOT / "docs" / "api" / "build.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True, timeout=600)
    index = out / "iglens_viz.html"
    assert index.is_file()
    text = index.read_text(encoding="utf-8")
    assert "IGLens" in text and "attribute" in text
    # The docstrings made it in, not just the names.
    assert "Attribute each position" in text  # IGLens.attribute
    assert "One-shot IG-Lens attribution" in text  # iglens_viz.attribute
    for page in (
        "core/lens.html",
        "causal.html",
        "core/trajectory.html",
        "widget.html",
        "export/html.html",
        "loading.html",
    ):
        assert (out / "iglens_viz" / page).is_file(), page
    lens_page = (out / "iglens_viz" / "core" / "lens.html").read_text(encoding="utf-8")
    assert "ReadoutMismatchError" in lens_page


def flat(path: str) -> str:
    """A doc's text with every run of whitespace one space (markdown wraps sentences)."""
    return " ".join((ROOT / path).read_text(encoding="utf-8").split())


# --- lens quality ----------------------------------------------------------------------------


@dataclass(frozen=True)
class KLRange:
    """A doc's sentence quoting ``KL[over] / KL[under]`` over depths ``first … last − 1``
    (``last`` None: every depth below the last, where every lens is the identity)."""

    doc: str
    model: str
    over: str
    under: str
    sentence: str
    first: int = 0
    last: int | None = None

    def ratios(self) -> np.ndarray:
        path = ROOT / "docs" / "data" / f"lens_quality_{self.model}.json"
        lenses = json.loads(path.read_text(encoding="utf-8"))["lenses"]
        kl = {name: np.asarray(v["kl"], dtype=float) for name, v in lenses.items()}
        last = len(kl["logit"]) - 1 if self.last is None else self.last
        return kl[self.over][self.first : last] / kl[self.under][self.first : last]

    def expected(self) -> str:
        """The sentence with the data's min and max (and their depths) written in."""
        r = self.ratios()
        lo, hi = int(np.argmin(r)), int(np.argmax(r))
        return self.sentence.format(lo=r[lo], hi=r[hi], dlo=self.first + lo, dhi=self.first + hi)


# "smaller" ranges are the logit lens's KL over the lens's; "larger" ones the lens's over
# the other's. Precision as written in the docs.
KL_RANGES = [
    KLRange(
        "README.md",
        "default",
        "logit",
        "shortcut",
        "the shortcut's KL to the model's final distribution is {lo:.1f}× (depth {dlo}) to "
        "{hi:.1f}× (depth {dhi}) smaller than the logit lens's at every depth below the last",
    ),
    KLRange(
        "README.md",
        "gemma",
        "logit",
        "shortcut",
        "the shortcut's KL is {lo:.1f}–{hi:.0f}× smaller at every depth below the last",
    ),
    KLRange(
        "README.md",
        "default",
        "logit",
        "tuned",
        "reads better than the logit lens at every depth (KL {lo:.1f}–{hi:.1f}× smaller)",
    ),
    KLRange(
        "README.md",
        "default",
        "logit",
        "jacobian",
        "reads the output better than the logit lens by KL ({lo:.1f}–{hi:.0f}× smaller)",
    ),
    KLRange(
        "README.md",
        "gemma",
        "jacobian",
        "logit",
        "**worse than the logit lens** at every depth from 2 to 17 (KL {lo:.2f}–{hi:.1f}× larger",
        first=2,
    ),
    KLRange(
        "README.md",
        "gemma",
        "logit",
        "tuned",
        "better than the logit lens at every depth (KL {lo:.1f}–{hi:.1f}× smaller, top-1 higher",
    ),
    KLRange(
        "README.md",
        "gemma",
        "tuned",
        "shortcut",
        "worse than the shortcut by KL at every depth ({lo:.2f}–{hi:.1f}× larger)",
    ),
    KLRange(
        "docs/lenses.md",
        "default",
        "logit",
        "shortcut",
        "The shortcut's KL is {lo:.1f}× (depth {dlo}) to {hi:.1f}× (depth {dhi}) smaller than "
        "the logit lens's at every depth below the last",
    ),
    KLRange(
        "docs/lenses.md",
        "default",
        "logit",
        "tuned",
        "its KL is {lo:.1f}–{hi:.1f}× smaller than the logit lens's at every depth below the last",
    ),
    KLRange(
        "docs/lenses.md",
        "default",
        "logit",
        "jacobian",
        "its KL is smaller than the logit lens's at every depth below the last, but only "
        "{lo:.1f}× (depth {dlo}) to {hi:.1f}× (depth {dhi})",
    ),
    KLRange(
        "docs/lenses.md",
        "default",
        "jacobian",
        "shortcut",
        "and {lo:.1f}–{hi:.1f}× *larger* than the shortcut's at every depth",
    ),
    KLRange(
        "docs/lenses.md",
        "gemma",
        "logit",
        "shortcut",
        "The shortcut's KL is {lo:.1f}× (depth {dlo}) to {hi:.0f}× (depth {dhi}) smaller than "
        "the logit lens's at every depth below the last",
    ),
    KLRange(
        "docs/lenses.md",
        "gemma",
        "jacobian",
        "logit",
        "at every depth from 2 to 17: its KL is {lo:.2f}× (depth {dlo}) to {hi:.1f}× (depth "
        "{dhi}) larger",
        first=2,
    ),
    KLRange(
        "docs/lenses.md",
        "gemma",
        "logit",
        "jacobian",
        "Only at depths 0 and 1 is its KL smaller ({hi:.0f}× and {lo:.0f}×)",
        last=2,
    ),
    KLRange(
        "docs/lenses.md",
        "gemma",
        "logit",
        "tuned",
        "its KL is {lo:.1f}× (depth {dlo}) to {hi:.1f}× (depth {dhi}) smaller",
    ),
    KLRange(
        "docs/lenses.md",
        "gemma",
        "tuned",
        "shortcut",
        "({lo:.2f}× at depth {dlo} to {hi:.1f}× at depth {dhi})",
    ),
]


@pytest.mark.parametrize("claim", KL_RANGES, ids=lambda c: f"{c.doc}:{c.model}:{c.over}/{c.under}")
def test_a_kl_range_is_the_data_files_min_and_max(claim):
    ratios = claim.ratios()
    # "N× smaller (larger) at every depth" of the range: the ratio exceeds 1 at each of them
    assert (ratios > 1).all(), (claim, ratios)
    assert claim.expected() in flat(claim.doc), claim.expected()


# A KL ratio range as the docs write them: "3.0–23.7×", "1.3× (depth 1) to 6.0×",
# "1.14× at depth 15 to 17.6×", "(14× and 3×)".
RANGE = re.compile(
    r"\d+(?:\.\d+)?×?(?: \(depth \d+\)| at depth \d+)?(?:–| to | and )\d+(?:\.\d+)?×"
)


@pytest.mark.parametrize("doc", sorted({c.doc for c in KL_RANGES}))
def test_every_kl_range_in_the_docs_is_checked(doc):
    text = flat(doc)
    checked = [
        (start, start + len(c.expected()))
        for c in KL_RANGES
        if c.doc == doc
        for start in [text.find(c.expected())]
        if start >= 0
    ]
    unchecked = [
        m.group()
        for m in RANGE.finditer(text)
        if "KL" in text[max(0, m.start() - 200) : m.start()]  # a ratio of KLs, not a timing
        and not any(a <= m.start() and m.end() <= b for a, b in checked)
    ]
    assert not unchecked, f"{doc}: KL ranges typed by hand, add them to KL_RANGES: {unchecked}"
