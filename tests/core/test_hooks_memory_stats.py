"""Facts with one home (issue 18): the shared hooks, the memory rule and the row statistics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iglens_viz.core.hooks import Hooks, block_output_states, replace_block_output
from iglens_viz.core.memory import ablation_rows, block_plan, rows_within
from iglens_viz.core.stats import argmax_rows, spearman, spearman_rows


def test_hooks_are_removed_also_when_the_forward_pass_raises():
    module = torch.nn.Linear(2, 2)
    seen = []

    def boom(mod, args, output):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"), Hooks() as hooks:
        hooks.before(module, lambda mod, args: seen.append("before"))
        hooks.after(module, boom)
        module(torch.zeros(1, 2))
    assert seen == ["before"]
    assert not module._forward_hooks and not module._forward_pre_hooks
    module(torch.zeros(1, 2))  # nothing left to raise


def test_block_outputs_have_one_error_text():
    with pytest.raises(TypeError) as read:
        block_output_states({"hidden_states": torch.zeros(1)})
    with pytest.raises(TypeError) as write:
        replace_block_output({"hidden_states": torch.zeros(1)}, torch.zeros(1))
    assert str(read.value) == str(write.value)
    assert "decoder block returned dict" in str(read.value)


def test_rows_within_floor_and_limit():
    assert rows_within(10, 3) == 3
    assert rows_within(2, 3) == 1  # one row whatever the budget
    assert rows_within(-5, 3) == 1
    assert rows_within(100, 0) == 100  # a free row costs one unit
    assert rows_within(100, 3, limit=7) == 7
    assert rows_within(100, 3, limit=0) == 0  # nothing to plan
    # the planners are the rule: an ablation row holds T × V float32 logits and two copies
    assert ablation_rows(9, 101, 9 * 101 * 12 * 5 + 1) == 5
    rows, cols = block_plan(10, 97, torch.float32, 1)
    assert (rows, cols) == (1, 1)


def test_one_argmax_and_one_spearman():
    x = np.array([[0.1, np.nan, 0.3, 0.3], [np.nan] * 4, [-np.inf, -1.0, np.inf, -2.0]])
    np.testing.assert_array_equal(argmax_rows(x), [2, -1, 1])
    a = np.array([[1.0, 2.0, 2.0, np.nan, 4.0], [3.0, 3.0, 3.0, 1.0, 2.0]])
    b = np.array([[1.0, 3.0, 2.0, 4.0, 4.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
    rho = spearman_rows(a, b)
    # row 0, pairs (1,1) (2,3) (2,2) (4,4): ranks a = 1, 2.5, 2.5, 4; b = 1, 3, 2, 4
    np.testing.assert_allclose(rho[0], 4.5 / np.sqrt(4.5 * 5.0), rtol=1e-15)
    assert rho[0] == spearman(a[0], b[0]) and rho[1] == spearman(a[1], b[1])
    assert np.isnan(spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))  # a constant side
    assert np.isnan(spearman([1.0, np.nan], [1.0, 2.0]))  # one finite pair
