"""Fitted lenses (iglens_viz.lenses), each against an independent computation on tiny models.

* shortcut: ``torch.linalg.lstsq`` (QR, not the normal equations) on states read with the
  model's own ``output_hidden_states`` and a hook on its last block;
* Jacobian: ``torch.autograd.functional.jacobian`` of h_n as a function of the whole
  sequence's h_L, reduced as ``jlens`` does (docs/lenses.md);
* tuned: the logit lens at zero steps, a lower KL after training;
* files: own round trip, ``jlens`` and tuned-lens layouts written here as those packages
  write them; a lens for another model refused;
* evaluation: the logit lens at depth n, and one depth by hand.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

import iglens_viz
from iglens_viz import InvalidRequestError
from iglens_viz.lenses import (
    LOGIT,
    Lens,
    LensFileError,
    evaluate_lens,
    fit_lens,
    load_lens,
    resolve_lens,
    save_lens,
)
from iglens_viz.lenses.fit import kept_checkpoint
from tests.support.tiny_models import (
    random_ids,
    reference_readout_logits,
    tiny_model,
    tiny_tokenizer,
)

EPS32 = torch.finfo(torch.float32).eps
EPS64 = torch.finfo(torch.float64).eps


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def llama64():
    return tiny_model("llama", dtype=torch.float64)


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


TEXTS = [random_ids(30, seed=10 + s) for s in range(5)]


@torch.no_grad()
def reference_states(model, ids: torch.Tensor) -> torch.Tensor:
    """``[n+1, T, d]`` h_0 … h_n of one text: HF's hidden states 0 … n−1 (block inputs) and
    the last block's output from a hook (HF's last hidden state is already normed)."""
    kept = {}
    handle = model.model.layers[-1].register_forward_hook(
        lambda m, a, out: kept.update(h=out[0] if isinstance(out, tuple) else out)
    )
    try:
        out = model(input_ids=ids[None], output_hidden_states=True)
    finally:
        handle.remove()
    return torch.stack([*[h[0] for h in out.hidden_states[:-1]], kept["h"][0]])


def test_shortcut_equals_lstsq_on_the_same_states(llama64, tokenizer):
    lens = fit_lens(llama64, tokenizer, "shortcut", TEXTS)
    states = torch.cat([reference_states(llama64, ids)[:, 1:] for ids in TEXTS], dim=1)
    n = states.shape[0] - 1
    assert (
        lens.kind == "shortcut" and lens.n_blocks == n and sorted(lens.matrices) == list(range(n))
    )
    assert lens.settings["positions"] == states.shape[1] == sum(t.numel() - 1 for t in TEXTS)
    for L in range(n):
        X = torch.cat([states[L], torch.ones(states.shape[1], 1, dtype=torch.float64)], dim=-1)
        W = torch.linalg.lstsq(X, states[n], driver="gelsd").solution  # [d+1, d]
        # The normal equations lose up to κ(X)² u64 relative to ‖W‖ (Higham §20.4; a factor
        # of 10 for the sums' and the Cholesky's constants), then A and b are rounded to
        # float32 once (u32 relative per entry).
        kappa = float(torch.linalg.cond(X))
        scale = float(W.abs().max())
        atol = 10 * kappa**2 * EPS64 * scale
        want_A, want_b = W[:-1].T, W[-1]
        for got, want in ((lens.matrices[L], want_A), (lens.biases[L], want_b)):
            err = (got.double() - want).abs()
            assert (err <= atol + EPS32 / 2 * want.abs() * 1.001).all(), (L, float(err.max()))


def test_shortcut_needs_enough_positions_or_a_ridge(llama64, tokenizer):
    few = [random_ids(8, seed=1)]  # 7 positions, width 32: singular
    with pytest.raises(InvalidRequestError, match="ridge"):
        fit_lens(llama64, tokenizer, "shortcut", few)
    lens = fit_lens(llama64, tokenizer, "shortcut", few, ridge=1e-2)
    assert all(torch.isfinite(m).all() for m in lens.matrices.values())


def _reference_jacobian(model, ids: torch.Tensor, depth: int, skip_first: int) -> torch.Tensor:
    """J_L(text) by ``torch.autograd.functional.jacobian``: h_n of the whole sequence as a
    function of the whole sequence's h_L (put in place by a hook), reduced as jlens does."""
    layers = model.model.layers
    h = reference_states(model, ids)
    T = ids.numel()

    def final(x):
        kept = {}

        def replace_input(module, args, kwargs):
            if args:
                return (x, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": x}

        def replace_output(module, args, out):
            return (x, *out[1:]) if isinstance(out, tuple) else x

        if depth == 0:
            handles = [layers[0].register_forward_pre_hook(replace_input, with_kwargs=True)]
        else:
            handles = [layers[depth - 1].register_forward_hook(replace_output)]
        handles.append(
            layers[-1].register_forward_hook(
                lambda m, a, out: kept.update(h=out[0] if isinstance(out, tuple) else out)
            )
        )
        try:
            model(input_ids=ids[None])
        finally:
            for handle in handles:
                handle.remove()
        return kept["h"][0]

    jac = torch.autograd.functional.jacobian(
        final, h[depth][None], vectorize=True
    )  # [T, d, 1, T, d]
    valid = torch.arange(skip_first, T - 1)
    summed = jac[valid][:, :, 0].sum(0)  # Σ_{p' ∈ V}: [d, T, d]
    return summed[:, valid].mean(1)  # mean over source positions p ∈ V: [d, d]


def test_jacobian_equals_autograd_jacobian_reduced_as_jlens(llama64, tokenizer):
    texts = [random_ids(9, seed=20), random_ids(7, seed=21)]
    skip = 2
    lens = fit_lens(llama64, tokenizer, "jacobian", texts, skip_first=skip, dim_batch=5)
    assert lens.kind == "jacobian" and not lens.biases
    for depth in (0, 2, 3):
        want = sum(_reference_jacobian(llama64, t, depth, skip) for t in texts) / len(texts)
        got = lens.matrices[depth].double()
        # float64 on both sides (errors ~1e-15), then rounded once to float32.
        assert torch.allclose(got, want, rtol=EPS32, atol=EPS32 * float(want.abs().max())), depth


def test_jacobian_split_half_error_against_the_per_text_jacobians(llama64, tokenizer):
    from iglens_viz.adapters import adapter_for
    from iglens_viz.lenses.jacobian import text_jacobians

    texts = [random_ids(8, seed=30 + s) for s in range(3)]
    skip = 2
    lens = fit_lens(llama64, tokenizer, "jacobian", texts, skip_first=skip, dim_batch=32)
    errors = lens.settings["split_half_rel_error"]
    assert len(errors) == lens.n_blocks
    adapter = adapter_for(llama64)
    own = [text_jacobians(llama64, adapter, t, skip_first=skip, dim_batch=32) for t in texts]

    def split_half(per_text):
        half_a = (per_text[0] + per_text[2]) / 2  # alternate texts: 1st and 3rd, then 2nd
        whole = sum(per_text) / 3
        return float(torch.linalg.norm(half_a - per_text[1]) / torch.linalg.norm(whole))

    for depth in range(lens.n_blocks):
        # the halves and norms, from the fit's own per-text Jacobians: float64 rounding only
        assert math.isclose(errors[depth], split_half([j[depth] for j in own]), rel_tol=1e-12)
    for depth in (0, lens.n_blocks - 1):
        # from autograd's: the per-text Jacobians of the two agree to ~1e-7 relative (as in
        # the test above; the tiny Llama's rotary angles are float32), so 1e-6 here
        want = split_half([_reference_jacobian(llama64, t, depth, skip) for t in texts])
        assert math.isclose(errors[depth], want, rel_tol=1e-6), depth
        assert 0 < want < math.inf
    one = fit_lens(llama64, tokenizer, "jacobian", texts[:1], skip_first=skip, dim_batch=32)
    assert one.settings["split_half_rel_error"] is None  # one text: no halves


def test_an_interrupted_jacobian_fit_resumes_at_the_next_text(llama, tokenizer):
    from iglens_viz.lenses.cache import lens_cache_dir

    opts = {"skip_first": 4, "dim_batch": 32}  # d = 32: one backward pass per text
    whole = fit_lens(llama, tokenizer, "jacobian", cache=False, **opts)
    first: list = []
    with pytest.raises(KeyboardInterrupt) as stopped:
        fit_lens(llama, tokenizer, "jacobian", progress=_interrupt_at(3, first), **opts)
    (partial,) = lens_cache_dir().glob("jacobian-*.partial.pt")
    state = torch.load(partial, weights_only=True)
    assert (state["texts_done"], state["sums"][0].dtype) == (3, torch.float64)
    kept = kept_checkpoint(stopped.value)
    assert kept is not None and (kept.done, kept.total, kept.unit, kept.path) == (
        3,
        whole.settings["texts"],
        "text",
        partial,
    )
    second: list = []
    resumed = fit_lens(llama, tokenizer, "jacobian", progress=second.append, **opts)
    # the phase's first report says where it resumed, then one per text's backward pass
    assert [r.done for r in _fit_reports(second)] == list(range(3, whole.settings["texts"] + 1))
    assert {r.resumed_at for r in _fit_reports(second)} == {3}
    assert not list(lens_cache_dir().glob("*.partial.pt"))
    # Exact: the float64 sums are saved as they are and the same texts are added to them in
    # the same order, by the same deterministic backward passes.
    assert all(torch.equal(whole.matrices[L], resumed.matrices[L]) for L in whole.matrices)
    assert resumed.settings["split_half_rel_error"] == whole.settings["split_half_rel_error"]
    assert resumed.settings["texts_used"] == whole.settings["texts_used"]


def test_tuned_is_the_logit_lens_at_init_and_lowers_the_kl(llama, tokenizer):
    zero = fit_lens(llama, tokenizer, "tuned", TEXTS, steps=0)
    h = reference_states(llama, TEXTS[0]).float()
    for L in range(zero.n_blocks):
        assert torch.equal(zero.transform(h[L], L), h[L])
    trained = fit_lens(llama, tokenizer, "tuned", TEXTS, steps=25, batch_rows=32)
    before = evaluate_lens(zero, llama, tokenizer, TEXTS)
    after = evaluate_lens(trained, llama, tokenizer, TEXTS)
    assert (before.kl == before.logit_kl).all()
    n = trained.n_blocks
    assert (after.kl[:n] < before.kl[:n]).all(), (after.kl, before.kl)
    losses = trained.settings["final_kl"]
    assert losses is not None and math.isfinite(losses)


def test_tuned_fit_is_deterministic(llama, tokenizer):
    a = fit_lens(llama, tokenizer, "tuned", TEXTS[:2], steps=3, batch_rows=16, seed=5)
    b = fit_lens(llama, tokenizer, "tuned", TEXTS[:2], steps=3, batch_rows=16, seed=5)
    assert all(torch.equal(a.matrices[L], b.matrices[L]) for L in a.matrices)


def test_kl_to_final_with_a_precomputed_target_is_the_same_number(llama):
    from iglens_viz.adapters import adapter_for
    from iglens_viz.core.readout import Readout
    from iglens_viz.lenses.tuned import final_log_probs, kl_to_final

    readout = Readout(adapter_for(llama), torch.float32)
    g = torch.Generator().manual_seed(3)
    final = torch.randn(7, llama.config.hidden_size, generator=g)
    lens_states = torch.randn(7, llama.config.hidden_size, generator=g)
    direct = kl_to_final(readout, final, lens_states)
    target = final_log_probs(readout, final)
    assert torch.equal(kl_to_final(readout, None, lens_states, target=target), direct)
    shared = kl_to_final(readout, None, lens_states, target=target, target_probs=target.exp())
    assert torch.equal(shared, direct)  # what a fit does: one target per step, every depth


def _interrupt_at(count: int, reports: list):
    """A progress callback that keeps the fit phase's reports and raises KeyboardInterrupt
    at its ``count``-th step or backward pass."""

    def progress(report):
        if report.phase == "fit":
            reports.append(report)
            if report.done == count:
                raise KeyboardInterrupt

    return progress


def _fit_reports(reports: list) -> list:
    return [r for r in reports if r.phase == "fit"]


def test_an_interrupted_tuned_fit_resumes_to_the_same_lens(llama, tokenizer):
    from iglens_viz.lenses.cache import lens_cache_dir

    # batch_rows near a third of the default corpus: the epoch's order is reshuffled twice
    # in 8 steps, so the checkpoint's generator state, order and cursor are all exercised.
    rows = fit_lens(llama, tokenizer, "shortcut").settings["positions"]
    opts = {"steps": 8, "batch_rows": rows // 3 + 1, "seed": 2}
    whole = fit_lens(llama, tokenizer, "tuned", cache=False, **opts)
    assert not list(lens_cache_dir().glob("*.partial.pt"))  # cache=False: no checkpoint
    first: list = []
    with pytest.raises(KeyboardInterrupt) as stopped:
        fit_lens(
            llama, tokenizer, "tuned", checkpoint_every=3, progress=_interrupt_at(5, first), **opts
        )
    assert [(r.done, r.resumed_at) for r in first] == [(k, 0) for k in range(0, 6)]
    (partial,) = lens_cache_dir().glob("tuned-*.partial.pt")
    # stopped by its progress callback after step 5: that step is kept, not the 3rd's
    assert torch.load(partial, weights_only=True)["step"] == 5
    kept = kept_checkpoint(stopped.value)
    assert kept is not None and (kept.done, kept.total, kept.unit) == (5, 8, "step")
    assert str(kept) == "the tuned lens's checkpoint at step 5/8"
    assert not list(lens_cache_dir().glob("tuned-*.safetensors"))
    second: list = []
    resumed = fit_lens(
        llama, tokenizer, "tuned", checkpoint_every=3, progress=second.append, **opts
    )
    assert [r.done for r in _fit_reports(second)] == [5, 6, 7, 8]
    assert {r.resumed_at for r in _fit_reports(second)} == {5}
    assert resumed.settings["resumed_at"] == 5
    assert not list(lens_cache_dir().glob("*.partial.pt"))  # removed once the lens is stored
    # Exact: the checkpoint restores every float32 tensor and the generator bit for bit, and
    # the remaining steps run the same operations on the same machine and thread count.
    for table, other in ((whole.matrices, resumed.matrices), (whole.biases, resumed.biases)):
        assert all(torch.equal(table[L], other[L]) for L in table)
    assert resumed.settings["final_kl"] == whole.settings["final_kl"]
    again = fit_lens(llama, tokenizer, "tuned", **opts)  # the cache, as for any lens
    assert torch.equal(again.matrices[0], whole.matrices[0]) and "resumed_at" in again.settings


def test_a_jacobian_fit_skips_texts_too_short_for_its_positions(llama64, tokenizer):
    # skip_first 16 (jlens's): a text of T tokens has the positions 16 … T−2, none for
    # T <= 17 (the 10-token text made torch.arange(16, 9) raise before); such texts are
    # left out, as the docs say, and the lens is the one of the long texts alone.
    long = [random_ids(20, seed=40), random_ids(19, seed=41)]
    short = [random_ids(10, seed=42), random_ids(17, seed=43)]
    opts = {"dim_batch": 32}
    mixed = fit_lens(llama64, tokenizer, "jacobian", [short[0], long[0], short[1], long[1]], **opts)
    alone = fit_lens(llama64, tokenizer, "jacobian", long, **opts)
    assert mixed.settings["texts_used"] == 2 and mixed.settings["texts"] == 4
    for L in alone.matrices:
        assert torch.equal(mixed.matrices[L], alone.matrices[L])
    want = _reference_jacobian(llama64, long[0], 1, 16) + _reference_jacobian(
        llama64, long[1], 1, 16
    )
    got = mixed.matrices[1].double()
    assert torch.allclose(got, want / 2, rtol=EPS32, atol=EPS32 * float(want.abs().max()))
    with pytest.raises(InvalidRequestError) as refused:
        fit_lens(llama64, tokenizer, "jacobian", short, **opts)
    message = str(refused.value)
    assert "\n" not in message and "no text is longer than 17 tokens" in message


def test_a_fit_reports_every_phase_with_the_time_left(llama, tokenizer):
    from iglens_viz.lenses.fit import describe_progress

    reports: list = []
    fit_lens(llama, tokenizer, "tuned", steps=6, batch_rows=16, progress=reports.append)
    phases = [r.phase for r in reports]
    # sampling the corpus (token by token), reading its states (by batch), the steps
    assert phases == sorted(phases, key=["corpus", "states", "fit"].index)
    by_phase = {p: [r for r in reports if r.phase == p] for p in ("corpus", "states", "fit")}
    corpus, states, steps = by_phase["corpus"], by_phase["states"], by_phase["fit"]
    new_tokens = llama.config.max_position_embeddings - max(
        len(tokenizer(o)["input_ids"]) for o in iglens_viz.lenses.corpus.FIT_OPENINGS
    )
    assert [r.done for r in corpus] == list(range(new_tokens + 1))
    assert {(r.unit, r.total) for r in corpus} == {("tokens", new_tokens)}
    assert [r.done for r in states] == [0, 16, 32, 48] and states[-1].total == 48
    assert [r.done for r in steps] == list(range(7)) and {r.unit for r in steps} == {"steps"}
    assert steps[0].loss is None and all(r.loss is not None for r in steps[1:])
    for phase in (corpus, states, steps):
        assert [r.seconds for r in phase] == sorted(r.seconds for r in phase)
        assert phase[0].remaining_seconds is None  # nothing done yet: no pace
        r = phase[1]
        assert r.remaining_seconds == pytest.approx(r.seconds / r.done * (r.total - r.done))
    line = describe_progress(steps[3])
    assert line.startswith("the tuned lens: fitting 3/6 steps, KL ") and " left" in line
    # the corpus is cached now: a second fit samples nothing and says nothing of it
    again: list = []
    fit_lens(llama, tokenizer, "tuned", steps=2, batch_rows=16, progress=again.append)
    assert {r.phase for r in again} == {"states", "fit"}


def test_a_fit_stops_where_its_progress_callback_raises(llama, tokenizer):
    from iglens_viz.lenses.cache import lens_cache_dir
    from iglens_viz.lenses.fit import fit_progress

    class Stop(Exception):
        pass

    def stop_in(phase: str, at: int):
        def report(r):
            if r.phase == phase and r.done == at:
                raise Stop(phase)

        return report

    # while sampling the corpus: nothing is kept (the corpus is sampled whole or not at all)
    with pytest.raises(Stop) as stopped:
        fit_lens(llama, tokenizer, "shortcut", progress=stop_in("corpus", 5))
    assert kept_checkpoint(stopped.value) is None and not list(lens_cache_dir().glob("*"))
    # a fit that lens="tuned" starts reports to the fit_progress block around it, and stops
    seen: list = []

    def observer(r):
        seen.append(r)
        stop_in("fit", 12)(r)

    with fit_progress(observer), pytest.raises(Stop):
        resolve_lens("tuned", llama, tokenizer)
    assert seen[-1].kind == "tuned" and (seen[-1].done, seen[-1].total) == (12, 250)
    (partial,) = lens_cache_dir().glob("tuned-*.partial.pt")
    assert torch.load(partial, weights_only=True)["step"] == 12
    # while the shortcut reads the states: stopped there, no lens stored
    with pytest.raises(Stop):
        fit_lens(llama, tokenizer, "shortcut", progress=stop_in("states", 16))
    assert not list(lens_cache_dir().glob("shortcut-*"))


def test_the_default_fit_keys_are_unchanged():
    from iglens_viz.lenses.fit import fit_key, fit_options

    key = fit_key("tuned", fit_options("tuned", {}), "openings-v1:64:128")
    assert key == {
        "kind": "tuned",
        "corpus": "openings-v1:64:128",
        **{"steps": 250, "batch_rows": 64, "lr": 1.0, "momentum": 0.9},
        **{"weight_decay": 1e-3, "clip": 1.0, "seed": 0, "skip_first": 1},
    }  # checkpoint_every is no fitting setting: a lens cached before it is still found


def test_save_and_load_round_trip(llama, tokenizer, tmp_path):
    lens = fit_lens(llama, tokenizer, "shortcut", TEXTS)
    path = save_lens(lens, tmp_path / "shortcut.safetensors")
    back = load_lens(path, llama)
    assert (back.kind, back.n_blocks, back.width, back.fingerprint) == (
        lens.kind,
        lens.n_blocks,
        lens.width,
        lens.fingerprint,
    )
    assert dict(back.settings) == json.loads(json.dumps(dict(lens.settings)))
    for table, other in ((lens.matrices, back.matrices), (lens.biases, back.biases)):
        assert sorted(table) == sorted(other)
        assert all(torch.equal(table[L], other[L]) for L in table)
    assert resolve_lens(str(path), llama).kind == "shortcut"
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically, nothing left over
    # the Lens's own methods are the same functions
    again = load_lens(lens.save(tmp_path / "method.safetensors"), llama)
    assert all(torch.equal(lens.matrices[L], again.matrices[L]) for L in lens.matrices)


def test_jlens_file_loads(llama, tmp_path):
    # As jlens's JacobianLens.save writes it: torch.save of this dict, J in float16, keyed
    # by the source layer (layer l is the output of block l; the last block is the target).
    d, n = llama.config.hidden_size, llama.config.num_hidden_layers
    torch.manual_seed(0)
    J = {layer: torch.randn(d, d).to(torch.float16) for layer in range(n - 1)}
    path = tmp_path / "lens.pt"
    torch.save({"J": J, "n_prompts": 3, "source_layers": sorted(J), "d_model": d}, path)
    lens = load_lens(path, llama)
    assert lens.kind == "jacobian" and lens.n_blocks == n and sorted(lens.matrices) == [1, 2, 3]
    assert lens.settings["n_prompts"] == 3
    h = torch.randn(5, d)
    for layer, matrix in J.items():  # jlens's transport: residual @ J.T
        assert torch.equal(lens.transform(h, layer + 1), h @ matrix.float().T)
    assert torch.equal(lens.transform(h, 0), h)  # the embeddings: not fitted by jlens
    assert load_lens(path).n_blocks == n  # without a model: max(source_layers) + 2


def test_tuned_lens_folder_loads(llama, tmp_path):
    # As tuned-lens's TunedLens.save writes it: params.pt, the state dict of a ModuleList
    # of nn.Linear(d, d) (one per hidden state 0 … n−1), and config.json (TunedLensConfig).
    d, n = llama.config.hidden_size, llama.config.num_hidden_layers
    torch.manual_seed(1)
    translators = torch.nn.ModuleList([torch.nn.Linear(d, d) for _ in range(n)])
    folder = tmp_path / "tuned"
    folder.mkdir()
    torch.save(translators.state_dict(), folder / "params.pt")
    config = {
        "base_model_name_or_path": "tiny-llama",
        "d_model": d,
        "num_hidden_layers": n,
        "bias": True,
        "base_model_revision": None,
        "unembed_hash": None,
        "lens_type": "linear_tuned_lens",
    }
    (folder / "config.json").write_text(json.dumps(config))
    lens = load_lens(folder, llama)
    assert lens.kind == "tuned" and sorted(lens.matrices) == list(range(n))
    h = torch.randn(6, d)
    with torch.no_grad():
        for i, translator in enumerate(translators):  # transform_hidden: h + translator(h)
            want = h + translator(h)
            assert torch.allclose(lens.transform(h, i), want, atol=1e-5, rtol=1e-5)


def test_bad_files_are_named(llama, tmp_path):
    with pytest.raises(LensFileError, match="no lens file"):
        load_lens(tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a lens at all")
    with pytest.raises(LensFileError, match="not an iglens_viz lens file"):
        load_lens(junk)
    with pytest.raises(LensFileError, match="params.pt"):
        load_lens(tmp_path)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(LensFileError, match="not a jlens file"):
        load_lens(other)


def test_a_lens_for_another_model_is_refused(llama, tokenizer, tmp_path):
    lens = fit_lens(llama, tokenizer, "shortcut", TEXTS)
    sibling = tiny_model("llama", seed=1)  # the same shape, other weights
    with pytest.raises(InvalidRequestError, match="another model of the same shape"):
        resolve_lens(lens, sibling)
    path = save_lens(lens, tmp_path / "l.safetensors")
    with pytest.raises(InvalidRequestError, match="another model"):
        load_lens(path, sibling)
    gpt2 = tiny_model("gpt2")
    with pytest.raises(InvalidRequestError, match="blocks of width"):
        resolve_lens(lens, gpt2)


def test_resolve_names_and_the_cache(llama, tokenizer):
    assert resolve_lens(None, llama) is LOGIT and resolve_lens("logit", llama) is LOGIT
    with pytest.raises(InvalidRequestError, match="choose one of"):
        resolve_lens("sideways", llama)
    with pytest.raises(InvalidRequestError, match="not fitted"):
        fit_lens(llama, tokenizer, "logit")
    with pytest.raises(InvalidRequestError, match="takes"):
        fit_lens(llama, tokenizer, "shortcut", TEXTS, steps=3)
    from iglens_viz.lenses import cached_fitted_lens

    assert cached_fitted_lens(llama, "shortcut") is None  # never fits
    first = resolve_lens("shortcut", llama, tokenizer)  # the default corpus, then cached
    from iglens_viz.lenses.cache import lens_cache_dir

    found = cached_fitted_lens(llama, "shortcut")
    assert found is not None and torch.equal(found.matrices[1], first.matrices[1])
    assert cached_fitted_lens(llama, "shortcut", ridge=1.0) is None  # other settings
    assert cached_fitted_lens(llama, "tuned") is None
    assert len(repr(first)) < 200 and "tensor" not in repr(first)  # no matrices in the repr

    assert len(list(lens_cache_dir().glob("shortcut-*.safetensors"))) == 1
    again = resolve_lens("shortcut", llama, tokenizer)
    assert again is not first and all(
        torch.equal(first.matrices[L], again.matrices[L]) for L in first.matrices
    )
    assert first.settings["corpus"].startswith("openings-v1")


def test_evaluate_logit_lens_and_one_depth_by_hand(llama, tokenizer):
    result = evaluate_lens(LOGIT, llama, tokenizer, TEXTS)
    n = llama.config.num_hidden_layers
    assert result.kl[n] == 0 and result.top1[n] == 1
    frame = result.to_frame()
    assert list(frame.columns[:3]) == ["depth", "kl", "top1"] and len(frame) == n + 1
    # Depth 2 by hand: the model's own final logits and its own norm and head on HF's
    # hidden state 2, in float64, over every position after the first.
    kls, hits, count = 0.0, 0, 0
    with torch.no_grad():
        for ids in TEXTS:
            out = llama(input_ids=ids[None], output_hidden_states=True)
            p = torch.log_softmax(out.logits[0, 1:].double(), -1)
            q = torch.log_softmax(
                reference_readout_logits(llama, out.hidden_states[2][0, 1:]).double(), -1
            )
            kls += float((p.exp() * (p - q)).sum())
            hits += int((p.argmax(-1) == q.argmax(-1)).sum())
            count += ids.numel() - 1
    # float32 readouts on both sides: logits agree to ~1e-6 here, the KL to ~1e-6 per row.
    assert result.positions == count
    assert abs(result.kl[2] - kls / count) < 1e-5
    assert result.top1[2] == hits / count
    same = LOGIT.evaluate(llama, tokenizer, TEXTS)  # the Lens method: the same function
    assert (same.kl == result.kl).all() and (same.top1 == result.top1).all()


def test_public_names():
    for name in ("Lens", "fit_lens", "load_lens"):
        assert name in iglens_viz.__all__ and hasattr(iglens_viz, name)
    assert iglens_viz.Lens is Lens
    from iglens_viz.core.extensions import provider

    assert provider("resolve_lens") is resolve_lens


def test_cli_fit_lens_writes_a_lens_that_loads(tiny_model_dir, tmp_path, capsys):
    from iglens_viz.cli.commands import main

    texts = tmp_path / "texts.txt"
    texts.write_text(
        "\n".join(" ".join(f"w{(7 * i + j) % 97}" for j in range(30)) for i in range(4))
    )
    out = tmp_path / "lens.safetensors"
    argv = ["fit-lens", "--kind", "shortcut", "--model", tiny_model_dir, "--texts", str(texts)]
    assert main([*argv, "--ridge", "0.01", "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    lens = load_lens(out)
    assert lens.kind == "shortcut" and lens.settings["ridge"] == 0.01
    assert main([*argv, "--steps", "3", "--out", str(out)]) == 2
    assert "--steps is for --kind tuned" in capsys.readouterr().err


def test_cli_lens_flag_is_passed_to_the_request(tiny_model_dir, tmp_path, capsys):
    import dataclasses

    from iglens_viz.cli.commands import main
    from iglens_viz.core import AttributionRequest

    argv = ["w1 w2 w3 w4", "--model", tiny_model_dir, "--no-chat", "--lens"]
    assert main([*argv, "logit"]) == 0
    if "lens" not in {f.name for f in dataclasses.fields(AttributionRequest)}:
        # until the core's lens= lands, a fitted lens is refused with a clear message
        assert main([*argv, "shortcut"]) == 2
        assert "no lens= yet" in capsys.readouterr().err
        return
    path = tmp_path / "shortcut.safetensors"
    texts = [" ".join(f"w{(5 * i + j) % 97}" for j in range(40)) for i in range(3)]
    model, tokenizer = iglens_viz.load_model(tiny_model_dir)
    save_lens(fit_lens(model, tokenizer, "shortcut", texts), path)
    capsys.readouterr()
    assert main([*argv, str(path)]) == 0, capsys.readouterr().err
    assert main([*argv, str(tmp_path / "missing.safetensors")]) == 2
    assert "lens" in capsys.readouterr().err


def test_lens_files_are_safetensors_files(tmp_path):
    import safetensors.torch as st

    from iglens_viz.lenses.safetensors_format import SafetensorsFormatError, dump, load

    tensors = {"matrix.0": torch.randn(3, 4), "bias.0": torch.randn(4), "ids": torch.arange(5)}
    data = dump(tensors, {"k": "v"})
    theirs = st.load(data)
    assert all(torch.equal(theirs[k], v) for k, v in tensors.items())
    ours, metadata = load(st.save(tensors, metadata={"k": "v"}))
    assert metadata == {"k": "v"} and all(torch.equal(ours[k], v) for k, v in tensors.items())
    for bad in (b"", data[:20], data[:-4], b"\xff" * 8 + data[8:]):
        with pytest.raises(SafetensorsFormatError):
            load(bad)
