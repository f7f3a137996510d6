"""The attribution request: parsed and validated once, the same from every front end."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from iglens_viz import (
    AttributeOptions,
    AttributionRequest,
    IGLens,
    IGLensError,
    InvalidRequestError,
    attribute,
)
from iglens_viz.core import parse_boundaries, segment_label
from iglens_viz.core.request import MAX_STEPS, PER_POSITION
from tests.support import HANG_S, ROOT
from tests.support.tiny_models import tiny_model, tiny_tokenizer
from tests.support.tolerances import sum_tol

PROMPT = "w3 w5 w7 w9 w11 w13"
PACKAGE = ROOT / "iglens_viz"


@pytest.fixture(scope="module")
def lens():
    return IGLens(tiny_model("llama"), tiny_tokenizer())


# ------------------------------------------------------------------------------ the object


def test_normalised_forms_and_immutability():
    r = AttributionRequest(
        np.array([3, 5, 7]),
        target=np.int64(4),
        contrast=torch.tensor([1, 2, -1]),
        boundaries=[0, np.int64(2), 4],
        steps="3",
    )
    assert r.prompt == (3, 5, 7) and r.target == 4 and isinstance(r.target, int)
    assert r.contrast == (1, 2, -1) and r.boundaries == (0, 2, 4) and r.steps == 3
    assert AttributionRequest("x", boundaries=" Every:05 ").boundaries == "every:5"
    assert AttributionRequest("x", boundaries="0, 10,20").boundaries == (0, 10, 20)
    assert AttributionRequest("x", boundaries=None).boundaries == "all"
    with pytest.raises(AttributeError):
        r.steps = 4  # frozen
    assert hash(r) == hash(
        AttributionRequest((3, 5, 7), target=4, contrast=[1, 2, -1], boundaries="0,2,4", steps=3)
    )


def test_json_round_trip():
    r = AttributionRequest(
        (1, 2, 3),
        target=[4, 5, -1],
        contrast=" Paris",
        boundaries="every:2",
        estimator="riemann",
        steps=7,
        chat=False,
        max_new_tokens=0,
    )
    data = json.loads(json.dumps(r.to_dict()))
    assert AttributionRequest(**data) == r


def test_the_typed_keywords_are_the_request_fields():
    """One keyword set for every front end: AttributeOptions names each field but the prompt."""
    fields = [f.name for f in dataclasses.fields(AttributionRequest)]
    assert fields[0] == "prompt"
    assert list(AttributeOptions.__annotations__) == fields[1:]


def test_every_front_end_takes_the_typed_keywords():
    """attribute(), IGLens.attribute, the widget and show() type their **options alike, so an
    editor completes the same keywords everywhere (none is left as a bare **kwargs: Any)."""
    import inspect

    from iglens_viz.widget import IGLensWidget, show

    for front_end in (attribute, IGLens.attribute, IGLensWidget.__init__, show):
        variadic = [
            p
            for p in inspect.signature(front_end).parameters.values()
            if p.kind is inspect.Parameter.VAR_KEYWORD
        ]
        assert [(p.name, p.annotation) for p in variadic] == [
            ("options", "Unpack[AttributeOptions]")
        ], front_end


def test_the_keywords_reach_the_request_with_the_request_defaults(lens):
    options: AttributeOptions = {"target": "next", "boundaries": "0,2,4", "steps": 2}
    result = lens.attribute(PROMPT, **options)
    assert result.request == AttributionRequest(PROMPT, **options)
    one_shot = attribute(lens.model, lens.tokenizer, PROMPT, **options)
    assert one_shot.request == result.request
    np.testing.assert_array_equal(one_shot.contributions, result.contributions)
    with pytest.raises(InvalidRequestError, match="did you mean 'steps'"):
        lens.attribute(PROMPT, step=2)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "fields, match",
    [
        (dict(prompt=""), "the prompt is empty"),
        (dict(prompt=" \n"), "only whitespace"),
        (dict(prompt=[1, -2]), ">= 0"),
        (dict(prompt=b"abc"), "bytes"),
        (dict(target=-1), "target token id must be >= 0"),
        (dict(target=np.int32(-7)), "target token id must be >= 0"),
        (dict(target=[1, -2]), "-1 marks a position without a target"),
        (dict(target=""), "empty string"),
        (dict(target=True), "target must be"),
        (dict(contrast=-1), "contrast token id must be >= 0"),
        (dict(boundaries=[0, 1.5, 3]), "must be integers"),
        (dict(boundaries=[0, True, 3]), "must be integers"),
        (dict(boundaries="every:0"), "K >= 1"),
        (dict(boundaries="0;3"), "not 'all'"),
        (dict(estimator="RIEMANN"), "unknown estimator"),
        (dict(steps=MAX_STEPS + 1), f"from 1 to {MAX_STEPS}"),
        (dict(steps=True), "steps"),
        (dict(chat="maybe"), "chat must be"),
        (dict(chat=True, prompt=[1, 2]), "needs the user message as a string"),
        (dict(max_new_tokens=1.5), "max_new_tokens"),
    ],
)
def test_invalid_fields(fields, match):
    fields = {"prompt": "w1 w2", **fields}
    with pytest.raises(InvalidRequestError, match=match) as info:
        AttributionRequest(**fields)
    assert isinstance(info.value, (IGLensError, ValueError))


def test_from_controls_reads_text_fields():
    """The CLI flags and the widget's controls are parsed by one function."""
    r = AttributionRequest.from_controls(
        "hi",
        {
            "target": "12",
            "contrast": " Paris",
            "boundaries": " every:3 ",
            "estimator": " riemann ",
            "steps": "4",
            "_n": 9,
        },
        chat="auto",
        max_new_tokens=5,
    )
    assert (r.target, r.contrast, r.boundaries, r.estimator, r.steps) == (
        12,
        " Paris",
        "every:3",
        "riemann",
        4,
    )
    assert r.chat == "auto" and r.max_new_tokens == 5
    empty = AttributionRequest.from_controls(
        "hi", {"target": "", "contrast": "", "boundaries": "", "steps": ""}
    )
    assert empty == AttributionRequest("hi")
    assert AttributionRequest.from_controls("hi", {"target": "next"}).target == "next"
    assert AttributionRequest.from_controls("hi", {"target": 7.0}).target == 7
    # Only bare ASCII digits are an id; anything else typed is a token string, as typed.
    for typed in (" 12 ", "12 ", "-1", "+4", "\u0663", "\uff14", " next", "next "):
        assert AttributionRequest.from_controls("hi", {"target": typed}).target == typed
    with pytest.raises(InvalidRequestError, match="steps"):
        AttributionRequest.from_controls("hi", {"steps": "two"})


