"""Running a model in evaluation mode for a while, then restoring its mode."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put ``model`` in eval mode (no dropout) inside the block; restore its mode after.

    Every forward pass iglens_viz runs on a user's model (capture, generation, ablation)
    goes through this, so a model left in training mode is measured without dropout and
    handed back as it was: every submodule gets its own ``training`` flag back, so a model
    whose parts were in different modes (a frozen, eval-mode encoder inside a model being
    trained, say) is restored part by part, not set to one mode throughout.
    """
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, training in modes:
            module.training = training
