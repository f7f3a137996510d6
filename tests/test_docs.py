"""The docs: the site builds (strict) with every shelf, its pages name what exists, and the
figures the prose quotes come from the committed data, not from memory.

* Lens quality: every "A–B× smaller/larger" KL range in docs/findings/ is the
  min and max over depths of a ratio of two lenses' KL columns in
  ``docs/data/lens_quality_<model>.json`` (at the precision written), and the claim it makes
  ("at every depth below the last") holds for every depth of the range. A KL range the tests
  do not know fails too, so a new one is checked, not typed.
* The counterfactual study: the patching site, the strict top-1 and the ±2-window hit rates
  the findings and docs/study.md quote are recomputed from ``docs/study-pairs-*/table.parquet``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The docs site as `make docs` builds it (strict: a warning fails the build)."""
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_the_docs_site_builds_with_every_shelf(site):
    api = (site / "reference" / "api.html").read_text(encoding="utf-8")
    assert "Attribute each position" in api  # IGLens.attribute's docstring, not just its name
    assert "One-shot IG-Lens attribution" in api  # iglens_viz.attribute's
    assert ":meth:" not in api and ":class:" not in api  # reST roles shown as code (hooks.py)
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    for command in ("iglens validate", "iglens fit-lens", "--no-chat"):
        assert command in cli, command
    for page in ("tutorials/first-hour", "explanation/glossary", "developing/architecture"):
        assert (site / f"{page}.html").is_file(), page
    assert (site / "gallery" / "01_quickstart.html").is_file()


def test_the_docs_site_loads_nothing_from_another_machine(site):
    """No page of the built site asks another machine for an image, a stylesheet, a script
    or a font (the gallery's badges, Material's Google Fonts, a CDN): it reads offline."""
    fetches = re.compile(
        r"""<(?:img|script|link|source|iframe)\b[^>]*\b(?:src|href)=["']?(https?:)?//"""
    )
    offenders = {
        str(page.relative_to(site))
        for page in site.rglob("*.html")
        if fetches.search(page.read_text(encoding="utf-8"))
    }
    assert not offenders, sorted(offenders)[:10]


def test_the_errors_page_names_every_error_class(site):
    """Every IGLensError subclass of the library and the study package has its section."""
    import importlib
    import pkgutil

    import iglens_viz

    for name in ("iglens_viz", "iglens_study"):
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                importlib.import_module(info.name)

    def subclasses(cls: type) -> list[type]:
        return [cls] + [s for sub in cls.__subclasses__() for s in subclasses(sub)]

    page = (site / "reference" / "errors.html").read_text(encoding="utf-8")
    named = [c for c in subclasses(iglens_viz.IGLensError) if c.__module__.startswith("iglens_")]
    assert len(named) >= 10 and any(c.__module__.startswith("iglens_study") for c in named)
    for cls in named:
        assert f"<code>{cls.__name__}</code>" in page, cls


def test_the_architecture_page_names_files_that_exist():
    text = (ROOT / "docs" / "developing" / "architecture.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:iglens_viz|js|tests)/[\w./-]*)`", text))
    assert len(paths) > 20
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == [], missing


