"""The default fitting corpus: the model's own text, sampled from fixed openings.

Nothing is downloaded. Each opening below (short, neutral, everyday prose in English) is
continued by the model itself with seeded nucleus sampling (temperature 1, top-p 0.95,
:data:`NEW_TOKENS` new tokens, stopped at the end-of-text token), so the corpus follows the
model's own distribution and is the same on every run on one machine (a sampled token can
flip where another BLAS rounds a near-tie differently; the settings saved with a lens record
the corpus's checksum). ``"fit"`` uses :data:`FIT_OPENINGS`, ``"eval"`` the held-out
:data:`EVAL_OPENINGS` with another seed.

On the default model (SmolLM2-135M) the fit corpus is 48 texts of about 70 tokens, some
3,300 positions; the evaluation corpus 16 texts, about 1,100. Sampling them takes minutes on
a CPU (134 s and 51 s on a 2-core machine), so both are shipped for the default model
(:mod:`.shipped`): there a first fit starts at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn

from ..core.capture import input_device
from ..core.hooks import Hooks
from ..core.model_mode import eval_mode

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["CORPUS_VERSION", "EVAL_OPENINGS", "FIT_OPENINGS", "corpus_digest", "default_corpus"]

CORPUS_VERSION = "openings-v1"
"""Named in every lens's settings and cache key; bump it when the openings or the sampling
change."""
NEW_TOKENS = 64
"""Tokens the model adds to each opening."""
TOP_P = 0.95
SEEDS = {"fit": 0, "eval": 1}

FIT_OPENINGS: tuple[str, ...] = (
    "The history of the town begins",
    "In the morning, the market",
    "Scientists have long wondered why",
    "The recipe calls for",
    "When the train arrived at the station,",
    "Most people do not realise that",
    "The river flows through",
    "Our school library has",
    "A good way to learn a language is",
    "The weather this week will be",
    "In 1850, the city of",
    "The museum's new exhibition",
    "My grandmother used to say that",
    "The committee met on Tuesday to",
    "Photosynthesis is the process by which",
    "The old bridge was built",
    "Here are some tips for",
    "The company announced that",
    "During the summer, the village",
    "The main character of the novel",
    "To repair a bicycle tyre,",
    "The population of the region",
    "Music has always been",
    "The first step in any project is",
    "On the island there is",
    "The teacher asked the students to",
    "Coffee is grown in",
    "The football match ended",
    "A computer program is",
    "The mountains in the north",
    "Last year the festival",
    "The doctor explained that",
    "Birds migrate south because",
    "The report found that",
    "In the kitchen, she",
    "The law was passed in",
    "Learning to swim",
    "The painting shows",
    "Water boils at",
    "The children played in the park until",
    "The price of bread",
    "An engine works by",
    "The letter arrived on a",
    "Many cities around the world",
    "The game is played with",
    "After dinner, we",
    "The planet Mars",
    "The shop on the corner sells",
)
"""The openings of the fit corpus."""

EVAL_OPENINGS: tuple[str, ...] = (
    "The library opens at",
    "In the winter, the lake",
    "The new road connects",
    "Researchers at the university found",
    "The story begins in a small",
    "Tea was first brought to",
    "The orchestra played",
    "A healthy breakfast includes",
    "The castle on the hill",
    "The farmer planted",
    "Electric cars are",
    "The film tells the story of",
    "Every spring the garden",
    "The ship sailed from",
    "Mathematics is the study of",
    "The hotel is located",
)
"""The held-out openings of the evaluation corpus (none is a fit opening)."""

Split = Literal["fit", "eval"]


@torch.no_grad()
def default_corpus(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    split: Split = "fit",
    *,
    new_tokens: int = NEW_TOKENS,
    progress: Callable[[int, int], None] | None = None,
) -> list[torch.Tensor]:
    """The default corpus as ``[T]`` token-id tensors (opening and continuation, no pads).

    Sampled by the model from the openings of ``split`` (see the module's text), in one
    left-padded batch, with a fixed seed; the global random state is left as it was.
    ``progress(done, total)`` is called after each of the batch's forward passes (one per
    new token; it may raise to stop the sampling). With fewer ``new_tokens`` each text is
    the same up to where it stops: the same random numbers are drawn in the same order.
    """
    if split not in SEEDS:
        raise ValueError(f"split must be 'fit' or 'eval', not {split!r}")
    openings = FIT_OPENINGS if split == "fit" else EVAL_OPENINGS
    if tokenizer is None:
        raise ValueError("the default corpus needs the model's tokenizer")
    prompts = [torch.as_tensor(tokenizer(o)["input_ids"], dtype=torch.long) for o in openings]
    eos = getattr(tokenizer, "eos_token_id", None)
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = pad if pad is not None else (eos if eos is not None else 0)
    longest = max(p.numel() for p in prompts)
    ids = torch.full((len(prompts), longest), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):  # left padding: every opening ends where generation starts
        ids[i, longest - p.numel() :] = p
        mask[i, longest - p.numel() :] = 1
    config = getattr(model, "config", None)
    context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 0)
    if isinstance(context, int) and context > 0:
        new_tokens = max(0, min(new_tokens, context - longest))
    device = input_device(model)
    passes = iter(range(1, new_tokens + 1))

    def after_pass(module: nn.Module, args: Any, output: Any) -> None:
        if progress is not None:
            progress(min(next(passes, new_tokens), new_tokens), new_tokens)

    with eval_mode(model), torch.random.fork_rng(devices=[]), Hooks() as hooks:
        hooks.after(model, after_pass)
        torch.manual_seed(SEEDS[split])
        out = model.generate(  # type: ignore[operator]
            ids.to(device),
            attention_mask=mask.to(device),
            do_sample=True,
            temperature=1.0,
            top_p=TOP_P,
            top_k=0,
            max_new_tokens=new_tokens,
            pad_token_id=pad,
            eos_token_id=eos,
        )
    out = out.cpu()
    texts = []
    for i, p in enumerate(prompts):
        new = out[i, longest:]
        if eos is not None:
            stop = (new == eos).nonzero()
            if len(stop):
                new = new[: int(stop[0])]
        texts.append(torch.cat([p, new]))
    return texts


def corpus_digest(sequences: list[torch.Tensor]) -> str:
    """SHA-256 of the token ids of a corpus (recorded in a lens's settings)."""
    digest = hashlib.sha256()
    for s in sequences:
        digest.update(s.to(torch.int64).numpy().tobytes())
        digest.update(b"|")
    return digest.hexdigest()
