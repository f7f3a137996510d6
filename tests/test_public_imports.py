"""The tests use iglens_viz through its public names only: a private name (a leading
underscore) is the package's to change, so no test imports one, reaches one through a module
or object it imported from iglens_viz, or patches one by name.

Read with ``ast`` from every test file (and from the Python code a test runs elsewhere, in a
string handed to a kernel or a subprocess): ``from iglens_viz.x import _y``, ``import
iglens_viz._x``, ``x._y`` where ``x`` was imported from iglens_viz, ``setattr(x, "_y", ...)``
(monkeypatch's too) and ``monkeypatch.setattr("iglens_viz.x._y", ...)``.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tests.support import ROOT

TESTS = ROOT / "tests"


def private(name: str) -> bool:
    """``_y`` but not a dunder (``__version__``, ``__all__``)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_part(dotted: str) -> bool:
    return any(private(part) for part in dotted.split("."))


def program_strings(tree: ast.AST) -> list[ast.Module]:
    """The string constants of ``tree`` that are Python code naming iglens_viz, parsed."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "iglens_viz" not in node.value or "import" not in node.value:
                continue
            try:
                found.append(ast.parse(textwrap.dedent(node.value)))
            except SyntaxError:
                continue
    return found


def private_uses(tree: ast.AST) -> list[str]:
    """Every use of a private iglens_viz name in ``tree`` (a module or a code string)."""
    ours: set[str] = set()  # names bound to something imported from iglens_viz
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "iglens_viz":
            if private_part(node.module or ""):
                uses.append(f"line {node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if private(alias.name):
                    uses.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                ours.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "iglens_viz":
                    continue
                if private_part(alias.name):
                    uses.append(f"line {node.lineno}: import {alias.name}")
                ours.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in ours:
                uses.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in {"setattr", "delattr", "getattr", "hasattr"}:
                continue
            target, attr = node.args[0], node.args[1] if len(node.args) > 1 else None
            if (
                isinstance(target, ast.Name)
                and target.id in ours
                and isinstance(attr, ast.Constant)
                and isinstance(attr.value, str)
                and private(attr.value)
            ):
                uses.append(f"line {node.lineno}: {name}({target.id}, {attr.value!r})")
            if (
                isinstance(target, ast.Constant)
                and isinstance(target.value, str)
                and target.value.split(".")[0] == "iglens_viz"
                and private_part(target.value)
            ):
                uses.append(f"line {node.lineno}: {name}({target.value!r})")
    return uses


TEST_FILES = sorted(p for p in TESTS.rglob("*.py") if p != Path(__file__))
"""Every test file but this one, whose examples below are private uses on purpose."""


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_private_iglens_viz_name(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    uses = private_uses(tree)
    for program in program_strings(tree):
        uses += [f"in a code string, {use}" for use in private_uses(program)]
    assert not uses, f"{path.relative_to(ROOT)} uses private names of iglens_viz: {uses}"


@pytest.mark.parametrize(
    "code",
    [
        "from iglens_viz.causal.ablation import _target_probs",
        "from iglens_viz._version import version",
        "import iglens_viz._version",
        "from iglens_viz.loading import cache\ncache._MARKER",
        "import iglens_viz\niglens_viz.core.readout._fold_top",
        "from iglens_viz.loading import default_model as d\nmp.setattr(d, '_convert_into', f)",
        "monkeypatch.setattr('iglens_viz.lenses.fit._options', f)",
        "CODE = '''\nfrom iglens_viz.loading import cache\ncache._sha256 = f\n'''",
    ],
)
def test_the_check_finds_each_kind_of_use(code):
    tree = ast.parse(code)
    uses = private_uses(tree) + [u for p in program_strings(tree) for u in private_uses(p)]
    assert len(uses) == 1, uses


@pytest.mark.parametrize(
    "code",
    [
        "from iglens_viz import __version__",
        "from iglens_viz.widget import IGLensWidget\nw = IGLensWidget(r)\nw._send",
        "import numpy as np\nnp._NoValue",
        "from iglens_viz.loading import default_model as d\nmp.setattr(d, 'convert_into', f)",
    ],
)
def test_public_names_and_other_packages_pass(code):
    assert private_uses(ast.parse(code)) == []
