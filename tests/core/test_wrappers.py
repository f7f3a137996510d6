"""Models inside wrappers (iglens_viz/core/wrappers.py): a TransformerLens ``TransformerBridge``,
an nnsight ``NNsight`` / ``LanguageModel``, an nnterp ``StandardizedTransformer``, and a model
dispatched by accelerate (``device_map`` with disk offload).

Every wrapper is the real package, built offline around a tiny model from a config
(tests/support/tiny_models.py): TransformerLens through ``boot_transformers(name, hf_model=...,
tokenizer=...)``, nnsight and nnterp around the module itself, and nnsight's lazy path from a
folder written by ``save_pretrained`` (what a Hub id would download). Nothing is fetched.

Expected values come from the bare model, a second ``tiny_model`` of the same family and seed
(the same weights). IG-Lens reads the wrapped model with the same modules, the same weights and
the same arithmetic as the bare one, so the results are compared with exact equality. Two
things TransformerLens changes in place are matched on the bare side or are exact: it forces
eager attention (the bare model is switched to eager too: against sdpa the attention kernels
differ), and it gives a bias-less head a zero bias (adding 0.0 is exact).

Each test skips when its package is missing. nnterp 1.3.0 imports
``nnsight.intervention.tracing``, which nnsight 0.8 no longer has, so it cannot be installed
beside the nnsight extra (nnsight >= 0.8); its tests run where nnterp sits with nnsight 0.7.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import iglens_viz
from iglens_viz.core.wrappers import unwrap_model, wrapper_name
from iglens_viz.errors import InvalidRequestError, ModelLoadError
from tests.support.tiny_models import tiny_model, tiny_tokenizer

PROMPT = "w5 w17 w3 w40 w8 w61 w2"  # tiny_tokenizer's words: 7 tokens
TARGET = "w9"
FIELDS = ("lens_probs", "path_probs", "contributions", "final_probs", "top_ids", "top_probs")


def expected(family: str, attn: str | None = None):
    """The bare model's result (same family and seed as the wrapped one)."""
    bare = tiny_model(family)
    if attn is not None:
        bare.set_attn_implementation(attn)
    return iglens_viz.attribute(bare, tiny_tokenizer(), PROMPT, target=TARGET, steps=3)


def assert_same(result, reference) -> None:
    """Exact equality of every attributed array and the token ids."""
    np.testing.assert_array_equal(result.input_ids, reference.input_ids)
    np.testing.assert_array_equal(result.target_ids, reference.target_ids)
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(result, field), getattr(reference, field), field)


def test_bare_model_is_not_a_wrapper():
    model = tiny_model("llama")
    assert wrapper_name(model) is None
    assert unwrap_model(model) == (model, None, None)
    assert iglens_viz.IGLens(model).wrapper is None


# -- TransformerLens -------------------------------------------------------------------------


def boot_bridge(family: str):
    """A TransformerBridge booted offline around a tiny model, holding tiny_tokenizer()."""
    pytest.importorskip("transformer_lens")
    from transformer_lens.model_bridge import TransformerBridge

    model = tiny_model(family)
    return TransformerBridge.boot_transformers(
        f"tiny-{family}", hf_model=model, tokenizer=tiny_tokenizer()
    )


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_transformer_bridge_gives_the_bare_models_numbers(family):
    bridge = boot_bridge(family)
    assert bridge.original_model.config._attn_implementation == "eager"  # set by TL
    lens = iglens_viz.IGLens(bridge)  # no tokenizer passed: the bridge's
    assert lens.wrapper == "TransformerLens TransformerBridge"
    assert lens.tokenizer is bridge.tokenizer
    assert isinstance(lens.model.lm_head, torch.nn.Linear)  # the view: HF modules only
    result = lens.attribute(PROMPT, target=TARGET, steps=3)
    assert_same(result, expected(family, attn="eager"))
    # The bridge is left as it was: its components are still spliced into its model.
    assert type(bridge.original_model.lm_head).__name__ == "UnembeddingBridge"


def test_transformer_bridge_view_shares_the_weights_and_keeps_hooks_apart():
    bridge = boot_bridge("llama")
    view, _, _ = unwrap_model(bridge)
    hf = bridge.original_model
    assert view is not hf
    assert view.lm_head is hf.lm_head.original_component
    assert view.model.layers[0].mlp.down_proj.weight is hf.model.layers[0].mlp.down_proj.weight
    # A hook on a copied container of the view never fires on the bridge's tree.
    calls = []
    handle = view.model.layers[0].register_forward_hook(lambda *args: calls.append(1))
    try:
        with torch.no_grad():
            bridge(torch.tensor([[5, 17, 3]]))
        assert calls == []
        with torch.no_grad():
            view(input_ids=torch.tensor([[5, 17, 3]]))
        assert calls == [1]
    finally:
        handle.remove()


