"""The counterfactual study's scoring (issue 21) on hand-built pair tables.

Every expected value is computed by hand or independently here (numpy, scipy), never by
the module under test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from iglens_study.bootstrap import cluster_weights, median_interval
from iglens_study.pair_scoring import (
    comparison,
    hypotheses,
    pair_scores,
    pair_summary,
)
from iglens_viz.errors import InvalidRequestError

CRITERIA = ("patch_total", "patch_total_all", "patch_direct")


def spearman(a, b):
    """Spearman ρ of two vectors without ties: Pearson of their ranks (scipy-free)."""
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def make_table(columns: dict, clusters=None, **meta) -> pd.DataFrame:
    """A pair table from ``(P, n)`` arrays per column; unspecified effects are copies of
    ``patch_total``, unspecified method columns zeros with the last block 1 (names the last)."""
    first = np.atleast_2d(np.asarray(next(iter(columns.values())), dtype=float))
    p, n = first.shape
    cols = {k: np.atleast_2d(np.asarray(v, dtype=float)) for k, v in columns.items()}
    base = cols.get("patch_total", first)
    for c in (*CRITERIA, "restore_state"):
        cols.setdefault(c, base)
    default = np.zeros((p, n))
    default[:, -1] = 1.0
    for c in ("ig_logit", "attribution", "dla", "ld_jump"):
        cols.setdefault(c, default)
    clusters = [f"c{i}" for i in range(p)] if clusters is None else list(clusters)
    rows = []
    for i in range(p):
        for b in range(n):
            row = {
                "pair": i,
                "cluster": clusters[i],
                "clean": "The capital of France is",
                "corrupt": "The capital of Italy is",
                "target": " Paris",
                "contrast": " Rome",
                "target_id": 1,
                "contrast_id": 2,
                "template": "t0",
                "source": meta.get("source", ["builtin"] * p)[i],
                "n_tokens": 6,
                "p_target": 0.5,
                "target_top1": meta.get("top1", [True] * p)[i],
                "m_clean": 2.0,
                "m_corrupt": -1.0,
                "block": b + 1,
            }
            row.update({k: v[i, b] for k, v in cols.items()})
            rows.append(row)
    return pd.DataFrame(rows)


def rows_of(scores: pd.DataFrame, method: str) -> pd.DataFrame:
    return scores[scores["method"] == method].set_index("pair")


def spike(sites, n, height=1.0):
    x = np.zeros((len(sites), n))
    x[np.arange(len(sites)), np.asarray(sites) - 1] = height
    return x


# --------------------------------------------------------------------------- hits


def test_strict_and_tolerance_hits_against_each_criterion():
    total = [[0.1, 0.95, 1.0, 0.2, 0.0]]  # max 1.0 at block 3; tolerance bar 0.9
    direct = [[-1.0, -0.5, -0.55, -2.0, -3.0]]  # max -0.5 at block 2; bar -0.55
    table = make_table(
        {
            "patch_total": total,
            "patch_direct": direct,
            "ig_logit": [[0, 1, 0, 0, 0]],  # block 2
            "dla": [[0, 0, 1, 0, 0]],  # block 3
            "ld_jump": [[1, 0, 0, 0, 0]],  # block 1
        }
    )
    s = pair_scores(table)
    ig, dla, jump = (rows_of(s, m).loc[0] for m in ("ig_logit", "dla", "ld_jump"))
    assert (ig["named"], dla["named"], jump["named"]) == (2, 3, 1)
    # patch_total: 0.95 ≥ 0.9 is a tolerance hit, not strict; block 3 is both; block 1 neither
    assert not ig["strict_patch_total"] and ig["tol_patch_total"]
    assert dla["strict_patch_total"] and dla["tol_patch_total"]
    assert not jump["strict_patch_total"] and not jump["tol_patch_total"]
    # a negative maximum: the bar is max − 0.1·|max| = −0.55, block 3 sits exactly on it
    assert ig["strict_patch_direct"] and ig["tol_patch_direct"]
    assert not dla["strict_patch_direct"] and dla["tol_patch_direct"]
    assert not jump["tol_patch_direct"]


def test_window_is_two_blocks_either_side_of_the_patch_total_argmax():
    n = 10
    total = spike([5] * 4, n)
    named = [3, 7, 2, 8]
    ig = spike(named, n)
    s = rows_of(pair_scores(make_table({"patch_total": total, "ig_logit": ig})), "ig_logit")
    assert list(s["named"]) == named
    assert list(s["window"]) == [True, True, False, False]
    assert (s["patch_argmax"] == 5).all()


def test_signed_argmax_not_absolute():
    # a large negative contribution is not the onset
    table = make_table({"patch_total": [[0, 1, 0, 0]], "ig_logit": [[-5.0, 0.2, 0.1, 0.0]]})
    assert rows_of(pair_scores(table), "ig_logit").loc[0, "named"] == 2


def test_rho_with_and_without_the_last_block():
    rng = np.random.default_rng(3)
    ig = rng.normal(size=(5, 7))
    direct = rng.normal(size=(5, 7))
    # the identity: the last block is the largest of both
    ig[:, -1] = direct[:, -1] = 10.0
    s = rows_of(pair_scores(make_table({"patch_direct": direct, "ig_logit": ig})), "ig_logit")
    for i in range(5):
        assert s.loc[i, "rho_patch_direct"] == pytest.approx(spearman(ig[i], direct[i]))
        assert s.loc[i, "rho_patch_direct_nolast"] == pytest.approx(
            spearman(ig[i, :-1], direct[i, :-1])
        )
    assert (s["rho_patch_direct"] > s["rho_patch_direct_nolast"]).all()


def test_restore_at_the_named_block_and_sufficiency_depth():
    restore = [[0.0, 0.2, 0.6, 0.4, 1.0], [0.0, 0.1, 0.2, 0.3, 0.4]]
    ig = spike([4, 2], 5)
    s = rows_of(
        pair_scores(
            make_table({"patch_total": spike([1, 1], 5), "restore_state": restore, "ig_logit": ig})
        ),
        "ig_logit",
    )
    assert list(s["restore"]) == [0.4, 0.1]
    assert s.loc[0, "sufficiency_depth"] == 3 and np.isnan(s.loc[1, "sufficiency_depth"])


def test_saturated_pairs_have_two_blocks_at_or_above_0_9():
    total = [[0.9, 0.95, 0.1], [0.89, 1.0, 0.0], [1.0, 1.0, 1.0]]
    s = rows_of(pair_scores(make_table({"patch_total": total})), "ig_logit")
    assert list(s["saturated"]) == [True, False, True]
    summary = pair_summary(make_table({"patch_total": total}), n_boot=50)
    row = summary.saturated.set_index("token_class").loc["all"]
    assert row["share"] == pytest.approx(2 / 3)


# --------------------------------------------------------------------------- baselines


def test_best_constant_is_the_block_with_most_hits_per_metric():
    n = 6
    # patch_total argmax at blocks 1, 1, 5, 5, 6. Strict: blocks 1 and 5 hit twice (ties:
    # the lowest, block 1). ±2 window: block 3 is within 2 of 1, 1, 5, 5 (four hits), block 4
    # of 5, 5, 6 (three), the others fewer: block 3.
    total = spike([1, 1, 5, 5, 6], n)
    direct = spike([4, 4, 4, 4, 2], n)  # strict against patch_direct: block 4
    s = pair_scores(make_table({"patch_total": total, "patch_direct": direct}))
    windows = np.array([[abs(b - a) <= 2 for b in range(1, n + 1)] for a in [1, 1, 5, 5, 6]])
    assert list(windows.sum(axis=0)) == [2, 2, 4, 3, 3, 3]
    chosen = s.attrs["best_constant"]
    assert chosen["strict_patch_total"] == 1
    assert chosen["strict_patch_direct"] == 4
    assert chosen["window"] == 3
    const = rows_of(s, "best_constant")
    assert list(const["strict_patch_total"]) == [True, True, False, False, False]
    assert list(const["strict_patch_direct"]) == [True, True, True, True, False]
    assert (const["named"] == 3).all()
    assert list(const["window"]) == [True, True, True, True, False]


def test_best_constant_ranks_with_the_leave_one_country_out_mean():
    rng = np.random.default_rng(5)
    direct = rng.normal(size=(6, 5))
    clusters = ["a", "a", "b", "b", "c", "d"]
    s = rows_of(pair_scores(make_table({"patch_direct": direct}, clusters)), "best_constant")
    g = np.array(clusters)
    for i in range(6):
        loo = direct[g != g[i]].mean(axis=0)
        assert s.loc[i, "rho_patch_direct"] == pytest.approx(spearman(loo, direct[i]))


def test_random_block_is_seeded_and_uniform():
    n = 5
    table = make_table({"patch_total": spike([1] * 400, n)})
    a = rows_of(pair_scores(table, seed=0), "random")["named"]
    b = rows_of(pair_scores(table, seed=0), "random")["named"]
    c = rows_of(pair_scores(table, seed=1), "random")["named"]
    assert a.equals(b) and not a.equals(c)
    counts = np.bincount(a, minlength=n + 1)[1:]
    assert counts.min() > 50  # 80 expected per block


# --------------------------------------------------------------------------- intervals


def _sites_table(p=24, n=12, countries=12, seed=0, **extra):
    rng = np.random.default_rng(seed)
    sites = rng.integers(1, n + 1, size=p)
    total = spike(sites, n) + rng.normal(0, 0.01, (p, n))
    cols = {"patch_total": total, "patch_direct": total, "ig_logit": total}
    cols.update(extra)
    return make_table(cols, [f"c{i % countries}" for i in range(p)]), sites


def test_a_method_identical_to_ig_lens_differs_by_exactly_zero():
    table, _ = _sites_table()
    table["dla"] = table["ig_logit"]
    m = pair_summary(table, n_boot=200).methods
    dla = m[m["method"] == "dla"]
    assert len(dla) and (dla["diff"] == 0).all()
    assert (dla["diff_lo"] == 0).all() and (dla["diff_hi"] == 0).all()
    ig = m[m["method"] == "ig_logit"]
    assert (ig["diff"] == 0).all()


def test_paired_difference_interval_matches_an_independent_cluster_bootstrap():
    table, sites = _sites_table(p=30, countries=10, seed=2)
    rng = np.random.default_rng(9)
    table["ig_logit"] = table["ig_logit"] + rng.normal(0, 0.6, len(table))
    clusters = table.drop_duplicates("pair")["cluster"].to_numpy()
    s = pair_scores(table)
    ig = rows_of(s, "ig_logit")["window"].to_numpy(float)
    rnd = rows_of(s, "random")["window"].to_numpy(float)
    n_boot = 500
    # the cluster bootstrap done by hand: draw countries, pool their pairs
    uniq = np.unique(clusters)
    draws = np.random.default_rng(0).integers(0, len(uniq), size=(n_boot, len(uniq)))
    stats = []
    for d in draws:
        idx = np.concatenate([np.flatnonzero(clusters == uniq[k]) for k in d])
        stats.append((ig[idx] - rnd[idx]).mean())
    lo, hi = np.quantile(stats, [0.025, 0.975])
    m = pair_summary(table, n_boot=n_boot, seed=0).methods
    row = m[(m["token_class"] == "all") & (m["method"] == "random") & (m["metric"] == "window")]
    assert row["diff"].iloc[0] == pytest.approx((ig - rnd).mean())
    assert row["diff_lo"].iloc[0] == pytest.approx(lo, abs=1e-12)
    assert row["diff_hi"].iloc[0] == pytest.approx(hi, abs=1e-12)


def test_two_phrasings_of_one_country_are_one_cluster():
    # every pair appears twice (two phrasings of a country, identical results)
    base, _ = _sites_table(p=20, countries=20, seed=4)
    rng = np.random.default_rng(1)
    base["ig_logit"] = base["ig_logit"] + rng.normal(0, 0.8, len(base))
    twin = base.copy()
    twin["pair"] += 1000
    both = pd.concat([base, twin], ignore_index=True)
    clustered = pair_summary(both, n_boot=2000).methods
    independent = both.copy()
    independent["cluster"] = independent["cluster"] + "/" + independent["pair"].astype(str)
    apart = pair_summary(independent, n_boot=2000).methods

    def width(m):
        r = m[(m["token_class"] == "all") & (m["method"] == "ig_logit")]
        r = r[r["metric"] == "window"].iloc[0]
        return r["hi"] - r["lo"]

    assert clustered["n_clusters"].iloc[0] == 20 and apart["n_clusters"].iloc[0] == 40
    assert width(clustered) > 1.2 * width(apart)


def test_median_interval_resamples_countries_like_the_mean():

    rng = np.random.default_rng(0)
    values = rng.normal(size=17)
    clusters = np.array([f"k{i % 6}" for i in range(17)])
    point, lo, hi = median_interval(values, clusters, 300, 7, 0.95)
    uniq, inverse = np.unique(clusters, return_inverse=True)
    weights = cluster_weights(len(uniq), 300, np.random.default_rng(7)).astype(int)
    medians = [np.median(np.repeat(values, w[inverse])) for w in weights]
    assert point == np.median(values)
    np.testing.assert_allclose([lo, hi], np.quantile(medians, [0.025, 0.975]), rtol=0, atol=0)


# --------------------------------------------------------------------------- NaN pairs


def test_nan_pairs_are_dropped_and_counted():
    table, _ = _sites_table(p=10, countries=5)
    table.loc[(table["pair"] == 3) & (table["block"] == 2), "patch_direct"] = np.nan
    table.loc[(table["pair"] == 7) & (table["block"] == 5), "ig_logit"] = np.nan
    s = pair_scores(table)
    assert s.attrs["n_dropped"] == 2 and s.attrs["dropped"] == [3, 7]
    assert set(s["pair"]) == set(range(10)) - {3, 7}
    summary = pair_summary(table, n_boot=20)
    assert (summary.n_pairs, summary.n_dropped) == (8, 2)
    assert hypotheses(table, n_boot=20).attrs["n_dropped"] == 2


def test_a_lens_column_of_nan_only_is_absent():
    table, _ = _sites_table(p=10, countries=5)
    table["ig_tuned"] = np.nan
    s = pair_scores(table)
    assert "ig_tuned" not in set(s["method"]) and s.attrs["n_dropped"] == 0


def test_a_pair_missing_a_block_is_refused():
    table, _ = _sites_table(p=4, countries=2)
    with pytest.raises(InvalidRequestError, match="one row per block"):
        pair_scores(table.drop(index=table.index[5]))
    with pytest.raises(InvalidRequestError, match="lacks"):
        pair_scores(table.drop(columns="restore_state"))


# --------------------------------------------------------------------------- words


def test_comparison_words_come_from_the_interval():
    assert comparison("IG-Lens", "ranks", "DLA", 0.21, 0.15, 0.27) == (
        "IG-Lens ranks better than DLA (+0.21 [0.15, 0.27])"
    )
    assert "no better than" in comparison("IG-Lens", "ranks", "DLA", 0.05, -0.01, 0.1)
    assert "worse than" in comparison("IG-Lens", "ranks", "DLA", -0.2, -0.3, -0.1)
    assert "no better than" in comparison("IG-Lens", "ranks", "DLA", 0.0, 0.0, 0.0)
    assert "no interval" in comparison("IG-Lens", "ranks", "DLA", 0.3, np.nan, np.nan)


# --------------------------------------------------------------------------- hypotheses


def _verdicts(table, **kw):
    h = hypotheses(table, n_boot=1000, **kw)
    return dict(zip(h["hypothesis"], h["verdict"])), h


def test_hypotheses_yes_when_ig_lens_finds_the_site():
    p, n = 36, 12
    rng = np.random.default_rng(0)
    sites = rng.integers(1, n + 1, size=p)
    total = spike(sites, n) + rng.normal(0, 0.02, (p, n))
    direct = spike(sites, n, 0.8) + rng.normal(0, 0.02, (p, n))
    restore = (np.arange(1, n + 1)[None, :] >= sites[:, None]).astype(float)
    logit = direct + rng.normal(0, 0.01, (p, n))
    off = np.where(np.arange(p) % 2 == 0, ((sites - 1 + 6) % n) + 1, sites)
    logit_total = spike(off, n) + 0.5 * direct  # onset off by 6 blocks for half the pairs
    cols = {
        "patch_total": total,
        "patch_direct": direct,
        "restore_state": restore,
        "ig_logit": logit,
        "ig_shortcut": logit,
        "dla": rng.normal(size=(p, n)),
        "ld_jump": rng.normal(size=(p, n)),
    }
    v, h = _verdicts(make_table(cols, [f"c{i % 12}" for i in range(p)]))
    assert v == {"H1": "yes", "H2": "yes", "H3": "yes", "H4": "no"}  # shortcut = logit: 0
    h4 = h.set_index("hypothesis").loc["H4"]
    assert h4["value"] == 0 and h4["lo"] == 0 and h4["hi"] == 0
    # H4: the logit lens misses half the sites, the shortcut lens finds them
    cols["ig_logit"] = logit_total
    cols["ig_shortcut"] = logit
    cols["ig_tuned"] = logit_total
    v, h = _verdicts(make_table(cols, [f"c{i % 12}" for i in range(p)]))
    assert v["H4"] == "yes" and v["H4 (tuned)"] == "no"
    assert h.set_index("hypothesis").loc["H4", "value"] == pytest.approx(0.5)
    assert "more often than" in h.set_index("hypothesis").loc["H4", "sentence"]


def test_hypotheses_no_when_ig_lens_does_not():
    p, n = 36, 12
    rng = np.random.default_rng(1)
    sites = rng.integers(1, n + 1, size=p)
    total = spike(sites, n) + rng.normal(0, 0.02, (p, n))
    cols = {
        "patch_total": total,
        "patch_direct": total,
        # sufficient at the last block only
        "restore_state": np.tile((np.arange(1, n + 1) == n).astype(float), (p, 1)),
        "ig_logit": rng.normal(size=(p, n)),
        "ig_shortcut": rng.normal(size=(p, n)),
        "dla": total,  # DLA ranks perfectly
        "ld_jump": rng.normal(size=(p, n)),
    }
    v, h = _verdicts(make_table(cols, [f"c{i % 12}" for i in range(p)]))
    assert v["H1"] == "no" and v["H2"] == "no" and v["H3"] == "no"
    h1 = h.set_index("hypothesis").loc["H1"]
    assert "does not beat frozen-norm DLA" in h1["sentence"]
    assert "worse than frozen-norm DLA" in h1["detail"]
    assert h1["hi"] < 0  # the binding comparison: DLA


def test_h3_boundary_and_h2_zero_difference():
    p, n = 12, 6
    sites = np.array([3] * p)
    total = spike(sites, n)
    restore = np.tile([0.0, 0.2, 0.5, 0.7, 0.9, 1.0], (p, 1))
    cols = {"patch_total": total, "restore_state": restore, "ig_logit": total}
    v, h = _verdicts(make_table(cols, [f"c{i % 6}" for i in range(p)]))
    h = h.set_index("hypothesis")
    assert h.loc["H3", "value"] == 0.5 and h.loc["H3", "lo"] == 0.5 and v["H3"] == "yes"
    # the onset is the best constant's block for every pair: a difference of 0 is not a yes
    assert h.loc["H2", "value"] == 0 and v["H2"] == "no"
    assert "sufficiency depth" in h.loc["H3", "detail"]


def test_a_hypothesis_whose_lens_is_absent_is_not_run():
    table, _ = _sites_table()
    v, _ = _verdicts(table)
    assert v["H4"] == "not run" and "H4 (tuned)" not in v
    v, _ = _verdicts(table.drop(columns="ig_logit"))
    assert set(v.values()) == {"not run"}


# --------------------------------------------------------------------------- report


def test_markdown_text_escapes_untrusted_strings():
    from iglens_study.pair_report import markdown_text

    assert markdown_text(" a|b") == " a\\|b"
    assert markdown_text(" a|b", token=True) == "␣a\\|b"
    # an escape's backslash is itself escaped: the page shows \x0a, the raw bytes never
    assert markdown_text("*x* <script>\n`c`") == "\\*x\\* \\<script\\>\\\\x0a\\`c\\`"
    assert markdown_text("\u202eevil") == "\\\\u202eevil"
    assert markdown_text("[l](http://x)") == "\\[l\\](http://x)"


def test_write_pair_report(tmp_path):
    from iglens_study.pair_report import write_pair_report

    table, _ = _sites_table(p=12, countries=6)
    table.loc[table["pair"] == 0, "target"] = " a|b"
    table.loc[(table["pair"] == 5) & (table["block"] == 1), "restore_state"] = np.nan
    path = write_pair_report(
        table, tmp_path / "out", {"model": "org/Model", "lens": "logit"}, n_boot=50
    )
    text = path.read_text(encoding="utf-8")
    assert "# Counterfactual study: org/Model" in text
    assert "11 pairs from 6 countries" in text and "1 pairs dropped" in text
    assert "| H4 |" in text and "**not run**" in text
    assert "␣a\\|b" in text and " a|b" not in text
    assert "best constant" in text and "Saturated pairs" in text
    for name in ("summary.csv", "hypotheses.csv", "effects_by_block.png", "hit_rates.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert {"method", "criterion", "metric", "diff_lo"} <= set(summary.columns)


def test_token_classes_top1_and_source_kind():
    from iglens_study.pair_scoring import source_kind

    assert source_kind("capital-pairs") == "capital-pairs"
    assert source_kind("my:pairs.jsonl:12") == "my:pairs.jsonl"
    n = 6
    sites = [2, 2, 5, 5, 3, 3]
    named = [2, 6, 5, 1, 3, 6]  # window hits: T, F, T, F, T, F
    top1 = [True, True, False, False, True, False]
    source = ["capital-pairs", "f.jsonl:1", "f.jsonl:2", "capital-pairs", "g.jsonl:1", "g.jsonl:2"]
    table = make_table(
        {"patch_total": spike(sites, n), "ig_logit": spike(named, n)},
        ["a", "b", "c", "a", "b", "c"],
        top1=top1,
        source=source,
    )
    m = pair_summary(table, n_boot=20).methods
    rows = m[(m["method"] == "ig_logit") & (m["metric"] == "window")].set_index("token_class")
    assert set(rows.index) == {
        "all",
        "target_top1",
        "source=capital-pairs",
        "source=f.jsonl",
        "source=g.jsonl",
    }
    assert rows.loc["all", "value"] == pytest.approx(3 / 6)
    assert rows.loc["target_top1", "value"] == pytest.approx(2 / 3)  # pairs 0, 1, 4
    assert rows.loc["source=f.jsonl", "value"] == pytest.approx(1 / 2)
    assert rows.loc["source=capital-pairs", "n_pairs"] == 2
