"""Static views: what the matplotlib figures draw, the tidy table, non-monotone detection and
readable token labels."""

from __future__ import annotations

import dataclasses
import io

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import QuadMesh  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import iglens_viz  # noqa: E402
from iglens_viz.core import segment_labels  # noqa: E402
from iglens_viz.views import (  # noqa: E402
    against_segments,
    against_steps,
    escape_mathtext,
    format_token,
    non_monotone,
    plot_heatmap,
    plot_token,
    static,
    to_dataframe,
)
from tests.support.tiny_models import random_ids, tiny_model, tiny_tokenizer  # noqa: E402

STEPS = 4


@pytest.fixture(scope="module")
def lens():
    return iglens_viz.IGLens(tiny_model("llama"), tiny_tokenizer())


@pytest.fixture(scope="module")
def result(lens):
    """target="next": the last position has no target (NaN row); steps > 1: path_probs."""
    return lens.attribute(random_ids(9, seed=4), target="next", steps=STEPS)


@pytest.fixture(scope="module")
def odd_result(result):
    """The same arrays with untrusted-looking token text."""
    tokens = list(result.tokens)
    tokens[:5] = [" the", "\n", "$x^2$", "\ta", "\u202eevil"]
    targets = list(result.target_tokens)
    targets[0] = "$y$"
    return dataclasses.replace(result, tokens=tokens, target_tokens=targets)


def _by_gid(artists, gid):
    return [a for a in artists if a.get_gid() == gid]


def _valid_positions(result):
    return [i for i in range(len(result.tokens)) if result.target_ids[i] >= 0]


# ----------------------------------------------------------------------------- heatmap


def test_heatmap_draws_contributions_on_symmetric_scale(result):
    fig = plot_heatmap(result)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    (mesh,) = [c for c in ax.collections if isinstance(c, QuadMesh)]
    assert mesh.get_gid() == static.GID_HEATMAP
    vmin, vmax = mesh.get_clim()
    expected = np.nanmax(np.abs(result.contributions))
    assert vmax == pytest.approx(expected) and vmin == pytest.approx(-expected)
    assert mesh.norm.vmin == -mesh.norm.vmax
    drawn = np.ma.filled(np.ma.asarray(mesh.get_array(), dtype=float), np.nan)
    np.testing.assert_array_equal(drawn.reshape(result.contributions.shape), result.contributions)
    # The NaN row (no target) is masked, greyed (axes face) and hatched.
    assert np.ma.getmaskarray(mesh.get_array()).reshape(result.contributions.shape)[-1].all()
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert len(hatched) == 1 and hatched[0].get_y() == len(result.tokens) - 1
    # Colour bar and labels.
    assert fig.axes[1].get_ylabel() == "contribution to p(target)"
    k = result.contributions.shape[1]
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(j) for j in range(1, k + 1)]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == f"[0] {result.tokens[0]} → {result.target_tokens[0]}"
    assert labels[-1].endswith("(no target)")


def test_heatmap_onset_outlines_and_annotations(result):
    ax = plot_heatmap(result, annotate=True).axes[0]
    outlined = [p for p in ax.patches if not p.get_hatch()]
    T, k = result.contributions.shape
    assert len(outlined) == T - 1  # one onset per position with a target
    for p in outlined:
        row, col = int(p.get_y()), int(p.get_x())
        assert result.onset[row] == result.boundaries[col + 1]
    numbers = [t for t in ax.texts if t.get_text() != "no target"]
    assert len(numbers) == (T - 1) * k
    assert all(t.get_text()[0] in "+-" for t in numbers)


def test_heatmap_positions_and_given_ax(result):
    fig = Figure()
    ax = fig.add_subplot()
    assert plot_heatmap(result, ax=ax, positions=[2, 0], mark_onset=False) is fig
    (mesh,) = [c for c in ax.collections if isinstance(c, QuadMesh)]
    drawn = np.asarray(mesh.get_array(), dtype=float).reshape(2, -1)
    np.testing.assert_array_equal(drawn, result.contributions[[2, 0]])
    sub = result.contributions[[2, 0]]
    assert mesh.get_clim()[1] == pytest.approx(np.abs(sub).max())
    assert [t.get_text()[:3] for t in ax.get_yticklabels()] == ["[2]", "[0]"]


