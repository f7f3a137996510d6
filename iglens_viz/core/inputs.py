"""Turning user input (text, id lists, tensors) into one validated sequence of token ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..errors import InvalidRequestError
from .request import PromptSpec, normalize_prompt

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

_CONTEXT_ATTRS = ("max_position_embeddings", "n_positions", "n_ctx", "seq_length")


def is_position_index(value: object) -> bool:
    """Whether ``value`` can index a position: an int (or integral float) ≥ 0, not a bool."""
    return (
        not isinstance(value, bool)
        and (isinstance(value, int) or (isinstance(value, float) and value.is_integer()))
        and value >= 0
    )


def context_length(config: object) -> int | None:
    """The longest input the model accepts, from its config (None when it does not say)."""
    for name in _CONTEXT_ATTRS:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def to_input_ids(
    text_or_ids: PromptSpec,
    tokenizer: PreTrainedTokenizerBase | None,
    config: object,
    vocab_size: int,
) -> torch.Tensor:
    """Validate and convert a prompt to a 1-D ``LongTensor`` of token ids on the CPU.

    Accepts a string (tokenised with ``tokenizer``, special tokens added as the tokenizer
    does by default), a sequence of ints, or a 1-D / ``[1, T]`` tensor or array; see
    :func:`~iglens_viz.core.request.normalize_prompt`. Ids must be below ``vocab_size`` and
    the sequence must fit the model's context.
    """
    prompt = normalize_prompt(text_or_ids)
    if isinstance(prompt, str):
        if tokenizer is None:
            raise InvalidRequestError("a text prompt needs a tokenizer; pass one or give token ids")
        tokens = tokenizer(prompt)["input_ids"]
        if not tokens:
            raise InvalidRequestError("the prompt tokenises to no tokens")
        ids = torch.as_tensor(tokens, dtype=torch.long)
    else:
        ids = torch.as_tensor(prompt, dtype=torch.long)
    bad = ids[ids >= vocab_size]
    if bad.numel():
        raise InvalidRequestError(f"token ids out of range [0, {vocab_size}): {bad[:5].tolist()}")
    check_context(ids.numel(), config)
    return ids


def check_context(n_tokens: int, config: object, *, generating: int = 0) -> None:
    """Raise when ``n_tokens`` (plus ``generating`` new tokens) exceed the model's context."""
    limit = context_length(config)
    if limit is None or n_tokens + generating <= limit:
        return
    if generating:
        raise InvalidRequestError(
            f"the prompt has {n_tokens} tokens and {generating} new tokens were asked for, "
            f"but the model's context is {limit}; ask for at most "
            f"{max(limit - n_tokens, 0)} new tokens or shorten the prompt"
        )
    raise InvalidRequestError(
        f"the prompt has {n_tokens} tokens but the model's context is "
        f"{limit}; shorten it or keep its last {limit} tokens"
    )
