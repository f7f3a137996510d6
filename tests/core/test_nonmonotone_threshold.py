"""The non-monotone rule's default threshold on a fixed tiny-model case, computed independently.

The reference side reads the tiny model's hidden states through its own norm and head
(``tiny_models.reference_lens_probs``, Hugging Face's forward pass, no IG-Lens code), takes
each block's change of the next token's probability as its contribution (the prediction-aware
estimator is exact: a segment's contribution is the change of f across it) and applies the
rule in plain Python loops; the library's flags come from the attribution and
:func:`iglens_viz.core.trajectory.is_monotone` with its default threshold.
"""

from __future__ import annotations

import numpy as np
import pytest

import iglens_viz
from iglens_viz.core.trajectory import NONMONOTONE_THRESHOLD, is_monotone
from iglens_viz.protocol.payload import result_payload
from tests.support.tiny_models import random_ids, reference_lens_probs, tiny_model, tiny_tokenizer


def flagged_by_hand(probs: np.ndarray, threshold: float) -> tuple[list[int], list[float]]:
    """Positions whose trajectory has a block moving against Δp by more than ``threshold`` of
    its largest move, and each position's margin |ratio − threshold| (how far from a tie)."""
    flagged, margins = [], []
    for i in range(probs.shape[1]):
        steps = [float(probs[L + 1, i] - probs[L, i]) for L in range(probs.shape[0] - 1)]
        net = float(probs[-1, i] - probs[0, i])
        largest = max(abs(s) for s in steps)
        against = [abs(s) for s in steps if s * net < 0]
        if against and largest > 0:
            ratio = max(against) / largest
            margins.append(abs(ratio - threshold))
            if ratio > threshold:
                flagged.append(i)
    return flagged, margins


@pytest.fixture(scope="module")
def case():
    model, tokenizer = tiny_model("llama", seed=2), tiny_tokenizer()
    ids = random_ids(24, seed=7)
    result = iglens_viz.IGLens(model, tokenizer).attribute(ids, target="next")
    reference = reference_lens_probs(model, ids[:-1], ids[1:]).numpy()  # [n+1, T-1]
    return result, reference


def test_the_default_is_the_documented_one():
    # docs/method.md "Non-monotone marks" states 60% and says why; the widget shows the payload's
    assert NONMONOTONE_THRESHOLD == 0.6


def test_flagged_fraction_on_a_tiny_model_matches_an_independent_count(case):
    result, reference = case
    want, margins = flagged_by_hand(reference, NONMONOTONE_THRESHOLD)
    assert min(margins) > 1e-3  # no position near a tie: float noise cannot flip a flag
    T = reference.shape[1]
    got = np.flatnonzero(~is_monotone(result.contributions[:T], result.delta_p[:T])).tolist()
    assert got == want
    assert 0 < len(want) < T  # the case has both kinds
    # the old 5% flags more of the same positions: the threshold is what changed
    loose, _ = flagged_by_hand(reference, 0.05)
    assert set(want) <= set(loose) and len(loose) > len(want)


def test_the_payload_carries_the_threshold(case):
    result, _ = case
    assert result_payload(result)["nonmonotone_threshold"] == NONMONOTONE_THRESHOLD