def test_controls_reproduce_the_request():
    r = AttributionRequest(
        "hi", target=" Paris", contrast=5, boundaries=[0, 2, 4], estimator="riemann", steps=3
    )
    assert r.controls() == {
        "target": " Paris",
        "contrast": "5",
        "boundaries": "0,2,4",
        "estimator": "riemann",
        "steps": 3,
    }
    assert r.with_controls(r.controls()) == r
    per_position = AttributionRequest("hi", target=[1, 2])
    assert per_position.controls()["target"] == PER_POSITION
    assert per_position.with_controls(per_position.controls()) == per_position


def test_boundary_forms_resolve_alike():
    for spec in ("every:2", "0,2,4", [0, 2, 4], (0, 2, 4), np.array([0, 2, 4])):
        assert parse_boundaries(spec, 4) == [0, 2, 4], spec
    assert parse_boundaries("every:3", 7) == [0, 3, 6, 7]
    assert parse_boundaries(None, 3) == parse_boundaries("all", 3) == [0, 1, 2, 3]
    assert [segment_label(0, 1), segment_label(3, 7)] == ["1", "4–7"]


@pytest.mark.parametrize(
    "spec",
    [np.array([[0, 2], [3, 4]]), np.array([[0, 2, 4]]), np.array(4), [[0, 2], [4]], [0, (2,), 4]],
)
def test_boundaries_that_are_not_one_dimensional_are_refused(spec):
    """Regression: a 2-D array was flattened ([[0, 2], [3, 4]] read as [0, 2, 3, 4])."""
    with pytest.raises(IGLensError, match="boundaries must be a 1-D list of ints"):
        parse_boundaries(spec, 4)
    with pytest.raises(IGLensError, match="1-D list of ints"):
        AttributionRequest("hi", boundaries=spec)


# ------------------------------------------------------------------------------ on the lens


