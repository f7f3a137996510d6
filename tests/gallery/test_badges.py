"""The gallery's Colab and Binder badges come from one address (gallery/badges.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.support import ROOT

spec = importlib.util.spec_from_file_location("badges", ROOT / "gallery" / "badges.py")
assert spec is not None and spec.loader is not None
badges = importlib.util.module_from_spec(spec)
spec.loader.exec_module(badges)

TITLE = "# Why probability space?\n\n![thumbnail](thumbnails/05_x.png)\n\nMany attributions."


def pyproject(tmp_path: Path, urls: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(f'[project]\nname = "x"\n{urls}', encoding="utf-8")
    return path


def test_the_address_is_read_from_pyproject(tmp_path):
    assert badges.repository(pyproject(tmp_path, "")) is None
    set_ = '[project.urls]\nRepository = "https://github.com/me/iglens_viz"\n'
    assert badges.repository(pyproject(tmp_path, set_)) == "me/iglens_viz"
    other = '[project.urls]\nRepository = "https://gitlab.com/me/iglens_viz"\n'
    with pytest.raises(SystemExit, match="not a GitHub address"):
        badges.repository(pyproject(tmp_path, other))


def test_badges_follow_the_address_and_leave_the_rest():
    with_ = badges.with_badges(TITLE, "me/iglens_viz", "05_x.ipynb")
    title, line, rest = with_.split("\n\n", 2)
    assert title == "# Why probability space?"
    assert (
        "https://colab.research.google.com/github/me/iglens_viz/blob/main/gallery/05_x.ipynb"
        in line
    )
    assert "https://mybinder.org/v2/gh/me/iglens_viz/HEAD?labpath=gallery%2F05_x.ipynb" in line
    assert rest == TITLE.split("\n\n", 1)[1]
    assert badges.with_badges(with_, "me/iglens_viz", "05_x.ipynb") == with_  # written once
    assert badges.with_badges(with_, None, "05_x.ipynb") == TITLE  # unset: none at all


def test_committed_notebooks_carry_the_configured_badges(capsys):
    """Every notebook's badge line is what pyproject.toml's address writes: none while it is
    not set (no placeholder link, no badge image requested off the machine)."""
    assert badges.main(["--check"]) == 0, capsys.readouterr().out
    configured = badges.repository()
    for path in badges.notebooks():
        text = path.read_text(encoding="utf-8")
        assert ("colab-badge.svg" in text) is (configured is not None), path.name
