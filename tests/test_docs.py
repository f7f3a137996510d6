"""The API reference builds from the docstrings with pdoc (the `docs` extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pdoc")


def test_api_reference_builds(tmp_path):
    out = tmp_path / "api"
    script = Path(__file__).resolve().parents[1] / "docs" / "api" / "build.py"
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