def test_attribute_and_widget_accept_a_bridge():
    bridge = boot_bridge("llama")
    result = iglens_viz.attribute(bridge, None, PROMPT, target=TARGET, steps=3)
    reference = expected("llama", attn="eager")
    assert_same(result, reference)
    pytest.importorskip("anywidget")
    from iglens_viz.widget import show

    widget = show(bridge, None, PROMPT, target=TARGET, steps=3)
    assert widget.engine.wrapper == "TransformerLens TransformerBridge"
    assert_same(widget.attribution, reference)


def test_processed_bridge_is_refused_unprocessed_compatibility_mode_is_not():
    bridge = boot_bridge("llama")
    bridge.enable_compatibility_mode(no_processing=True)  # hooks only: the weights stay
    assert_same(
        iglens_viz.attribute(bridge, None, PROMPT, target=TARGET, steps=3),
        expected("llama", attn="eager"),
    )
    bridge.enable_compatibility_mode()  # folds the norms into the weights, centres them
    with pytest.raises(InvalidRequestError, match="TransformerBridge's weights were processed"):
        iglens_viz.IGLens(bridge)


def test_bridge_over_an_offloaded_model_is_refused(tmp_path):
    pytest.importorskip("transformer_lens")
    from transformer_lens.model_bridge import TransformerBridge

    model = offloaded_llama(tmp_path)
    bridge = TransformerBridge.boot_transformers("tiny", hf_model=model, tokenizer=tiny_tokenizer())
    with pytest.raises(InvalidRequestError, match="offloading hooks"):
        iglens_viz.IGLens(bridge)


# -- nnsight ---------------------------------------------------------------------------------


def test_nnsight_wrapper_gives_the_bare_models_numbers():
    nnsight = pytest.importorskip("nnsight")
    model = tiny_model("llama")
    wrapped = nnsight.NNsight(model)
    lens = iglens_viz.IGLens(wrapped, tiny_tokenizer())
    assert lens.wrapper == "nnsight NNsight" and lens.model is model
    assert_same(lens.attribute(PROMPT, target=TARGET, steps=3), expected("llama"))


@pytest.mark.filterwarnings("ignore:LanguageModel is deprecated")  # nnsight 0.8
def test_nnsight_language_model_gives_its_tokenizer_and_the_same_numbers():
    nnsight = pytest.importorskip("nnsight")
    model, tokenizer = tiny_model("gpt2"), tiny_tokenizer()
    wrapped = nnsight.LanguageModel(model, tokenizer=tokenizer)
    lens = iglens_viz.IGLens(wrapped)
    assert lens.wrapper == "nnsight LanguageModel"
    assert lens.model is model and lens.tokenizer is tokenizer
    reference = expected("gpt2")
    assert_same(lens.attribute(PROMPT, target=TARGET, steps=3), reference)
    # The wrapper still traces after IG-Lens ran on its model.
    with wrapped.trace(torch.tensor([[5, 17, 3]])):
        logits = wrapped.lm_head.output.save()
    assert logits.shape == (1, 3, 97)
    pytest.importorskip("anywidget")
    from iglens_viz.widget import show

    assert_same(show(wrapped, None, PROMPT, target=TARGET, steps=3).attribution, reference)


def test_nnsight_transformers_model_gives_its_tokenizer_and_the_same_numbers():
    nnsight = pytest.importorskip("nnsight")
    if not hasattr(nnsight, "TransformersModel"):  # nnsight < 0.8
        pytest.skip("nnsight.TransformersModel is new in nnsight 0.8")
    model, tokenizer = tiny_model("llama"), tiny_tokenizer()
    wrapped = nnsight.TransformersModel(model, tokenizer=tokenizer)
    lens = iglens_viz.IGLens(wrapped)
    assert lens.wrapper == "nnsight TransformersModel"
    assert lens.model is model and lens.tokenizer is tokenizer
    assert_same(lens.attribute(PROMPT, target=TARGET, steps=3), expected("llama"))