def test_the_lesson_plan_quotes_the_student_help():
    """The teacher's plan reads out the help's sentences: the ones js/views/help.js shows."""
    js = (ROOT / "js" / "views" / "help.js").read_text(encoding="utf-8")
    block = js[js.index("export const STUDENT_HELP = [") : js.index("];", js.index("STUDENT_HELP"))]
    sentences = [json.loads(f'"{s}"') for s in re.findall(r'"((?:[^"\\]|\\.)*)"', block)]
    assert len(sentences) == 4
    plan = flat("docs/tutorials/lesson-plan.md")
    for sentence in sentences:
        assert f"> {sentence}" in plan, sentence


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
        "docs/findings/fitted-lenses.md",
        "default",
        "logit",
        "shortcut",
        "the shortcut's KL to the model's final distribution is {lo:.1f}× (depth {dlo}) to "
        "{hi:.1f}× (depth {dhi}) smaller than the logit lens's at every depth below the last",
    ),
    KLRange(
        "docs/findings/fitted-lenses.md",
        "gemma",
        "logit",
        "shortcut",
        "the shortcut's KL is {lo:.1f}–{hi:.0f}× smaller at every depth below the last",
    ),
    KLRange(
        "docs/findings/fitted-lenses.md",
        "default",
        "logit",
        "tuned",
        "reads better than the logit lens at every depth (KL {lo:.1f}–{hi:.1f}× smaller)",
    ),
    KLRange(
        "docs/findings/fitted-lenses.md",
        "default",
        "logit",
        "jacobian",
        "reads the output better than the logit lens by KL ({lo:.1f}–{hi:.0f}× smaller)",
    ),
    KLRange(
        "docs/findings/fitted-lenses.md",
        "gemma",
        "jacobian",
        "logit",
        "**worse than the logit lens** at every depth from 2 to 17 (KL {lo:.2f}–{hi:.1f}× larger",
        first=2,
    ),
    KLRange(
        "docs/findings/fitted-lenses.md",
        "gemma",
        "logit",
        "tuned",
        "better than the logit lens at every depth (KL {lo:.1f}–{hi:.1f}× smaller, top-1 higher",
    ),
    KLRange(
        "docs/findings/fitted-lenses.md",
        "gemma",
        "tuned",
        "shortcut",
        "worse than the shortcut by KL at every depth ({lo:.2f}–{hi:.1f}× larger)",
    ),
    KLRange(
        "docs/findings/lens-quality.md",
        "default",
        "logit",
        "shortcut",
        "The shortcut's KL is {lo:.1f}× (depth {dlo}) to {hi:.1f}× (depth {dhi}) smaller than "
        "the logit lens's at every depth below the last",
    ),
    KLRange(
        "docs/findings/lens-quality.md",
        "default",
        "logit",
        "tuned",
        "its KL is {lo:.1f}–{hi:.1f}× smaller than the logit lens's at every depth below the last",
    ),
    KLRange(
        "docs/findings/lens-quality.md",
        "default",
        "logit",
        "jacobian",
        "its KL is smaller than the logit lens's at every depth below the last, but only "
        "{lo:.1f}× (depth {dlo}) to {hi:.1f}× (depth {dhi})",
    ),
    KLRange(
        "docs/findings/lens-quality.md",
        "default",
        "jacobian",
        "shortcut",
        "and {lo:.1f}–{hi:.1f}× *larger* than the shortcut's at every depth",
    ),
    KLRange(
        "docs/findings/lens-quality.md",
        "gemma",
        "logit",
        "shortcut",
        "The shortcut's KL is {lo:.1f}× (depth {dlo}) to {hi:.0f}× (depth {dhi}) smaller than "
        "the logit lens's at every depth below the last",
    ),
    KLRange(
        "docs/findings/lens-quality.md",
        "gemma",
        "jacobian",
        "logit",
        "at every depth from 2 to 17: its KL is {lo:.2f}× (depth {dlo}) to {hi:.1f}× (depth "
        "{dhi}) larger",
        first=2,
    ),
    KLRange(
        "docs/findings/lens-quality.md",
        "gemma",
        "logit",
        "jacobian",
        "Only at depths 0 and 1 is its KL smaller ({hi:.0f}× and {lo:.0f}×)",
        last=2,
    ),
    KLRange(
        "docs/findings/lens-quality.md",
        "gemma",
        "logit",
        "tuned",
        "its KL is {lo:.1f}× (depth {dlo}) to {hi:.1f}× (depth {dhi}) smaller",
    ),
    KLRange(
        "docs/findings/lens-quality.md",
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


# --- the counterfactual study: site, strict top-1 and the ±2 window ---------------------------


@functools.cache
def study_figures(folder: str) -> dict[str, float | int]:
    """What the docs quote of one committed counterfactual study, recomputed from its table:
    the patching site (argmax of ``patch_total`` over blocks, per pair), how often it is its
    commonest block, the all-position site's block-1 count, and for every method column the
    strict top-1 rate (its argmax is the site) and the ±2-window rate; the best constant's."""
    pd = pytest.importorskip("pandas")
    table = pd.read_parquet(ROOT / "docs" / folder / "table.parquet")

    def named(column: str) -> np.ndarray:  # the block each pair's column names (its argmax)
        wide = table.pivot(index="pair", columns="block", values=column)
        return wide.columns.to_numpy()[wide.to_numpy().argmax(1)]

    site = named("patch_total")
    blocks, counts = np.unique(site, return_counts=True)
    out: dict[str, float | int] = {
        "n": len(site),
        "site": int(blocks[counts.argmax()]),
        "site_n": int(counts.max()),
        "all1": int((named("patch_total_all") == 1).sum()),
    }
    methods = [c for c in table.columns if c.startswith("ig_")] + ["attribution", "dla"]
    for column in methods:
        if table[column].notna().all():
            name = column.removeprefix("ig_")
            out[f"strict_{name}"] = float((named(column) == site).mean())
            out[f"win_{name}"] = float((np.abs(named(column) - site) <= 2).mean())
    constants = np.unique(table["block"])
    windows = [(np.abs(site - b) <= 2).mean() for b in constants]
    out["const_block"] = int(constants[int(np.argmax(windows))])  # the first best, as reported
    out["const_win"] = float(max(windows))
    out["const_strict"] = float(max((site == b).mean() for b in constants))
    return out


# (doc, study folder, sentence with the figures as written)
STUDY_SENTENCES = [
    (
        "docs/findings/counterfactual-study.md",
        "study-pairs-default",
        "block {site} for {site_n} of {n} pairs (median effect",
    ),
    (
        "docs/findings/counterfactual-study.md",
        "study-pairs-default",
        "patching the block at *every* position instead puts it at block 1 for {all1} pairs",
    ),
    (
        "docs/findings/counterfactual-study.md",
        "study-pairs-default",
        "**no**: {win_logit:.3f} against {const_win:.3f} (block {const_block}'s window), −0.99 "
        "[−1.00, −0.97]; strict top-1 (the onset *is* the site): {strict_logit:.3f} against "
        "block {site}'s {const_strict:.3f}",
    ),
    (
        "docs/findings/counterfactual-study.md",
        "study-pairs-default",
        "**yes**: {win_shortcut:.3f} against {win_logit:.3f}, +0.47 [0.35, 0.59]; strict top-1 "
        "{strict_shortcut:.3f} against {strict_logit:.3f}",
    ),
    (
        "docs/findings/counterfactual-study.md",
        "study-pairs-gemma",
        "**no**: {win_shortcut:.3f} against {win_logit:.3f}, −0.60 [−0.78, −0.41]; strict top-1 "
        "{strict_shortcut:.3f} against {strict_logit:.3f}",
    ),
    (
        "docs/findings/counterfactual-study.md",
        "study-pairs-default",
        "tuned **no** ({win_tuned:.3f} against {win_logit:.3f}, +0.00 [−0.01, 0.01]; strict "
        "{strict_tuned:.3f} and {strict_logit:.3f}); Jacobian **yes** ({win_jacobian:.3f} "
        "against {win_logit:.3f}, +0.44 [0.32, 0.55]; strict {strict_jacobian:.3f} against "
        "{strict_logit:.3f})",
    ),
    (
        "docs/findings/counterfactual-study.md",
        "study-pairs-default",
        "does not name that block ({win_logit:.1%} of pairs within ±2, {strict_logit:.1%} "
        "strictly). The site is block {site} for {site_n} of {n} pairs, so a constant block "
        "scores {const_win:.3f} under the ±2 window; and patching a block at every position "
        "instead of the answer position alone puts it at block 1 for {all1} pairs. The fitted "
        "shortcut lens's onset is within ±2 blocks of block {site} for about half the pairs "
        "({win_shortcut:.3f}) and on it for {strict_shortcut:.3f} — an improvement on the logit "
        "lens, far from attribution patching ({win_attribution:.3f} within ±2, "
        "{strict_attribution:.3f} strictly), frozen-norm DLA ({win_dla:.3f}, {strict_dla:.3f}) "
        "or the constant. The Jacobian lens does about as well within ±2 ({win_jacobian:.3f}; "
        "{strict_jacobian:.3f} strictly), the tuned lens as fitted here not at all "
        "({win_tuned:.3f}, {strict_tuned:.3f} strictly",
    ),
    (
        "docs/findings/counterfactual-study.md",
        "study-pairs-gemma",
        "the Jacobian lens's for {win_jacobian:.2f} ({strict_jacobian:.2f} strictly)",
    ),
    (
        "docs/findings/counterfactual-study.md",
        "study-pairs-gemma-tuned",
        "tuned lens's onset is within ±2 blocks of it for {win_tuned:.2f} of pairs "
        "({strict_tuned:.2f} strictly)",
    ),
    (
        "docs/study.md",
        "study-pairs-default",
        "at block {site} for {site_n} of {n} pairs, so a constant block hits {const_win:.3f} of "
        "them",
    ),
    (
        "docs/study.md",
        "study-pairs-default",
        "H4 on the default model: ±2 hit rates {win_shortcut:.3f} (shortcut) and "
        "{win_logit:.3f} (logit), strict {strict_shortcut:.3f} and {strict_logit:.3f}",
    ),
    (
        "docs/study.md",
        "study-pairs-gemma",
        "on Gemma-3-270M {win_shortcut:.3f} and {win_logit:.3f}, strict {strict_shortcut:.3f} "
        "and {strict_logit:.3f} (the site is block {site} for every pair)",
    ),
    (
        "docs/study.md",
        "study-pairs-default",
        "hit rates {win_jacobian:.3f} and {win_logit:.3f}, strict {strict_jacobian:.3f} and "
        "{strict_logit:.3f})",
    ),
    (
        "docs/study.md",
        "study-pairs-gemma",
        "hit rates {win_jacobian:.3f} and {win_logit:.3f}, strict {strict_jacobian:.3f} and "
        "{strict_logit:.3f}; its onset is block {site}",
    ),
    (
        "docs/study.md",
        "study-pairs-gemma-212",
        "(shortcut {win_shortcut:.3f} against logit {win_logit:.3f}, −0.59 [−0.78, −0.40]; "
        "strict top-1 {strict_shortcut:.3f} against {strict_logit:.3f})",
    ),
    (
        "gallery/10_counterfactual_patching.ipynb",
        "study-pairs-default",
        "for about half the pairs ({win_shortcut:.3f}; H4: **yes**, +0.47 [0.35, 0.59]), on the "
        "site itself for {strict_shortcut:.3f} (strict top-1; the Jacobian lens "
        "{win_jacobian:.3f} within ±2, {strict_jacobian:.3f} strictly). Patching a block at "
        "every position instead of the answer position alone puts the site at block 1 for "
        "{all1} of the {n} pairs",
    ),
]


def doc_text(doc: str) -> str:
    """``flat`` of a markdown file, or of a notebook's markdown cells."""
    if not doc.endswith(".ipynb"):
        return flat(doc)
    cells = json.loads((ROOT / doc).read_text(encoding="utf-8"))["cells"]
    return " ".join(
        " ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown"
    )


@pytest.mark.parametrize(
    ("doc", "folder", "sentence"), STUDY_SENTENCES, ids=lambda v: v if "/" in v else None
)
def test_the_study_figures_quoted_are_the_tables(doc, folder, sentence):
    expected = sentence.format(**study_figures(folder))
    assert expected in doc_text(doc), expected


# --- the readout checks ----------------------------------------------------------------------


def _sci(value: float, times: str) -> str:
    """``value`` as the docs write it: two significant figures, ``3.9{times}10⁻⁶``."""
    mantissa, exponent = f"{value:.1e}".split("e")
    digits = str(int(exponent)).replace("-", "⁻")
    return mantissa + times + "10" + digits.translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def test_the_readout_checks_quoted_are_the_data_file():
    """docs/findings/fitted-lenses.md and docs/lens-onsets.md quote the largest model and
    readout gaps of benchmarks/lens_onsets.py's run, as written in
    docs/data/lens_onsets_default.json."""
    data = json.loads((ROOT / "docs/data/lens_onsets_default.json").read_text(encoding="utf-8"))
    rows, checks = data["rows"], data["summary"]["completeness"]
    for lens in ("logit", "shortcut"):  # the summary is the rows' own maximum
        for key in ("model_gap", "readout_gap"):
            assert checks[lens][f"max_{key}"] == pytest.approx(max(r[lens][key] for r in rows))
    model_gap = max(checks[lens]["max_model_gap"] for lens in ("logit", "shortcut"))
    readme, onsets = flat("docs/findings/fitted-lenses.md"), flat("docs/lens-onsets.md")
    assert f"within {_sci(model_gap, '·')} of the model's own softmax probability" in readme
    assert (
        f"within {_sci(checks['logit']['max_readout_gap'], '·')} (logit lens) and "
        f"{_sci(checks['shortcut']['max_readout_gap'], '·')} (shortcut)" in readme
    )
    for lens in ("logit", "shortcut"):
        row = (
            f"| {lens} | {_sci(checks[lens]['max_model_gap'], ' × ')} | "
            f"{_sci(checks[lens]['max_readout_gap'], ' × ')} |"
        )
        assert row in onsets, row
