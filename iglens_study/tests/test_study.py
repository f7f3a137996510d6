"""The study runner: prompt sets, the tidy table against independent computations, and
resuming an interrupted run (the references of mean and resample ablation:
tests/test_study_references.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from iglens_study import run as study_run
from iglens_study.prompts import StudyPrompt, builtin_set, load_study_prompts
from iglens_study.run import Study, study
from iglens_viz import IGLens, InvalidRequestError, ablate
from tests.support.tiny_models import tiny_model, tiny_tokenizer
from tests.support.tolerances import eps, forward_dtype, forward_tol, readout_size, readout_tol

PROMPTS = [
    f"w{i} w{(3 * i) % 97} w{(5 * i + 2) % 97} w{(7 * i + 1) % 97}" + (" w9" if i % 2 else "")
    for i in range(1, 21)
]


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", dtype=torch.float64)


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


# ----------------------------------------------------------------------------- prompt sets


def test_builtin_sets_have_known_answers():
    capitals = builtin_set("capitals")
    assert len(capitals) >= 400 and all(p.answer and p.answer.startswith(" ") for p in capitals)
    assert StudyPrompt("The capital of France is", " Paris", "capitals") in capitals
    shipped = builtin_set("shipped")
    assert len(shipped) == 70 and all(p.answer is None for p in shipped)
    assert len(builtin_set("default")) == len(capitals) + 70
    with pytest.raises(InvalidRequestError, match="built-in sets: capitals"):
        builtin_set("nope")


def test_prompt_files(tmp_path):
    text = tmp_path / "p.txt"
    text.write_text("# a comment\nw1 w2\n\nw3 w4\n", encoding="utf-8")
    assert [p.text for p in load_study_prompts(text)] == ["w1 w2", "w3 w4"]
    lines = tmp_path / "p.jsonl"
    lines.write_text(
        json.dumps({"prompt": "w1 w2", "target": " w7"})
        + "\n"
        + json.dumps({"prompt": "w5"})
        + "\n",
        encoding="utf-8",
    )
    got = load_study_prompts(lines)
    assert [(p.text, p.answer) for p in got] == [("w1 w2", " w7"), ("w5", None)]
    assert got[0].source == "p.jsonl:1"
    lines.write_text('{"prompt": ""}\n', encoding="utf-8")
    with pytest.raises(InvalidRequestError, match="p.jsonl:1"):
        load_study_prompts(lines)
    lines.write_text("not json\n", encoding="utf-8")
    with pytest.raises(InvalidRequestError, match="not a JSON object"):
        load_study_prompts(lines)
    with pytest.raises(InvalidRequestError, match="neither a file nor a built-in"):
        load_study_prompts(tmp_path / "missing.txt")


# ----------------------------------------------------------------------------- the table


def test_table_matches_iglens_ablate_and_the_lens(model, tokenizer):
    items = [{"prompt": PROMPTS[0], "target": " w11"}, PROMPTS[1], PROMPTS[2], PROMPTS[3]]
    result = study(model, tokenizer, items, modes=("zero",), progress=False)
    table = result.table
    n = 4
    # An answer: only the last position, its first token; no answer: every position's
    # predicted token (the last position has a next-token prediction too).
    first = table[table.prompt == 0]
    last = len(tokenizer(PROMPTS[0])["input_ids"]) - 1
    assert set(first.position) == {last} and set(first.target_id) == {11}
    lens = IGLens(model, tokenizer)
    expected = lens.attribute(PROMPTS[1])
    second = table[table.prompt == 1]
    assert len(second) == len(expected.tokens) * n
    # The study's batch reads the rows of four prompts in one float32 readout map: each lens
    # probability within one readout's rounding of the lens's own (tolerances.readout_tol).
    ids = torch.as_tensor(tokenizer(PROMPTS[1])["input_ids"])
    size = readout_size(model, ids)
    read_tol = readout_tol(size, torch.float32)
    np.testing.assert_allclose(
        second.contribution.to_numpy().reshape(-1, n),
        expected.contributions,
        rtol=0,
        atol=2 * read_tol,
    )
    np.testing.assert_array_equal(
        second.onset.to_numpy().reshape(-1, n), expected.onset_segment[:, None] == np.arange(n)
    )
    # Drops: the readout's f(h_n) of batched ablations against the model's own logits, one
    # prompt at a time: two readouts' and two forward passes' rounding.
    drop = ablate(model, tokenizer, PROMPTS[1], target=expected.target_ids.tolist()).drop
    np.testing.assert_allclose(
        second.drop_zero.to_numpy().reshape(-1, n), drop, rtol=0, atol=_drop_tol(model, size)
    )
    # The lens logit after the last block is the model's own logit of the target: the study
    # reads out in float32 (each side's logit within 3·√w·eps·S, see tolerances.readout_tol).
    with torch.no_grad():
        own = model(input_ids=ids[None]).logits[0].double().numpy()
    last_logits = second[second.segment == n - 1]
    np.testing.assert_allclose(
        last_logits.lens_logit_end,
        own[last_logits.position.to_numpy(), last_logits.target_id.to_numpy()],
        rtol=0,
        atol=6 * np.sqrt(size.width) * eps(torch.float32) * size.scale,
    )
    # With the final norm's scale frozen at h_n's own, the last boundary reads h_n exactly.
    last = second[second.segment == n - 1]
    np.testing.assert_allclose(
        last.frozen_prob_end, last.lens_prob_end, rtol=0, atol=readout_tol(size, torch.float32)
    )
    assert (second.top1_end[second.segment == n - 1]).all()  # predicted = top-1 of h_n
    assert not np.allclose(second.frozen_prob_start, second.lens_prob_start)


def _drop_tol(model, size) -> float:
    """|Δ drop| between the study (float32 readout of batched passes) and ``ablate`` (the
    model's own float64 logits, one prompt alone): each of the two probabilities within one
    float32 readout's rounding, plus two forward passes' (tolerances.forward_tol)."""
    return 2 * readout_tol(size, torch.float32) + forward_tol(
        size, model.config.num_hidden_layers, forward_dtype(model)
    )


def test_padded_batches_equal_one_prompt_at_a_time(model, tokenizer):
    """Prompts of 4 and 5 words in one right-padded batch give the table of one prompt per
    batch, to two forward passes' rounding (float64 model and readout)."""
    prompts = PROMPTS[:5]
    assert len({len(tokenizer(p)["input_ids"]) for p in prompts}) > 1  # some are padded
    runs = [
        study(
            model,
            tokenizer,
            prompts,
            modes=("zero", "mean"),
            reference=3,
            progress=False,
            dtype=torch.float64,
            batch_size=size,
        ).table
        for size in (len(prompts), 1)
    ]
    batched, alone = runs
    size = readout_size(model, torch.as_tensor(tokenizer(prompts[0])["input_ids"]))
    tol = forward_tol(size, model.config.num_hidden_layers, forward_dtype(model))
    numbers = [c for c in alone.columns if alone[c].dtype.kind == "f"]
    others = [c for c in alone.columns if c not in numbers]
    assert batched[others].equals(alone[others])
    for column in numbers:
        scale = 1.0 if "logit" not in column else 6 * np.sqrt(size.width) * size.scale
        np.testing.assert_allclose(
            batched[column], alone[column], rtol=0, atol=tol * scale, err_msg=column
        )


def test_an_interrupted_study_resumes_to_the_same_table(model, tokenizer, tmp_path, monkeypatch):
    whole = study(
        model, tokenizer, PROMPTS, modes=("zero", "mean"), reference=4, progress=False, batch_size=8
    ).table
    real = study_run._batch_rows

    def failing(lens, model_, tokenizer_, batch, *args):
        if 9 in batch:
            raise KeyboardInterrupt
        return real(lens, model_, tokenizer_, batch, *args)

    monkeypatch.setattr(study_run, "_batch_rows", failing)
    with pytest.raises(KeyboardInterrupt):
        study(
            model,
            tokenizer,
            PROMPTS,
            modes=("zero", "mean"),
            reference=4,
            out=tmp_path / "s",
            progress=False,
            batch_size=8,
        )
    saved = Study.load(tmp_path / "s")
    assert set(saved.table.prompt) == set(range(8))  # one whole batch
    monkeypatch.setattr(study_run, "_batch_rows", real)
    resumed = study(
        model,
        tokenizer,
        PROMPTS,
        modes=("zero", "mean"),
        reference=4,
        out=tmp_path / "s",
        progress=False,
        batch_size=8,
    ).table
    assert resumed.equals(whole)
    with pytest.raises(InvalidRequestError, match="another study"):
        study(
            model,
            tokenizer,
            PROMPTS,
            modes=("zero",),
            reference=4,
            out=tmp_path / "s",
            progress=False,
        )


def test_bad_study_arguments(model, tokenizer):
    with pytest.raises(InvalidRequestError, match="unknown ablation modes"):
        study(model, tokenizer, PROMPTS[:2], modes=("random",), progress=False)
    with pytest.raises(InvalidRequestError, match="no prompts"):
        study(model, tokenizer, [], progress=False)
    with pytest.raises(InvalidRequestError, match="batch_size must be an integer >= 1"):
        study(model, tokenizer, PROMPTS[:2], progress=False, batch_size=0)


def test_cli_study_writes_table_summary_and_report(tiny_model_dir, tmp_path, capsys):
    import pandas as pd

    from iglens_viz.cli import main

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "\n".join(
            json.dumps({"prompt": p, "target": " w3"} if i % 2 else {"prompt": p})
            for i, p in enumerate(PROMPTS[:6])
        ),
        encoding="utf-8",
    )
    out = tmp_path / "study"
    assert (
        main(
            [
                "study",
                str(prompts),
                "--out",
                str(out),
                "--model",
                tiny_model_dir,
                "--reference",
                "3",
                "--boot",
                "50",
                "--modes",
                "zero,resample",
            ]
        )
        == 0
    )
    table = pd.read_parquet(out / "table.parquet")
    assert set(table.prompt) == set(range(6)) and {"drop_zero", "drop_resample"} <= set(table)
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["mode"]) == {"zero", "resample"}
    ig = summary[
        (summary["mode"] == "zero") & (summary.method == "ig_lens") & (summary.token_class == "all")
    ].iloc[0]
    assert ig.n_tokens == table.groupby(["prompt", "position"]).ngroups
    assert ig.agreement_lo <= ig.agreement <= ig.agreement_hi
    # every token scores every method, so the mean paired difference is the difference of
    # the summary's means
    paired = pd.read_csv(out / "differences.csv").query("token_class == 'all'")
    for method in ("random", "logit_jump", "block_1"):
        d = paired[(paired["mode"] == "zero") & (paired.method == method)]
        d = d[d.metric == "agreement"].iloc[0]
        other = summary.query("mode == 'zero' and token_class == 'all' and method == @method")
        other = other.iloc[0]
        assert d.difference == pytest.approx(ig.agreement - other.agreement)
        assert d.lo <= d.difference <= d.hi
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| ig_lens |" in report and "best constant" in report
    # The model by its display name, not its folder's full path (issue 18, defect 8).
    assert report.startswith(f"# IG-Lens study: {Path(tiny_model_dir).name}\n")
    for figure in ("onsets.png", "methods_zero.png", "drop_vs_contribution_resample.png"):
        assert f"({figure})" in report and (out / figure).read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert "ig_lens" in printed and f"wrote {out / 'report.md'}" in printed
    assert main(["study", str(tmp_path / "missing.txt"), "--out", str(out)]) == 2
    assert "neither a file nor a built-in" in capsys.readouterr().err


