"""The counterfactual study: the capital-pairs builder, the JSONL pair files, every table
column against computations written here (plain hooks, the model's own modules, float64),
resuming, and the CLI's ``study --pairs``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from iglens_study import counterfactual, load_pairs, pair_study
from iglens_study import prompts as study_prompts
from iglens_study.counterfactual import pair_columns
from iglens_study.pairs import Pair, capital_pairs
from iglens_viz import InvalidRequestError
from iglens_viz.core.coordinates import Lens
from tests.support.tiny_models import reference_readout_logits, tiny_model, tiny_tokenizer
from tests.support.tolerances import forward_dtype, forward_tol, readout_size

CLEAN = "w1 w5 w7 w9 w11 w5 w7 w9 w3"
CORRUPT = "w1 w5 w8 w9 w11 w5 w7 w9 w3"  # one word differs: the same template and length
T_ID, C_ID = 4, 6


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", dtype=torch.float64)


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def _ids(text: str) -> list[int]:
    return [int(w[1:]) for w in text.split()]


# --- the capital-pairs builder ---------------------------------------------------------------


@torch.no_grad()
def _last_probs(model, tokenizer, text: str) -> np.ndarray:
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    return torch.softmax(model(ids).logits[0, -1].double(), -1).numpy()


def _small_capitals(model, tokenizer):
    """A hand-made capitals set on the tiny vocabulary (unknown words read as w0): most
    answers are the model's own top-1, a few are its least likely token (not given)."""
    countries = ["w5", "w6", "w10", "w12", "w13", "w14", "w15", "w16 w17", "w18 w19", "w20 w21"]
    items = []
    for template in study_prompts.CAPITAL_TEMPLATES:
        for k, country in enumerate(countries):
            text = template.format(country=country)
            p = _last_probs(model, tokenizer, text)
            answer = int(np.argmin(p)) if k in (3, 7) else int(np.argmax(p))
            items.append(study_prompts.StudyPrompt(text, f" w{answer} w2", "capitals"))
    return items


def _expected(model, tokenizer, items, min_p, per_country, max_pairs, seed):
    """The pre-registered rule, computed here from the model's own logits."""
    answered = []
    for i, item in enumerate(items):
        p = _last_probs(model, tokenizer, item.text)
        t = int(item.answer.split()[0][1:])
        if int(np.argmax(p)) == t or p[t] >= min_p:
            template = next(
                tp
                for tp in sorted(study_prompts.CAPITAL_TEMPLATES, key=len, reverse=True)
                if item.text.startswith(tp.split("{country}")[0])
            )
            country = item.text[len(template.split("{country}")[0]) : -len(" is")]
            answered.append((i, item, t, template, country, len(item.text.split())))
    candidates = []
    for key in sorted({(a[3], a[5]) for a in answered}):
        group = [a for a in answered if (a[3], a[5]) == key]
        candidates += [(a, b) for a in group for b in group if a[0] != b[0] and a[2] != b[2]]
    accepted, cleans, corrupts = [], {}, {}
    for k in np.random.default_rng(seed).permutation(len(candidates)):
        a, b = candidates[k]
        if cleans.get(a[4], 0) < per_country and corrupts.get(b[4], 0) < per_country:
            cleans[a[4]] = cleans.get(a[4], 0) + 1
            corrupts[b[4]] = corrupts.get(b[4], 0) + 1
            accepted.append((a[1].text, b[1].text, a[2], b[2], a[4], a[3]))
            if len(accepted) == max_pairs:
                break
    return answered, candidates, accepted


