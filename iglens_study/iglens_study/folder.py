"""A resumable study folder: ``metadata.json`` beside ``parts/part-*.parquet``.

Both studies (:func:`~iglens_study.run.study`, :func:`~iglens_study.counterfactual.
pair_study`) write their table as it grows, one part file per batch (written whole or not at
all: :func:`iglens_viz.files.write_atomic`), so an interrupted run resumes after its last
finished batch. One :class:`FolderKind` per study says what differs between them: the name
its messages use, the unit a part holds (a prompt, a pair), the columns a part must have and
the settings that must match for a folder to be resumed.

* :func:`prepare` creates the folder or checks it holds the same study (its settings), moves
  a damaged part aside (``<part>.damaged``, with a warning: its units are redone, as those of
  a missing part are), writes ``metadata.json`` and returns the units already done;
* :func:`read_parts` reads the parts back, naming each damaged one;
* :func:`read_table` concatenates them, or names the first damaged part;
* :func:`write_part` and :func:`write_table` write a part, or the finished table.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iglens_viz.errors import IGLensError, InvalidRequestError
from iglens_viz.files import OutputFileError, write_atomic

if TYPE_CHECKING:
    from pandas import DataFrame

__all__ = [
    "FolderKind",
    "StudyFolderError",
    "concat",
    "part_files",
    "prepare",
    "read_metadata",
    "read_parts",
    "read_table",
    "write_part",
    "write_table",
]


class StudyFolderError(IGLensError, RuntimeError):
    """A study folder cannot be read or resumed: a damaged ``metadata.json`` or part file."""


@dataclass(frozen=True)
class FolderKind:
    """What tells one study's folder from another's."""

    name: str
    """The study as messages name it: "study", "counterfactual study"."""
    unit: str
    """The column of a part that numbers its units ("prompt", "pair")."""
    units: str
    """The units as messages name them ("prompts", "pairs")."""
    columns: tuple[str, ...]
    """The columns every part has (a file without them is not a part of this study)."""
    settings: tuple[str, ...]
    """The metadata keys that must be equal for a folder to be resumed."""


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """A study folder's ``metadata.json`` at ``path`` as a dict, None where there is none;
    :class:`StudyFolderError` where it cannot be read or is not a JSON object."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        reason = getattr(err, "strerror", None) or type(err).__name__
        if isinstance(err, json.JSONDecodeError):
            reason = f"not valid JSON: {err.msg} at line {err.lineno}"
        raise StudyFolderError(
            f"{path} is damaged ({reason}); delete the folder {path.parent} or choose another one"
        ) from None
    if not isinstance(metadata, dict):
        raise StudyFolderError(
            f"{path} is damaged (not a JSON object); delete the folder "
            f"{path.parent} or choose another one"
        )
    return metadata


def part_files(folder: Path) -> list[Path]:
    """The folder's part files, in the order of their first unit."""
    return sorted((folder / "parts").glob("part-*.parquet"))


def read_parts(folder: Path, kind: FolderKind) -> tuple[list[DataFrame], list[tuple[Path, str]]]:
    """The tables of the readable parts, and ``(path, reason)`` of each damaged one. A part
    is written whole or not at all, so a damaged one was damaged afterwards: truncated by a
    full disk or a copy, or not a part at all."""
    import pandas as pd

    tables: list[DataFrame] = []
    damaged: list[tuple[Path, str]] = []
    for path in part_files(folder):
        try:
            table = pd.read_parquet(path)
        except Exception as err:  # pyarrow raises several types for a bad file
            first = (str(err).splitlines() or [""])[0][:120]
            damaged.append((path, f"{type(err).__name__}: {first}"))
            continue
        if not set(kind.columns) <= set(table.columns):
            damaged.append(
                (path, f"not a part of a {kind.name}: no {'/'.join(kind.columns)} columns")
            )
            continue
        tables.append(table)
    return tables, damaged


def concat(tables: Sequence[DataFrame]) -> DataFrame:
    """The tables one below the other (an empty table for none)."""
    import pandas as pd

    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def read_table(folder: Path, kind: FolderKind, hint: str = "") -> DataFrame:
    """The parts concatenated (in the order of their files); :class:`StudyFolderError`
    naming the first damaged part, followed by ``hint``."""
    tables, damaged = read_parts(folder, kind)
    if damaged:
        path, reason = damaged[0]
        raise StudyFolderError(f"the part {path} is damaged ({reason}){hint}")
    return concat(tables)


def prepare(
    folder: Path,
    metadata: dict[str, Any],
    kind: FolderKind,
    check: Callable[[dict[str, Any], list[str]], None] | None = None,
) -> set[int]:
    """Create ``folder`` (or check it holds this study) and return the units done.

    ``check(old, changed)`` may refuse the folder first, with the study's own words, given
    the folder's metadata and the settings that differ. ``metadata.json`` is then written
    (the latest run's; its settings are the folder's). A damaged part (one that cannot be
    read back) is renamed ``<part>.damaged`` and its units are redone, as those of a missing
    part are; a warning names it."""
    try:
        (folder / "parts").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputFileError(
            f"cannot create the study folder {folder}: {err.strerror or err}"
        ) from None
    meta_path = folder / "metadata.json"
    old = read_metadata(meta_path)
    if old is not None:
        changed = [k for k in kind.settings if old.get(k) != metadata.get(k)]
        if check is not None:
            check(old, changed)
        if changed:
            raise InvalidRequestError(
                f"{folder} holds another {kind.name} (it differs in "
                f"{', '.join(changed)}); use a new folder"
            )
    elif part_files(folder):
        raise StudyFolderError(
            f"{folder} holds parts of a study but no metadata.json, so they cannot be "
            f"checked against this one; use a new folder"
        )
    write_atomic(meta_path, json.dumps(metadata, indent=1, ensure_ascii=False))
    tables, damaged = read_parts(folder, kind)
    for path, reason in damaged:
        aside = path.with_name(path.name + ".damaged")
        try:
            path.replace(aside)
        except OSError as err:
            raise StudyFolderError(
                f"the part {path} is damaged ({reason}) and cannot be moved aside "
                f"({err.strerror or err}); delete it to redo its {kind.units}"
            ) from None
        warnings.warn(
            f"the part {path} is damaged ({reason}); moved to {aside.name}, its "
            f"{kind.units} are redone",
            stacklevel=3,
        )
    table = concat(tables)
    return set() if not len(table) else {int(i) for i in table[kind.unit].unique()}


def write_table(path: str | os.PathLike[str], table: DataFrame) -> Path:
    """``table`` as Parquet at ``path``, written whole or not at all."""
    data = io.BytesIO()
    table.to_parquet(data, index=False)
    return write_atomic(path, data.getvalue())


def write_part(folder: Path, first: int, part: DataFrame) -> Path:
    """One part file, named after its first unit (``parts/part-000042.parquet``)."""
    return write_table(folder / "parts" / f"part-{int(first):06d}.parquet", part)
