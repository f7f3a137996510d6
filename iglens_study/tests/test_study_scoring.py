"""Scoring of the study (iglens_study.scoring): predictors, metrics, classes, bootstrap.

No model: hand-built trajectories with known answers and synthetic tables.
"""

import numpy as np
import pandas as pd
import pytest

from iglens_study.scoring import (
    CLASSES,
    CONSTANT_PREFIX,
    DIFFERENCE_COLUMNS,
    PREDICTORS,
    SCORE_COLUMNS,
    SUMMARY_COLUMNS,
    best_constant,
    bootstrap_interval,
    headline,
    method_names,
    paired_differences,
    predict,
    score,
    spearman_rows,
    summarize,
)
from iglens_viz.errors import InvalidRequestError

# --------------------------------------------------------------------------- helpers


def token_rows(prompt, position, contribution, drops, *, top1=None, logits=None, frozen=None):
    """Rows of one token from per-segment values; ``logits`` and ``frozen`` are values at the
    k+1 boundaries (start of segment j = boundary j, end = boundary j+1)."""
    c = np.asarray(contribution, dtype=float)
    k = len(c)
    probs = np.concatenate([[0.0], np.cumsum(c)])
    logits = np.zeros(k + 1) if logits is None else np.asarray(logits, dtype=float)
    frozen = probs if frozen is None else np.asarray(frozen, dtype=float)
    top1 = np.zeros(k, dtype=bool) if top1 is None else np.asarray(top1, dtype=bool)
    if not isinstance(drops, dict):
        drops = {"zero": drops}
    rows = {
        "prompt": prompt,
        "position": position,
        "segment": np.arange(k),
        "contribution": c,
        "lens_prob_start": probs[:-1],
        "lens_prob_end": probs[1:],
        "lens_logit_start": logits[:-1],
        "lens_logit_end": logits[1:],
        "top1_end": top1,
        "frozen_prob_start": frozen[:-1],
        "frozen_prob_end": frozen[1:],
    }
    for mode, d in drops.items():
        rows[f"drop_{mode}"] = np.asarray(d, dtype=float)
    return pd.DataFrame(rows)


def table_of(*frames):
    return pd.concat(frames, ignore_index=True)


def arrays_of(table):
    """(k,) arrays of a one-token table, as predict() takes them."""
    t = table.sort_values("segment")
    return {c: t[c].to_numpy() for c in t.columns}


def random_table(n_prompts, n_positions, k, seed=0, modes=("zero",), peak=None):
    """A synthetic table with random values; ``peak`` (segment) gets the largest drop."""
    rng = np.random.default_rng(seed)
    frames = []
    for p in range(n_prompts):
        for t in range(n_positions):
            drops = {}
            for m in modes:
                d = rng.normal(size=k)
                if peak is not None:
                    d[peak] = np.abs(d).max() + 1.0
                drops[m] = d
            frames.append(
                token_rows(
                    p,
                    t,
                    rng.normal(size=k),
                    drops,
                    top1=rng.random(k) > 0.7,
                    logits=rng.normal(size=k + 1),
                    frozen=rng.random(k + 1),
                )
            )
    return table_of(*frames)


# The hand-built token (k = 6 blocks): contributions peak at block 3 (segment 2), the target
# first becomes top-1 after block 5 (segment 4), the largest lens-logit jump is at block 2
# (segment 1), and |Δ frozen prob| is largest at block 4 (segment 3), with a negative sign.
C = [0.01, 0.02, 0.30, 0.05, -0.02, 0.04]
TOP1 = [False, False, False, False, True, True]
LOGITS = [0.0, 0.5, 3.5, 4.0, 5.0, 5.5, 6.0]  # jumps 0.5 3.0 0.5 1.0 0.5 0.5
FROZEN = [0.10, 0.11, 0.13, 0.30, 0.05, 0.09, 0.12]  # Δ .01 .02 .17 -.25 .04 .03
FROZEN_DELTA = [0.01, 0.02, 0.17, -0.25, 0.04, 0.03]
DROPS = [0.05, 0.40, 0.30, 0.10, -0.05, 0.20]  # largest: block 2; top 3: blocks 2, 3, 6


@pytest.fixture
def hand():
    return token_rows(0, 3, C, DROPS, top1=TOP1, logits=LOGITS, frozen=FROZEN)


