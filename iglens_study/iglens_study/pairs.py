"""Pair sets for the counterfactual study: a clean prompt, a corrupt one, their answers.

A pair is two prompts of the same template and token length that differ in their subject
("The capital of France is" / "The capital of Italy is"), the clean prompt's answer (the
*target*, " Paris") and the corrupt prompt's (the *contrast*, " Rome"). The study patches
between them (see :mod:`iglens_study.counterfactual` and ``docs/study.md``, section
"Counterfactual mode: pre-registered hypotheses", which defines both sets).

* :func:`capital_pairs` — the built-in ``capital-pairs`` set, made per model from the
  ``capitals`` prompt set (:mod:`.prompts`): only answers the model gives, grouped by
  template and token length, both orders of every pair, seeded, capped per country.
* :func:`load_pairs` — a user's JSONL file, one ``{"clean", "corrupt", "target",
  "contrast"}`` object per line, optional ``"cluster"``.

Target and contrast are the first tokens of the answers (the study's target rule,
:func:`iglens_study.run._answer_id`): an answer of several tokens is fine, its first
token is taken.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from iglens_viz.adapters import adapter_for
from iglens_viz.core.capture import input_device, padded_batch
from iglens_viz.core.inputs import to_input_ids
from iglens_viz.core.model_mode import eval_mode
from iglens_viz.errors import InvalidRequestError

from . import prompts as _prompts
from .run import _answer_id

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["CAPITAL_PAIRS", "Pair", "capital_pairs", "load_pairs"]

CAPITAL_PAIRS = "capital-pairs"
"""The name of the built-in pair set (:func:`capital_pairs`)."""


@dataclass(frozen=True)
class Pair:
    """One clean/corrupt pair of the counterfactual study."""

    clean: str
    """The clean prompt (raw text, no chat template)."""
    corrupt: str
    """The corrupt prompt: the same template and token length, another subject."""
    target: str
    """The text of t, the first token of the clean prompt's answer (e.g. " Paris")."""
    contrast: str
    """The text of c, the first token of the corrupt prompt's answer (e.g. " Rome")."""
    target_id: int
    """t, the first token of :attr:`target`."""
    contrast_id: int
    """c, the first token of :attr:`contrast` (never t)."""
    cluster: str
    """The bootstrap's cluster: the clean prompt's country (built in), the file's
    ``cluster`` (default: the target text)."""
    template: str = ""
    """The prompts' template (built in: e.g. ``"The capital of {country} is"``; "" from a
    file)."""
    source: str = CAPITAL_PAIRS
    """``"capital-pairs"``, or ``"<file name>:<line>"`` for a pair from a file."""
    target_answer: str = ""
    """The clean prompt's whole answer as given (e.g. " Buenos Aires"; t is its first
    token)."""
    contrast_answer: str = ""
    """The corrupt prompt's whole answer as given."""

    def to_dict(self) -> dict[str, Any]:
        """The pair's fields as a JSON-serialisable dict."""
        return asdict(self)


def _vocab(model: torch.nn.Module) -> int:
    return int(adapter_for(model).head.weight.shape[0])


def _text(tokenizer: PreTrainedTokenizerBase, token: int) -> str:
    """The decoded text of one token."""
    return str(tokenizer.decode([token]))


@dataclass(frozen=True)
class _Answered:
    """A capitals prompt with its country, template, token length and first answer token."""

    index: int
    text: str
    answer: str
    country: str
    template: str
    n_tokens: int
    answer_id: int


def _template_of(text: str) -> tuple[str, str] | None:
    """(template, country) of a capitals prompt (the template with the longest matching
    prefix), or None when no template matches."""
    best: tuple[str, str] | None = None
    for template in _prompts.CAPITAL_TEMPLATES:
        prefix, suffix = template.split("{country}")
        if (
            text.startswith(prefix)
            and text.endswith(suffix)
            and len(text) > len(prefix) + len(suffix)
            and (best is None or len(prefix) > len(best[0].split("{country}")[0]))
        ):
            best = (template, text[len(prefix) : len(text) - len(suffix)])
    return best


@torch.no_grad()
def _last_distributions(
    model: torch.nn.Module, ids: list[torch.Tensor], batch_size: int
) -> list[np.ndarray]:
    """The model's own next-token distribution at each prompt's last position (float64),
    from right-padded batches."""
    device = input_device(model)
    out: list[np.ndarray] = []
    with eval_mode(model):
        for first in range(0, len(ids), batch_size):
            chunk = ids[first : first + batch_size]
            batch, mask = padded_batch(chunk, device)
            logits = model(input_ids=batch, attention_mask=mask, use_cache=False).logits
            last = torch.as_tensor([x.numel() - 1 for x in chunk], device=logits.device)
            rows = logits[torch.arange(len(chunk), device=logits.device), last].double()
            out.extend(torch.softmax(rows, -1).cpu().numpy())
    return out