@pytest.mark.slow
def test_capital_pairs_group_cap_and_swap(model, tokenizer, monkeypatch):
    items = _small_capitals(model, tokenizer)
    monkeypatch.setitem(study_prompts.BUILTIN_SETS, "capitals", lambda: items)
    # every candidate (no cap): both orders of every pair with different first answers
    everything = capital_pairs(model, tokenizer, max_pairs=10_000, per_country=10_000)
    answered, candidates, _ = _expected(model, tokenizer, items, 0.1, 10**4, 10**4, 0)
    assert len(answered) < len(items)  # the not-given answers are left out
    got = {(p.clean, p.corrupt) for p in everything}
    assert got == {(a[1].text, b[1].text) for a, b in candidates} and len(got) == len(everything)
    assert any((b, a) in got for a, b in got)  # swapped pairs included
    for p in everything:
        assert len(p.clean.split()) == len(p.corrupt.split()) and p.target_id != p.contrast_id
        assert p.template.format(country=p.cluster) == p.clean and p.source == "capital-pairs"
        assert p.target == f"w{p.target_id}" and p.target_answer == f" w{p.target_id} w2"
    # the seeded, capped acceptance, against the greedy rule computed here
    for per_country, max_pairs, seed, min_p in ((2, 10_000, 0, 0.1), (1, 5, 3, 0.02)):
        pairs = capital_pairs(
            model, tokenizer, max_pairs=max_pairs, per_country=per_country, seed=seed, min_p=min_p
        )
        *_, accepted = _expected(model, tokenizer, items, min_p, per_country, max_pairs, seed)
        assert [
            (p.clean, p.corrupt, p.target_id, p.contrast_id, p.cluster, p.template) for p in pairs
        ] == accepted
        assert len(pairs) <= max_pairs
        clean_countries = [p.cluster for p in pairs]
        assert max(clean_countries.count(c) for c in clean_countries) <= per_country
    with pytest.raises(InvalidRequestError, match="per_country"):
        capital_pairs(model, tokenizer, per_country=0)


# --- pair files ------------------------------------------------------------------------------


def _line(**kw):
    item = {"clean": CLEAN, "corrupt": CORRUPT, "target": " w4", "contrast": " w6", **kw}
    return json.dumps({k: v for k, v in item.items() if v is not None})


def test_load_pairs_and_its_errors(tokenizer, tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        "# a comment\n" + _line() + "\n\n" + _line(cluster="x", target=" w4 w5") + "\n",
        encoding="utf-8",
    )
    with pytest.warns(UserWarning, match="first token of each is taken"):
        pairs = load_pairs(path, tokenizer)
    assert [(p.target_id, p.contrast_id, p.cluster, p.source) for p in pairs] == [
        (4, 6, " w4", "pairs.jsonl:2"),
        (4, 6, "x", "pairs.jsonl:4"),
    ]
    assert pairs[1].target == "w4" and pairs[1].target_answer == " w4 w5"
    for text, match in (
        ("not json", "pairs.jsonl:1: not a JSON object"),
        ("[1, 2]", "pairs.jsonl:1: not a JSON object"),
        (_line(contrast=None), "'contrast' must be non-empty text"),
        (_line(corrupt="w1 w2"), "clean prompt has 9 tokens and the corrupt one 2"),
        (_line(contrast=" w4 w9"), "start with the same token"),
        (_line(cluster=[1]), "'cluster' must be text"),
        ("", "holds no pairs"),
    ):
        path.write_text(_line() + "\n" + text + "\n" if text else "\n", encoding="utf-8")
        with pytest.raises(InvalidRequestError, match=match.replace(":1:", ":2:")):
            load_pairs(path, tokenizer)
    with pytest.raises(InvalidRequestError, match="neither a JSONL pairs file"):
        load_pairs(tmp_path / "missing.jsonl", tokenizer)


# --- the table against computations written here ---------------------------------------------


def _blocks(model):
    return model.model.layers


def _first(output):
    return output if isinstance(output, torch.Tensor) else output[0]


def _put(output, new):
    return new if isinstance(output, torch.Tensor) else (new, *output[1:])


@torch.no_grad()
def _run(model, ids, hooks=()):
    """The model's own last-position logits, and every block's input and output ``[T, d]``."""
    ins, outs = {}, {}

    def keep(i):
        def hook(module, args, kwargs, output):
            x = args[0] if args else kwargs["hidden_states"]
            ins[i], outs[i] = x[0].clone(), _first(output)[0].clone()

        return hook

    handles = [m.register_forward_hook(fn, with_kwargs=True) for m, fn in hooks]
    handles += [
        b.register_forward_hook(keep(i), with_kwargs=True) for i, b in enumerate(_blocks(model))
    ]
    try:
        logits = model(torch.tensor([ids])).logits[0, -1].double()
    finally:
        for h in handles:
            h.remove()
    n = len(_blocks(model))
    return logits, torch.stack([ins[i] for i in range(n)]), torch.stack([outs[i] for i in range(n)])


def _m(logits):
    return float((logits[T_ID] - logits[C_ID]).detach())


