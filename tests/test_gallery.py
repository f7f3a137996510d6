"""The gallery notebooks run top to bottom on the default model and save their thumbnails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

GALLERY = Path(__file__).resolve().parents[1] / "gallery"
NOTEBOOKS = sorted(GALLERY.glob("[0-9][0-9]_*.ipynb"))
REPO_PLACEHOLDER = "OWNER/iglens_viz"


def test_gallery_has_the_eight_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07", "08"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean(path):
    """No outputs, a python3 kernelspec, thumbnail + Colab/Binder links in the first cell."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)
    first = "".join(nb["cells"][0]["source"])
    assert nb["cells"][0]["cell_type"] == "markdown"
    assert f"(thumbnails/{path.stem}.png)" in first
    assert (GALLERY / "thumbnails" / f"{path.stem}.png").is_file()
    assert (f"https://colab.research.google.com/github/{REPO_PLACEHOLDER}/blob/main/gallery/"
            f"{path.name}") in first
    assert f"https://mybinder.org/v2/gh/{REPO_PLACEHOLDER}/HEAD?labpath=gallery%2F{path.name}" in first


@pytest.mark.real_model
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path, monkeypatch):
    """Execute with nbclient (python3 kernel, cwd = gallery/); any error fails the test."""
    monkeypatch.setenv("IGLENS_GALLERY_OUT", str(tmp_path))  # thumbnails and exports go here
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(GALLERY)}})
    client.execute()
    png = tmp_path / "thumbnails" / f"{path.stem}.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.get("output_type") == "error"]
    assert not errors