def answered_capitals(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    *,
    min_p: float = 0.1,
    batch_size: int = 16,
) -> tuple[list[_Answered], int]:
    """The ``capitals`` prompts whose answer the model gives (the first answer token is its
    top-1 next token at the last position, or has p ≥ ``min_p`` there), and how many
    prompts the set has."""
    items = _prompts.builtin_set("capitals")
    vocab = _vocab(model)
    ids = [to_input_ids(p.text, tokenizer, model.config, vocab) for p in items]
    probs = _last_distributions(model, ids, batch_size)
    kept = []
    for i, (item, x, p) in enumerate(zip(items, ids, probs)):
        parsed = _template_of(item.text)
        if parsed is None or item.answer is None:
            continue
        t = _answer_id(tokenizer, item.answer)
        if int(np.argmax(p)) == t or p[t] >= min_p:
            template, country = parsed
            kept.append(_Answered(i, item.text, item.answer, country, template, x.numel(), t))
    return kept, len(items)


def capital_pairs(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    *,
    max_pairs: int = 240,
    per_country: int = 6,
    seed: int = 0,
    min_p: float = 0.1,
) -> list[Pair]:
    """The built-in ``capital-pairs`` set for ``model``, as ``docs/study.md`` pre-registers it.

    1. Every prompt of the ``capitals`` set whose answer the model gives: the answer's first
       token (the study's target) is the model's top-1 next token at the last position, or
       has p ≥ ``min_p`` there.
    2. Grouped by template and token length; every ordered pair (clean, corrupt) of one
       group whose answers' first tokens differ is a candidate (both orders: swapped pairs
       included).
    3. The candidates are shuffled with ``seed`` and accepted in that order while the clean
       country has been clean in fewer than ``per_country`` accepted pairs and the corrupt
       country corrupt in fewer than ``per_country``, up to ``max_pairs`` pairs.

    Fewer pairs than asked come back as they are (not padded). The cluster of a pair is the
    clean prompt's country.
    """
    for name, value, least in (("max_pairs", max_pairs, 1), ("per_country", per_country, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidRequestError(f"{name} must be an integer >= {least}, got {value!r}")
    if not 0.0 <= float(min_p) <= 1.0:
        raise InvalidRequestError(f"min_p must be a probability in [0, 1], got {min_p!r}")
    answered, _ = answered_capitals(model, tokenizer, min_p=float(min_p))
    return _pairs_of(answered, tokenizer, max_pairs, per_country, seed)


def _pairs_of(
    answered: Sequence[_Answered],
    tokenizer: PreTrainedTokenizerBase,
    max_pairs: int,
    per_country: int,
    seed: int,
) -> list[Pair]:
    """Steps 2 and 3 of :func:`capital_pairs` on the answered prompts."""
    groups: dict[tuple[str, int], list[_Answered]] = {}
    for a in answered:
        groups.setdefault((a.template, a.n_tokens), []).append(a)
    candidates = [
        (a, b)
        for key in sorted(groups)
        for a in groups[key]
        for b in groups[key]
        if a.index != b.index and a.answer_id != b.answer_id
    ]
    order = np.random.default_rng(seed).permutation(len(candidates))
    clean_count: dict[str, int] = {}
    corrupt_count: dict[str, int] = {}
    pairs: list[Pair] = []
    for k in order:
        a, b = candidates[int(k)]
        if clean_count.get(a.country, 0) >= per_country:
            continue
        if corrupt_count.get(b.country, 0) >= per_country:
            continue
        clean_count[a.country] = clean_count.get(a.country, 0) + 1
        corrupt_count[b.country] = corrupt_count.get(b.country, 0) + 1
        pairs.append(
            Pair(
                clean=a.text,
                corrupt=b.text,
                target=_text(tokenizer, a.answer_id),
                contrast=_text(tokenizer, b.answer_id),
                target_id=a.answer_id,
                contrast_id=b.answer_id,
                cluster=a.country,
                template=a.template,
                source=CAPITAL_PAIRS,
                target_answer=a.answer,
                contrast_answer=b.answer,
            )
        )
        if len(pairs) >= max_pairs:
            break
    return pairs


def _read_lines(path: Path) -> list[str]:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InvalidRequestError(
            f"cannot read the pairs file {path}: {err.strerror or err}"
        ) from None
    try:
        return data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InvalidRequestError(
            f"{path.name}:{line}: the pairs file is not UTF-8 text (byte {err.start}); save it "
            f"as UTF-8"
        ) from None


_FIELDS = ("clean", "corrupt", "target", "contrast")
_EXAMPLE = '{"clean": "The capital of France is", "corrupt": "The capital of Italy is", ' + (
    '"target": " Paris", "contrast": " Rome"}'
)


def load_pairs(
    path: str | os.PathLike[str],
    tokenizer: PreTrainedTokenizerBase,
    model: torch.nn.Module | None = None,
) -> list[Pair]:
    """Pairs from a JSONL file: one JSON object per line with ``"clean"``, ``"corrupt"``,
    ``"target"`` and ``"contrast"`` (texts) and an optional ``"cluster"`` (default: the
    target text). Blank lines and lines starting with ``#`` are skipped.

    The target is the clean prompt's answer, the contrast the corrupt prompt's; an answer
    of several tokens is fine (its first token is taken, as the study takes it; a warning
    says how many were). The two prompts must have the same token length (checked with
    ``tokenizer``, special tokens added as for every prompt; with ``model``, the ids are
    also checked against its vocabulary and context), and the two answers different first
    tokens. Every error names the line and says what would work.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidRequestError(
            f"{str(path)!r} is neither a JSONL pairs file nor the built-in set "
            f"{CAPITAL_PAIRS!r}; a file has one object per line, e.g. {_EXAMPLE}"
        )
    vocab = None if model is None else _vocab(model)
    pairs: list[Pair] = []
    several: list[str] = []
    for number, line in enumerate(_read_lines(path), start=1):
        where = f"{path.name}:{number}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as err:
            raise InvalidRequestError(
                f"{where}: not a JSON object ({err.msg}); each line is one object, e.g. {_EXAMPLE}"
            ) from None
        if not isinstance(item, dict):
            raise InvalidRequestError(f"{where}: not a JSON object; e.g. {_EXAMPLE}")
        missing = [k for k in _FIELDS if not isinstance(item.get(k), str) or not item[k]]
        if missing:
            raise InvalidRequestError(
                f"{where}: {', '.join(repr(k) for k in missing)} must be non-empty text; each "
                f"line needs clean, corrupt, target and contrast, e.g. {_EXAMPLE}"
            )
        cluster = item.get("cluster", item["target"])
        if not isinstance(cluster, (str, int)) or isinstance(cluster, bool):
            raise InvalidRequestError(f"{where}: 'cluster' must be text (e.g. the country)")
        if vocab is None:
            clean = tokenizer(item["clean"])["input_ids"]
            corrupt = tokenizer(item["corrupt"])["input_ids"]
        else:
            assert model is not None
            clean = to_input_ids(item["clean"], tokenizer, model.config, vocab).tolist()
            corrupt = to_input_ids(item["corrupt"], tokenizer, model.config, vocab).tolist()
        if len(clean) != len(corrupt):
            raise InvalidRequestError(
                f"{where}: the clean prompt has {len(clean)} tokens and the corrupt one "
                f"{len(corrupt)}; they are patched position by position, so they must be as "
                f"long: use the same template with a subject of as many tokens"
            )
        ids = {}
        for key in ("target", "contrast"):
            tokens = tokenizer(item[key], add_special_tokens=False)["input_ids"]
            if not tokens:
                raise InvalidRequestError(f"{where}: the {key} {item[key]!r} has no tokens")
            if len(tokens) > 1:
                several.append(f"{where} {key} {item[key]!r}")
            ids[key] = int(tokens[0])
        if ids["target"] == ids["contrast"]:
            first = _text(tokenizer, ids["target"])
            raise InvalidRequestError(
                f"{where}: the target {item['target']!r} and the contrast "
                f"{item['contrast']!r} start with the same token {first!r} (id "
                f"{ids['target']}), and the first token is what the study compares: their "
                f"logit difference is 0; pick a corrupt prompt whose answer starts with "
                f"another token"
            )
        pairs.append(
            Pair(
                clean=item["clean"],
                corrupt=item["corrupt"],
                target=_text(tokenizer, ids["target"]),
                contrast=_text(tokenizer, ids["contrast"]),
                target_id=ids["target"],
                contrast_id=ids["contrast"],
                cluster=str(cluster),
                template="",
                source=where,
                target_answer=item["target"],
                contrast_answer=item["contrast"],
            )
        )
    if not pairs:
        raise InvalidRequestError(f"{path} holds no pairs; one object per line, e.g. {_EXAMPLE}")
    if several:
        warnings.warn(
            f"{len(several)} answers of {path.name} are several tokens long (first: "
            f"{several[0]}); the first token of each is taken, as the study does",
            stacklevel=2,
        )
    return pairs