def test_result_keeps_its_request_and_replays_it(lens):
    result = lens.attribute(PROMPT, target="next", boundaries="every:2", steps=2)
    assert result.request == AttributionRequest(
        PROMPT, target="next", boundaries="every:2", steps=2
    )
    assert result.boundaries == [0, 2, 4] and result.estimator == "prediction_aware"
    again = lens.run(result.request)
    np.testing.assert_array_equal(again.contributions, result.contributions)
    other = lens.run(result.request.replace(boundaries="all"))
    # Pairs of float64 differences of the same lens values: three roundings per sum.
    np.testing.assert_allclose(
        other.contributions[:-1].reshape(6 - 1, 2, 2).sum(-1),
        result.contributions[:-1],
        atol=sum_tol(torch.float64, 3),
    )
    with pytest.raises(InvalidRequestError, match="AttributionRequest"):
        lens.run({"prompt": PROMPT})


def test_predicted_is_the_generated_token_for_target_and_contrast(lens):
    """Along a generated answer, "predicted" means the generated token (one rule, both
    arguments)."""
    result = lens.attribute(PROMPT, max_new_tokens=3, contrast="predicted", target=3)
    answer = result.input_ids[result.prompt_length :]
    np.testing.assert_array_equal(result.contrast_ids[result.answer_positions], answer)


def test_answer_cache_is_bounded():
    lens = IGLens(tiny_model("llama"), tiny_tokenizer(), cache_size=2)
    for i in range(5):
        lens.attribute(f"w{i + 1} w2", max_new_tokens=2)
    assert len(lens.answer_cache) == 2 and len(lens.trace_cache) == 2


def test_generation_longer_than_the_context_is_refused_before_generating(lens, monkeypatch):
    import iglens_viz.core.lens as lens_module

    def fail(*args, **kwargs):
        raise AssertionError("generation must not start")

    monkeypatch.setattr(lens_module, "generate_greedy", fail)
    with pytest.raises(InvalidRequestError, match="at most 58 new tokens"):
        lens.attribute(PROMPT, max_new_tokens=100)  # context 64, prompt 6


def test_every_user_error_is_an_iglens_error(lens):
    with pytest.raises(IGLensError):
        lens.attribute(PROMPT, target="w1 w2")
    with pytest.raises(IGLensError):
        IGLens(torch.nn.Linear(2, 2))
    with pytest.raises(IGLensError):
        IGLens(tiny_model("llama"), top_k=-1)


# ------------------------------------------------------------------------------ structure


def test_core_does_not_import_the_widget():
    code = (
        "import sys, iglens_viz.core; "
        "print(sorted(m for m in sys.modules if m.startswith(('iglens_viz.', 'anywidget'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=HANG_S
    )
    loaded = eval(out.stdout)
    assert "iglens_viz.core.lens" in loaded
    for above in ("iglens_viz.widget", "iglens_viz.export", "iglens_viz.protocol", "anywidget"):
        assert not any(m == above or m.startswith(above + ".") for m in loaded), above


def _package_imports() -> dict[str, set[str]]:
    """Package → packages it imports (module level or inside functions), from the source."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = rel.parts if rel.name != "__init__" else rel.parts[:-1]
        package = ".".join(parts[:2]) if len(parts) > 1 else parts[0]
        if package in SHIMS:
            continue
        here = parts[:-1] if rel.name != "__init__" else parts
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("iglens_viz"):
                target = node.module
            else:
                continue
            target_package = ".".join(target.split(".")[:2])
            if target_package != package:  # the façade ("iglens_viz") counts like the rest
                graph.setdefault(package, set()).add(target_package)
    return graph


SHIMS = {"iglens_viz.studies"}
"""Deprecated names for another package (iglens_study), kept one release: outside the floors,
and nothing in the package imports them (checked below)."""

FLOORS = (
    ("iglens_viz.errors", "iglens_viz._version", "iglens_viz.files"),
    ("iglens_viz.adapters", "iglens_viz.loading"),
    ("iglens_viz.core",),
    ("iglens_viz.views", "iglens_viz.protocol", "iglens_viz.lenses"),
    ("iglens_viz.export", "iglens_viz.widget"),
    ("iglens_viz.causal",),
    ("iglens_viz.cli",),
    ("iglens_viz", "iglens_viz.__main__"),  # the façade and the entry point, above all
)
"""The import floors, lowest first: a package imports from its own floor (without a cycle)
and the floors below, never from above. The façade is the top floor, so no subpackage
imports it (the version lives in the leaf ``_version``)."""


def test_packages_import_only_their_floor_and_below():
    floor = {package: level for level, packages in enumerate(FLOORS) for package in packages}
    graph = _package_imports()
    named = set(graph) | {t for targets in graph.values() for t in targets}
    assert named - set(floor) == set(), "a package without a floor: add it to FLOORS"
    assert named & SHIMS == set(), "a package imports a deprecated shim"
    upward = sorted(
        f"{p} (floor {floor[p]}) imports {t} (floor {floor[t]})"
        for p, targets in graph.items()
        for t in targets
        if floor[t] > floor[p]
    )
    assert upward == []
    assert not any(
        "iglens_viz" in targets for p, targets in graph.items() if p != "iglens_viz.__main__"
    ), "a subpackage imports the façade"


def test_one_version_source():
    """pyproject.toml reads the version from iglens_viz/_version.py (hatch); __version__ is
    it, and the front end's package.json carries the same."""
    import tomllib

    import iglens_viz

    source = (PACKAGE / "_version.py").read_text(encoding="utf-8")
    (__version__,) = re.findall(r'^__version__ = "([^"]+)"$', source, flags=re.M)
    root = PACKAGE.parent
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "iglens_viz/_version.py"
    assert iglens_viz.__version__ == __version__
    package_json = json.loads((root / "package.json").read_text(encoding="utf-8"))
    assert package_json["version"] == __version__