def spearman_untied(a, b):
    """The textbook formula 1 − 6 Σ d² / (n (n² − 1)), valid without ties."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert len(set(a)) == len(a) and len(set(b)) == len(b)
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    n = len(a)
    return 1.0 - 6.0 * ((ra - rb) ** 2).sum() / (n * (n * n - 1))


# --------------------------------------------------------------------------- predictors


def test_every_predictor_on_a_hand_built_token(hand):
    a = arrays_of(hand)
    expected = {"ig_lens": 2, "logit_lens_first_top1": 4, "logit_jump": 1, "frozen_norm": 3}
    for method, segment in expected.items():
        predicted, _ = predict(method, a)
        assert predicted == segment, method

    _, s = predict("ig_lens", a)
    np.testing.assert_allclose(s, C)
    assert predict("logit_lens_first_top1", a)[1] is None
    _, s = predict("logit_jump", a)
    np.testing.assert_allclose(s, [0.5, 3.0, 0.5, 1.0, 0.5, 0.5])
    _, s = predict("frozen_norm", a)
    np.testing.assert_allclose(s, FROZEN_DELTA)
    assert s[3] < 0 and np.argmax(s) != 3  # |Δ| picks block 4, not the signed maximum

    for block in range(1, 7):
        assert predict(f"{CONSTANT_PREFIX}{block}", a) == (block - 1, None)
    with pytest.raises(InvalidRequestError):
        predict("block_7", a)
    with pytest.raises(InvalidRequestError):
        predict("nonsense", a)


def test_ties_go_to_the_lowest_index_and_never_top1_is_no_prediction():
    a = arrays_of(
        token_rows(
            0,
            0,
            [0.1, 0.3, 0.3, 0.0],
            [1, 0, 0, 0],
            logits=[0, 1, 2, 3, 4],
            frozen=[0, 0.2, 0, 0.2, 0],
        )
    )
    assert predict("ig_lens", a)[0] == 1
    assert predict("logit_jump", a)[0] == 0  # all jumps 1.0
    assert predict("frozen_norm", a)[0] == 0  # |Δ| all 0.2
    assert predict("logit_lens_first_top1", a)[0] == -1  # never top-1


def test_random_and_shuffled_are_permutations_reproducible_and_seed_dependent():
    t = random_table(40, 3, 8, seed=1)
    k = 8
    a = {
        "contribution": t.pivot(
            index=["prompt", "position"], columns="segment", values="contribution"
        ).to_numpy()
    }
    for method in ("random", "shuffled"):
        p0, s0 = predict(method, a, seed=0)
        p0b, s0b = predict(method, a, seed=0)
        p1, s1 = predict(method, a, seed=1)
        np.testing.assert_array_equal(p0, p0b)
        np.testing.assert_array_equal(s0, s0b)
        assert not np.array_equal(s0, s1) and not np.array_equal(p0, p1)
        np.testing.assert_array_equal(p0, np.argmax(s0, axis=1))
    _, s = predict("random", a, seed=0)
    np.testing.assert_array_equal(np.sort(s, axis=1), np.broadcast_to(np.arange(k), s.shape))
    _, s = predict("shuffled", a, seed=0)
    np.testing.assert_allclose(np.sort(s, axis=1), np.sort(a["contribution"], axis=1))
    assert not np.array_equal(s, a["contribution"])
    # the random block is spread over the blocks
    p, _ = predict("random", a, seed=0)
    assert len(np.unique(p)) == k

    # through score(): same seed, same rows; another seed, other predictions
    s0, s0b, s1 = score(t, seed=0), score(t, seed=0), score(t, seed=1)
    pd.testing.assert_frame_equal(s0, s0b)
    for method in ("random", "shuffled"):
        a0 = s0[s0.method == method].predicted.to_numpy()
        a1 = s1[s1.method == method].predicted.to_numpy()
        assert not np.array_equal(a0, a1)
    for method in ("ig_lens", "logit_jump", "block_3"):
        pd.testing.assert_frame_equal(s0[s0.method == method], s1[s1.method == method])
    # a random method's draws do not depend on which other methods are scored
    only = score(t, seed=0, methods=["shuffled"])
    pd.testing.assert_frame_equal(
        only.reset_index(drop=True), s0[s0.method == "shuffled"].reset_index(drop=True)
    )


def test_method_names_list_every_constant():
    names = method_names(4)
    assert names[: len(PREDICTORS)] == list(PREDICTORS)
    assert names[len(PREDICTORS) :] == ["block_1", "block_2", "block_3", "block_4"]
    assert set(PREDICTORS) == {
        "ig_lens",
        "logit_lens_first_top1",
        "logit_jump",
        "frozen_norm",
        "random",
        "shuffled",
    }


# --------------------------------------------------------------------------- metrics


def test_metrics_on_a_hand_built_token(hand):
    s = score(hand).set_index("method")
    assert list(score(hand).columns) == list(SCORE_COLUMNS)
    assert len(s) == len(method_names(6)) and set(s["mode"]) == {"zero"}
    assert (s.prompt == 0).all() and (s.position == 3).all()

    # largest drop: segment 1 (block 2); three largest: segments 1, 2, 5
    expect = {  # method: (predicted, agreement, hit_at_3)
        "ig_lens": (2, False, True),
        "logit_lens_first_top1": (4, False, False),
        "logit_jump": (1, True, True),
        "frozen_norm": (3, False, False),
        "block_1": (0, False, False),
        "block_2": (1, True, True),
        "block_3": (2, False, True),
        "block_6": (5, False, True),
    }
    for method, (p, agree, hit) in expect.items():
        row = s.loc[method]
        assert (row.predicted, row.agreement, row.hit_at_3) == (p, agree, hit), method

    # ρ against the textbook formula (untied data) ...
    assert s.loc["ig_lens", "rho"] == pytest.approx(spearman_untied(C, DROPS))
    assert s.loc["frozen_norm", "rho"] == pytest.approx(spearman_untied(FROZEN_DELTA, DROPS))
    # ... and with ties: average ranks of the jumps, Pearson by hand
    ranks_jump = [2.5, 6, 2.5, 5, 2.5, 2.5]
    ranks_drop = [2, 6, 5, 3, 1, 4]
    assert s.loc["logit_jump", "rho"] == pytest.approx(np.corrcoef(ranks_jump, ranks_drop)[0, 1])
    for method in ("logit_lens_first_top1", "block_1", "block_6"):
        assert np.isnan(s.loc[method, "rho"])


def test_no_prediction_is_a_miss_and_nan_drops_are_never_the_largest():
    t = token_rows(0, 0, [0.1, 0.5, 0.2, 0.0], [np.nan, 0.3, 0.1, 0.2])
    s = score(t).set_index("method")
    assert s.loc["logit_lens_first_top1", "predicted"] == -1
    assert not s.loc["logit_lens_first_top1", "agreement"]
    assert not s.loc["logit_lens_first_top1", "hit_at_3"]
    assert not s.loc["block_1", "hit_at_3"]  # the NaN drop is not among the three largest
    assert s.loc["block_4", "hit_at_3"] and s.loc["block_3", "hit_at_3"]
    assert s.loc["ig_lens", "agreement"]
    # ρ over the three finite pairs
    assert s.loc["ig_lens", "rho"] == pytest.approx(
        spearman_untied([0.5, 0.2, 0.0], [0.3, 0.1, 0.2])
    )


def test_spearman_rows_matches_references():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(50, 9)), rng.normal(size=(50, 9))
    got = spearman_rows(a, b)
    for i in range(50):
        assert got[i] == pytest.approx(spearman_untied(a[i], b[i]))
    # ties, against the former validation's own implementation where it is still there
    validation = pytest.importorskip("iglens_viz.causal.validation")
    if hasattr(validation, "spearman"):
        at, bt = np.round(a, 0), np.round(b, 0)
        for i in range(50):
            ref = validation.spearman(at[i], bt[i])
            assert (np.isnan(ref) and np.isnan(spearman_rows(at[i], bt[i])[0])) or spearman_rows(
                at[i], bt[i]
            )[0] == pytest.approx(ref)
    # constant input has no rank correlation
    assert np.isnan(spearman_rows([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])[0])
    assert np.isnan(spearman_rows([1.0, np.nan, 2.0], [np.nan, 1.0, 3.0])[0])


def test_modes_and_skipped_tokens():
    t = table_of(
        token_rows(0, 0, [0.1, 0.5, 0.2], {"zero": [0.1, 0.2, 0.3], "mean": [0.3, 0.2, 0.1]}),
        token_rows(0, 1, [0.1, 0.5, 0.2], {"zero": [np.nan] * 3, "mean": [0.0, 0.2, 0.1]}),
    )
    s = score(t)
    assert set(s["mode"]) == {"zero", "mean"}
    assert len(s[s["mode"] == "zero"]) == len(method_names(3))  # position 1 skipped
    assert len(s[s["mode"] == "mean"]) == 2 * len(method_names(3))
    assert set(score(t, modes=["drop_mean"])["mode"]) == {"mean"}
    assert set(score(t, modes="zero")["mode"]) == {"zero"}
    with pytest.raises(InvalidRequestError):
        score(t, modes=["resample"])
    with pytest.raises(InvalidRequestError):
        score(t.drop(columns=["frozen_prob_end"]))
    assert set(
        score(t.drop(columns=["frozen_prob_end"]), methods=["ig_lens", "block_1"])["method"]
    ) == {"ig_lens", "block_1"}
    with pytest.raises(InvalidRequestError):
        score(t.iloc[1:])  # a token with a missing segment
    # row order of the input does not matter
    shuffled = t.sample(frac=1.0, random_state=0)
    pd.testing.assert_frame_equal(score(shuffled), s)


# --------------------------------------------------------------------------- classes


def test_token_classes_against_hand_computations(hand):
    t = table_of(
        token_rows(0, 0, [0.1, 0.3, 0.2, 0.05], [1, 0, 0, 0]),  # all up: monotone
        token_rows(0, 1, [0.1, 0.3, -0.2, 0.05], [1, 0, 0, 0]),  # rises, falls: not
        token_rows(0, 2, [0.1, 0.3, -0.17, 0.05], [1, 0, 0, 0]),  # 0.17 < 60% of 0.3
        token_rows(0, 3, [0.1, 0.2, 0.1, 0.4], [1, 0, 0, 0]),  # onset last block
        token_rows(0, 4, [-0.1, -0.3, -0.2, 0.4], [1, 0, 0, 0]),  # Δp < 0, onset last
        token_rows(0, 5, [0.0, 0.0, 0.0, 0.0], [1, 0, 0, 0]),  # flat: monotone
    )
    s = score(t)
    tok = s[s.method == "ig_lens"].set_index("position")
    assert tok.monotone.to_dict() == {0: True, 1: False, 2: True, 3: True, 4: False, 5: True}
    assert tok.onset_last.to_dict() == {0: False, 1: False, 2: False, 3: True, 4: True, 5: False}
    # the classes are properties of the token, the same for every method
    assert (s.groupby("position").monotone.nunique() == 1).all()
    assert (s.groupby("position").onset_last.nunique() == 1).all()
    # the hand-built token: peak at block 3 of 6; its -0.02 segment exceeds 5% of 0.30 but not
    # the default 60%: non-monotone at 5%, monotone by default
    h = score(hand, nonmonotone_threshold=0.05)
    assert not h.monotone.any() and not h.onset_last.any()
    assert score(hand).monotone.all()


# --------------------------------------------------------------------------- summary


def test_constant_beats_ig_lens_when_drops_always_peak_at_block_1():
    t = random_table(30, 4, 6, seed=2, modes=("zero", "mean"), peak=0)
    summary = summarize(score(t), n_boot=200)
    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    assert set(summary.token_class) == set(CLASSES)
    s = summary[summary.token_class == "all"].set_index(["mode", "method"])
    for mode in ("zero", "mean"):
        assert s.loc[(mode, "block_1"), "agreement"] == 1.0
        assert s.loc[(mode, "block_1"), "hit_at_3"] == 1.0
        assert s.loc[(mode, "ig_lens"), "agreement"] < 0.5
        # the interval says it too: IG-Lens's upper bound stays below the constant
        assert s.loc[(mode, "ig_lens"), "agreement_hi"] < 1.0
        assert s.loc[(mode, "block_2"), "agreement"] == 0.0
        assert s.loc[(mode, "block_1"), "n_tokens"] == 120
        assert s.loc[(mode, "block_1"), "n_prompts"] == 30
    best = best_constant(summary)
    nonempty = (summary[summary.method == "block_1"].n_tokens > 0).sum()
    assert len(best) == nonempty  # one best constant per (mode, non-empty class)
    assert set(best[best.token_class == "all"].method) == {"block_1"}
    h = headline(summary[(summary["mode"] == "zero") & (summary.token_class == "all")])
    assert list(h.label) == [
        *PREDICTORS,
        "first block (block_1)",
        "last block (block_6)",
        "best constant (block_1)",
    ]


def test_summary_values_and_intervals_match_the_definitions():
    t = random_table(25, 3, 5, seed=4)
    scores = score(t)
    summary = summarize(scores, n_boot=300, seed=7)
    for cls in CLASSES:
        for method in ("ig_lens", "shuffled", "block_2"):
            row = summary[(summary.method == method) & (summary.token_class == cls)].iloc[0]
            s = scores[scores.method == method]
            mask = {
                "all": np.ones(len(s), bool),
                "monotone": s.monotone,
                "non_monotone": ~s.monotone,
                "onset_last": s.onset_last,
                "onset_not_last": ~s.onset_last,
            }[cls]
            s = s[np.asarray(mask)]
            assert row.n_tokens == len(s) and row.n_prompts == s.prompt.nunique()
            if not len(s):
                assert np.isnan(row.agreement)
                continue
            assert row.agreement == pytest.approx(s.agreement.mean())
            assert row.hit_at_3 == pytest.approx(s.hit_at_3.mean())
            assert row.n_rho == np.isfinite(s.rho).sum()
            if row.n_rho:
                assert row.rho == pytest.approx(np.nanmean(s.rho))
            else:
                assert np.isnan(row.rho) and np.isnan(row.rho_lo)
            # the same resamples as bootstrap_interval with the same seed
            s = s.sort_values(["prompt", "position"])
            lo, hi = bootstrap_interval(
                s.agreement.to_numpy(), s.prompt.to_numpy(), n_boot=300, seed=7
            )
            if row.n_prompts >= 2:
                assert (row.agreement_lo, row.agreement_hi) == pytest.approx((lo, hi))
                assert row.agreement_lo <= row.agreement <= row.agreement_hi
            else:
                assert np.isnan(row.agreement_lo) and np.isnan(lo)
    # deterministic with a seed
    pd.testing.assert_frame_equal(summary, summarize(scores, n_boot=300, seed=7))
    assert not summary.agreement_lo.equals(summarize(scores, n_boot=300, seed=8).agreement_lo)


def test_one_prompt_group_has_no_interval():
    t = table_of(
        token_rows(0, 0, [0.1, 0.2, 0.5], [0.0, 0.1, 0.5]),  # onset last, prompt 0
        token_rows(0, 1, [0.1, 0.6, 0.2], [0.0, 0.1, 0.5]),
        token_rows(1, 0, [0.1, 0.6, 0.2], [0.0, 0.5, 0.1]),
        token_rows(2, 0, [0.6, 0.1, 0.2], [0.0, 0.5, 0.1]),
    )
    summary = summarize(score(t), n_boot=100).set_index(["method", "token_class"])
    last = summary.loc[("ig_lens", "onset_last")]
    assert last.n_prompts == 1 and last.n_tokens == 1 and last.agreement == 1.0
    assert np.isnan(last.agreement_lo) and np.isnan(last.agreement_hi)
    every = summary.loc[("ig_lens", "all")]
    assert every.n_prompts == 3 and np.isfinite(every.agreement_lo)
    assert summary.loc[("ig_lens", "monotone"), "n_tokens"] == 4
    assert summary.loc[("ig_lens", "non_monotone"), "n_tokens"] == 0
    assert np.isnan(summary.loc[("ig_lens", "non_monotone"), "agreement"])


# --------------------------------------------------------------------------- bootstrap


def bernoulli(n_prompts, seed, p=0.3, per_prompt=5):
    rng = np.random.default_rng(seed)
    values = rng.random(n_prompts * per_prompt) < p
    return values, np.repeat(np.arange(n_prompts), per_prompt)


def test_bootstrap_covers_a_known_mean():
    covered = 0
    for r in range(200):
        values, clusters = bernoulli(200, seed=1000 + r)
        lo, hi = bootstrap_interval(values, clusters, n_boot=1000, seed=r, level=0.95)
        covered += lo <= 0.3 <= hi
    assert 0.9 <= covered / 200 <= 0.99


def test_bootstrap_width_shrinks_with_more_prompts():
    widths = {}
    for n in (50, 200, 800):
        w = []
        for r in range(10):
            lo, hi = bootstrap_interval(*bernoulli(n, seed=r), n_boot=500, seed=r)
            w.append(hi - lo)
        widths[n] = np.mean(w)
    assert widths[800] < widths[200] < widths[50]
    assert widths[800] < 0.7 * widths[200]  # ~ 1/sqrt(n): halves when n quadruples


def test_bootstrap_is_deterministic_and_handles_edge_cases():
    values, clusters = bernoulli(60, seed=0)
    a = bootstrap_interval(values, clusters, n_boot=400, seed=3)
    assert a == bootstrap_interval(values, clusters, n_boot=400, seed=3)
    assert a != bootstrap_interval(values, clusters, n_boot=400, seed=4)
    # one prompt: no interval
    lo, hi = bootstrap_interval([1.0, 0.0, 1.0], [5, 5, 5])
    assert np.isnan(lo) and np.isnan(hi)
    # clusters resample as units: constant within prompts, the interval is the prompt means'
    v = np.repeat([0.0, 1.0], 50)
    lo, hi = bootstrap_interval(v, np.repeat([0, 1], 50), n_boot=2000, seed=0)
    assert lo == 0.0 and hi == 1.0
    # 2-D: columns resampled together, each as its own 1-D call with the same seed
    rng = np.random.default_rng(1)
    m = np.column_stack([values, rng.normal(size=len(values))])
    m[::7, 1] = np.nan  # NaNs are left out of the mean
    lo2, hi2 = bootstrap_interval(m, clusters, n_boot=400, seed=3)
    for j in range(2):
        assert (lo2[j], hi2[j]) == pytest.approx(
            bootstrap_interval(m[:, j], clusters, n_boot=400, seed=3)
        )
    with pytest.raises(InvalidRequestError):
        bootstrap_interval(values, clusters[:-1])
    with pytest.raises(InvalidRequestError):
        bootstrap_interval(values, clusters, level=1.5)


def test_identical_prompts_give_an_interval_that_holds_the_mean():
    """Every replicate of three identical prompts is their mean, summed in another order:
    an ulp off, a bound passed the estimate (and the report's error bars went negative)."""
    tokens = [0.8701448475755365, 0.6317071082430643, -0.9945229996597038]
    values, clusters = np.tile(tokens, 3), np.repeat([0, 1, 2], 3)
    mean = np.nanmean(values)
    lo, hi = bootstrap_interval(values, clusters, n_boot=200, seed=0)
    assert lo <= mean <= hi and hi - lo < 4 * np.finfo(float).eps
    # a real spread is left alone: the bounds are the replicates' quantiles
    spread = values + np.repeat([0.0, 0.0, 1e-6], 3)
    lo, hi = bootstrap_interval(spread, clusters, n_boot=200, seed=0)
    assert lo < np.nanmean(spread) < hi and hi - lo > 1e-7


# --------------------------------------------------------------------------- clusters, pairs


def naive_bootstrap(values, clusters, n_boot, seed, level=0.95):
    """A loop over replicates: draw as many clusters as there are (with replacement, the
    draws :func:`bootstrap_interval` documents), pool the drawn clusters' finite values."""
    labels = list(dict.fromkeys(clusters))  # first-appearance order, as pandas.factorize
    groups = [values[np.asarray(clusters) == c] for c in labels]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(labels), size=(n_boot, len(labels)))
    means = []
    for row in draws:
        pooled = np.concatenate([groups[i] for i in row])
        means.append(np.nanmean(pooled))
    alpha = (1 - level) / 2
    return tuple(np.quantile(means, [alpha, 1 - alpha]))


