"""Untrusted text on its way out, and the model's name (issue 18, defects 4 and 8).

Defect 4: the CLI printed the model's generated answer raw, so ESC sequences (set the
terminal title, clear the screen, OSC 8 links) and U+202E reached the terminal; the model's
name reached the table title, the page's title and heading, and the exported figures'
titles unescaped. Defect 8: a model loaded from a folder showed as its full path.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
import transformers as tf
from tokenizers import Tokenizer, models, pre_tokenizers

import iglens_viz
from iglens_viz import IGLens, IGLensError
from iglens_viz.cli import main
from iglens_viz.export.html import page_state
from iglens_viz.views.token_format import visible_text
from iglens_viz.widget.widget import show
from tests.support.tiny_models import VOCAB, tiny_model, tiny_tokenizer

# What a hostile token or name carries: set the window title (OSC 0, BEL-terminated), an
# OSC 8 link, clear the screen (CSI 2J), the 8-bit CSI (U+009B), a right-to-left override.
PAYLOADS = [
    "\x1b]0;pwned\x07",
    "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\",
    "\x1b[2J",
    "\x9b31m",
    "\u202eexe.txt",
    "\u2066iso\u2069",
    "a\rb",
]
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
"""Control and bidi characters that must never reach a terminal, a page or a plot title
(newline and tab, which the answer may hold, are fine)."""
PROMPT_IDS = (1, 3, 5)  # the tiny model answers 60, 86, 2: RLO, then two CSI 2J


def hostile_vocab() -> list[str]:
    """97 words, every one carrying a payload, split on whitespace only."""
    return [f"t{i}{PAYLOADS[i % len(PAYLOADS)]}" for i in range(VOCAB)]


def hostile_tokenizer():
    vocab = {word: i for i, word in enumerate(hostile_vocab())}
    backend = Tokenizer(models.WordLevel(vocab, unk_token=hostile_vocab()[0]))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tf.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token=hostile_vocab()[0])


HOSTILE_NAME = "evil<b>&" + "".join(p for p in PAYLOADS if "\r" not in p and "/" not in p)
"""A model folder's name with markup, ESC sequences and bidi controls (no "/", no CR)."""


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    """A tiny Llama whose every token carries a payload, in a folder with a hostile name."""
    folder = tmp_path_factory.mktemp("hostile") / HOSTILE_NAME
    tiny_model("llama").save_pretrained(folder)
    hostile_tokenizer().save_pretrained(folder)
    return str(folder)


def unspaced(text: str) -> str:
    return re.sub(r"\s+", "", text)


def hostile_prompt() -> str:
    vocab = hostile_vocab()
    return " ".join(vocab[i] for i in PROMPT_IDS)


# ----------------------------------------------------------------------------- defect 4


