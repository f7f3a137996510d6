"""The README is a front door: short, and its example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_LINES = 150


def test_the_readme_fits_its_budget():
    assert len(README.splitlines()) <= MAX_LINES


def _example() -> str:
    """The Python block of the README's "A first picture" section."""
    section = README[README.index("## A first picture") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_example_is_ten_lines_at_most():
    assert len(_example().strip().splitlines()) <= 10


@pytest.mark.real_model
def test_the_readme_example_runs_as_written():
    from iglens_viz.widget.widget import IGLensWidget

    scope: dict = {}
    exec(compile(_example(), "README.md", "exec"), scope)  # the last line, `w`, shows it
    w = scope["w"]
    assert isinstance(w, IGLensWidget) and w.view == "lesson"
    answer = w.attribution.tokens[w.attribution.prompt_length :]
    assert "".join(answer).startswith("The capital of Vietnam is")
    assert 0 <= w.selected < len(w.attribution.input_ids)  # it opens on a token of the answer
