"""``iglens study`` and the main command's outputs when the user's files or folders are bad:
one-line errors before the model loads, damaged study folders, CSV prompts, long names."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iglens_study import study
from iglens_study.prompts import load_study_prompts
from iglens_study.run import Study, StudyFolderError
from iglens_viz import IGLensError, loading
from iglens_viz.cli import main
from iglens_viz.files import OutputFileError, write_atomic
from tests.support.tiny_models import tiny_model, tiny_tokenizer

PROMPTS = ["w5 w9 w11 w2", "w3 w5 w7 w9", "w2 w4 w6"]


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture
def loads(monkeypatch):
    """The list of models the CLI loads during the test (each call appended)."""
    calls = []
    real = loading.load_model  # what `iglens` and `iglens study` load with, at call time

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(loading, "load_model", spy)
    return calls


def read_only(folder: Path, monkeypatch) -> Path:
    """``folder`` made read-only. Root passes permission bits, so for root the test also
    answers os.access as an unprivileged user would (a read-only folder is not writable)."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    if os.geteuid() == 0:
        real = os.access

        def access(path, mode, *args, **kwargs):
            if mode & os.W_OK and Path(path).resolve() == folder.resolve():
                return False
            return real(path, mode, *args, **kwargs)

        monkeypatch.setattr(os, "access", access)
    return folder


def error_line(capsys) -> str:
    """The CLI's stderr: exactly one line, an error and no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("iglens: error: "), err
    return lines[0]


def write_prompts(folder: Path, prompts=PROMPTS, name="p.txt") -> Path:
    path = folder / name
    path.write_text("\n".join(prompts) + "\n", encoding="utf-8")
    return path


def run_cli_study(tiny_model_dir, prompts: Path, out: Path, *more) -> int:
    return main(
        [
            "study",
            str(prompts),
            "--out",
            str(out),
            "--model",
            tiny_model_dir,
            "--modes",
            "zero",
            "--boot",
            "50",
            *more,
        ]
    )


# ------------------------------------------------------- the output folder, before loading


@pytest.mark.parametrize(
    "case",
    [
        "read-only folder",
        "inside a read-only folder",
        "a file",
        "below a file",
        "parts is a file",
        "table.parquet is a folder",
    ],
)
def test_study_out_that_cannot_be_written_fails_before_the_model_loads(
    tiny_model_dir, tmp_path, capsys, monkeypatch, loads, case
):
    prompts = write_prompts(tmp_path)
    out, expected = tmp_path / "study", "not writable"
    if case == "read-only folder":
        read_only(out, monkeypatch)
    elif case == "inside a read-only folder":
        read_only(tmp_path / "ro", monkeypatch)
        out = tmp_path / "ro" / "new" / "study"
    elif case == "a file":
        out.write_text("x")
        expected = "is a file, not a folder"
    elif case == "below a file":
        (tmp_path / "file").write_text("x")
        out, expected = tmp_path / "file" / "study", f"{tmp_path / 'file'} is a file"
    elif case == "parts is a file":
        out.mkdir()
        (out / "parts").write_text("x")
        expected = f"{out / 'parts'} is a file where the folder parts/ goes"
    else:
        (out / "table.parquet").mkdir(parents=True)
        expected = f"{out / 'table.parquet'} is a folder where the file table.parquet goes"
    assert run_cli_study(tiny_model_dir, prompts, out) == 2
    line = error_line(capsys)
    assert expected in line and str(out) in line
    assert loads == []


def test_study_api_refuses_a_read_only_out_before_any_work(model, tokenizer, tmp_path, monkeypatch):
    out = read_only(tmp_path / "study", monkeypatch)
    with pytest.raises(OutputFileError, match=f"the folder {out} is not writable"):
        study(model, tokenizer, PROMPTS, modes=("zero",), out=out, progress=False)
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("flag", ["--json", "--png", "--html"])
def test_main_outputs_in_a_read_only_folder_fail_before_the_model_loads(
    tiny_model_dir, tmp_path, capsys, monkeypatch, loads, flag
):
    folder = read_only(tmp_path / "ro", monkeypatch)
    target = folder / f"out{flag.replace('--', '.')}"
    assert main(["w3 w5 w7", "--model", tiny_model_dir, "--no-chat", flag, str(target)]) == 2
    assert f"cannot write {target}: the folder {folder} is not writable" in error_line(capsys)
    assert loads == []


def test_a_254_byte_output_name_is_written(tiny_model_dir, tmp_path):
    """The longest legal name (255 bytes) leaves no room for a temporary name built from
    it: the temporary file's name is short."""
    target = tmp_path / ("é" * 100 + "a" * 49 + ".json")  # 200 + 49 + 5 bytes
    assert len(target.name.encode("utf-8")) == 254
    assert main(["w3 w5 w7", "--model", tiny_model_dir, "--no-chat", "--json", str(target)]) == 0
    assert json.loads(target.read_text(encoding="utf-8"))["tokens"]
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no temporary file left
    longest = tmp_path / ("b" * 255)
    write_atomic(longest, b"ok")
    assert longest.read_bytes() == b"ok"


