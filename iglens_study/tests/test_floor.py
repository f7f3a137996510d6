"""The study package stands on iglens_viz's public API only: no module of iglens_study imports
a private iglens_viz module (a ``_``-prefixed part of the dotted path) or a private name (a
``_``-prefixed name imported from iglens_viz), at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "iglens_study"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(source: str) -> list[str]:
    """The iglens_viz imports of ``source`` that reach a private module or name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, [alias.name for alias in node.names])]
        else:
            continue
        for module, names in modules:
            parts = module.split(".")
            if parts[0] != "iglens_viz":
                continue
            if any(_private(part) for part in parts[1:]):
                found.append(f"line {node.lineno}: {module}")
            found += [f"line {node.lineno}: {module}.{n}" for n in names if _private(n)]
    return found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from iglens_viz import IGLens, attribute", []),
        ("import iglens_viz.core.stats", []),
        ("from iglens_viz._version import __version__", ["line 1: iglens_viz._version"]),
        ("import iglens_viz.core._x", ["line 1: iglens_viz.core._x"]),
        ("def f():\n    from iglens_viz.files import _tmp", ["line 2: iglens_viz.files._tmp"]),
        ("from .run import _answer_id", []),  # the package's own private names are its own
        ("from pandas import _libs", []),
        ("from iglens_viz import __version__", []),
    ],
)
def test_the_check_finds_private_imports(source, expected):
    assert private_imports(source) == expected


def test_iglens_study_imports_only_public_iglens_viz_names():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) >= 10  # the package's modules are where this test looks
    found = {
        path.name: private
        for path in modules
        if (private := private_imports(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_no_module_of_iglens_study_imports_back_at_module_level():
    """Each module's own-package imports at module level (not inside a function or under
    TYPE_CHECKING) form no cycle: the schemas, the folder and the bootstrap are below the
    runners and the scoring (pair_scoring and counterfactual no longer import each other)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets = [node.module] if node.module else [a.name for a in node.names]
                graph.setdefault(path.stem, set()).update(targets)
    assert "counterfactual" not in graph["pair_scoring"]
    assert {"schemas"} <= graph["pair_scoring"] & graph["counterfactual"]

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert [m for m in graph if reaches(m, m, set())] == []
