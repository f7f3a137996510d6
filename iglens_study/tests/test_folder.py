"""The one resumable study folder both studies use (:mod:`iglens_study.folder`): the units
done, a damaged part moved aside and redone, the settings check, the concatenation."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from iglens_study.counterfactual import PAIR_FOLDER
from iglens_study.folder import (
    StudyFolderError,
    part_files,
    prepare,
    read_metadata,
    read_table,
    write_part,
)
from iglens_study.run import STUDY_FOLDER
from iglens_viz.errors import InvalidRequestError


def _part(kind, units):
    """A part of ``kind`` holding ``units``, two rows each (its key columns and one value)."""
    rows = [{c: u for c in kind.columns} | {"value": u / 4} for u in units for _ in range(2)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("kind", [STUDY_FOLDER, PAIR_FOLDER], ids=lambda k: k.unit)
def test_parts_resume_and_a_damaged_one_is_moved_aside(kind, tmp_path):
    metadata = {key: f"the {key}" for key in kind.settings} | {"study": "counterfactual"}
    assert prepare(tmp_path, metadata, kind) == set()
    assert read_metadata(tmp_path / "metadata.json") == metadata
    write_part(tmp_path, 0, _part(kind, [0, 1]))
    write_part(tmp_path, 2, _part(kind, [2, 3]))
    write_part(tmp_path, 4, _part(kind, [4]))
    assert [p.name for p in part_files(tmp_path)] == [
        "part-000000.parquet",
        "part-000002.parquet",
        "part-000004.parquet",
    ]
    table = read_table(tmp_path, kind)
    assert table[kind.unit].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert table["value"].tolist() == [u / 4 for u in (0, 0, 1, 1, 2, 2, 3, 3, 4, 4)]
    assert prepare(tmp_path, metadata, kind) == {0, 1, 2, 3, 4}

    damaged = tmp_path / "parts" / "part-000002.parquet"
    damaged.write_bytes(damaged.read_bytes()[:40])  # truncated, as by a full disk
    with pytest.raises(StudyFolderError, match=f"the part {damaged} is damaged .*; redo"):
        read_table(tmp_path, kind, "; redo")
    with pytest.warns(UserWarning, match=f"moved to part-000002.parquet.damaged, its {kind.units}"):
        assert prepare(tmp_path, metadata, kind) == {0, 1, 4}
    assert (tmp_path / "parts" / "part-000002.parquet.damaged").exists()
    assert not damaged.exists()


@pytest.mark.parametrize("kind", [STUDY_FOLDER, PAIR_FOLDER], ids=lambda k: k.unit)
def test_another_study_is_refused(kind, tmp_path):
    metadata = {key: 1 for key in kind.settings}
    prepare(tmp_path, metadata, kind)
    other = metadata | {kind.settings[-1]: 2, "not a setting": 3}
    with pytest.raises(InvalidRequestError, match=rf"another {kind.name} \(it differs in "):
        prepare(tmp_path, other, kind)
    assert json.loads((tmp_path / "metadata.json").read_text()) == metadata  # left as it was
    assert prepare(tmp_path, metadata | {"not a setting": 3}, kind) == set()


def test_parts_without_metadata_or_of_the_other_study_are_refused(tmp_path):
    (tmp_path / "parts").mkdir()
    write_part(tmp_path, 0, _part(STUDY_FOLDER, [0]))
    with pytest.raises(StudyFolderError, match="holds parts of a study but no metadata.json"):
        prepare(tmp_path, {}, STUDY_FOLDER)
    with pytest.raises(
        StudyFolderError, match="not a part of a counterfactual study: no pair/block"
    ):
        read_table(tmp_path, PAIR_FOLDER)