def test_cli_answer_and_title_reach_the_terminal_escaped(hostile_dir, tmp_path, capsys):
    out_json = tmp_path / "out.json"
    assert (
        main(
            [
                hostile_prompt(),
                "--model",
                hostile_dir,
                "--no-chat",
                "--generate",
                "3",
                "--all-positions",
                "--json",
                str(out_json),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert RAW.findall(out) == []
    ids = json.loads(out_json.read_text())["input_ids"]
    answer = hostile_tokenizer().decode(ids[len(PROMPT_IDS) :], skip_special_tokens=True)
    assert RAW.search(answer)  # the model did say something hostile
    # The answer is printed in full, its payloads as visible escapes such as \x1b]0;pwned\x07
    # (compared without whitespace: rich wraps long lines).
    shown = visible_text(answer)
    assert shown.count("\\") >= 3 and unspaced(f"Answer: {shown}") in unspaced(out)
    assert unspaced(f"IG-Lens — {visible_text(HOSTILE_NAME)} (4 blocks") in unspaced(out)


def test_cli_error_quoting_hostile_text_is_escaped(hostile_dir, capsys):
    assert (
        main(
            [hostile_prompt(), "--model", hostile_dir, "--no-chat", "--target", "x\x1b[2J\u202ey z"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert RAW.findall(err) == [] and "not a single token" in err


def test_page_title_heading_and_state_are_escaped(hostile_dir, tmp_path):
    model, tokenizer = iglens_viz.load_model(hostile_dir)
    result = iglens_viz.attribute(model, tokenizer, hostile_prompt(), max_new_tokens=2)
    assert result.model_name == HOSTILE_NAME  # raw in the result; escaped on the way out
    page_path = tmp_path / "page.html"
    result.to_html(page_path)
    page = page_path.read_text(encoding="utf-8")
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    heading = re.search(r'<h1 class="iglens-page-title">(.*?)</h1>', page, re.S).group(1)
    for text in (title, heading):
        assert RAW.findall(text) == []
        assert text.startswith("IG-Lens · evil&lt;b&gt;&amp;\\x1b]0;pwned\\x07")
        assert "\\u202eexe.txt" in text and "<b>" not in text
    # Outside the state and bundle (JSON in <script> elements, never rendered as such; the
    # bundle inserts tokens through its token formatter) the page holds no raw control.
    assert RAW.findall(re.sub(r"<script\b.*?</script>", "", page, flags=re.S)) == []
    # The views' own copy (widget header, exported PNG/SVG titles) is escaped the same way.
    assert page_state(result)["result"]["model_name"] == visible_text(HOSTILE_NAME, keep="")


def test_widget_header_name_is_escaped(hostile_dir):
    model, tokenizer = iglens_viz.load_model(hostile_dir)
    w = show(model, tokenizer, hostile_prompt())
    assert w.result["model_name"] == visible_text(HOSTILE_NAME, keep="")
    assert RAW.findall(w.result["model_name"]) == []


def test_plot_titles_show_tokens_escaped():
    """Tokens reach the figures' titles only through the token formatter."""
    result = iglens_viz.attribute(tiny_model("llama"), hostile_tokenizer(), hostile_prompt())
    titles = []
    for fig in (result.plot_heatmap(), result.plot_token(1)):
        titles += [fig._suptitle.get_text()] if fig._suptitle is not None else []
        titles += [ax.get_title(loc) for ax in fig.axes for loc in ("left", "center")]
    assert any("[1] t3\\x9b31m → " in t for t in titles)  # position 1's token, visible
    assert all(RAW.findall(t) == [] for t in titles), titles


@pytest.mark.parametrize(
    "text, shown",
    [
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
        ("\u202eabc", "\\u202eabc"),
        ("\x9b2J", "\\x9b2J"),
        ("a\rb", "a\\rb"),
        ("line one\nline\ttwo", "line one\nline\ttwo"),
        (
            "caf\u00e9 \u4e2d\u6587 \U0001f600 a\u00a0b",
            "caf\u00e9 \u4e2d\u6587 \U0001f600 a\u00a0b",
        ),
        ("zero\u200bwidth", "zero\\u200bwidth"),
    ],
)
def test_visible_text(text, shown):
    assert visible_text(text) == shown
    assert visible_text(shown) == shown  # escaping twice changes nothing


# ----------------------------------------------------------------------------- defect 8


@pytest.fixture(scope="module")
def cached_dir(tmp_path_factory):
    """A model folder laid out like the converted default model's cache."""
    folder = tmp_path_factory.mktemp("home") / ".cache" / "iglens_viz" / "models" / "tiny-Llama"
    tiny_model("llama").save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def test_folder_model_shows_its_short_name_everywhere(cached_dir, tmp_path, capsys):
    page_path = tmp_path / "page.html"
    assert (
        main(
            [
                "w3 w5 w7",
                "--model",
                str(cached_dir),
                "--no-chat",
                "--generate",
                "2",
                "--html",
                str(page_path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "IG-Lens — tiny-Llama (4 blocks" in out and ".cache" not in out.split("wrote")[0]
    page = page_path.read_text(encoding="utf-8")
    assert re.search("<title>IG-Lens · tiny-Llama · “w3 w5 w7” · [45] tokens</title>", page)
    assert ".cache" not in page and str(cached_dir) not in page

    model, tokenizer = iglens_viz.load_model(cached_dir)
    assert model.config.name_or_path == str(cached_dir)  # where it came from, kept
    result = iglens_viz.attribute(model, tokenizer, "w3 w5 w7")
    assert result.model_name == "tiny-Llama"
    assert page_state(result)["result"]["model_name"] == "tiny-Llama"  # header, PNG/SVG
    assert show(model, tokenizer, "w3 w5 w7").result["model_name"] == "tiny-Llama"


def test_name_argument_sets_the_display_name(cached_dir, tmp_path, capsys):
    model, tokenizer = iglens_viz.load_model(cached_dir)
    result = iglens_viz.attribute(model, tokenizer, "w3 w5 w7", name="My model")
    assert result.model_name == "My model"
    assert "<title>IG-Lens · My model · " in result.to_html()
    lens = IGLens(model, tokenizer, name="Lens name")
    assert lens.attribute("w3 w5").model_name == "Lens name"
    assert (
        lens.run(lens.attribute("w3 w5").request.replace(target="next")).model_name == "Lens name"
    )
    assert show(model, tokenizer, "w3 w5", name="Shown").result["model_name"] == "Shown"
    with pytest.raises(IGLensError, match="pass name= to IGLens"):
        show(lens, None, "w3 w5", name="Other")
    for bad in ("", "   ", 5):
        with pytest.raises(IGLensError, match="name must be a non-empty string"):
            IGLens(model, tokenizer, name=bad)
    assert main(["w3 w5 w7", "--model", str(cached_dir), "--no-chat", "--name", "CLI name"]) == 0
    assert "IG-Lens — CLI name (4 blocks" in capsys.readouterr().out


@pytest.mark.parametrize(
    "name_or_path, shown",
    [
        ("gpt2", "gpt2"),
        ("EleutherAI/pythia-70m", "EleutherAI/pythia-70m"),  # a hub id is kept whole
        ("/root/.cache/iglens_viz/models/SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct"),
        ("/root/.cache/iglens_viz/models/SmolLM2-135M-Instruct/", "SmolLM2-135M-Instruct"),
        ("./models/tiny", "tiny"),
        ("~/m/x", "x"),
        (
            "/h/.cache/huggingface/hub/models--EleutherAI--pythia-70m/snapshots/abc123",
            "EleutherAI/pythia-70m",
        ),
        ("C:\\models\\phi-2", "phi-2"),
        ("", ""),
    ],
)
def test_display_name(name_or_path, shown):
    from iglens_viz.core.result import display_name

    assert display_name(name_or_path) == shown


def test_display_name_of_a_relative_folder(tmp_path, monkeypatch):
    from iglens_viz.core.result import display_name

    (tmp_path / "models" / "tiny").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert display_name("models/tiny") == "tiny"  # a folder here, not a hub id
    shutil.rmtree(tmp_path / "models")
    assert display_name("models/tiny") == "models/tiny"