@pytest.mark.filterwarnings("ignore:LanguageModel is deprecated")
def test_undispatched_language_model_is_refused_until_dispatched(tmp_path):
    nnsight = pytest.importorskip("nnsight")
    tiny_model("llama").save_pretrained(tmp_path)  # what a Hub id would download
    wrapped = nnsight.LanguageModel(str(tmp_path), tokenizer=tiny_tokenizer())
    with pytest.raises(ModelLoadError, match="nnsight LanguageModel has not loaded its weights"):
        iglens_viz.IGLens(wrapped)
    wrapped.dispatch()
    result = iglens_viz.attribute(wrapped, None, PROMPT, target=TARGET, steps=3)
    assert_same(result, expected("llama"))


@pytest.mark.filterwarnings("ignore:Module .* output")  # nnsight on BERT
def test_wrapper_of_an_unsupported_model_names_the_wrapper():
    nnsight = pytest.importorskip("nnsight")
    import transformers as tf

    config = tf.BertConfig(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
    )
    with pytest.raises(InvalidRequestError, match="the nnsight NNsight wraps BertModel") as err:
        iglens_viz.IGLens(nnsight.NNsight(tf.BertModel(config)))
    assert "not a causal language model" in str(err.value)
    assert "TransformerBridge" in str(err.value)  # what would work
    with pytest.raises(InvalidRequestError, match="wraps Linear"):
        iglens_viz.IGLens(nnsight.NNsight(torch.nn.Linear(4, 4)))


# -- nnterp ----------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:LanguageModel is deprecated")
def test_nnterp_standardized_transformer_gives_the_bare_models_numbers():
    # nnterp 1.3 cannot import beside nnsight >= 0.8 (see the module docstring): skipped there.
    nnterp = pytest.importorskip("nnterp")
    model, tokenizer = tiny_model("llama"), tiny_tokenizer()
    wrapped = nnterp.StandardizedTransformer(model, tokenizer=tokenizer)
    lens = iglens_viz.IGLens(wrapped)
    assert lens.wrapper == "nnterp StandardizedTransformer"
    assert lens.model is model and lens.tokenizer is tokenizer
    assert_same(lens.attribute(PROMPT, target=TARGET, steps=3), expected("llama"))


# -- accelerate ------------------------------------------------------------------------------


def test_device_map_with_disk_offload_gives_the_bare_models_numbers(tmp_path):
    """``from_pretrained(..., device_map=...)`` of a saved tiny model, half its blocks and its
    head offloaded to disk (accelerate's hooks load them for each forward). The other
    accelerate path, ``cpu_offload``, is tests/core/test_api.py's."""
    model = offloaded_llama(tmp_path)
    assert model.hf_device_map["lm_head"] == "disk"
    assert model.lm_head.weight.device.type == "meta"  # really offloaded
    result = iglens_viz.attribute(model, tiny_tokenizer(), PROMPT, target=TARGET, steps=3)
    assert_same(result, expected("llama"))


def test_versus_on_an_offloaded_model_gives_the_bare_models_numbers(tmp_path):
    """The second answer continues the prompt from the model's key/value cache, with half the
    model on disk (accelerate's hooks around the cached pass too)."""
    request = dict(answer=" w9 w11", versus=" w12")
    mine = iglens_viz.attribute(offloaded_llama(tmp_path), tiny_tokenizer(), PROMPT, **request)
    bare = iglens_viz.attribute(tiny_model("llama"), tiny_tokenizer(), PROMPT, **request)
    for ours, theirs in ((mine.answer, bare.answer), (mine.versus, bare.versus)):
        np.testing.assert_array_equal(ours.ids, theirs.ids)
        np.testing.assert_array_equal(ours.lens_logprobs, theirs.lens_logprobs)
        np.testing.assert_array_equal(ours.logprob_contributions, theirs.logprob_contributions)


def offloaded_llama(folder):
    """tiny_model("llama") saved and loaded back with blocks 1 and 3 and the head on disk."""
    import transformers as tf

    tiny_model("llama").save_pretrained(folder / "model")
    device_map = {
        "model.embed_tokens": "cpu",
        "model.layers.0": "cpu",
        "model.layers.1": "disk",
        "model.layers.2": "cpu",
        "model.layers.3": "disk",
        "model.norm": "cpu",
        "model.rotary_emb": "cpu",
        "lm_head": "disk",
    }
    return tf.AutoModelForCausalLM.from_pretrained(
        folder / "model", device_map=device_map, offload_folder=folder / "offload"
    )
