"""Build the API reference (HTML) from the docstrings with pdoc.

    python docs/api/build.py [OUTPUT_DIR]        # default: docs/api/_build (gitignored)

pdoc documents a package's submodules only when its ``__all__`` names them; iglens_viz's
``__all__`` lists the public functions and classes, so every public module is passed
explicitly here (walked from the package, private ``_names`` skipped).
"""

from __future__ import annotations

import pkgutil
import sys
from pathlib import Path

import pdoc
import pdoc.render

import iglens_viz

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "_build"


def public_modules() -> list[str]:
    """``iglens_viz`` and every public submodule, in import-path order."""
    names = ["iglens_viz"]
    for info in pkgutil.walk_packages(iglens_viz.__path__, prefix="iglens_viz."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def build(output: Path = DEFAULT_OUTPUT) -> Path:
    """Render the reference into ``output``; returns the path of the package's page."""
    pdoc.render.configure(
        docformat="numpy",
        footer_text=f"iglens_viz {iglens_viz.__version__}",
        search=True,
        show_source=True,
    )
    pdoc.pdoc(*public_modules(), output_directory=Path(output))
    return Path(output) / "iglens_viz.html"


if __name__ == "__main__":
    page = build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT)
    print(f"API reference: {page}")
