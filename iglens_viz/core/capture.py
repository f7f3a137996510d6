"""One forward pass that records the pre-norm residual stream h_0 … h_n.

Hugging Face's ``output_hidden_states`` is not used: its last element already has the final
norm applied, so h_n (pre-norm) is missing from it. Instead a pre-hook on block 0 records
its input (h_0, embeddings scaled as the model scales them) and a hook on every block records
its output. Blocks return a tensor in transformers 5 and a tuple in 4.x; both are handled.
"""

from __future__ import annotations

import torch
from torch import nn

from ..adapters import ModelAdapter
from .model_mode import eval_mode


def block_output_states(value) -> torch.Tensor:
    """The hidden states in a decoder block's output (a tensor in transformers 5, a tuple in 4.x)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    raise TypeError(f"decoder block returned {type(value).__name__}; expected a tensor or a "
                    f"tuple whose first item is the hidden states")


@torch.no_grad()
def capture_states(model: nn.Module, adapter: ModelAdapter, input_ids: torch.Tensor,
                   *, device: torch.device, dtype: torch.dtype, sublayers: bool = False
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``model`` once on ``input_ids`` (shape ``[T]``).

    Returns ``(states, logits)``: ``states[L]`` is h_L, shape ``[n+1, T, d]`` on ``device``
    in ``dtype``; ``logits`` are the model's own logits at every position, ``[T, V]`` in the
    model's dtype, used for the numeric self-check of the readout at every position (as a
    plain forward pass computes them: one head matmul over T rows, 1/(n+1) of the readout
    map's).

    With ``sublayers``, the stream between each block's attention write and its MLP
    (h_L.attn, read as the input of the family's ``mid_state`` module) is kept too:
    ``states`` is ``[2n+1, T, d]``, ``states[2L-1]`` = h_L.attn and ``states[2L]`` = h_L.
    Parallel blocks have no such state: :class:`~iglens_viz.errors.UnsupportedModelError`.
    """
    n = adapter.n_blocks
    stride = 2 if sublayers else 1
    mids = adapter.require_sublayers() if sublayers else ()
    states: torch.Tensor | None = None  # allocated at the first hook, once d is known
    seen = [False] * (stride * n + 1)

    def keep(index: int, tensor: torch.Tensor) -> None:
        nonlocal states
        if states is None:
            states = torch.empty((len(seen), *tensor.shape[1:]), device=device, dtype=dtype)
        states[index].copy_(tensor[0])
        seen[index] = True

    def before_first(module, args, kwargs):
        keep(0, args[0] if args else kwargs["hidden_states"])

    def after_block(index):
        def hook(module, args, output):
            keep(index, block_output_states(output))
        return hook

    def before_mlp(index):
        def hook(module, args):  # OPT flattens the batch into [B·T, d] here; B is 1
            keep(index, args[0].reshape(1, -1, args[0].shape[-1]))
        return hook

    handles = [adapter.blocks[0].register_forward_pre_hook(before_first, with_kwargs=True)]
    handles += [block.register_forward_hook(after_block(stride * (i + 1)))
                for i, block in enumerate(adapter.blocks)]
    handles += [mid.register_forward_pre_hook(before_mlp(2 * i + 1))
                for i, mid in enumerate(mids)]
    try:
        with eval_mode(model):
            ids = input_ids.unsqueeze(0).to(input_device(model))
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    missing = [i for i, ok in enumerate(seen) if not ok]
    if missing:
        raise RuntimeError(f"the forward pass did not fill states {missing} (of "
                           f"{len(seen)}); the adapter for {adapter.family.name} does not "
                           f"match this model")
    return states, out.logits[0]


def input_device(model: nn.Module) -> torch.device:
    """Where the model's input ids must live (the embeddings' execution device)."""
    embeddings = model.get_input_embeddings()
    hook = getattr(embeddings, "_hf_hook", None)
    if getattr(hook, "execution_device", None) is not None:
        return torch.device(hook.execution_device)
    param = next(embeddings.parameters())
    return param.device if param.device.type != "meta" else torch.device("cpu")
