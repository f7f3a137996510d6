"""Write the gallery notebooks' "Open in Colab" and Binder badges from one address.

The one home of the repository's public address is ``[project.urls] Repository`` in
``pyproject.toml`` (a ``https://github.com/<owner>/<name>`` address). While it is not set,
the notebooks carry no badge (a badge to a placeholder is a broken image offline and a dead
link online); once it is, this script writes each notebook's badge line under its title.

    python gallery/badges.py            # rewrite the badge lines from pyproject.toml
    python gallery/badges.py --check    # exit 1 when a notebook's badges are not as written
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader
    import tomli as tomllib

GALLERY = Path(__file__).resolve().parent
PYPROJECT = GALLERY.parent / "pyproject.toml"
GITHUB = re.compile(r"https://github\.com/([\w.-]+/[\w.-]+?)/?$")
BADGE_LINE = re.compile(r"^\[!\[Open In Colab\].*$\n*", re.MULTILINE)


def repository(pyproject: Path = PYPROJECT) -> str | None:
    """``owner/name`` of ``[project.urls] Repository``, or None when it is not set."""
    urls = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("urls", {})
    address = urls.get("Repository")
    if address is None:
        return None
    match = GITHUB.match(address)
    if match is None:
        raise SystemExit(f"[project.urls] Repository {address!r} is not a GitHub address")
    return match.group(1)


def badge_line(repo: str, notebook: str) -> str:
    """The Colab and Binder badges of ``notebook`` (a file name in gallery/) in ``repo``."""
    colab = f"https://colab.research.google.com/github/{repo}/blob/main/gallery/{notebook}"
    binder = f"https://mybinder.org/v2/gh/{repo}/HEAD?labpath=gallery%2F{notebook}"
    return (
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab}) "
        f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder})"
    )


def with_badges(title_cell: str, repo: str | None, notebook: str) -> str:
    """``title_cell`` (a notebook's first markdown cell) with its badge line as configured:
    under the title when ``repo`` is set, absent when it is not."""
    text = BADGE_LINE.sub("", title_cell)
    if repo is None:
        return text
    title, _, rest = text.partition("\n\n")
    return f"{title}\n\n{badge_line(repo, notebook)}\n\n{rest}"


def notebooks() -> list[Path]:
    """The numbered gallery notebooks (the demo app and the Colab quick start have none)."""
    return sorted(GALLERY.glob("[0-9][0-9]_*.ipynb"))


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    repo, stale = repository(), []
    for path in notebooks():
        nb = nbformat.read(path, as_version=4)
        wanted = with_badges(nb.cells[0].source, repo, path.name)
        if nb.cells[0].source != wanted:
            stale.append(path.name)
            if not check:
                nb.cells[0].source = wanted
                nbformat.write(nb, path)
    verb = "differ from" if check else "rewritten from"
    print(f"{len(stale)} notebooks' badges {verb} Repository = {repo or '(not set)'}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
