"""A small study rerun with this package gets the committed table's rows.

The first three pairs of the committed default-model counterfactual study
(``docs/study-pairs-default``; the pairs as its metadata lists them), rerun with
:func:`iglens_study.pair_study` on the embedded default model under the logit lens (the fitted
lenses' columns need fits the test does not make), give the committed rows: every text,
integer and boolean column equal, every float column within float32 rounding of it.

Bit for bit holds on the machine that made the table; another CPU's float32 kernels round the
forward passes apart (the committed run: an AMD EPYC; on an Intel Xeon, with one thread or two,
in the committed batch of 16 or alone: at most 1.3e-5 apart in logits, 2.2e-6 in
probabilities and normalised effects). The bound: a float32 forward pass of 30 blocks rounds
each block's output to ``eps32 · |x|``; 256 eps32 of the column's largest magnitude holds
those differences with a margin of 13 or more (at most 6e-4, in the largest logits).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iglens_study import pair_study
from iglens_study.pairs import Pair

FOLDER = Path(__file__).resolve().parents[2] / "docs" / "study-pairs-default"
N_PAIRS = 3


@pytest.mark.real_model
def test_three_committed_pairs_rerun_give_the_committed_rows(default_model):
    model, tokenizer = default_model
    metadata = json.loads((FOLDER / "metadata.json").read_text(encoding="utf-8"))
    pairs = [Pair(**p) for p in metadata["pair_list"][:N_PAIRS]]
    rerun = pair_study(model, tokenizer, pairs, lenses=("logit",), progress=False).table
    committed = pd.read_parquet(FOLDER / "table.parquet")
    committed = committed[committed["pair"] < N_PAIRS].reset_index(drop=True)
    assert len(rerun) == len(committed) == N_PAIRS * model.config.num_hidden_layers
    assert set(rerun.columns) <= set(committed.columns)
    eps32 = float(np.finfo(np.float32).eps)
    for column in rerun.columns:
        got, want = rerun[column].to_numpy(), committed[column].to_numpy()
        if want.dtype.kind != "f":
            assert got.tolist() == want.tolist(), column
            continue
        bound = 256 * eps32 * max(1.0, float(np.nanmax(np.abs(want))))
        np.testing.assert_allclose(got, want, rtol=0, atol=bound, err_msg=column)
