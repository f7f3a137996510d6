"""Turning user input (text, id lists, tensors) into one validated sequence of token ids."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

_CONTEXT_ATTRS = ("max_position_embeddings", "n_positions", "n_ctx", "seq_length")


def context_length(config) -> int | None:
    """The longest input the model accepts, from its config (None when it does not say)."""
    for name in _CONTEXT_ATTRS:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def to_input_ids(text_or_ids, tokenizer, config, vocab_size: int) -> torch.Tensor:
    """Validate and convert ``text_or_ids`` to a 1-D ``LongTensor`` of token ids on the CPU.

    Accepts a string (tokenised with ``tokenizer``, special tokens added as the tokenizer
    does by default), a sequence of ints, or a 1-D / ``[1, T]`` tensor or array.
    """
    if isinstance(text_or_ids, str):
        if not text_or_ids:
            raise ValueError("the prompt is empty: pass a non-empty string or a list of token ids")
        if tokenizer is None:
            raise ValueError("a text prompt needs a tokenizer; pass one or give token ids")
        ids = torch.as_tensor(tokenizer(text_or_ids)["input_ids"], dtype=torch.long)
    elif isinstance(text_or_ids, (torch.Tensor, np.ndarray, Sequence)):
        ids = torch.as_tensor(text_or_ids)
        if ids.numel() == 0:
            raise ValueError("the prompt is empty: it has no tokens")
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise TypeError(f"token ids must be integers, got dtype {ids.dtype}")
        ids = ids.long().cpu()
        if ids.dim() == 2 and ids.shape[0] == 1:
            ids = ids[0]
        if ids.dim() != 1:
            raise ValueError(f"token ids must be 1-D or [1, T]; got shape {tuple(ids.shape)} "
                             f"(attribute one sequence at a time)")
    else:
        raise TypeError(f"text_or_ids must be a string, a sequence of token ids or a tensor, "
                        f"not {type(text_or_ids).__name__}")
    if ids.numel() == 0:
        raise ValueError("the prompt is empty: it has no tokens")
    bad = ids[(ids < 0) | (ids >= vocab_size)]
    if bad.numel():
        raise ValueError(f"token ids out of range [0, {vocab_size}): {bad[:5].tolist()}")
    limit = context_length(config)
    if limit is not None and ids.numel() > limit:
        raise ValueError(f"the prompt has {ids.numel()} tokens but the model's context is "
                         f"{limit}; shorten it or keep its last {limit} tokens")
    return ids
