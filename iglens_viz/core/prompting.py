"""Building the sequence to attribute: chat template and greedy generation of the answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from ..errors import InvalidRequestError
from .capture import input_device
from .model_mode import eval_mode

if TYPE_CHECKING:
    from transformers import GenerationMixin, PreTrainedTokenizerBase

    from .request import ChatMode


def wants_chat(
    chat: ChatMode, text_or_ids: object, tokenizer: PreTrainedTokenizerBase | None
) -> bool:
    """Resolve ``chat`` ("auto", True, False; validated by the request) for this input."""
    has_template = tokenizer is not None and bool(getattr(tokenizer, "chat_template", None))
    if chat == "auto":
        return isinstance(text_or_ids, str) and has_template
    if chat is True and not has_template:
        raise InvalidRequestError(
            "chat=True but the tokenizer has no chat template; pass chat=False"
        )
    return bool(chat)


def chat_prompt_ids(tokenizer: PreTrainedTokenizerBase | None, message: str) -> list[int]:
    """Token ids of ``message`` as one user turn, ready for the assistant's answer."""
    import jinja2

    if tokenizer is None:
        raise InvalidRequestError("a chat prompt needs a tokenizer; pass chat=False")

    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
        )
    except jinja2.TemplateError as err:
        where = getattr(tokenizer, "name_or_path", "") or "the tokenizer"
        raise InvalidRequestError(
            f"the chat template of {where} failed: {type(err).__name__}: {err}; fix its "
            "chat_template.jinja (or tokenizer_config.json), or pass chat=False"
        ) from err
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@torch.no_grad()
def generate_greedy(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    max_new_tokens: int,
    eos_token_id: int | list[int] | None = None,
) -> torch.Tensor:
    """The greedy continuation of ``prompt_ids`` ``[T]`` (new tokens only, stops at EOS).

    Uses the model's KV cache (``generate``), not repeated full forward passes.
    """
    ids = prompt_ids[None].to(input_device(model))
    special = (
        {} if eos_token_id is None else {"eos_token_id": eos_token_id, "pad_token_id": eos_token_id}
    )
    with eval_mode(model):
        # a transformers model: nn.Module's stubs type an unknown attribute as Tensor | Module
        out = cast("GenerationMixin", model).generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            temperature=None,
            top_p=None,
            top_k=None,
            **special,
        )
    return out[0, prompt_ids.numel() :].cpu()
