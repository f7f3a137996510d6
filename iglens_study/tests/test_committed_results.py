"""The committed counterfactual studies (``docs/study-pairs-*``) are reproducible from their
committed tables: the hypotheses H1–H4 and the method summary, recomputed by this package,
are the committed ``hypotheses.csv`` and ``summary.csv`` byte for byte (the bootstrap is
seeded; the CSVs keep 6 significant digits, as the report writes them)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from iglens_study.pair_report import csv_text
from iglens_study.pair_scoring import hypotheses, pair_summary

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = sorted(p.name for p in (ROOT / "docs").glob("study-pairs-*") if p.is_dir())


def test_the_committed_studies_are_found():
    assert {"study-pairs-default", "study-pairs-gemma"} <= set(FOLDERS)


@pytest.mark.parametrize("name", FOLDERS)
def test_hypotheses_and_summary_are_the_committed_files(name):
    folder = ROOT / "docs" / name
    table = pd.read_parquet(folder / "table.parquet")
    seed = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))["seed"]
    answers = hypotheses(table, seed=seed)
    assert set(answers["verdict"]) <= {"yes", "no", "not run"} and len(answers) >= 4
    assert csv_text(answers) == (folder / "hypotheses.csv").read_text(encoding="utf-8")
    summary = pair_summary(table, seed=seed).methods
    assert csv_text(summary) == (folder / "summary.csv").read_text(encoding="utf-8")
