"""The gallery notebooks run top to bottom on the default model, and running them leaves
the checkout (the committed thumbnails above all) as it was.

The notebooks run (marker ``gallery``, also ``real_model``) on a model converted and lenses
fitted once per test run, before the first notebook and outside any cell's time limit
(:func:`tests.support.real_model.fit_gallery_lenses`): no cell converts or fits. Their
committed form (no outputs, thumbnails, links) is checked in the fast tier.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.promises import unkept_promises
from tests.support.real_model import GALLERY_LENSES

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

GALLERY = ROOT / "gallery"
NOTEBOOKS = sorted(GALLERY.glob("[0-9][0-9]_*.ipynb"))


def test_gallery_has_its_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(1, 12)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean(path):
    """No outputs, a python3 kernelspec, the thumbnail in the first cell (its badges:
    test_badges.py)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)
    first = "".join(nb["cells"][0]["source"])
    assert nb["cells"][0]["cell_type"] == "markdown"
    assert f"(thumbnails/{path.stem}.png)" in first
    assert (GALLERY / "thumbnails" / f"{path.stem}.png").is_file()


def gallery_files() -> dict[str, str]:
    """Every file under gallery/ (caches aside) and the SHA-256 of its bytes."""
    return {
        str(p.relative_to(GALLERY)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(GALLERY.rglob("*"))
        if p.is_file()
        and not {"__pycache__", ".ipynb_checkpoints"} & set(p.relative_to(GALLERY).parts)
    }


def git_status(folder: Path) -> str | None:
    """``git status --porcelain`` of ``folder`` (None without git or outside a checkout)."""
    if shutil.which("git") is None:
        return None
    out = subprocess.run(
        ["git", "status", "--porcelain", "--", str(folder)],
        cwd=GALLERY,
        capture_output=True,
        text=True,
    )
    return out.stdout if out.returncode == 0 else None


def _output_paths(path: Path) -> str:
    """The first code cell's lines that choose where the notebook writes."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    setup = "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])
    lines = [
        line
        for line in setup.splitlines()
        if line.startswith(("OUT =", "REFRESH =", "THUMBNAILS =", "THUMBNAILS.mkdir"))
    ]
    assert len(lines) == 4, setup
    return "\n".join(lines)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_writes_thumbnails_only_on_purpose(path, tmp_path, monkeypatch):
    """Figures go to a scratch folder; ``thumbnails/`` only with IGLENS_WRITE_THUMBNAILS=1."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    saves = [line.strip() for src in code for line in src.splitlines() if "savefig(" in line]
    assert saves == [
        f"fig{'3' if path.stem.startswith('07') else ''}.savefig(THUMBNAILS / "
        f'"{path.stem}.png", dpi=80, bbox_inches="tight")'
    ]
    assert all('"thumbnails"' not in src for src in code[1:])  # no other way in
    chooser = _output_paths(path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    for env, expected in [
        ({}, tmp_path / "tmp" / "iglens_gallery" / "thumbnails"),
        ({"IGLENS_GALLERY_OUT": str(tmp_path / "out")}, tmp_path / "out" / "thumbnails"),
        ({"IGLENS_WRITE_THUMBNAILS": "0"}, tmp_path / "tmp" / "iglens_gallery" / "thumbnails"),
        ({"IGLENS_WRITE_THUMBNAILS": "1"}, tmp_path / "thumbnails"),
    ]:
        for name in ("IGLENS_GALLERY_OUT", "IGLENS_WRITE_THUMBNAILS"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        scope = {"os": os, "tempfile": tempfile, "Path": Path}
        exec(chooser, scope)
        assert (tmp_path / scope["THUMBNAILS"]).resolve() == expected.resolve(), env
        assert expected.is_dir()


FITTED = re.compile(r"[\"'](shortcut|tuned|jacobian)[\"']")
"""A fitted lens kind named in a notebook's code."""


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_fits_no_lens_the_test_run_has_not(path):
    """Every fitted kind a notebook names is one the gallery fixture fits beforehand, or one
    it only reads from the cache (``cached_fitted_lens``, which never fits): no cell fits."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    named = set(FITTED.findall(code)) - set(GALLERY_LENSES)
    assert "fit_lens(" not in code
    assert not named or "cached_fitted_lens(" in code, named
    for kind in named:  # such a kind appears only in the loop that reads the cache
        lines = [line for line in code.splitlines() if f'"{kind}"' in line]
        assert all(line.lstrip().startswith("for kind in") for line in lines), lines


@pytest.fixture(scope="session")
def gallery_cache():
    """The cache folder holding the converted default model and the gallery's lenses,
    made once per run before the first notebook runs (outside any cell's time limit)."""
    from tests.support.real_model import fit_gallery_lenses

    return fit_gallery_lenses()


def test_make_thumbnails_is_the_one_that_refreshes():
    text = (GALLERY / "make_thumbnails.py").read_text(encoding="utf-8")
    assert 'os.environ["IGLENS_WRITE_THUMBNAILS"] = "1"' in text
    assert "IGLENS_WRITE_THUMBNAILS=1" in (GALLERY / "README.md").read_text(encoding="utf-8")


@pytest.mark.gallery
@pytest.mark.real_model
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path, monkeypatch, gallery_cache):
    """Execute with nbclient (python3 kernel, cwd = gallery/) as a reader would, with no
    output folder set, on the cache the gallery fixture filled: any error fails the test,
    the figure lands in the scratch folder (here under TMPDIR = tmp_path), and the
    checkout's gallery/ is left byte for byte as it was — its committed thumbnails above all;
    every figure, table and widget a cell's text announces is shown (in the inline backend a
    reader's kernel has: :func:`tests.support.promises.unkept_promises`). The limits
    (:mod:`tests.support.notebooks`) only catch a hung kernel."""
    from tests.support.notebooks import run_notebook

    for name in ("IGLENS_GALLERY_OUT", "IGLENS_WRITE_THUMBNAILS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IGLENS_CACHE", str(gallery_cache))  # the kernel's cache: model, lenses
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel's tempfile.gettempdir()
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    before, status = gallery_files(), git_status(GALLERY / "thumbnails")
    nb = nbformat.read(path, as_version=4)
    run_notebook(nb, GALLERY)
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "error"
    ]
    assert not errors
    assert unkept_promises(nb) == []
    after = gallery_files()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"running {path.name} wrote into the checkout: {changed}"
    assert git_status(GALLERY / "thumbnails") == status
    png = tmp_path / "iglens_gallery" / "thumbnails" / f"{path.stem}.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