def test_a_name_too_long_fails_before_the_model_loads(tiny_model_dir, tmp_path, capsys, loads):
    target = tmp_path / ("c" * 251 + ".json")
    assert main(["w3 w5 w7", "--model", tiny_model_dir, "--no-chat", "--json", str(target)]) == 2
    assert "its name is 256 bytes, longer than the 255" in error_line(capsys)
    assert loads == [] and list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------- prompt files


def test_prompts_file_that_is_not_utf8_is_one_line(tiny_model_dir, tmp_path, capsys, loads):
    prompts = tmp_path / "latin1.txt"
    prompts.write_bytes("w3 w5\nw7 caf\xe9\n".encode("latin-1"))
    assert run_cli_study(tiny_model_dir, prompts, tmp_path / "study") == 2
    line = error_line(capsys)
    assert "latin1.txt:2: the prompts file is not UTF-8 text (byte 12)" in line
    assert loads == [] and not (tmp_path / "study").exists()


def test_csv_prompts_use_the_header(model, tokenizer, tmp_path):
    path = tmp_path / "p.csv"
    path.write_text('id,prompt,target\n1,"w5 w9, w11",\n2,w3 w5 w7, w9\n', encoding="utf-8")
    got = load_study_prompts(path)
    assert [(p.text, p.answer, p.source) for p in got] == [
        ("w5 w9, w11", None, "p.csv:2"),
        ("w3 w5 w7", " w9", "p.csv:3"),
    ]
    table = study(model, tokenizer, path, modes=("zero",), progress=False).table
    lengths = [len(tokenizer(p.text)["input_ids"]) for p in got]
    answered = table[table.prompt == 1]
    assert set(answered.target_id) == {9} and set(answered.position) == {lengths[1] - 1}
    assert set(table[table.prompt == 0].position) == set(range(lengths[0]))  # predicted
    path.write_text("text,answer\nw3 w5,\n", encoding="utf-8")
    with pytest.raises(
        IGLensError,
        match="p.csv:1: a CSV prompts file needs a header row "
        "with a 'prompt' column .* its header is text,answer",
    ):
        load_study_prompts(path)
    path.write_text('prompt\n"w3 w5\n', encoding="utf-8")  # a quote never closed
    with pytest.raises(IGLensError, match="p.csv:2: not valid CSV"):
        load_study_prompts(path)


# -------------------------------------------------------------------- damaged study folders