def test_heatmap_grouped_segment_labels(lens):
    grouped = lens.attribute(random_ids(6, seed=5), boundaries=[0, 1, 4])
    ax = plot_heatmap(grouped).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2–4"]
    assert segment_labels([0, 2, 4]) == ["1–2", "3–4"]


def test_token_labels_are_readable_and_escaped(odd_result):
    fig = plot_heatmap(odd_result)
    labels = fig.axes[0].get_yticklabels()
    texts = [t.get_text() for t in labels]
    assert texts[0] == r"[0] ␣the → \$y\$"
    assert texts[1].startswith("[1] ↵ → ")
    assert texts[2].startswith(r"[2] \$x^2\$ → ")
    assert texts[3].startswith("[3] ⇥a → ")
    assert texts[4].startswith(r"[4] \u202eevil → ")  # no raw bidi override
    for t in labels[:3]:
        assert not t.get_usetex()
        shown, is_math = t._preprocess_math(t.get_text())
        assert not is_math  # drawn as text, not a formula
    assert "$x^2$" in labels[2]._preprocess_math(texts[2])[0]
    fig.savefig(io.BytesIO(), format="png")  # renders without a mathtext error


# ----------------------------------------------------------------------------- one token


def test_plot_token_bars_curve_path_and_overlay(result):
    i = 1
    fig = plot_token(result, i)
    ax_bar, ax_curve, ax_top = fig.axes
    k = result.contributions.shape[1]
    bars = _by_gid(ax_bar.patches, static.GID_BARS)
    assert len(bars) == k
    np.testing.assert_allclose([b.get_height() for b in bars], result.contributions[i])
    centres = [b.get_x() + b.get_width() / 2 for b in bars]
    np.testing.assert_allclose(centres, np.arange(k) + 0.5)
    for bar, c in zip(bars, result.contributions[i]):
        expected = static.POSITIVE_COLOR if c >= 0 else static.NEGATIVE_COLOR
        assert matplotlib.colors.same_color(bar.get_facecolor(), expected)

    (curve,) = _by_gid(ax_curve.lines, static.GID_CURVE)
    np.testing.assert_array_equal(curve.get_xdata(), result.boundaries)
    np.testing.assert_array_equal(curve.get_ydata(), result.lens_probs[i])
    (path,) = _by_gid(ax_curve.lines, static.GID_PATH)
    np.testing.assert_array_equal(path.get_ydata(), result.path_probs[i].ravel())
    x = np.asarray(path.get_xdata()).reshape(k, STEPS + 1)
    np.testing.assert_allclose(x[:, 0], result.boundaries[:-1])
    np.testing.assert_allclose(x[:, 1], np.asarray(result.boundaries[:-1]) + 1 / STEPS)

    (top1,) = _by_gid(ax_top.lines, static.GID_TOP1)
    np.testing.assert_array_equal(top1.get_ydata(), result.top_probs[i, :, 0])
    ids = result.top_ids[i, :, 0]
    changes = [0] + [j for j in range(1, len(ids)) if ids[j] != ids[j - 1]]
    assert [t.get_text() for t in ax_top.texts] == [
        format_token(result.token_text[int(ids[j])], max_len=12) for j in changes
    ]

    title = fig._suptitle.get_text()
    total, dp = result.contributions[i].sum(), result.delta_p[i]
    assert f"Σ contributions = {total:+.4f}" in title and f"Δp = {dp:+.4f}" in title
    assert "error" in title and result.target_tokens[i] in title
    fig.savefig(io.BytesIO(), format="png")


def test_plot_token_marks_non_monotone_without_colour(result):
    # a threshold at which this small random case has flags (at the default 60% it has none)
    hits = [(i, non_monotone(result, i, threshold=0.05)) for i in _valid_positions(result)]
    i, flags = next((i, f) for i, f in hits if f.segments.any())
    fig = plot_token(result, i, threshold=0.05)
    bars = _by_gid(fig.axes[0].patches, static.GID_BARS)
    for bar, flagged in zip(bars, flags.segments):
        assert bool(bar.get_hatch()) == bool(flagged)
    for ax in fig.axes:
        spans = _by_gid(ax.patches, static.GID_NONMONOTONE)
        assert len(spans) == flags.segments.sum()
        assert all(s.get_hatch() for s in spans)
        xs = sorted(s.get_x() for s in spans)
        assert xs == [result.boundaries[j] for j in flags.segment_indices]
    # Flagged interior steps are drawn with x markers.
    i, flags = next((i, f) for i, f in hits if f.step_indices)
    lines = plot_token(result, i, threshold=0.05).axes[1].lines
    marked = [ln for ln in lines if ln.get_marker() == "x"]
    assert len(marked) == len(flags.step_indices)


