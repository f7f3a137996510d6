"""Running a model in evaluation mode for a while, then restoring its mode."""

from __future__ import annotations

import contextlib

from torch import nn


@contextlib.contextmanager
def eval_mode(model: nn.Module):
    """Put ``model`` in eval mode (no dropout) inside the block; restore its mode after.

    Every forward pass iglens_viz runs on a user's model (capture, generation, ablation)
    goes through this, so a model left in training mode is measured without dropout and
    handed back as it was.
    """
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
