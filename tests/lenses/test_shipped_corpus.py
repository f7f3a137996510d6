"""The default model's sampled corpus ships with the package (issue 32, item 9).

A first fitted lens on the default model spent ~10 minutes (at load 11-15) sampling its fit
corpus by generation. iglens_viz/lenses/default_corpus.json holds the token ids
``default_corpus`` samples for the default model, used for exactly that model (its
fingerprint), so the first fit is forward passes only; any other model samples its own.
The ``real_model`` tests check the shipped ids against a fresh sampling on this machine.
"""

from __future__ import annotations

import base64
import json

import pytest
import torch

from iglens_viz.core.coordinates import model_fingerprint
from iglens_viz.lenses import corpus as corpus_module
from iglens_viz.lenses import fit as fit_module
from iglens_viz.lenses import shipped
from iglens_viz.lenses.cache import lens_cache_dir
from iglens_viz.lenses.corpus import EVAL_OPENINGS, FIT_OPENINGS, corpus_digest, default_corpus
from iglens_viz.lenses.fit import model_corpus
from tests.support.tiny_models import tiny_model, tiny_tokenizer


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))


def _no_sampling(monkeypatch) -> list:
    """Make sampling fail loudly; the list of calls (empty while nothing samples)."""
    calls: list = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("the corpus was sampled")

    monkeypatch.setattr(fit_module, "default_corpus", refuse)
    return calls


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("llama"), tiny_tokenizer()


@pytest.fixture
def shipped_for_tiny(tiny, tmp_path, monkeypatch):
    """A shipped file written by the generator's own function for the tiny model, in place
    of the package's; the sampled splits it holds."""
    model, tokenizer = tiny
    splits = {s: default_corpus(model, tokenizer, s) for s in ("fit", "eval")}
    record = shipped.corpus_record(model, tokenizer, model_fingerprint(model), "tiny", splits)
    path = tmp_path / "default_corpus.json"
    path.write_text(json.dumps(record))
    monkeypatch.setattr(shipped, "SHIPPED_PATH", path)
    return splits, path


def test_the_shipped_corpus_is_used_for_its_model_only(tiny, shipped_for_tiny, monkeypatch):
    model, tokenizer = tiny
    splits, _ = shipped_for_tiny
    calls = _no_sampling(monkeypatch)
    for split in ("fit", "eval"):
        got = model_corpus(model, tokenizer, split)
        assert len(got) == len(splits[split])
        assert all(torch.equal(a, b) for a, b in zip(got, splits[split]))
        assert all(t.dtype == torch.int64 for t in got)
    assert calls == [] and not lens_cache_dir().exists()  # nothing sampled, nothing written
    other = tiny_model("llama", seed=1)  # another checkpoint of the same shape
    assert model_fingerprint(other) != model_fingerprint(model)
    with pytest.raises(AssertionError, match="sampled"):
        model_corpus(other, tokenizer, "fit")
    assert len(calls) == 1


@pytest.mark.parametrize("damage", ["ids", "version", "tokenizer"])
def test_a_shipped_corpus_that_does_not_fit_is_not_used(tiny, shipped_for_tiny, damage):
    model, tokenizer = tiny
    _, path = shipped_for_tiny
    record = json.loads(path.read_text())
    if damage == "ids":  # one id changed: the checksum no longer matches
        ids = bytearray(base64.b64decode(record["splits"]["fit"]["ids"]))
        ids[10] ^= 1
        record["splits"]["fit"]["ids"] = base64.b64encode(bytes(ids)).decode()
    elif damage == "version":
        record["corpus_version"] = "openings-v0"
    path.write_text(json.dumps(record))
    shipped.read_shipped.cache_clear()
    fingerprint = model_fingerprint(model)
    if damage == "tokenizer":  # openings tokenized otherwise: not this model's corpus

        def other_tokenizer(text):
            return {"input_ids": [1, *tokenizer(text)["input_ids"]]}

        assert shipped.shipped_corpus(fingerprint, "fit", other_tokenizer) is None
        assert shipped.shipped_corpus(fingerprint, "fit", tokenizer) is not None
    else:
        assert shipped.shipped_corpus(fingerprint, "fit", tokenizer) is None


def test_the_package_ships_both_splits_with_their_checksums():
    record = json.loads(shipped.SHIPPED_PATH.read_text(encoding="utf-8"))
    assert record["corpus_version"] == corpus_module.CORPUS_VERSION
    assert record["new_tokens"] == corpus_module.NEW_TOKENS
    assert set(record["splits"]) == {"fit", "eval"}
    for split, openings in (("fit", FIT_OPENINGS), ("eval", EVAL_OPENINGS)):
        texts = shipped.decode_split(record["splits"][split])
        assert texts is not None and len(texts) == len(openings)
        assert corpus_digest(texts) == record["splits"][split]["sha256"]
        assert all(0 < t.numel() <= 64 + 16 for t in texts)
    assert shipped.SHIPPED_PATH.stat().st_size < 32_000  # compact: uint16 ids


@pytest.fixture(scope="module")
def default_model():
    pytest.importorskip("gguf")
    from iglens_viz import load_model

    return load_model()


@pytest.mark.real_model
def test_the_default_model_reads_the_shipped_corpus_without_sampling(default_model, monkeypatch):
    model, tokenizer = default_model
    fingerprint = model_fingerprint(model)
    record = json.loads(shipped.SHIPPED_PATH.read_text(encoding="utf-8"))
    assert record["fingerprint"] == fingerprint
    calls = _no_sampling(monkeypatch)
    texts = model_corpus(model, tokenizer, "fit")
    assert calls == [] and len(texts) == len(FIT_OPENINGS)
    assert corpus_digest(texts) == record["splits"]["fit"]["sha256"]


@pytest.mark.real_model
@pytest.mark.parametrize("split", ["fit", "eval"])
def test_the_shipped_ids_are_what_the_default_model_samples(default_model, split):
    # Sampling fewer tokens draws the same random numbers in the same order, so each text of
    # a short sampling is the shipped text's beginning (a few forward passes of the batch,
    # not the minutes of the whole corpus).
    model, tokenizer = default_model
    new_tokens = 6
    fresh = default_corpus(model, tokenizer, split, new_tokens=new_tokens)
    texts = shipped.shipped_corpus(model_fingerprint(model), split, tokenizer)
    assert texts is not None
    openings = FIT_OPENINGS if split == "fit" else EVAL_OPENINGS
    for opening, got, full in zip(openings, fresh, texts):
        start = len(tokenizer(opening)["input_ids"])
        assert got.numel() == min(full.numel(), start + new_tokens)
        assert torch.equal(got, full[: got.numel()]), opening