def test_plot_token_into_one_ax(result):
    fig = Figure()
    ax = fig.add_subplot()
    assert plot_token(result, -2, ax=ax) is fig
    assert len(fig.axes) == 2  # ax and its twin
    k = result.contributions.shape[1]
    bars = _by_gid(ax.patches, static.GID_BARS)
    assert len(bars) == k
    np.testing.assert_allclose([b.get_height() for b in bars], result.contributions[-2])
    (curve,) = _by_gid(fig.axes[1].lines, static.GID_CURVE)
    np.testing.assert_array_equal(curve.get_ydata(), result.lens_probs[-2])
    assert "Σ contributions" in ax.get_title()


def test_plot_token_bad_positions(result):
    with pytest.raises(ValueError, match="no target"):
        plot_token(result, len(result.tokens) - 1)
    with pytest.raises(IndexError):
        plot_token(result, len(result.tokens))
    with pytest.raises(TypeError):
        plot_token(result, 1.0)


def test_plot_token_without_path_or_top_tokens(lens):
    plain = lens.attribute(random_ids(5))
    T, k1, _ = plain.top_ids.shape
    plain = dataclasses.replace(
        plain, top_ids=np.zeros((T, k1, 0), dtype=np.int64), top_probs=np.zeros((T, k1, 0))
    )  # as kept with top_k=0
    fig = plot_token(plain, 0)
    assert len(fig.axes) == 2  # no overlay panel without top tokens
    assert not _by_gid(fig.axes[1].lines, static.GID_PATH)


def test_result_methods(result):
    assert isinstance(result.plot_heatmap(), Figure)
    assert isinstance(result.plot_token(0), Figure)
    assert len(result.to_dataframe()) == result.contributions.size


# ----------------------------------------------------------------------------- table


def test_to_dataframe(result):
    df = to_dataframe(result)
    T, k = result.contributions.shape
    assert len(df) == T * k
    assert list(df.columns) == [
        "position",
        "token",
        "target",
        "target_id",
        "segment",
        "label",
        "block_start",
        "block_end",
        "contribution",
        "lens_prob_start",
        "lens_prob_end",
        "onset",
        "non_monotone",
        "delta_p",
    ]
    valid = df[df.target_id >= 0]
    sums = valid.groupby("position").contribution.sum()
    np.testing.assert_allclose(sums.to_numpy(), result.delta_p[sums.index], atol=1e-12)
    np.testing.assert_allclose(
        valid.lens_prob_end - valid.lens_prob_start, valid.contribution, atol=1e-12
    )
    assert (valid.groupby("position").onset.sum() == 1).all()
    onset_rows = valid[valid.onset]
    np.testing.assert_array_equal(onset_rows.block_end, result.onset[onset_rows.position])
    assert not df[df.target_id < 0].onset.any() and df[df.target_id < 0].contribution.isna().all()
    assert df.block_start.tolist()[:k] == list(range(1, k + 1))
    assert df.label.tolist()[:k] == [str(b) for b in range(1, k + 1)]
    assert df.token.tolist()[::k] == result.tokens


# ----------------------------------------------------------------------------- trajectory


def test_against_segments_rise_then_fall():
    c = np.array([0.3, 0.4, -0.2, -0.01, 0.02])
    np.testing.assert_array_equal(
        against_segments(c, c.sum(), threshold=0.05), [False, False, True, False, False]
    )  # -0.01 < 5% of 0.4
    assert against_segments(c, c.sum(), threshold=0.0)[3]
    # the default (60%): a fall of half the largest rise is not flagged, one of 70% is
    assert not against_segments(c, c.sum()).any()  # 0.2 < 60% of 0.4
    big = np.array([0.3, 0.4, -0.28, 0.1])
    np.testing.assert_array_equal(against_segments(big, big.sum()), [False, False, True, False])
    falling = np.array([-0.5, 0.2, -0.1])
    np.testing.assert_array_equal(
        against_segments(falling, falling.sum(), threshold=0.05), [False, True, False]
    )
    assert not against_segments(falling, falling.sum()).any()  # 0.2 < 60% of 0.5


