"""docs/developing/where-things-go.md names files and names in them that exist (issue 36).

The page says where a new figure, command, lens kind and statistic go; a file moved or a name
renamed without the page fails here.
"""

from __future__ import annotations

import re

import pytest

from tests.support import ROOT

PAGE = ROOT / "docs" / "developing" / "where-things-go.md"
TEXT = PAGE.read_text(encoding="utf-8")
PATHS = sorted(set(re.findall(r"`((?:iglens_viz|js|tests|docs)/[\w./-]*)`", TEXT)))

# Names the page sends the reader to, and the file each is defined in.
NAMES = [
    ("new_figure", "iglens_viz/views/static.py"),
    ("heatmapFigure", "js/figures/heatmap.js"),
    ("gridFigure", "js/figures/grid.js"),
    ("COMMANDS", "iglens_viz/protocol/commands.py"),
    ("_field", "iglens_viz/protocol/commands.py"),
    ("HANDLERS", "iglens_viz/widget/commands.py"),
    ("answered", "iglens_viz/protocol/payload.py"),
    ("StateKey", "iglens_viz/protocol/state.py"),
    ("LensKind", "iglens_viz/core/coordinates.py"),
    ("LENS_LABELS", "iglens_viz/core/coordinates.py"),
    ("FITTED_KINDS", "iglens_viz/lenses/fit.py"),
    ("LENS_OPTIONS", "js/model/lens-name.js"),
    ("result_payload", "iglens_viz/protocol/payload.py"),
    ("RESULT_FIELDS", "iglens_viz/protocol/schema.py"),
    ("decodeResult", "js/model/result.js"),
    ("ColorBy", "iglens_viz/protocol/state.py"),
    ("colorLabels", "js/views/strip/index.js"),
    ("createCommands", "js/model/commands.js"),
]


def test_the_page_has_the_four_sections_and_is_in_the_nav():
    headings = re.findall(r"^## (.+)$", TEXT, flags=re.M)
    assert headings == [
        "A new figure",
        "A new widget command",
        "A new lens kind",
        "A new statistic of a result",
    ]
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "developing/where-things-go.md" in nav


def test_the_page_names_files_that_exist():
    assert len(PATHS) >= 30, PATHS
    missing = [p for p in PATHS if not (ROOT / p).exists()]
    assert missing == [], f"{PAGE.name} names files that do not exist: {missing}"


@pytest.mark.parametrize(("name", "path"), NAMES)
def test_each_name_is_in_the_file_the_page_gives(name, path):
    assert f"`{name}" in TEXT or f"{name}`" in TEXT, f"the page no longer names {name}"
    assert path in PATHS, path
    source = (ROOT / path).read_text(encoding="utf-8")
    assert re.search(rf"\b{re.escape(name)}", source), f"{name} is not in {path}"
