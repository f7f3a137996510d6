"""The default model's sampled corpora, shipped with the package (``default_corpus.json``).

Sampling the default corpus (:func:`~.corpus.default_corpus`) is the slow part of a first
fitted lens on a CPU: minutes of generation before the first forward pass of the fit. The
file beside this module holds what the default model (SmolLM2-135M-Instruct, float32, as
:func:`iglens_viz.load_model` loads it) samples, for the ``"fit"`` and ``"eval"`` splits:
the token ids of every text, so a first fit on the default model is forward passes only, and
the same corpus on every machine (sampling can flip a near-tie where another BLAS rounds
differently).

It is used for a model whose fingerprint (:func:`~iglens_viz.core.coordinates.
model_fingerprint`) is the one recorded, when the corpus's version and length are this
build's (:data:`~.corpus.CORPUS_VERSION`, :data:`~.corpus.NEW_TOKENS`), every text starts
with its opening as the model's tokenizer writes it, and the ids match the recorded
checksum (:func:`~.corpus.corpus_digest`, the one a lens's settings record); otherwise the
corpus is sampled as before. Regenerate it with ``python -m iglens_viz.lenses.shipped``
(it samples both splits with the default model and rewrites the file; ``--check`` compares
instead); tests/lenses/test_shipped_corpus.py checks it against a fresh sampling.

The file: JSON ``{"about", "corpus_version", "new_tokens", "model", "fingerprint",
"encoding", "splits": {split: {"sha256", "lengths", "ids"}}}`` — ``ids`` all the texts'
ids one after the other as little-endian uint16, base64-encoded, ``lengths`` each text's
length.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from ..files import write_atomic
from .corpus import (
    CORPUS_VERSION,
    EVAL_OPENINGS,
    FIT_OPENINGS,
    NEW_TOKENS,
    Split,
    corpus_digest,
    default_corpus,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["SHIPPED_PATH", "corpus_record", "main", "shipped_corpus"]

SHIPPED_PATH = Path(__file__).with_name("default_corpus.json")
"""The shipped corpora (see the module's text)."""

_ENCODING = "uint16-le-base64"
_SPLITS: tuple[Split, ...] = ("fit", "eval")


@functools.lru_cache(maxsize=4)
def read_shipped(path: Path) -> dict[str, Any] | None:
    """The shipped corpora's JSON record at ``path`` (read once per path), or None when it
    cannot be read or is not an object."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def decode_split(entry: Any) -> list[torch.Tensor] | None:
    """The texts of one split's entry, or None when it is malformed or does not match its
    checksum."""
    try:
        flat = np.frombuffer(base64.b64decode(entry["ids"], validate=True), dtype="<u2")
        lengths = [int(n) for n in entry["lengths"]]
        if sum(lengths) != flat.size or min(lengths, default=0) < 1:
            return None
        bounds = np.cumsum([0, *lengths])
        texts = [
            torch.from_numpy(flat[a:b].astype(np.int64)) for a, b in zip(bounds[:-1], bounds[1:])
        ]
    except (KeyError, TypeError, ValueError):
        return None
    return texts if corpus_digest(texts) == entry.get("sha256") else None


def _starts_with_openings(
    texts: list[torch.Tensor], tokenizer: PreTrainedTokenizerBase | None, split: Split
) -> bool:
    if tokenizer is None:
        return False
    openings = FIT_OPENINGS if split == "fit" else EVAL_OPENINGS
    if len(openings) != len(texts):
        return False
    for opening, text in zip(openings, texts):
        ids = list(tokenizer(opening)["input_ids"])
        if text[: len(ids)].tolist() != ids:
            return False
    return True


def shipped_corpus(
    fingerprint: str,
    split: Split,
    tokenizer: PreTrainedTokenizerBase | None,
    path: Path | None = None,
) -> list[torch.Tensor] | None:
    """The shipped corpus ``split`` for the model ``fingerprint`` (``[T]`` int64 token ids
    per text, what :func:`~.corpus.default_corpus` samples for it), or None when none is
    shipped for that model or it does not pass the checks of the module's text."""
    record = read_shipped(path or SHIPPED_PATH)
    if (
        record is None
        or record.get("fingerprint") != fingerprint
        or record.get("corpus_version") != CORPUS_VERSION
        or record.get("new_tokens") != NEW_TOKENS
        or record.get("encoding") != _ENCODING
    ):
        return None
    splits = record.get("splits")
    texts = decode_split(splits.get(split)) if isinstance(splits, dict) else None
    if texts is None or not _starts_with_openings(texts, tokenizer, split):
        return None
    return texts


def _encode(texts: list[torch.Tensor]) -> dict[str, Any]:
    flat = torch.cat(texts).numpy()
    if flat.size and (flat.min() < 0 or flat.max() > np.iinfo(np.uint16).max):
        raise ValueError("token ids beyond 65535 do not fit the shipped corpus's uint16")
    return {
        "sha256": corpus_digest(texts),
        "lengths": [int(t.numel()) for t in texts],
        "ids": base64.b64encode(flat.astype("<u2").tobytes()).decode("ascii"),
    }


def corpus_record(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    fingerprint: str,
    name: str,
    splits: dict[str, list[torch.Tensor]] | None = None,
) -> dict[str, Any]:
    """The shipped file's content for ``model``: both splits sampled by
    :func:`~.corpus.default_corpus` (or taken from ``splits``)."""
    if splits is None:
        splits = {split: default_corpus(model, tokenizer, split) for split in _SPLITS}
    return {
        "about": "The default corpus iglens_viz.lenses.corpus.default_corpus samples with this "
        "model; written by `python -m iglens_viz.lenses.shipped` (see that module).",
        "corpus_version": CORPUS_VERSION,
        "new_tokens": NEW_TOKENS,
        "model": name,
        "fingerprint": fingerprint,
        "encoding": _ENCODING,
        "splits": {split: _encode(texts) for split, texts in splits.items()},
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m iglens_viz.lenses.shipped [--out FILE] [--check]``: sample the default
    model's corpora and write them (``--check``: compare them with the shipped file)."""
    p = argparse.ArgumentParser(prog="python -m iglens_viz.lenses.shipped", description=__doc__)
    p.add_argument("--out", type=Path, default=SHIPPED_PATH)
    p.add_argument("--check", action="store_true", help="compare with --out; write nothing")
    args = p.parse_args(argv)
    from ..core.coordinates import model_fingerprint
    from ..loading import load_model

    model, tokenizer = load_model()
    fingerprint = model_fingerprint(model)
    record = corpus_record(model, tokenizer, fingerprint, "SmolLM2-135M-Instruct (float32)")
    if args.check:
        shipped = read_shipped(args.out) or {}
        same = {s: shipped.get("splits", {}).get(s) == e for s, e in record["splits"].items()}
        print(json.dumps({"fingerprint": shipped.get("fingerprint") == fingerprint, **same}))
        return 0 if all(same.values()) and shipped.get("fingerprint") == fingerprint else 1
    write_atomic(args.out, json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover - the command line
    raise SystemExit(main())
