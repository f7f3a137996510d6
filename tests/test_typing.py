"""Every public function and method of the package is fully annotated.

Public: no leading underscore in the module's dotted path nor in the name, and defined in
that module (``obj.__module__ == module.__name__``: re-exports are checked where they live).
Each parameter but a method's ``self``/``cls`` (``*args`` and ``**kwargs`` included) and the
return must carry an annotation; mypy (``make typecheck``) then checks that they are right.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import iglens_viz

PACKAGE = Path(iglens_viz.__file__).resolve().parent


def public_modules() -> list[str]:
    """The dotted names of the package's public modules, from the file tree."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            names.append(".".join(parts))
    return names


def _public(name: str) -> bool:
    return not name.startswith("_")


def public_callables(module: ModuleType) -> Iterator[tuple[str, Callable[..., object], bool]]:
    """``(qualified name, function, is a method taking self/cls)`` for each public function
    of ``module`` and each public method (properties' getters and setters included) of its
    public classes."""
    for name, obj in vars(module).items():
        if not _public(name) or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            yield f"{module.__name__}.{name}", obj, False
        elif inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not _public(attr):
                    continue
                where = f"{module.__name__}.{name}.{attr}"
                if isinstance(member, staticmethod):
                    yield where, member.__func__, False
                elif isinstance(member, classmethod):
                    yield where, member.__func__, True
                elif isinstance(member, functools.cached_property):
                    yield where, member.func, True
                elif isinstance(member, property):
                    for accessor in (member.fget, member.fset):
                        if accessor is not None:
                            yield where, accessor, True
                elif inspect.isfunction(member):
                    yield where, member, True


def missing_annotations(function: Callable[..., object], method: bool) -> list[str]:
    """The parameters (and ``return``) of ``function`` without an annotation."""
    signature = inspect.signature(function)  # a functools.wraps wrapper: the wrapped one
    parameters = list(signature.parameters.values())
    if method and parameters and parameters[0].kind is not inspect.Parameter.KEYWORD_ONLY:
        parameters = parameters[1:]  # self / cls
    missing = [
        ("*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else "") + p.name
        for p in parameters
        if p.annotation is inspect.Parameter.empty
    ]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_public_modules_are_found():
    modules = public_modules()
    assert {"iglens_viz", "iglens_viz.adapters", "iglens_viz.core.lens", "iglens_viz.files"} <= set(
        modules
    )
    assert not any(part.startswith("_") for name in modules for part in name.split("."))


def test_every_public_function_and_method_is_fully_annotated():
    unannotated: dict[str, list[str]] = {}
    checked = 0
    for name in public_modules():
        module = importlib.import_module(name)
        for where, function, method in public_callables(module):
            checked += 1
            missing = missing_annotations(function, method)
            if missing:
                subpackage = ".".join(name.split(".")[:2])
                unannotated.setdefault(subpackage, []).append(f"{where}({', '.join(missing)})")
    assert checked > 100  # the walk found the package's API
    report = "\n".join(
        f"{subpackage} ({len(found)}):\n  " + "\n  ".join(found)
        for subpackage, found in sorted(unannotated.items())
    )
    assert not unannotated, f"public functions without full annotations:\n{report}"