def test_against_segments_monotone_and_degenerate():
    assert not against_segments([0.1, 0.2, 0.3], 0.6).any()
    assert not against_segments([-0.1, -0.2], -0.3).any()
    assert not against_segments([0.2, -0.2], 0.0).any()  # no net direction
    assert not against_segments([0.0, 0.0], 0.0).any()
    assert not against_segments([np.nan, np.nan], np.nan).any()
    rows = against_segments([[0.3, -0.2], [0.1, 0.2], [np.nan, np.nan]], [0.1, 0.3, np.nan])
    np.testing.assert_array_equal(rows, [[False, True], [False, False], [False, False]])
    with pytest.raises(ValueError):
        against_segments([0.1], 0.1, threshold=2)


def test_against_steps():
    path = np.array(
        [
            [0.0, 0.5, 0.3, 0.6],  # rises, dips, rises: step 1 against
            [0.6, 0.5, 0.4, 0.2],  # monotone fall
            [0.2, 0.201, 0.2, 0.15],
        ]
    )  # falls; the 0.001 wiggle is below threshold
    np.testing.assert_array_equal(
        against_steps(path, threshold=0.05),
        [[False, True, False], [False, False, False], [False, False, False]],
    )
    assert not against_steps(path).any()  # the default 60%: the dip 0.2 < 0.6 * 0.5
    deep = np.array([[0.0, 0.5, 0.1, 0.6]])  # a dip of 0.4 > 0.6 * 0.5
    np.testing.assert_array_equal(against_steps(deep), [[False, True, False]])
    assert not against_steps([[0.1, 0.3, 0.1]]).any()  # no net change: no direction
    assert not against_steps(np.full((2, 3), np.nan)).any()
    assert against_steps(np.stack([path, path])).shape == (2, 3, 3)


def test_non_monotone_on_result(result):
    for i in _valid_positions(result):
        flags = non_monotone(result, i)
        np.testing.assert_array_equal(
            flags.segments, against_segments(result.contributions[i], result.delta_p[i])
        )
        assert flags.steps.shape == (result.contributions.shape[1], STEPS)
        assert flags.segment_indices == list(np.flatnonzero(flags.segments))
    last = non_monotone(result, len(result.tokens) - 1)
    assert not last.any


# ----------------------------------------------------------------------------- token text


@pytest.mark.parametrize(
    "text, shown",
    [
        (" the", "␣the"),
        ("the ", "the␣"),
        ("   ", "␣␣␣"),
        ("New York", "New York"),
        ("\n", "↵"),
        ("a\n\nb", "a↵↵b"),
        ("\t", "⇥"),
        ("\r\n", "\\r↵"),
        ("", "∅"),
        (None, "∅"),
        ("\x00", "\\x00"),
        ("\x1b[31m", "\\x1b[31m"),
        ("\u200b", "\\u200b"),
        ("a\u202eb", "a\\u202eb"),
        ("\u00a0", "\u237d"),  # a no-break space: the shouldered box, not a literal \xa0
        ("é$€", "é$€"),
    ],
)
def test_format_token(text, shown):
    assert format_token(text) == shown


def test_format_token_options_and_truncation():
    assert format_token(" the", space="·") == "·the"
    assert format_token("\n", newline="\\n") == "\\n"
    assert format_token("a b", all_spaces=True) == "a␣b"
    long = "internationalisation"
    assert format_token(long, max_len=8) == "interna…"
    assert len(format_token(long * 3)) == 16
    assert format_token(long, max_len=None) == long
    assert format_token("exactly8", max_len=8) == "exactly8"
    # An escape is never split: it is dropped whole.
    assert format_token("abcd\x00", max_len=6) == "abcd…"
    assert format_token("abc\x00def", max_len=7) == "abc…"
    with pytest.raises(ValueError):
        format_token("x", max_len=0)


def test_escape_mathtext():
    assert escape_mathtext("$x^2$") == r"\$x^2\$"
    assert escape_mathtext("a\\$") == "a\\\\$"
    assert escape_mathtext("plain") == "plain"
