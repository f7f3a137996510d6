"""gallery/colab.ipynb, run as a Colab user runs it, but from the wheel and offline.

A fresh virtual environment (with pip: the notebook's first cell runs ``%pip install``) reaches
the dependencies through a ``.pth`` line after its own site-packages, as the packaging tests'
does; a kernel spec starts IPython in it with ``IGLENS_WHEEL`` set to the wheel built from this
checkout and ``PIP_NO_INDEX=1``, so the install cell installs that wheel and can fetch nothing.
The notebook must then run top to bottom and show the widget in the student view, with the
picture beside it for renderers without widgets, from the package installed in the fresh
environment (not from the checkout).
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.packaging import no_node_env, run

pytestmark = [pytest.mark.packaging, pytest.mark.real_model]

NOTEBOOK = ROOT / "gallery" / "colab.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def fresh_kernel(dists, tmp_path_factory) -> dict:  # noqa: F811 (the imported fixture)
    """A kernel spec for a fresh venv (pip included, no iglens_viz) that sees this
    interpreter's packages after its own, with the wheel's path and no package index."""
    work = tmp_path_factory.mktemp("colab")
    venv = work / "venv"
    run(
        [sys.executable, "-m", "venv", str(venv)], cwd=work, env=no_node_env()
    )  # ensurepip: offline
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    fresh_site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=work,
            env=no_node_env(),
        ).strip()
    )
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (fresh_site / "zz_test_dependencies.pth").write_text("\n".join(ours) + "\n")
    spec = work / "jupyter" / "kernels" / "colab-fresh"
    spec.mkdir(parents=True)
    # This interpreter's site-packages (through the .pth) hold the checkout's editable install,
    # which pip would take as the package already installed: the wheel goes in over it, without
    # its dependencies (they are those same site-packages; the wheel's own Requires-Dist is
    # checked by test_packaging.py).
    wheel = f"--force-reinstall --no-deps {dists['wheel']}"
    env = {"IGLENS_WHEEL": wheel, "PIP_NO_INDEX": "1", "MPLBACKEND": "Agg"}
    if os.environ.get("IGLENS_CACHE"):
        env["IGLENS_CACHE"] = os.environ["IGLENS_CACHE"]
    kernel = {
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh venv",
        "language": "python",
        "env": env,
    }
    (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")
    return {"jupyter_path": str(work / "jupyter"), "name": "colab-fresh", "site": fresh_site}


def test_the_colab_notebook_runs_from_the_wheel(fresh_kernel, monkeypatch, tmp_path):
    import nbformat

    from tests.support.notebooks import run_notebook

    monkeypatch.setenv("JUPYTER_PATH", fresh_kernel["jupyter_path"])
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.cells[1].source.count("%pip install") == 2  # the install cell is the first code
    where = nbformat.v4.new_code_cell(
        "import iglens_viz, importlib.metadata as m\n"
        "print(iglens_viz.__file__)\nprint(m.distribution('iglens_viz').locate_file(''))"
    )
    nb.cells.append(where)
    run_notebook(nb, tmp_path, kernel_name=fresh_kernel["name"])
    shown = [o for o in nb.cells[-2].outputs if o.output_type == "execute_result"]
    assert len(shown) == 1 and {WIDGET_VIEW, "image/png"} <= set(shown[0].data), shown
    install = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert "error" not in install.lower(), install
    # Saved and rendered where no widget runs (nbconvert with no widget state, as nbviewer; a
    # reopened VS Code notebook; GitHub reads the same image/png entry): the picture shows.
    from nbconvert import HTMLExporter

    nb.metadata.pop("widgets", None)
    html, _ = HTMLExporter().from_notebook_node(nb)
    png = shown[0].data["image/png"]
    assert f'src="data:image/png;base64,{png}' in html.replace("\n", "")
    site = fresh_kernel["site"].resolve()
    paths = where.outputs[0].text.split()
    assert len(paths) == 2 and all(Path(p).resolve().is_relative_to(site) for p in paths), paths
