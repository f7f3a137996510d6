"""Pages the docs site generates at build time (mkdocs-gen-files; see mkdocs.yml).

* ``reference/cli.md``: ``iglens --help`` and each subcommand's, run as a user runs them, so
  the page is the parser's own words and never drifts from it;
* ``reference/errors.md``: every :class:`~iglens_viz.IGLensError` subclass in the package,
  with the built-in exception it also is and its docstring (what raises it, what to do), so
  a new error class appears on the page without anyone remembering to add it;
* ``gallery/``: the gallery's notebooks and their thumbnails, rendered by mkdocs-jupyter
  (not executed: the test suite runs them, tests/gallery/test_notebooks.py).
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[2]
SUBCOMMANDS = ("", "validate", "study", "fit-lens", "export-site")
"""``iglens`` itself (the attribution) and each subcommand, in the order of the page."""


def _help(subcommand: str) -> str:
    args = [sys.executable, "-m", "iglens_viz", *([subcommand] if subcommand else []), "--help"]
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[2:])} exited {proc.returncode}: {proc.stderr[-500:]}")
    return proc.stdout


def cli_page() -> str:
    parts = [
        "# Command line\n\n"
        "`iglens` is installed with the package. This page is the output of `--help` for the\n"
        "command and each subcommand, generated when the site is built.\n"
    ]
    for sub in SUBCOMMANDS:
        title = f"iglens {sub}".strip()
        parts.append(f"\n## `{title}`\n\n```text\n{_help(sub).rstrip()}\n```\n")
    return "".join(parts)


# The packages whose errors the page lists: the library and, when installed, the study package
# (`iglens study` reports its own). The library's deprecated studies shim is not walked.
ERROR_PACKAGES = ("iglens_viz", "iglens_study")
SHIM = "iglens_viz.studies"


def import_error_modules() -> None:
    """Import every public module of :data:`ERROR_PACKAGES` that is installed, so each
    error class is defined."""
    for name in ERROR_PACKAGES:
        try:
            package = importlib.import_module(name)
        except ImportError:
            continue
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            public = not any(part.startswith("_") for part in info.name.split("."))
            if public and not info.name.startswith(SHIM):
                importlib.import_module(info.name)


def error_classes() -> list[type]:
    """Every subclass of IGLensError defined in a module of :data:`ERROR_PACKAGES`, base
    first."""
    import iglens_viz

    import_error_modules()
    found, todo = [], [iglens_viz.IGLensError]
    while todo:
        cls = todo.pop(0)
        found.append(cls)
        todo.extend(sorted(cls.__subclasses__(), key=lambda c: c.__name__))
    return [c for c in found if c.__module__.startswith(ERROR_PACKAGES)]


def _markdown(rst: str) -> str:
    """A docstring's reST roles and literals as markdown code (``:class:`~a.B``` → `B`)."""
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?([^`]+)`", r"`\1`", rst)
    return text.replace("``", "`")


def errors_page() -> str:
    parts = [
        "# Errors\n\n"
        "Everything iglens_viz (and iglens_study) reports on purpose is an `IGLensError`,\n"
        "with a one-line message that names the problem and what would work; on the command\n"
        "line it prints as\n"
        "`iglens: error: …` with exit status 2. Anything else is a bug: please report it. Each\n"
        "class also derives from the built-in exception a caller would expect, so\n"
        "`except ValueError` keeps working. This page is generated from the classes.\n"
    ]
    for cls in error_classes():
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__)
        doc = _markdown(inspect.cleandoc(cls.__doc__ or "").strip() or "(no docstring)")
        parts.append(f"\n## `{cls.__name__}`\n\n`{cls.__module__}` · derives from {bases}\n\n")
        parts.append(f"{doc}\n")
    return "".join(parts)


with mkdocs_gen_files.open("reference/errors.md", "w") as page:
    page.write(errors_page())

with mkdocs_gen_files.open("reference/cli.md", "w") as page:
    page.write(cli_page())

for path in sorted((ROOT / "gallery").glob("*.ipynb")):
    with mkdocs_gen_files.open(f"gallery/{path.name}", "wb") as page:
        page.write(path.read_bytes())
for path in sorted((ROOT / "gallery" / "thumbnails").glob("*.png")):
    with mkdocs_gen_files.open(f"gallery/thumbnails/{path.name}", "wb") as page:
        page.write(path.read_bytes())
