"""The model's state around what iglens_viz runs: evaluation mode for a while, then its
own mode back; and real (not meta) weights before anything runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn

from ..errors import ModelLoadError


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


def require_materialized(model: nn.Module) -> None:
    """:class:`~iglens_viz.errors.ModelLoadError` when some weight of ``model`` is on the
    ``meta`` device (built under ``torch.device("meta")`` or ``init_empty_weights()``, never
    loaded) and no accelerate hook brings it in for the forward pass (offloading does)."""
    hooked: list[str] = []
    for name, module in model.named_modules():
        if getattr(module, "_hf_hook", None) is not None:
            hooked.append(name)
            continue
        if any(name == h or name.startswith(h + ".") or h == "" for h in hooked):
            continue
        for tensor_name, tensor in [
            *module.named_parameters(recurse=False),
            *module.named_buffers(recurse=False),
        ]:
            if tensor is not None and tensor.is_meta:
                where = f"{name}.{tensor_name}" if name else tensor_name
                raise ModelLoadError(
                    f"the model's weights are not materialised ({where} is on the meta "
                    f"device): load it with from_pretrained(...) outside "
                    f"init_empty_weights() / torch.device('meta'), or build it on a real "
                    f"device"
                )
