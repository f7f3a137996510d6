"""The ``iglens`` command on a tiny random model saved to a local folder."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from iglens_viz import IGLens
from iglens_viz.cli import main
from tests.support.tiny_models import random_ids, tiny_model, tiny_tokenizer

PROMPT = "w3 w5 w7 w9 w11"


@pytest.fixture(scope="module")
def lens():
    return IGLens(tiny_model("llama"), tiny_tokenizer())


def table_positions(out: str) -> list[int]:
    """Positions of the table's rows (continuation lines start with spaces, then 'L')."""
    return [int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s{2,}\S", out, re.MULTILINE)]


def run_json(tiny_model_dir, tmp_path, *args):
    out = tmp_path / "out.json"
    assert main([PROMPT, "--model", tiny_model_dir, "--no-chat", "--json", str(out), *args]) == 0
    return json.loads(out.read_text())


def test_json_holds_the_api_result(tiny_model_dir, tmp_path, lens):
    data = run_json(
        tiny_model_dir,
        tmp_path,
        "--target",
        "next",
        "--contrast",
        "w4",
        "--boundaries",
        "0,1,4",
        "--steps",
        "3",
        "--estimator",
        "riemann",
    )
    expected = lens.attribute(
        PROMPT, target="next", contrast="w4", boundaries=[0, 1, 4], steps=3, estimator="riemann"
    )
    assert data["boundaries"] == [0, 1, 4] and data["steps"] == 3
    got = np.array(data["contributions"], dtype=float)
    # JSON keeps float64 exactly (repr round-trips); the slack covers only float64 rounding.
    np.testing.assert_allclose(got[:-1], expected.contributions[:-1], atol=1e-9)
    assert data["contributions"][-1] == [None, None]  # no next token at the end: null, not NaN
    assert data["contrast_ids"] == [4] * 5
    assert np.array(data["path_probs"], dtype=float).shape == (5, 2, 4)


def test_generate_and_every_k_boundaries(tiny_model_dir, tmp_path, lens):
    data = run_json(tiny_model_dir, tmp_path, "--generate", "3", "--boundaries", "every:3")
    expected = lens.attribute(PROMPT, max_new_tokens=3, boundaries=[0, 3, 4])
    assert data["input_ids"] == expected.input_ids.tolist()
    assert data["prompt_length"] == 5 and data["answer_positions"] == [4, 5, 6]
    np.testing.assert_allclose(data["lens_probs"], expected.lens_probs, atol=1e-9)  # as above


def test_sublayer_boundaries_and_components(tiny_model_dir, tmp_path, capsys, lens):
    data = run_json(
        tiny_model_dir,
        tmp_path,
        "--boundaries",
        "sublayer",
        "--components",
        "--position",
        "2",
        "--position",
        "-1",
    )
    expected = lens.attribute(PROMPT, boundaries="sublayer")
    assert data["boundaries"] == expected.boundaries and data["boundaries"][1] == 0.5
    np.testing.assert_allclose(data["contributions"], expected.contributions, atol=1e-9)
    split = data["components"]
    assert split["names"] == lens.component_names and split["positions"] == [2, 4]
    shares = lens.components(expected, [2, 4])  # the same rows: the same float32 arithmetic
    np.testing.assert_allclose(split["shares"], shares, atol=1e-9)
    out = capsys.readouterr().out
    assert "largest" in out and "components" in out
    # The onset column names the half block; the component column the largest share.
    onset = expected.segment_labels[expected.onset_segment[2]]
    assert re.search(rf"^\s+2\s.*\sL{re.escape(onset)}\s", out, re.MULTILINE)
    block, comp = np.unravel_index(np.argmax(np.abs(shares[0])), shares[0].shape)
    short = lens.component_names[comp].replace("head:", "h")
    assert f"L{block + 1}.{short} {shares[0, block, comp]:+.3f}" in out


def test_table_shows_the_answer_by_default(tiny_model_dir, capsys, lens):
    assert main([PROMPT, "--model", tiny_model_dir, "--no-chat", "--generate", "2"]) == 0
    out = capsys.readouterr().out
    expected = lens.attribute(PROMPT, max_new_tokens=2)
    assert "Answer:" in out
    assert table_positions(out) == [4, 5]
    row = next(line for line in out.splitlines() if re.match(r"^\s+4\s", line))
    assert f"{expected.final_probs[4]:.3f}" in row and f"L{expected.onset[4]}" in row


def test_positions_top_k_and_all_positions(tiny_model_dir, capsys, lens):
    assert (
        main(
            [
                PROMPT,
                "--model",
                tiny_model_dir,
                "--no-chat",
                "--position",
                "1",
                "--position",
                "-1",
                "--top-k",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert table_positions(out) == [1, 4]
    assert not re.search(r"^\s+L\d", out, re.MULTILINE)  # --top-k 1: no continuation lines
    assert main([PROMPT, "--model", tiny_model_dir, "--no-chat", "--all-positions"]) == 0
    assert table_positions(capsys.readouterr().out) == [0, 1, 2, 3, 4]


def test_png_is_written(tiny_model_dir, tmp_path):
    out = tmp_path / "map.png"
    assert main([PROMPT, "--model", tiny_model_dir, "--no-chat", "--png", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target", "w1 w2"], "not a single token"),
        (["--boundaries", "0,3,2,4"], "strictly increasing"),
        (["--boundaries", "every:x"], "every:K"),
        (["--boundaries", "0,1.5,4"], "not 'all', 'every:5'"),
        (["--steps", "0"], "steps must be an integer from 1 to 1000"),
        (["--steps", "10000000"], "steps must be an integer from 1 to 1000"),
        (["--position", "99"], "outside the 5 positions"),
        (["--model", "/nonexistent/folder"], "nonexistent"),
        # Regressions: -1 was the internal "no target" marker (a table of dashes, exit 0); an
        # empty target raised IndexError; negative counts were accepted.
        # Now "-1" is text (only bare digits are an id): a token string the tokenizer splits.
        (
            ["--target", "-1"],
            "not a single token: it tokenises to 2 tokens ['w0', 'w0'] "
            "(ids [0, 0]) (a token id is typed as bare digits, e.g. 4)",
        ),
        (["--contrast", "-1"], "the contrast '-1' is not a single token"),
        (["--target", ""], "argument --target: must not be empty"),
        (["--contrast", ""], "argument --contrast: must not be empty"),
        (["--top-k", "-1"], "argument --top-k: must be >= 0"),
        (["--generate", "-2"], "argument --generate: must be >= 0"),
        (["--generate", "100"], "context is 64"),
    ],
)
def test_user_errors_exit_2_without_traceback(tiny_model_dir, capsys, args, message):
    argv = [PROMPT, "--no-chat", *args]
    if "--model" not in args:
        argv += ["--model", tiny_model_dir]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("iglens: error:") and message in err
    assert "Traceback" not in err


def test_answer_text_is_not_read_as_markup(tiny_model_dir, capsys, monkeypatch):
    """Generated text such as "[bold]" or "[/]" is printed literally, never as rich markup."""
    import transformers

    monkeypatch.setattr(
        transformers.PreTrainedTokenizerFast, "decode", lambda self, ids, **kw: "[red]x[/] [/bold]"
    )
    assert main([PROMPT, "--model", tiny_model_dir, "--no-chat", "--generate", "1"]) == 0
    assert "Answer: [red]x[/] [/bold]" in capsys.readouterr().out


def test_blank_prompt_is_refused(tiny_model_dir, capsys):
    assert main([" \t ", "--model", tiny_model_dir, "--no-chat"]) == 2
    assert "the prompt is empty (only whitespace)" in capsys.readouterr().err


def test_invalid_utf8_argument_is_one_line(tiny_model_dir, capsys):
    # Python keeps undecodable argv bytes as lone surrogates (surrogateescape).
    assert main(["w3 \udcff", "--model", tiny_model_dir, "--no-chat"]) == 2
    err = capsys.readouterr().err
    assert "not valid UTF-8" in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--json", "--png", "--html"])
def test_output_to_a_folder_is_refused_before_anything_is_written(
    tiny_model_dir, tmp_path, capsys, flag
):
    first = tmp_path / "first.json"
    argv = [PROMPT, "--model", tiny_model_dir, "--no-chat", flag, str(tmp_path)]
    if flag != "--json":
        argv += ["--json", str(first)]
    assert main(argv) == 2
    assert "is a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no first.json, no <folder>.png


def test_outputs_are_written_atomically(tiny_model_dir, tmp_path, monkeypatch):
    """A failure while writing leaves the old file whole and no temporary file behind."""
    import iglens_viz.files as files

    out = tmp_path / "out.json"
    out.write_text("old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    assert main([PROMPT, "--model", tiny_model_dir, "--no-chat", "--json", str(out)]) == 2
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_model_path_with_markup_characters(tiny_model_dir, tmp_path, capsys):
    """A path such as ".../x[/]y" is shown literally (it was read as rich markup)."""
    import shutil

    odd = tmp_path / "x[" / "]y[bold]"
    shutil.copytree(tiny_model_dir, odd)
    assert main([PROMPT, "--model", str(odd), "--no-chat"]) == 0
    # The title names the folder by its last part ("]y[bold]"), literally.
    assert "IG-Lens — ]y[bold] (4 blocks" in capsys.readouterr().out.replace("\n", "")


def test_prompt_validate_after_double_dash(tiny_model_dir, capsys):
    """`iglens -- validate` attributes the word; `iglens validate` is the subcommand."""
    assert main(["--model", tiny_model_dir, "--no-chat", "--", "validate"]) == 0
    assert "IG-Lens" in capsys.readouterr().out


def test_validate_passes_dtype_and_device_and_checks_limit(tiny_model_dir, capsys, monkeypatch):
    import iglens_viz.loading as loading

    seen = {}
    real = loading.load_model

    def spy(name, **kwargs):
        seen.update(kwargs)
        return real(name, **kwargs)

    monkeypatch.setattr(loading, "load_model", spy)
    assert (
        main(
            [
                "validate",
                "--model",
                tiny_model_dir,
                "--limit",
                "1",
                "--dtype",
                "float64",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert seen == {"dtype": "float64", "device": "cpu"}
    assert "hit_rate" in capsys.readouterr().out
    assert main(["validate", "--limit", "-1"]) == 2
    assert "argument --limit: must be >= 1" in capsys.readouterr().err


def test_loading_problems_are_one_line(tmp_path, capsys, monkeypatch):
    """A folder with only config.json, a meta device and a cache path that is a file each
    print one `iglens: error:` line (they raised tracebacks)."""
    (tmp_path / "only-config").mkdir()
    (tmp_path / "only-config" / "config.json").write_text('{"model_type": "llama"}')
    cache_file = tmp_path / "cache-is-a-file"
    cache_file.write_text("x")
    monkeypatch.setenv("IGLENS_CACHE", str(cache_file))
    for argv in (
        [PROMPT, "--model", str(tmp_path / "only-config")],
        [PROMPT, "--device", "meta"],
        [PROMPT],
    ):  # the default model must be converted into the cache
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("iglens: error:") and "Traceback" not in err, (argv, err)


def test_answer_and_vs_print_the_whole_answer_ledger(tiny_model_dir, tmp_path, capsys, lens):
    data = run_json(tiny_model_dir, tmp_path, "--answer", "w7 w9", "--vs", "w11")
    out = capsys.readouterr().out
    assert "Whole answer across the blocks" in out and "answer − versus" in out
    expected = lens.attribute(PROMPT, answer="w7 w9", versus="w11")
    assert data["answer"]["ids"] == [7, 9] and data["versus"]["ids"] == [11]
    # JSON keeps float64 exactly (repr round-trips)
    assert data["answer"]["logprob"] == expected.answer.logprob
    np.testing.assert_array_equal(
        data["comparison"]["logprob_contributions"], expected.comparison.logprob_contributions
    )
    assert data["prompt_length"] == 5  # --answer generates nothing by default


TEMPLATE = "{% for m in messages %}w1 {{ m['content'] }} w2{% endfor %} w90"


def words(out: str) -> str:
    """The output with rich's line wrapping undone (every run of whitespace one space)."""
    return " ".join(out.split())


@pytest.fixture(scope="module")
def chat_model_dir(tmp_path_factory):
    """The tiny Llama with a chat template on its tokenizer, as a local model folder."""
    folder = tmp_path_factory.mktemp("tiny-chat")
    tiny_model("llama").save_pretrained(folder)
    tokenizer = tiny_tokenizer()
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_the_output_says_which_mode_ran_and_how_to_get_the_other(
    chat_model_dir, tiny_model_dir, tmp_path, capsys
):
    # A completion prompt run as a chat question is attributed as one: the output says so.
    out_json = tmp_path / "chat.json"
    argv = [PROMPT, "--model", chat_model_dir, "--generate", "2", "--json", str(out_json)]
    assert main(argv) == 0
    first = words(capsys.readouterr().out).split(" Answer: ")[0]
    assert first.startswith("Mode: chat — the prompt is a user message in the model's chat")
    assert "greedy answer after it (2 tokens" in first and "add --no-chat" in first
    chat_lens = IGLens(tiny_model("llama"), tiny_tokenizer())
    chat_lens.tokenizer.chat_template = TEMPLATE
    wrapped = chat_lens.attribute(PROMPT, chat=True, max_new_tokens=2)
    assert json.loads(out_json.read_text())["input_ids"] == wrapped.input_ids.tolist()
    assert wrapped.tokens[0] == "w1"  # the template's own token: it ran wrapped

    assert main([PROMPT, "--model", chat_model_dir, "--no-chat", "--answer", "w7 w9"]) == 0
    first = words(capsys.readouterr().out).split(" Answer: ")[0]
    assert first.startswith("Mode: plain completion — the prompt is raw text, then the --answer")
    assert "drop --no-chat" in first

    # without a chat template there is no chat mode to offer
    assert main([PROMPT, "--model", tiny_model_dir, "--generate", "0"]) == 0
    first = words(capsys.readouterr().out).split(" Answer: ")[0]
    assert first.startswith("Mode: plain completion") and "no chat template" in first
    assert "nothing generated after it" in first


def test_the_onset_column_names_its_rule_beside_a_larger_fall(tiny_model_dir, capsys, lens):
    result = lens.attribute(PROMPT)
    c = result.contributions[:-1]
    # a position whose largest |contribution| is a fall, larger than the onset's rise
    t = next(t for t in range(len(c)) if c[t, np.argmax(np.abs(c[t]))] < 0)
    assert main([PROMPT, "--model", tiny_model_dir, "--no-chat", "--position", str(t)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if re.match(rf"^\s+{t}\s", line))
    fall = int(np.argmax(np.abs(c[t])))
    assert f"L{result.onset[t]} " in row and f"L{fall + 1} {c[t, fall]:+.3f}" in row
    assert result.onset[t] == int(np.argmax(c[t])) + 1 != fall + 1
    assert "onset*" in out
    caption = words(out)
    assert "* onset: the block with the largest signed contribution" in caption
    assert "so a larger fall can be listed beside the onset" in caption


def test_a_whole_answer_whose_probability_underflows_says_so(tmp_path, capsys):
    # 400 tokens: the joint probability is below float64's smallest number at every depth
    folder = tmp_path / "tiny-long"
    tiny_model("llama", max_position_embeddings=512).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    answer = " ".join(f"w{i}" for i in random_ids(400, seed=3).tolist())
    out_json = tmp_path / "long.json"
    argv = [
        PROMPT,
        "--model",
        str(folder),
        "--no-chat",
        "--answer",
        answer,
        "--json",
        str(out_json),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    data = json.loads(out_json.read_text())["answer"]
    # independently: the JSON's own per-token log-probabilities sum below log(smallest float64)
    log_f = np.array(data["token_logprobs"]).sum(0)
    assert log_f.max() < np.log(np.finfo(np.float64).tiny)
    assert data["prob_underflow"] is True and data["onset"] == -1
    row = next(line for line in out.splitlines() if "0 at float" in line)
    assert f"L{data['logprob_onset']}, —†" in row
    caption = words(out)
    assert "† the probability ledger is 0 at float precision" in caption
    assert "Read the log-probability ledger" in caption
