"""Targets typed as text (issue 18, defect 3): only bare ASCII digits are a token id.

``--target " 4"`` and the widget's target box used to strip the spaces and attribute token
id 4, and so did a non-ASCII digit such as "٣" (int() reads it as 3); ids beyond int64 died
with an OverflowError traceback; a contrast equal to the target gave an all-zero map with
its onset at L1 everywhere.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import transformers as tf
from tokenizers import Tokenizer, models, pre_tokenizers

import iglens_viz
from iglens_viz import IGLens, IGLensError
from iglens_viz.cli import main
from iglens_viz.widget.widget import show
from tests.support.tiny_models import VOCAB, tiny_model
from tests.support.widget_page import Page, error_of

PROMPT = "w3 w5 w7 w9 w11"
FOUR, ARABIC_THREE, NEXT = 50, 60, 70  # the ids of the words "4", "٣" and "next"


def digit_tokenizer():
    """Words w0 … w96, except that ids 50, 60, 70 are the words "4", "٣" and "next": typed
    text that looks like an id or a keyword is a real token here."""
    vocab = {f"w{i}": i for i in range(VOCAB)}
    for word, i in (("4", FOUR), ("\u0663", ARABIC_THREE), ("next", NEXT)):
        del vocab[f"w{i}"]
        vocab[word] = i
    backend = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return tf.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="w0")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits") / "tiny-digits"
    tiny_model("llama").save_pretrained(folder)
    digit_tokenizer().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def lens():
    return IGLens(tiny_model("llama"), digit_tokenizer())


def cli_targets(model_dir, tmp_path, *args) -> tuple[list, list | None]:
    out = tmp_path / "out.json"
    assert main([PROMPT, "--model", model_dir, "--no-chat", "--json", str(out), *args]) == 0
    data = json.loads(out.read_text())
    return data["target_ids"], data["contrast_ids"]


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("4", 4),  # bare ASCII digits: the id
        (" 4", FOUR),  # with a space: the token string " 4" (the word "4")
        ("4 ", FOUR),
        (" 4 ", FOUR),
        ("\u0663", ARABIC_THREE),  # an Arabic-Indic digit is text, not id 3
        ("next", None),  # the keyword: the text's next token
        (" next", NEXT),  # with a space: the token string
    ],
)
def test_cli_target_text(model_dir, tmp_path, typed, expected):
    targets, _ = cli_targets(model_dir, tmp_path, "--target", typed)
    if expected is None:
        assert targets == [5, 7, 9, 11, -1]
    else:
        assert targets == [expected] * 5


def test_cli_contrast_text(model_dir, tmp_path):
    targets, contrast = cli_targets(model_dir, tmp_path, "--target", "3", "--contrast", " 4")
    assert targets == [3] * 5 and contrast == [FOUR] * 5


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--target", "18446744073709551616"],
            "target id out of range: 18446744073709551616; this model's token ids are 0..96",
        ),
        (
            ["--target", "9" * 40],
            f"target id out of range: {'9' * 40}; this model's token ids are 0..96",
        ),
        (["--contrast", "18446744073709551616"], "contrast id out of range"),
        (["--target", "97"], "target id out of range: 97; this model's token ids are 0..96"),
        (
            ["--target", "w3", "--contrast", "w3"],
            "the contrast is the target itself (token id 3) at every position",
        ),
        (["--target", "3", "--contrast", "w3"], "the contrast is the target itself (token id 3)"),
        (
            ["--target", "next", "--contrast", "next"],
            "the contrast is the target itself (the same token ids)",
        ),
        (["--contrast", "predicted"], "the contrast is the target itself"),
        (
            ["--target", " 12"],
            "the target ' 12' is not in the vocabulary (it tokenises to the "
            "unknown token 'w0') (a token id is typed as bare digits, e.g. 4)",
        ),
    ],
)
def test_cli_bad_targets_exit_2_without_traceback(model_dir, capsys, args, message):
    assert main([PROMPT, "--model", model_dir, "--no-chat", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iglens: error:") and message in err, err
    assert "Traceback" not in err and "OverflowError" not in err


def test_api_ids_beyond_int64(lens):
    for target in (2**64, 2**63, [2**63] * 5, np.array([2**63] * 5, dtype=np.uint64)):
        with pytest.raises(
            IGLensError,
            match="target id out of range: 9223372036854775808|"
            "target id out of range: 18446744073709551616",
        ):
            lens.attribute(PROMPT, target=target)
    with pytest.raises(
        IGLensError,
        match="target ids out of range: 2361183241434822606848 is beyond any vocabulary",
    ):
        lens.attribute(PROMPT, target=[2**71] * 5)
    with pytest.raises(IGLensError, match="contrast id out of range: 18446744073709551616"):
        iglens_viz.attribute(lens.model, lens.tokenizer, PROMPT, contrast=2**64)


def test_api_contrast_equal_to_the_target_is_refused(lens):
    for target, contrast in (
        (" w3", "w3"),
        (3, "w3"),
        ("next", "next"),
        ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
    ):
        with pytest.raises(IGLensError, match="the contrast is the target itself"):
            lens.attribute(PROMPT, target=target, contrast=contrast)
    # Equal at some positions only: allowed; those rows are 0, the others are not.
    result = lens.attribute(PROMPT, target="next", contrast="w7")
    assert result.contrast_ids.tolist() == [7] * 5 and result.target_ids[1] == 7
    np.testing.assert_array_equal(result.contributions[1], 0.0)
    assert np.abs(result.contributions[0]).max() > 0


def test_widget_target_box(lens):
    w = show(lens, None, PROMPT, target="next")
    page = Page(w)
    assert page.recompute(target=" 4", contrast="", boundaries="all", steps=1)["ok"]
    assert w.attribution.target_ids.tolist() == [FOUR] * 5
    assert w.result["target_tokens"] == ["4"] * 5
    assert page.recompute(target="\u0663")["ok"]
    assert w.attribution.target_ids.tolist() == [ARABIC_THREE] * 5
    assert page.recompute(target="4")["ok"]
    assert w.attribution.target_ids.tolist() == [4] * 5
    shown = w.attribution
    assert error_of(page.recompute(target="18446744073709551616")) == (
        "target id out of range: 18446744073709551616; this model's token ids are 0..96"
    )
    assert w.attribution is shown and w.running == {}
    answer = page.recompute(target="w3", contrast="3")
    assert error_of(answer).startswith("the contrast is the target itself (token id 3)")
    assert w.attribution is shown
