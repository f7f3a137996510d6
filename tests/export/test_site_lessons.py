"""The site's pre-computed lessons (iglens_viz.export.site_lessons): each lesson file is what
the HTML export embeds for Python's ``attribute`` of the question, listed in the manifest with
its bytes and sha256; ``lessons=()`` writes none. Oracle: ``attribute`` called here."""

from __future__ import annotations

import hashlib
import json

import pytest

from iglens_viz import attribute
from iglens_viz.export.html import page_state
from iglens_viz.export.site import export_site
from iglens_viz.protocol import result_payload, to_base64_state
from tests.support.tiny_models import tiny_model, tiny_tokenizer

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

TEMPLATE = (
    "{% for m in messages %}w1 {{ m['content'] }} w2 {% endfor %}"
    "{% if add_generation_prompt %}w3{% endif %}"
)
"""A chat template over the tiny word-level vocabulary."""


def chat_tokenizer():
    tokenizer = tiny_tokenizer()
    tokenizer.chat_template = TEMPLATE
    return tokenizer


@pytest.fixture(scope="module")
def lesson_site(tmp_path_factory):
    model = tiny_model("llama", tie_word_embeddings=True)
    folder = tmp_path_factory.mktemp("lessons") / "site"
    lessons = ["w5 w7 w9", {"question": "w4 w6", "chat": False, "max_new_tokens": 3}]
    manifest = export_site(folder, model, chat_tokenizer(), name="tiny", lessons=lessons)
    return model, folder, manifest


def test_each_lesson_file_is_pythons_attribute_as_the_html_export_embeds_it(lesson_site):
    model, folder, manifest = lesson_site
    asked = [("w5 w7 w9", True, 12), ("w4 w6", False, 3)]
    assert [(e["question"], e["chat"], e["max_new_tokens"]) for e in manifest["lessons"]] == asked
    for entry, (question, chat, new) in zip(manifest["lessons"], asked, strict=True):
        data = json.loads((folder / entry["file"]).read_text())
        result = attribute(
            model, chat_tokenizer(), question, chat=chat, max_new_tokens=new, name="tiny"
        )
        assert data["question"] == question and data["chat"] is chat
        assert data["state"]["result"] == to_base64_state(result_payload(result))
        assert data["state"] == json.loads(json.dumps(page_state(result)))
        assert entry["positions"] == len(result.input_ids)


def test_the_manifest_lists_each_lesson_with_its_bytes_and_sha256(lesson_site):
    _, folder, manifest = lesson_site
    files = sorted(p.relative_to(folder).as_posix() for p in (folder / "lessons").iterdir())
    assert files == ["lessons/lesson-01.json", "lessons/lesson-02.json"]
    assert [e["file"] for e in manifest["lessons"]] == files
    for name in files:
        data = (folder / name).read_bytes()
        assert manifest["files"][name] == {
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }


def test_no_lessons_writes_none(tmp_path):
    manifest = export_site(
        tmp_path / "site", tiny_model("llama"), chat_tokenizer(), name="tiny", lessons=()
    )
    assert manifest["lessons"] == []
    assert not (tmp_path / "site" / "lessons").exists()
    assert not any(name.startswith("lessons/") for name in manifest["files"])


@pytest.mark.parametrize(
    ("flags", "lessons"),
    [
        ([], None),
        (["--lesson", "Why?", "--lesson", "How?"], ["Why?", "How?"]),
        (["--no-lessons"], ()),
    ],
)
def test_the_command_passes_its_lessons(monkeypatch, tmp_path, capsys, flags, lessons):
    from iglens_viz.cli import commands
    from iglens_viz.export import site

    asked = {}

    def fake_export(directory, model, tokenizer, **kwargs):
        asked.update(kwargs)
        return {"files": {"lessons/lesson-01.json": {"bytes": 10}}, "model": {"name": "m"}}

    monkeypatch.setattr(site, "export_site", fake_export)
    assert commands.run_export_site([str(tmp_path / "s"), *flags]) == 0
    assert asked["lessons"] == lessons
    assert "lessons/lesson-01.json" in capsys.readouterr().out