def _replace(block, where, value_of):
    """A hook on ``block`` setting its output at positions ``where`` to ``value_of(input,
    output)`` there."""

    def hook(module, args, kwargs, output):
        x = (args[0] if args else kwargs["hidden_states"])[0]
        new = _first(output).clone()
        new[0, where] = value_of(x, new[0])[where]
        return _put(output, new)

    return block, hook


def _independent_row(model, lens_a):
    """Every column of the pair (CLEAN, CORRUPT, t, c), computed here."""
    clean, corrupt = _ids(CLEAN), _ids(CORRUPT)
    T = len(clean)
    n = len(_blocks(model))
    lc, in_c, out_c = _run(model, clean)
    lx, in_x, out_x = _run(model, corrupt)
    m_clean, m_corrupt = _m(lc), _m(lx)
    denom = m_clean - m_corrupt
    upd_c, upd_x = out_c - in_c, out_x - in_x  # Δ_L, Δ′_L [n, T, d]
    cols = {k: [] for k in ("patch_total", "patch_total_all", "restore_state", "patch_direct")}
    for b, block in enumerate(_blocks(model)):
        for name, where in (("patch_total", [T - 1]), ("patch_total_all", list(range(T)))):
            hook = _replace(block, where, lambda x, out, b=b: x + upd_x[b])
            cols[name].append((m_clean - _m(_run(model, clean, [hook])[0])) / denom)
        hook = _replace(block, [T - 1], lambda x, out, b=b: out_c[b])
        cols["restore_state"].append((_m(_run(model, corrupt, [hook])[0]) - m_corrupt) / denom)
        h = out_c[-1, -1] - upd_c[b, -1] + upd_x[b, -1]
        direct = reference_readout_logits(model, h[None])[0].double()
        cols["patch_direct"].append((m_clean - _m(direct)) / denom)
    # attribution patching: dM/dh_L at the last position (autograd on the model's logits)
    kept = {}

    def grad_hook(i):
        def hook(module, args, kwargs, output):
            _first(output).retain_grad()
            kept[i] = _first(output)

        return hook

    handles = [
        b.register_forward_hook(grad_hook(i), with_kwargs=True)
        for i, b in enumerate(_blocks(model))
    ]
    try:
        logits = model(torch.tensor([clean])).logits[0, -1].double()
        (logits[T_ID] - logits[C_ID]).backward()
    finally:
        for h in handles:
            h.remove()
    model.zero_grad()
    cols["attribution"] = [
        -float(kept[b].grad[0, -1] @ (upd_x[b, -1] - upd_c[b, -1])) / denom for b in range(n)
    ]
    # the clean run's states h_0 … h_n at the last position
    states = torch.cat([in_c[:1, -1], out_c[:, -1]])  # [n+1, d]
    with torch.no_grad():
        ref = reference_readout_logits(model, states).double()
        probs = torch.softmax(ref, -1)
        gap = probs[:, T_ID] - probs[:, C_ID]
        cols["ig_logit"] = (gap[1:] - gap[:-1]).tolist()
        lensed = torch.stack(
            [states[L] if n == L else lens_a.transform(states[L], L) for L in range(n + 1)]
        )
        lp = torch.softmax(reference_readout_logits(model, lensed).double(), -1)
        lgap = lp[:, T_ID] - lp[:, C_ID]
        cols["ig_rand"] = (lgap[1:] - lgap[:-1]).tolist()
        md = ref[:, T_ID] - ref[:, C_ID]
        cols["ld_jump"] = (md[1:] - md[:-1]).tolist()
        norm = model.model.norm
        scale = torch.rsqrt(states[-1].pow(2).mean() + norm.variance_epsilon)
        w = model.lm_head.weight[T_ID] - model.lm_head.weight[C_ID]
        cols["dla"] = [float((norm.weight * upd_c[b, -1] * scale) @ w) for b in range(n)]
    p = torch.softmax(lc, -1)
    fixed = {
        "p_target": float(p[T_ID]),
        "target_top1": int(torch.argmax(lc)) == T_ID,
        "m_clean": m_clean,
        "m_corrupt": m_corrupt,
    }
    return fixed, cols