def test_no_import_cycle_between_packages():
    graph = _package_imports()
    assert "iglens_viz.widget" not in graph.get("iglens_viz.core", set())
    assert "iglens_viz.export" not in graph.get(
        "iglens_viz.widget", set()
    ) or "iglens_viz.widget" not in graph.get("iglens_viz.export", set())

    def reach(start, seen):
        for nxt in graph.get(start, ()):
            if nxt not in seen:
                seen.add(nxt)
                reach(nxt, seen)
        return seen

    cycles = [p for p in graph if p in reach(p, set())]
    assert cycles == [], {p: sorted(graph[p]) for p in cycles}


def test_every_imported_distribution_is_declared():
    """Regression: tqdm was imported but not declared in pyproject.toml. A distribution of an
    extra (onnx for the site) may be imported only inside a function, which the extra's
    users reach; at module level every import is a dependency."""
    import tomllib

    def names(requirements: list[str]) -> set[str]:
        return {
            re.split(r"[<>=\[; ]", d, maxsplit=1)[0].lower().replace("-", "_") for d in requirements
        }

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    declared = names(project["dependencies"])
    in_extras = names([d for extra in project["optional-dependencies"].values() for d in extra])

    def imported(nodes) -> set[str]:
        found = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
        return found

    distribution_of = {"PIL": "pillow"}  # import names that are not their distribution's

    def third_party(modules: set[str]) -> set[str]:
        return {
            distribution_of.get(m, m)
            for m in modules
            if m not in sys.stdlib_module_names and m not in ("iglens_viz", "__future__")
        }

    everywhere, in_functions = set(), set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        everywhere |= imported(ast.walk(tree))
        for f in ast.walk(tree):
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
                in_functions |= imported(ast.walk(f))
    at_module_level = imported(
        n
        for path in PACKAGE.rglob("*.py")
        for n in _module_level(ast.parse(path.read_text(encoding="utf-8")))
    )
    assert "tqdm" in third_party(everywhere) and "onnx" in third_party(in_functions)
    assert third_party(at_module_level) - declared == set()
    assert third_party(everywhere) - declared - in_extras == set()


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """The nodes of a module outside its functions (classes and top-level blocks included)."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def test_one_onset_rule():
    """The onset is the largest signed contribution's segment; no target → -1; every user of
    the rule (result, table, heatmap outline) agrees."""
    from iglens_viz.core import onset_segments

    c = np.array([[0.1, 0.5, -0.7], [np.nan, np.nan, np.nan], [-0.2, -0.1, -0.3]])
    np.testing.assert_array_equal(onset_segments(c), [1, -1, 1])


def test_onset_of_a_result_follows_its_boundaries(lens):
    result = lens.attribute(PROMPT, target="next", boundaries=[0, 1, 4])
    seg = result.onset_segment
    assert seg[-1] == -1 and result.onset[-1] == -1
    np.testing.assert_array_equal(result.onset[:-1], np.array([1, 4])[seg[:-1]])
    np.testing.assert_array_equal(seg[:-1], np.argmax(result.contributions[:-1], axis=1))
    table = result.to_dataframe()
    np.testing.assert_array_equal(table[table.onset].segment, seg[:-1])
