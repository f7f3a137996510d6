"""Residual states h_0 … h_n of a corpus, for fitting and evaluating lenses.

The states come from the core's capture (:func:`iglens_viz.core.capture.capture_batch`):
one right-padded forward pass per batch of texts, h_0 the first block's input and h_L the
output of block L, before the final norm. Only real positions are kept, and of those only
the ones a lens is fitted on: by default every position after the first of each text (the
first is the attention sink, whose state is far from the others and would dominate a
least-squares fit).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from ..adapters import ModelAdapter, adapter_for, execution_device
from ..core.capture import capture_batch
from ..errors import InvalidRequestError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["STATE_BATCH", "encode_texts", "model_shape", "state_batches"]

DEFAULT_MAX_LENGTH = 128
"""Tokens kept of each text (the rest is cut off)."""

STATE_BATCH = 16
"""Texts per forward pass of :func:`state_batches` (by default)."""


def model_shape(model: nn.Module) -> tuple[ModelAdapter, int, int]:
    """The adapter, the number of blocks n and the residual width d of ``model``."""
    adapter = adapter_for(model)
    width = getattr(getattr(model, "config", None), "hidden_size", None)
    if not isinstance(width, int):
        raise InvalidRequestError(
            f"cannot read the residual width of {type(model).__name__} (config.hidden_size)"
        )
    return adapter, adapter.n_blocks, width


def encode_texts(
    tokenizer: PreTrainedTokenizerBase | None,
    texts: Sequence[str | Sequence[int] | torch.Tensor],
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> list[torch.Tensor]:
    """Each text as ``[T]`` token ids (special tokens added as the tokenizer does by
    default), cut to ``max_length``; id sequences pass as they are (cut too)."""
    if isinstance(texts, str):
        raise InvalidRequestError(
            "texts must be a list of texts, not one string: pass [text] for a single text"
        )
    out = []
    for text in texts:
        if isinstance(text, str):
            if tokenizer is None:
                raise InvalidRequestError("texts given as strings need the model's tokenizer")
            ids = torch.as_tensor(tokenizer(text)["input_ids"], dtype=torch.long)
        else:
            ids = torch.as_tensor(text, dtype=torch.long).reshape(-1)
        out.append(ids[:max_length])
    return out


def state_batches(
    model: nn.Module,
    sequences: Sequence[torch.Tensor],
    *,
    batch_size: int = STATE_BATCH,
    skip_first: int = 1,
    skip_last: bool = False,
    dtype: torch.dtype = torch.float32,
) -> Iterator[torch.Tensor]:
    """``[n+1, R, d]`` states of the kept positions of each batch of ``sequences``.

    Kept: positions ``skip_first`` … T−1 of each sequence (… T−2 with ``skip_last``); a
    sequence with none is skipped. The states are on the head's device, in ``dtype``.
    """
    adapter = adapter_for(model)
    device = execution_device(adapter.head)
    last = 1 if skip_last else 0
    usable = [s for s in sequences if s.numel() - last > skip_first]
    for start in range(0, len(usable), batch_size):
        chunk = list(usable[start : start + batch_size])
        captures = capture_batch(model, adapter, chunk, device=device, dtype=dtype)
        kept = [c.states[:, skip_first : c.states.shape[1] - last] for c in captures]
        yield torch.cat(kept, dim=1)


def corpus_positions(
    sequences: Sequence[torch.Tensor], *, skip_first: int = 1, skip_last: bool = False
) -> int:
    """How many positions :func:`state_batches` keeps of ``sequences``."""
    last = 1 if skip_last else 0
    return sum(max(0, s.numel() - last - skip_first) for s in sequences)