def _random_lens(model, seed=0):
    n, d = len(_blocks(model)), model.config.hidden_size
    g = torch.Generator().manual_seed(seed)
    eye = torch.eye(d, dtype=torch.float64)
    return Lens(
        "shortcut",
        n,
        d,
        {L: eye + 0.1 * torch.randn(d, d, generator=g, dtype=torch.float64) for L in range(n)},
        {L: 0.1 * torch.randn(d, generator=g, dtype=torch.float64) for L in range(n)},
        settings={"name": "rand"},
    )


@pytest.mark.slow
def test_every_column_against_an_independent_computation(model, tokenizer):
    lens_a = _random_lens(model)
    pairs = [
        Pair(CLEAN, CORRUPT, "w4", "w6", T_ID, C_ID, "France", "tpl", "capital-pairs"),
        Pair("w2 w3 w3", "w2 w4 w3", "w6", "w4", C_ID, T_ID, "Italy", "tpl", "capital-pairs"),
    ]
    res = pair_study(model, tokenizer, pairs, lenses=("logit", lens_a), progress=False)
    table = res.table
    assert list(table.columns) == pair_columns(["logit", "rand"])
    n = len(_blocks(model))
    assert len(table) == 2 * n and table["block"].tolist() == [*range(1, n + 1)] * 2
    row = table[table["pair"] == 0]
    fixed, cols = _independent_row(model, lens_a)
    assert row["n_tokens"].unique().tolist() == [9]
    assert row["cluster"].unique().tolist() == ["France"] and row["target"].iloc[0] == "w4"
    assert bool(row["target_top1"].iloc[0]) == fixed["target_top1"]
    # the library's float64 readout against the model's own modules (transformers rounds
    # RMS norms in float32): one forward tolerance in p, four in a logit difference
    tol = forward_tol(readout_size(model, torch.tensor(_ids(CLEAN))), n, forward_dtype(model))
    denom = abs(fixed["m_clean"] - fixed["m_corrupt"])
    assert denom > 1000 * tol  # the effects are well defined
    for name, value in fixed.items():
        if name != "target_top1":
            atol = tol if name == "p_target" else 4 * tol
            np.testing.assert_allclose(row[name], value, rtol=0, atol=atol, err_msg=name)
    for name, values in cols.items():
        atol = {"ig_logit": tol, "ig_rand": tol, "dla": 4 * tol, "ld_jump": 4 * tol}
        # an effect: two metric errors over the denominator (attribution: a gradient too)
        bound = atol.get(name, 12 * tol / denom)
        np.testing.assert_allclose(row[name], values, rtol=0, atol=bound, err_msg=name)
        assert np.abs(values).max() > 10 * bound, name  # not vacuous
    assert row["restore_state"].iloc[-1] == 1.0  # h_n at the last position: all of it
    assert res.metadata["lenses"][1]["name"] == "rand" and res.metadata["n_pairs"] == 2


# --- the folder: resume, other studies ---------------------------------------------------------


def _pairs():
    words = [f"w{i}" for i in range(20, 30)]
    out = []
    for k in range(3):
        a, b = words[2 * k], words[2 * k + 1]
        out.append(Pair(f"w1 {a} w3", f"w1 {b} w3", "w4", "w6", T_ID, C_ID, a, "", "f:1"))
    return out


