"""The wheel installs and works without Node: ``python -m build`` makes a wheel and an sdist
that carry the front-end bundle, and the wheel, installed into a fresh virtual environment
with no ``npm`` (or ``node``) on ``PATH``, writes a widget page that carries it.

Offline and fast: the build runs without isolation (hatchling and hatch-jupyter-builder come
from the ``test`` extra), the wheel is installed with ``--no-deps`` into a venv created
without pip, and that venv reaches the dependencies (torch, transformers, …) through a
``.pth`` line naming this interpreter's site-packages, *after* its own — so ``iglens_viz``
itself is imported from the fresh venv (checked), never from the checkout.

The checkout must hold the bundle (``make js``): building from a checkout runs npm when it
is missing, which this test forbids.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import tarfile
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.packaging import BUNDLE, no_node_env, run, unavailable

pytestmark = pytest.mark.packaging

PROMPT = "w3 w5 w7 w9 w11"  # words of the tiny word-level tokenizer


def test_wheel_and_sdist_carry_the_bundle(dists):
    checkout = {p: (ROOT / p).read_bytes() for p in BUNDLE}
    with zipfile.ZipFile(dists["wheel"]) as whl:
        names = set(whl.namelist())
        for p in BUNDLE:
            assert whl.read(p) == checkout[p]
        assert "iglens_viz/py.typed" in names
        # the default model's sampled corpus (iglens_viz.lenses.shipped), as in the checkout
        corpus = "iglens_viz/lenses/default_corpus.json"
        assert whl.read(corpus) == (ROOT / corpus).read_bytes()
        assert not any(n.startswith(("tests/", "js/", "node_modules/")) for n in names)
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = whl.read(meta).decode("utf-8")
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    # No address is published yet: no placeholder URL in the metadata (see pyproject.toml)
    assert "Project-URL: " not in metadata and "OWNER" not in metadata
    with tarfile.open(dists["sdist"]) as sdist:
        top = sdist.getnames()[0].split("/")[0]
        for p in BUNDLE:
            assert sdist.extractfile(f"{top}/{p}").read() == checkout[p]
        names = set(sdist.getnames())
    for p in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "iglens_viz/py.typed"):
        assert f"{top}/{p}" in names, p
    assert not any(n.startswith((f"{top}/node_modules/", f"{top}/.venv/")) for n in names)


class _Scripts(HTMLParser):
    """The text of each ``<script id=…>`` element of a page."""

    def __init__(self):
        super().__init__()
        self.scripts: dict[str, str] = {}
        self._id: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._id = dict(attrs).get("id")
            if self._id:
                self.scripts[self._id] = ""

    def handle_data(self, data):
        if self._id:
            self.scripts[self._id] += data

    def handle_endtag(self, tag):
        if tag == "script":
            self._id = None


@pytest.fixture(scope="module")
def page(dists, tiny_model_dir, tmp_path_factory) -> Path:
    """The wheel in a fresh venv without npm: ``iglens … --html`` on a tiny model folder."""
    work = tmp_path_factory.mktemp("fresh")
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=work, env=no_node_env())
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    fresh_site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=work,
            env=no_node_env(),
        ).strip()
    )
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            str(dists["wheel"]),
        ],
        cwd=work,
        env=no_node_env(),
    )
    # The dependencies from this interpreter, after the venv's own site-packages.
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (fresh_site / "zz_test_dependencies.pth").write_text("\n".join(ours) + "\n")
    env = no_node_env(python.parent)
    # Where `import iglens_viz` and its metadata resolve (find_spec runs no package code).
    where = json.loads(
        run(
            [
                str(python),
                "-c",
                "import json, importlib.metadata as m, "
                "importlib.util as u; print(json.dumps([u.find_spec('iglens_viz')"
                ".origin, str(m.distribution('iglens_viz').locate_file(''))]))",
            ],
            cwd=work,
            env=env,
        )
    )
    for path in where:
        assert Path(path).resolve().is_relative_to(fresh_site.resolve()), where
    out = work / "page.html"
    run(
        [
            str(python.parent / "iglens"),
            PROMPT,
            "--model",
            tiny_model_dir,
            "--no-chat",
            "--html",
            str(out),
        ],
        cwd=work,
        env=env,
    )
    return out


def test_the_wheel_writes_a_widget_page_without_npm(page, dists):
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    parser = _Scripts()
    parser.feed(text)
    with zipfile.ZipFile(dists["wheel"]) as whl:
        js = whl.read(BUNDLE[0]).decode("utf-8")
    assert json.loads(parser.scripts["iglens-bundle"]) == js  # the wheel's bundle, inline
    state = json.loads(parser.scripts["iglens-state"])
    assert state["result"]["tokens"][:2] == ["w3", "w5"]


@pytest.mark.browser
def test_the_page_from_the_wheel_shows_the_views(page):
    """Opened from file:// in headless Chromium: the token strip is drawn, no errors."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the playwright package (pip install -e '.[test]')")
    from tests.ui.helpers import PageRecorder, chromium_path, launch_chromium

    if chromium_path() is None:
        unavailable("Chromium (apt-get install chromium)")
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            recorder = PageRecorder().attach(tab)
            tab.goto(page.as_uri())
            # the strip draws in about a second idle; 5 minutes bounds a hang, not a speed
            tab.wait_for_selector("[data-token-index]", timeout=300_000)
            assert tab.locator("[data-token-index]").count() > 0
        finally:
            browser.close()
    assert not recorder.page_errors and not recorder.console_errors and not recorder.network
