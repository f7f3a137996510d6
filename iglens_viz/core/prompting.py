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


def _render_chat(tokenizer: PreTrainedTokenizerBase | None, message: str) -> str:
    """``message`` as one user turn of the tokenizer's chat template, as text."""
    import jinja2

    if tokenizer is None:
        raise InvalidRequestError("a chat prompt needs a tokenizer; pass chat=False")

    try:
        return cast(
            "str",
            tokenizer.apply_chat_template(
                [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
            ),
        )
    except jinja2.TemplateError as err:
        where = getattr(tokenizer, "name_or_path", "") or "the tokenizer"
        raise InvalidRequestError(
            f"the chat template of {where} failed: {type(err).__name__}: {err}; fix its "
            "chat_template.jinja (or tokenizer_config.json), or pass chat=False"
        ) from err


def chat_prompt_ids(tokenizer: PreTrainedTokenizerBase | None, message: str) -> list[int]:
    """Token ids of ``message`` as one user turn, ready for the assistant's answer."""
    text = _render_chat(tokenizer, message)
    return cast("PreTrainedTokenizerBase", tokenizer)(text, add_special_tokens=False)["input_ids"]


# A user message no template rewrites and no text contains: private-use characters.
_SENTINEL = "\ue000iglens-message\ue001"


def chat_template_positions(
    tokenizer: PreTrainedTokenizerBase | None, message: str
) -> list[int] | None:
    """The positions of :func:`chat_prompt_ids` that belong to the chat template (system
    prompt, role markers, the assistant's header), not to the user's ``message``.

    The template is rendered once with ``message`` and once with a sentinel message: the
    sentinel render's text before and after the sentinel is the template's part, and the
    characters between them in the real render are the message as the template wrote it.
    A token whose character span (a fast tokenizer's offsets) overlaps the message is the
    user's; the others are the template's. Without offsets, the template's parts are
    tokenised on their own and matched at the ends of the ids. None when the template does
    not keep the message between a fixed prefix and suffix (it rewrites or repeats it).
    """
    text = _render_chat(tokenizer, message)
    tok = cast("PreTrainedTokenizerBase", tokenizer)
    parts = _render_chat(tok, _SENTINEL).split(_SENTINEL)
    if len(parts) != 2:
        return None
    prefix, suffix = parts
    start, end = len(prefix), len(text) - len(suffix)
    if start > end or not text.startswith(prefix) or not text.endswith(suffix):
        return None
    try:
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = [(int(a), int(b)) for a, b in enc["offset_mapping"]]
    except (NotImplementedError, ValueError, KeyError, TypeError):
        offsets = None
    if offsets is not None:
        return [t for t, (a, b) in enumerate(offsets) if not _inside(a, b, start, end)]
    ids = tok(text, add_special_tokens=False)["input_ids"]
    head = tok(prefix, add_special_tokens=False)["input_ids"] if prefix else []
    tail = tok(suffix, add_special_tokens=False)["input_ids"] if suffix else []
    n = len(ids)
    out: list[int] = []
    if head and ids[: len(head)] == head:
        out += range(len(head))
    if tail and len(tail) <= n - len(out) and ids[n - len(tail) :] == tail:
        out += range(n - len(tail), n)
    return out


def _inside(a: int, b: int, start: int, end: int) -> bool:
    """Whether the characters ``a … b`` of a token overlap the message's ``start … end``
    (a zero-width token: whether it sits inside the message)."""
    return a < end and b > start if b > a else start < a < end


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


def eos_ids(tokenizer: PreTrainedTokenizerBase | None) -> set[int]:
    """The tokenizer's end-of-sequence id(s) (empty without a tokenizer)."""
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        return set()
    return {int(i) for i in (eos if isinstance(eos, (list, tuple)) else [eos])}