@pytest.mark.slow
def test_an_interrupted_pair_study_resumes(model, tokenizer, tmp_path, monkeypatch):
    pairs = _pairs()
    whole = pair_study(model, tokenizer, pairs, lenses=("logit",), batch_size=1, progress=False)
    out = tmp_path / "cf"
    calls = {"n": 0}
    real = counterfactual._batch_table

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(counterfactual, "_batch_table", failing)
    with pytest.raises(KeyboardInterrupt):
        pair_study(
            model, tokenizer, pairs, lenses=("logit",), out=out, batch_size=1, progress=False
        )
    assert [p.name for p in sorted((out / "parts").iterdir())] == ["part-000000.parquet"]
    monkeypatch.setattr(counterfactual, "_batch_table", real)
    resumed = pair_study(
        model, tokenizer, pairs, lenses=("logit",), out=out, batch_size=1, progress=False
    )
    assert resumed.metadata["pairs_run"] == 2
    import pandas as pd

    pd.testing.assert_frame_equal(resumed.table, whole.table)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "table.parquet"), whole.table)
    loaded = counterfactual.PairStudy.load(out)
    assert loaded.pairs == pairs and loaded.lenses == ["logit"]
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["study"] == "counterfactual" and meta["torch_version"] == torch.__version__
    assert meta["model_fingerprint"] and meta["lenses"][0]["kind"] == "logit"
    # another pair set, another lens set, another kind of study: refused
    with pytest.raises(InvalidRequestError, match="pairs_digest"):
        pair_study(model, tokenizer, pairs[:2], lenses=("logit",), out=out, progress=False)
    with pytest.raises(InvalidRequestError, match="lenses"):
        pair_study(
            model, tokenizer, pairs, lenses=("logit", _random_lens(model)), out=out, progress=False
        )
    # a lens fitted again: the same lens, another wall time and final loss; the study resumes
    fitted, refitted = _random_lens(model), _random_lens(model)
    fitted.settings.update(seconds=12.5, final_kl=0.31)
    refitted.settings.update(seconds=40.0, final_kl=0.29)
    again = tmp_path / "refit"
    pair_study(model, tokenizer, pairs[:1], lenses=(fitted,), out=again, progress=False)
    resumed = pair_study(model, tokenizer, pairs[:1], lenses=(refitted,), out=again, progress=False)
    assert resumed.metadata["pairs_run"] == 0
    assert resumed.metadata["lens_fits"] == [{"seconds": 40.0, "final_kl": 0.29}]
    changed = _random_lens(model)
    changed.settings.update(steps=99)
    with pytest.raises(InvalidRequestError, match="lenses"):
        pair_study(model, tokenizer, pairs[:1], lenses=(changed,), out=again, progress=False)
    other = tmp_path / "ablation"
    other.mkdir()
    (other / "metadata.json").write_text(json.dumps({"modes": ["zero"]}))
    with pytest.raises(InvalidRequestError, match="all-position ablation study"):
        pair_study(model, tokenizer, pairs, lenses=("logit",), out=other, progress=False)


def test_cli_study_pairs(tiny_model_dir, tmp_path, capsys):
    import pandas as pd

    from iglens_viz.cli import main

    path = tmp_path / "pairs.jsonl"
    path.write_text(_line() + "\n" + _line(cluster="b") + "\n", encoding="utf-8")
    out = tmp_path / "cf"
    args = ["study", "--pairs", str(path), "--out", str(out), "--model", tiny_model_dir]
    assert main([*args, "--lenses", "logit", "--limit", "1"]) == 0
    printed = capsys.readouterr().out
    assert "1 pairs of 2" in printed and "table.parquet" in printed
    table = pd.read_parquet(out / "table.parquet")
    assert table["pair"].unique().tolist() == [0] and "ig_logit" in table.columns
    assert math.isfinite(table["patch_total"].sum())
    # the report and the four answers, each the verdict of its pre-registered rule
    from iglens_study import PairStudy

    answers = PairStudy.load(out).hypotheses()
    for row in answers.itertuples():
        assert f"{row.hypothesis} {row.verdict}: " in printed
    assert (out / "report.md").is_file() and (out / "hypotheses.csv").is_file()
    assert main(["study", "--pairs", "nope", "--out", str(out)]) == 2
    assert "neither capital-pairs nor a file" in capsys.readouterr().err
    assert main(["study", "capitals", "--pairs", str(path), "--out", str(out)]) == 2
    assert "give PROMPTS" in capsys.readouterr().err


def test_a_declared_per_country_cap_is_used_and_recorded(model, tokenizer, monkeypatch):
    items = _small_capitals(model, tokenizer)
    monkeypatch.setitem(study_prompts.BUILTIN_SETS, "capitals", lambda: items)
    study = pair_study(model, tokenizer, lenses=("logit",), limit=1, progress=False, per_country=1)
    expected = capital_pairs(model, tokenizer, per_country=1)
    assert [p.to_dict() for p in study.pairs] == [p.to_dict() for p in expected]
    assert study.metadata["pair_settings"]["per_country"] == 1
    assert len(expected) < len(capital_pairs(model, tokenizer))  # the cap binds here
    with pytest.raises(InvalidRequestError, match="built-in 'capital-pairs' set only"):
        pair_study(model, tokenizer, [expected[0]], lenses=("logit",), per_country=2)
    with pytest.raises(InvalidRequestError, match="per_country must be"):
        pair_study(model, tokenizer, lenses=("logit",), per_country=0)
