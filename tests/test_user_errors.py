"""User errors that used to escape as bare Python errors (issue 18, defect 6), called the way a
user calls them: each is now a one-line IGLensError that names the problem and what would
work, or it works (inference mode, a mixed train/eval model, a string dtype)."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import torch

import iglens_viz
from iglens_viz import IGLens, IGLensError, InvalidRequestError, ModelLoadError, ModelOutputError
from iglens_viz.core.memory import min_memory_budget
from iglens_viz.core.readout import Readout
from tests.support.tiny_models import FAMILY_CONFIGS, VOCAB, random_ids, tiny_model, tiny_tokenizer
from tests.support.tolerances import readout_size, readout_tol

IDS = random_ids(8, seed=5)


def _one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text and text
    return text


# --- dtype ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, dtype",
    [
        ("float32", torch.float32),
        ("float64", torch.float64),
        ("torch.float64", torch.float64),
        (np.float64, torch.float64),
    ],
)
def test_readout_dtype_by_name(llama, given, dtype):
    by_name = iglens_viz.attribute(llama, None, IDS, dtype=given, steps=2)
    by_dtype = iglens_viz.attribute(llama, None, IDS, dtype=dtype, steps=2)
    assert IGLens(llama, dtype=given).readout.dtype == dtype
    # The same readout either way: the same numbers.
    np.testing.assert_array_equal(by_name.lens_probs, by_dtype.lens_probs)
    np.testing.assert_array_equal(by_name.path_probs, by_dtype.path_probs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, "float16", "bfloat16"])
def test_half_readout_dtype_is_refused_with_the_reason(llama, dtype):
    with pytest.raises(InvalidRequestError, match="float32 or float64.*float32 at least") as err:
        IGLens(llama, dtype=dtype)
    assert "leave dtype at its default" in _one_line(err)


@pytest.mark.parametrize("dtype", ["int8", "fast", 3, None])
def test_other_readout_dtypes_are_refused(llama, dtype):
    with pytest.raises(InvalidRequestError, match="torch.float32 or torch.float64") as err:
        iglens_viz.attribute(llama, None, IDS, dtype=dtype)
    _one_line(err)


# --- plot_token ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def next_result(llama):
    return IGLens(llama).attribute(IDS, target="next")


def test_plot_token_without_target_names_the_positions_that_have_one(next_result):
    T = len(next_result.tokens)
    with pytest.raises(InvalidRequestError, match=f"position {T - 1} has no target") as err:
        next_result.plot_token(-1)
    assert f"positions 0–{T - 2} have one" in _one_line(err)


def test_plot_token_out_of_range_and_not_an_integer(next_result):
    T = len(next_result.tokens)
    with pytest.raises(IGLensError, match=rf"out of range.*\[-{T}, {T}\)") as err:
        next_result.plot_token(100)
    assert isinstance(err.value, IndexError)  # ``except IndexError`` keeps working
    with pytest.raises(IGLensError, match="integer position") as err:
        next_result.plot_token(1.0)
    assert isinstance(err.value, TypeError)


# --- to_html -------------------------------------------------------------------------------


def test_to_html_path_that_is_not_a_path(next_result, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidRequestError, match="str or os.PathLike.*not int 12345") as err:
        next_result.to_html(12345)
    _one_line(err)
    assert list(tmp_path.iterdir()) == []  # nothing written


# --- request.replace -----------------------------------------------------------------------


def test_request_replace_with_an_unknown_field(next_result):
    request = next_result.request
    with pytest.raises(InvalidRequestError, match="no field 'unknown'") as err:
        request.replace(unknown=3)
    text = _one_line(err)
    for name in ("prompt", "target", "boundaries", "estimator", "steps", "components"):
        assert name in text
    with pytest.raises(InvalidRequestError, match="did you mean 'steps'"):
        request.replace(stpes=3)
    assert request.replace(steps=3).steps == 3  # the known fields still work


def test_request_constructor_with_an_unknown_field():
    """The constructor names the fields as ``replace`` does (it raised Python's own
    TypeError, "__init__() got an unexpected keyword argument", before)."""
    from iglens_viz import AttributionRequest

    with pytest.raises(InvalidRequestError, match="no field 'unknown'") as err:
        AttributionRequest("hi", unknown=3)
    text = _one_line(err)
    for name in ("prompt", "target", "boundaries", "estimator", "steps", "components"):
        assert name in text
    with pytest.raises(InvalidRequestError, match="did you mean 'estimator'"):
        AttributionRequest("hi", estimater="riemann")
    with pytest.raises(InvalidRequestError, match="no field 'stpes'"):
        AttributionRequest.from_controls("hi", {}, stpes=3)
    assert AttributionRequest("hi", steps=3).steps == 3  # the known fields still work
    assert str(inspect.signature(AttributionRequest)).startswith("(prompt: 'PromptSpec'")


# --- a model whose weights are not materialised ----------------------------------------------


def test_meta_device_model():
    config_cls, model_cls, kwargs = FAMILY_CONFIGS["llama"]
    with torch.device("meta"):
        model = model_cls(config_cls(**kwargs))
    with pytest.raises(ModelLoadError, match="not materialised.*meta device") as err:
        iglens_viz.attribute(model, None, IDS)
    assert "from_pretrained" in _one_line(err)
    with pytest.raises(ModelLoadError, match="model.embed_tokens.weight is on the meta"):
        IGLens(model)


# --- extreme weights -----------------------------------------------------------------------


def _with_weight(family: str, name: str, value: float = 1e30):
    model = tiny_model(family)
    with torch.no_grad():
        dict(model.named_parameters())[name].view(-1)[0] = value
    return model


@pytest.mark.parametrize(
    "family, name",
    [
        ("llama", "model.layers.0.mlp.down_proj.weight"),  # the stream overflows the final norm
        ("mistral", "model.layers.0.self_attn.o_proj.weight"),
        ("llama", "lm_head.weight"),  # logits of 1e29: float32 rounds them by 1e22
        ("gpt2", "transformer.ln_f.weight"),
        ("opt", "model.decoder.project_out.weight"),
        ("gpt2", "transformer.h.0.mlp.c_fc.weight"),  # NaN in the stream itself
    ],
)
def test_a_weight_of_1e30_says_the_model_produces_inf_nan(family, name):
    model = _with_weight(family, name)
    with pytest.raises(ModelOutputError) as err:
        IGLens(model).attribute(IDS)
    text = _one_line(err)
    assert "NaN" in text and "weights" in text
    assert "tolerance nan" not in text and "tolerance 0" not in text


def test_nan_states_of_the_default_model_name_its_cached_copy():
    """The embedded default model is read from its converted copy in the cache: a NaN in its
    stream says how to check that copy (any other model's error does not)."""
    from iglens_viz.loading import DEFAULT_MODEL_NAME

    model = _with_weight("gpt2", "transformer.h.0.mlp.c_fc.weight", float("nan"))
    with pytest.raises(ModelOutputError) as plain:
        IGLens(model).attribute(IDS)
    assert "verify_default_model" not in str(plain.value)
    model.config.name_or_path = DEFAULT_MODEL_NAME  # as load_model() names it
    with pytest.raises(ModelOutputError) as default:
        IGLens(model).attribute(IDS)
    assert "verify_default_model()" in _one_line(default)


def test_an_exact_readout_with_zero_tolerance_passes():
    """A final norm of weight 0: every logit is exactly 0 on both sides (spread 0, tolerance
    0). The self-check used to divide 0 by 0 and report "differs at 0 of 8 positions,
    tolerance 0.0e+00"; the model's uniform output is read out exactly."""
    model = tiny_model("llama")
    with torch.no_grad():
        model.model.norm.weight.zero_()
    result = IGLens(model).attribute(IDS)
    np.testing.assert_allclose(
        result.lens_probs, 1 / VOCAB, rtol=4 * torch.finfo(torch.float32).eps
    )
    np.testing.assert_array_equal(result.contributions, 0)


def test_large_but_meaningful_weights_still_pass(llama):
    """A head scaled by 1e3 (logits in the thousands): finite, far from float32's limits, and
    the self-check compares it like any other model."""
    model = tiny_model("llama")
    with torch.no_grad():
        model.lm_head.weight.mul_(1e3)
    result = IGLens(model).attribute(IDS)
    assert np.isfinite(result.lens_probs).all()
    np.testing.assert_allclose(
        result.contributions.sum(1),
        result.delta_p,
        rtol=0,
        atol=result.contributions.shape[1] * torch.finfo(torch.float32).eps,
    )


# --- inference mode --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, model_dtype, readout_dtype",
    [
        ("llama", torch.float32, torch.float32),
        ("llama", torch.float32, torch.float64),  # parameters copied by the readout
        ("llama", torch.bfloat16, torch.float32),  # the norm upcast, the head upcast per block
        ("gpt2", torch.float32, torch.float32),
    ],
)
def test_riemann_and_components_under_inference_mode(family, model_dtype, readout_dtype):
    model = tiny_model(family, dtype=model_dtype)
    kwargs = dict(estimator="riemann", steps=3, components=True)
    with torch.no_grad():
        expected = IGLens(model, dtype=readout_dtype).attribute(IDS, **kwargs)
        pa_expected = IGLens(model, dtype=readout_dtype).attribute(IDS, steps=3, components=True)
    with torch.inference_mode():  # the lens built inside, too
        lens = IGLens(model, dtype=readout_dtype)
        result = lens.attribute(IDS, **kwargs)
        pa = lens.attribute(IDS, steps=3, components=True)
        _, terms = lens.interior_path(result, 2, terms=True)
    # The same arithmetic on the same inputs as under no_grad: the same numbers.
    np.testing.assert_array_equal(result.contributions, expected.contributions)
    np.testing.assert_array_equal(result.component_shares, expected.component_shares)
    np.testing.assert_array_equal(pa.component_shares, pa_expected.component_shares)
    np.testing.assert_allclose(
        terms.sum(1), expected.contributions[2], rtol=0, atol=3 * torch.finfo(readout_dtype).eps
    )
    # A trace cached under inference mode serves a later call outside it.
    again = lens.attribute(IDS, **kwargs)
    np.testing.assert_array_equal(again.component_shares, expected.component_shares)