def test_damaged_metadata_is_named_before_the_model_loads(
    tiny_model_dir, tmp_path, capsys, loads, model, tokenizer
):
    prompts = write_prompts(tmp_path)
    out = tmp_path / "study"
    study(model, tokenizer, prompts, modes=("zero",), out=out, progress=False)
    meta = out / "metadata.json"
    whole = meta.read_text(encoding="utf-8")
    for damaged in (whole[: len(whole) // 2], "", "[1, 2]"):
        meta.write_text(damaged, encoding="utf-8")
        loads.clear()
        assert run_cli_study(tiny_model_dir, prompts, out) == 2
        line = error_line(capsys)
        assert f"{meta} is damaged (" in line and "choose another one" in line
        assert loads == []
        with pytest.raises(StudyFolderError, match="metadata.json is damaged"):
            study(model, tokenizer, prompts, modes=("zero",), out=out, progress=False)
        with pytest.raises(StudyFolderError, match="metadata.json is damaged"):
            Study.load(out)
    meta.unlink()  # deleted, its parts can no longer be told from another study's
    with pytest.raises(StudyFolderError, match="holds parts of a study but no metadata.json"):
        study(model, tokenizer, prompts, modes=("zero",), out=out, progress=False)


def test_metadata_is_written_atomically(model, tokenizer, tmp_path, monkeypatch):
    import iglens_viz.files as files

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", full_disk)
    out = tmp_path / "study"
    with pytest.raises(OutputFileError, match="metadata.json: No space left on device"):
        study(model, tokenizer, PROMPTS, modes=("zero",), out=out, progress=False)
    assert [p.name for p in out.iterdir()] == ["parts"]  # no half file, no temporary file


def test_a_damaged_part_is_redone_like_a_missing_one(model, tokenizer, tmp_path):
    out = tmp_path / "study"
    kwargs = dict(modes=("zero", "mean"), reference=2, progress=False, batch_size=1)
    whole = study(model, tokenizer, PROMPTS, out=out, **kwargs).table
    part = out / "parts" / "part-000001.parquet"
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])  # truncated, as by a full disk or a copy
    with pytest.raises(StudyFolderError, match=f"the part {part} is damaged"):
        Study.load(out)
    with pytest.warns(
        UserWarning,
        match="part-000001.parquet is damaged .*moved to "
        "part-000001.parquet.damaged, its prompts are redone",
    ):
        resumed = study(model, tokenizer, PROMPTS, out=out, **kwargs).table
    assert resumed.equals(whole)  # bit-identical, as for a missing part
    assert (out / "parts" / "part-000001.parquet.damaged").read_bytes() == data[: len(data) // 2]
    assert (
        Study.load(out)
        .table.sort_values(["prompt", "position", "segment"], ignore_index=True)
        .equals(whole)
    )
    part.write_bytes(b"not parquet at all")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert study(model, tokenizer, PROMPTS, out=out, **kwargs).table.equals(whole)


def test_cli_resume_over_a_damaged_part_warns_in_one_line(tiny_model_dir, tmp_path, capsys):
    prompts = write_prompts(tmp_path)
    out = tmp_path / "study"
    assert run_cli_study(tiny_model_dir, prompts, out, "--batch-size", "2") == 0
    first = pd.read_parquet(out / "table.parquet")
    (out / "parts" / "part-000002.parquet").write_bytes(b"PAR1 truncated")
    capsys.readouterr()
    assert run_cli_study(tiny_model_dir, prompts, out, "--batch-size", "2") == 0
    err = capsys.readouterr().err  # the warning and the progress bar
    said = [line for line in err.splitlines() if "damaged" in line]
    assert (
        len(said) == 1
        and said[0].startswith("iglens: warning: the part ")
        and "part-000002.parquet is damaged" in said[0]
    )
    assert "UserWarning" not in err and "warnings.warn" not in err
    assert pd.read_parquet(out / "table.parquet").equals(first)


# ----------------------------------------------------------------------- the report


def test_three_identical_prompts_write_the_report(tiny_model_dir, tmp_path, capsys):
    """Every bootstrap replicate of identical prompts is the estimate up to rounding; a
    bound past the estimate by an ulp made the report's error bars negative."""
    prompts = write_prompts(tmp_path, [PROMPTS[0]] * 3)
    out = tmp_path / "study"
    assert run_cli_study(tiny_model_dir, prompts, out) == 0
    assert (out / "report.md").is_file() and (out / "methods_zero.png").is_file()
    summary = pd.read_csv(out / "summary.csv")
    for metric in ("agreement", "hit_at_3", "rho"):
        rows = summary[np.isfinite(summary[f"{metric}_lo"])]
        assert len(rows)
        assert (rows[f"{metric}_lo"] <= rows[metric]).all(), metric
        assert (rows[metric] <= rows[f"{metric}_hi"]).all(), metric
    # The same prompt thrice: every token's metrics repeat, so the methods that do not
    # draw at random have no spread at all.
    ig = summary[(summary.method == "ig_lens") & (summary.token_class == "all")].iloc[0]
    assert ig.agreement_lo == ig.agreement == ig.agreement_hi
    assert ig.rho_lo == ig.rho == ig.rho_hi