def test_a_cluster_column_is_the_unit_of_the_bootstrap():
    t = random_table(24, 2, 5, seed=11)
    t["cluster"] = "c" + (t["prompt"] // 3).astype(str)  # three prompts per cluster
    scores = score(t)
    assert set(scores.cluster) == {f"c{i}" for i in range(8)}
    summary = summarize(scores, n_boot=300, seed=2)
    row = summary[(summary.method == "ig_lens") & (summary.token_class == "all")].iloc[0]
    assert (row.n_prompts, row.n_clusters) == (24, 8)
    s = scores[scores.method == "ig_lens"].sort_values(["prompt", "position"])
    lo, hi = naive_bootstrap(s.agreement.to_numpy(float), s.cluster.to_numpy(), 300, 2)
    assert (row.agreement_lo, row.agreement_hi) == pytest.approx((lo, hi))
    # without the column every prompt is its own cluster
    by_prompt = summarize(score(t.drop(columns="cluster")), n_boot=300, seed=2)
    row = by_prompt[(by_prompt.method == "ig_lens") & (by_prompt.token_class == "all")].iloc[0]
    assert row.n_clusters == 24


def test_paired_differences_match_per_token_differences():
    t = random_table(30, 2, 6, seed=5)
    t["cluster"] = "c" + (t["prompt"] // 2).astype(str)
    scores = score(t)
    diffs = paired_differences(scores, n_boot=400, seed=3)
    assert list(diffs.columns) == list(DIFFERENCE_COLUMNS)
    assert "ig_lens" not in set(diffs.method)
    wide = {
        m: scores.pivot(index=["prompt", "position"], columns="method", values=m).astype(float)
        for m in ("agreement", "rho")
    }
    clusters = scores.drop_duplicates(["prompt", "position"]).sort_values(["prompt", "position"])
    for method in ("random", "shuffled", "logit_jump", "block_3"):
        for metric in ("agreement", "rho"):
            per_token = (wide[metric]["ig_lens"] - wide[metric][method]).to_numpy(float)
            row = diffs[
                (diffs.method == method) & (diffs.metric == metric) & (diffs.token_class == "all")
            ]
            if metric == "rho" and not np.isfinite(per_token).any():
                assert np.isnan(row.difference.iloc[0])  # a constant has no ρ
                continue
            row = row.iloc[0]
            assert row.difference == pytest.approx(np.nanmean(per_token))
            assert (row.n_tokens, row.n_clusters) == (60, 15)
            lo, hi = naive_bootstrap(per_token, clusters.cluster.to_numpy(), 400, 3)
            assert (row.lo, row.hi) == pytest.approx((lo, hi))
    with pytest.raises(InvalidRequestError, match="no method 'nope'"):
        paired_differences(scores, against="nope")


def test_the_verdict_is_worded_from_the_paired_difference():
    # Two methods that differ on few tokens, always in IG-Lens's favour: their marginal
    # intervals overlap, the paired difference does not hold 0.
    from iglens_study.report import _verdict

    rng = np.random.default_rng(0)
    n = 200
    ig = rng.random(n) < 0.5
    other = ig & (rng.random(n) < 0.9)  # loses 10% of IG-Lens's hits, gains none
    scores = pd.DataFrame(
        {
            "mode": "zero",
            "prompt": np.tile(np.arange(n), 2),
            "position": 0,
            "method": np.repeat(["ig_lens", "logit_jump"], n),
            "predicted": 0,
            "agreement": np.concatenate([ig, other]),
            "hit_at_3": True,
            "rho": np.nan,
            "monotone": True,
            "onset_last": False,
            "cluster": np.tile(np.arange(n), 2).astype(str),
        }
    )
    summary = summarize(scores, n_boot=500).query("token_class == 'all'")
    a, b = (summary[summary.method == m].iloc[0] for m in ("ig_lens", "logit_jump"))
    assert a.agreement_lo < b.agreement_hi  # the marginal intervals overlap
    diffs = paired_differences(scores, n_boot=500).query("token_class == 'all'")
    d = diffs[diffs.metric == "agreement"].iloc[0]
    assert d.lo > 0 and d.difference == pytest.approx(ig.mean() - other.mean())
    text = _verdict(headline(summary), diffs)
    assert "more often than the best baseline, logit_jump" in text
    assert f"{d.difference:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}]" in text
    # the same numbers, the other way round: beaten
    swapped = scores.assign(method=np.repeat(["logit_jump", "ig_lens"], n))
    text = _verdict(
        headline(summarize(swapped, n_boot=500).query("token_class == 'all'")),
        paired_differences(swapped, n_boot=500).query("token_class == 'all'"),
    )
    assert "it is beaten by logit_jump" in text