# --- memory budget ---------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [1, 256])
def test_tiny_memory_budget_is_raised_to_one_row_with_a_warning(budget):
    model = tiny_model("llama", vocab_size=4096)
    readout = IGLens(model).readout
    floor = min_memory_budget(readout, model.config.hidden_size)
    assert floor >= 4 * 512 * 4  # 512 float32 columns and their temporaries, at least
    with pytest.warns(
        UserWarning,
        match=rf"memory_budget={budget} bytes is below.*using "
        rf"{floor}.*memory_budget={budget} \* 2\*\*20",
    ):
        lens = IGLens(model, memory_budget=budget)
    assert lens.memory_budget == floor
    widths = []
    original = Readout.logits_from_features

    def record(self, z, *args, **kwargs):
        out = original(self, z, *args, **kwargs)
        widths.append(out.shape[-1])
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Readout, "logits_from_features", record)
        result = lens.attribute(IDS, steps=3, estimator="riemann")
    # Before the floor: 1 column per block (4,096 blocks per row). Now the vocabulary
    # streams in blocks of hundreds of columns.
    assert np.median(widths) >= 256
    whole = IGLens(model).attribute(IDS, steps=3, estimator="riemann")
    tol = readout_tol(readout_size(model, IDS), torch.float32, blocks=4096 // 64)
    np.testing.assert_allclose(result.lens_probs, whole.lens_probs, rtol=0, atol=tol)
    np.testing.assert_allclose(result.contributions, whole.contributions, rtol=0, atol=tol)


def test_memory_budget_at_the_floor_does_not_warn(llama):
    floor = min_memory_budget(IGLens(llama).readout, llama.config.hidden_size)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert IGLens(llama, memory_budget=floor).memory_budget == floor


# --- train/eval modes ------------------------------------------------------------------------


def _modes(model):
    return {name: module.training for name, module in model.named_modules()}


def test_mixed_train_eval_modes_are_restored_module_by_module():
    model = tiny_model("llama").train()
    model.model.layers[0].eval()  # a frozen block inside a model in training mode
    model.model.layers[2].mlp.eval()
    before = _modes(model)
    assert len(set(before.values())) == 2
    lens = IGLens(model, tiny_tokenizer())
    lens.attribute(IDS, max_new_tokens=2)  # capture and generation
    assert _modes(model) == before
    iglens_viz.ablate(model, None, IDS, layers=[1])
    assert _modes(model) == before
    # Measured without dropout either way: the same as the model in eval mode.
    reference = IGLens(tiny_model("llama").eval()).attribute(IDS)
    np.testing.assert_array_equal(IGLens(model).attribute(IDS).lens_probs, reference.lens_probs)