SHARDED = """
import sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from iglens_study import study
folder = sys.argv[1]
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64)
tokenizer = AutoTokenizer.from_pretrained(folder)
study(model, tokenizer, sys.argv[2:-1], modes=("zero", "resample"), reference=3,
      out=sys.argv[-1], progress=False, dtype=torch.float64)
"""


def test_two_processes_under_torchrun_give_the_single_process_table(model, tokenizer, tmp_path):
    import shutil
    import subprocess
    import sys

    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed beside this Python")
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    script = tmp_path / "sharded.py"
    script.write_text(SHARDED, encoding="utf-8")
    prompts = PROMPTS[:7]
    done = subprocess.run(
        [
            torchrun,
            "--nproc-per-node",
            "2",
            str(script),
            str(folder),
            *prompts,
            str(tmp_path / "two"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    two = Study.load(tmp_path / "two")
    assert two.metadata["processes"] == 2
    assert sorted((tmp_path / "two" / "parts").glob("*.parquet")) != []
    one = study(
        model,
        tokenizer,
        prompts,
        modes=("zero", "resample"),
        reference=3,
        progress=False,
        dtype=torch.float64,
    ).table
    merged = two.table.sort_values(["prompt", "position", "segment"], ignore_index=True)
    numbers = [c for c in one.columns if one[c].dtype.kind == "f"]
    others = [c for c in one.columns if c not in numbers]
    assert merged[others].equals(one[others])
    # float64 throughout; the processes may use other thread counts, so other kernels: two
    # forward passes' worth of rounding (tolerances.forward_tol), logits S·√w times larger.
    size = readout_size(model, torch.as_tensor(tokenizer(prompts[0])["input_ids"]))
    tol = forward_tol(size, model.config.num_hidden_layers, torch.float64)
    for column in numbers:
        scale = 1.0 if "logit" not in column else 6 * np.sqrt(size.width) * size.scale
        np.testing.assert_allclose(
            merged[column], one[column], rtol=0, atol=tol * scale, err_msg=column
        )
