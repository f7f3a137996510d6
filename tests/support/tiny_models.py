"""Tiny randomly initialised models of every supported family, built in the test process.

Weights are perturbed after initialisation so that norm weights, biases and the head all
matter (a freshly initialised norm is the identity, which would hide formula mistakes), and
distributions are far from uniform. Also an independent readout written with the model's own
modules, so tests never compare iglens_viz with itself.
"""

from __future__ import annotations

import torch
import transformers as tf

from iglens_viz.adapters import adapter_for
from iglens_viz.core.coordinates import Lens, model_fingerprint

VOCAB = 97
COMMON = dict(vocab_size=VOCAB, max_position_embeddings=64)
LLAMA_LIKE = dict(
    COMMON,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
)

# (name, config class, model class, config kwargs)
FAMILY_CONFIGS = {
    "gpt2": (
        tf.GPT2Config,
        tf.GPT2LMHeadModel,
        dict(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=3, n_head=4),
    ),
    "gpt_neo": (
        tf.GPTNeoConfig,
        tf.GPTNeoForCausalLM,
        dict(
            COMMON,
            hidden_size=32,
            num_layers=2,
            num_heads=4,
            window_size=8,
            attention_types=[[["global", "local"], 1]],
        ),
    ),
    "gptj": (
        tf.GPTJConfig,
        tf.GPTJForCausalLM,
        dict(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=3, n_head=4, rotary_dim=4),
    ),
    "gpt_neox": (
        tf.GPTNeoXConfig,
        tf.GPTNeoXForCausalLM,
        dict(
            COMMON, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4
        ),
    ),
    "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, LLAMA_LIKE),
    "mistral": (tf.MistralConfig, tf.MistralForCausalLM, LLAMA_LIKE),
    "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM, LLAMA_LIKE),
    "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, dict(LLAMA_LIKE, head_dim=8)),
    "gemma": (tf.GemmaConfig, tf.GemmaForCausalLM, dict(LLAMA_LIKE, head_dim=8)),
    "gemma2": (
        tf.Gemma2Config,
        tf.Gemma2ForCausalLM,
        dict(LLAMA_LIKE, head_dim=8, final_logit_softcapping=2.0, sliding_window=16),
    ),
    "gemma3_text": (
        tf.Gemma3TextConfig,
        tf.Gemma3ForCausalLM,
        dict(LLAMA_LIKE, head_dim=8, final_logit_softcapping=3.0, sliding_window=16),
    ),
    "opt": (
        tf.OPTConfig,
        tf.OPTForCausalLM,
        dict(
            COMMON,
            hidden_size=32,
            ffn_dim=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            word_embed_proj_dim=16,
        ),
    ),
    "phi": (
        tf.PhiConfig,
        tf.PhiForCausalLM,
        dict(
            COMMON, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4
        ),
    ),
    "phi3": (
        tf.Phi3Config,
        tf.Phi3ForCausalLM,
        dict(LLAMA_LIKE, pad_token_id=0, bos_token_id=1, eos_token_id=2),
    ),
}
FAMILY_NAMES = sorted(FAMILY_CONFIGS)


def tiny_model(name: str, seed: int = 0, dtype: torch.dtype = torch.float32, **overrides):
    """A tiny random model of family ``name`` in eval mode, weights perturbed."""
    config_cls, model_cls, kwargs = FAMILY_CONFIGS[name]
    config = config_cls(**{**kwargs, **overrides})
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    return model.to(dtype)


def random_ids(length: int = 12, seed: int = 1) -> torch.Tensor:
    """Random token ids, reproducible."""
    return torch.randint(0, VOCAB, (length,), generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def model_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """The model's own logits ``[T, V]`` for a 1-D id tensor."""
    return model(input_ids=ids[None]).logits[0].double()


def reference_readout_logits(model, h: torch.Tensor) -> torch.Tensor:
    """Logits of pre-norm states ``h`` computed with the model's own modules (test oracle)."""
    config = model.config
    kind = config.model_type
    if kind in ("gpt2", "gpt_neo", "gptj"):
        logits = model.lm_head(model.transformer.ln_f(h))
    elif kind == "gpt_neox":
        logits = model.get_output_embeddings()(model.gpt_neox.final_layer_norm(h))
    elif kind == "opt":
        decoder = model.model.decoder
        x = decoder.final_layer_norm(h) if decoder.final_layer_norm is not None else h
        x = decoder.project_out(x) if decoder.project_out is not None else x
        logits = model.lm_head(x)
    elif kind == "phi":
        logits = model.lm_head(model.model.final_layernorm(h))
    else:
        logits = model.lm_head(model.model.norm(h))
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


@torch.no_grad()
def reference_lens_probs(model, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``[n+1, T]`` logit-lens probability of ``targets`` after every block.

    h_0 … h_{n-1} come from ``output_hidden_states`` (raw block inputs); the last row is the
    model's own output distribution, since HF's last hidden state is already normed.
    """
    out = model(input_ids=ids[None], output_hidden_states=True)
    hidden = out.hidden_states
    rows = [
        torch.softmax(reference_readout_logits(model, hidden[i][0]).double(), -1)
        for i in range(len(hidden) - 1)
    ]
    rows.append(torch.softmax(out.logits[0].double(), -1))
    probs = torch.stack(rows)
    return probs[:, torch.arange(ids.numel()), targets]


def tiny_tokenizer():
    """A word-level tokenizer over ``VOCAB`` words ``w0 … w96`` (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(VOCAB)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return tf.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="w0")


# --------------------------------------------------------------- sub-layer states, by hooks

PARALLEL = ("gptj", "phi")  # and GPT-NeoX with its default parallel residual
SEQUENTIAL = sorted(set(FAMILY_CONFIGS) - set(PARALLEL) - {"gpt_neox"})
# The module whose output is the attention's write as it enters the stream (the test's own
# reading of each family's block code, independent of the library's family table).
ATTN_WRITE = {
    "gpt2": "attn",
    "gpt_neo": "attn",
    "opt": "self_attn",
    "gpt_neox": "attention",
    "gemma2": "post_attention_layernorm",
    "gemma3_text": "post_attention_layernorm",
}


def _first(x):
    return x[0] if isinstance(x, (tuple, list)) else x


@torch.no_grad()
def hooked_mid_states(model, ids) -> torch.Tensor:
    """``[n, T, d]`` h_{L−1} + the attention's write of every block, read with hooks."""
    blocks = adapter_for(model).blocks
    name = ATTN_WRITE.get(model.config.model_type, "self_attn")
    inputs, writes = {}, {}
    handles = []
    for i, block in enumerate(blocks):
        handles.append(
            block.register_forward_pre_hook(
                lambda m, args, kwargs, i=i: inputs.__setitem__(
                    i, args[0] if args else kwargs["hidden_states"]
                ),
                with_kwargs=True,
            )
        )
        handles.append(
            block.get_submodule(name).register_forward_hook(
                lambda m, args, out, i=i: writes.__setitem__(i, _first(out))
            )
        )
    try:
        model(input_ids=ids[None])
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(
        [(inputs[i] + writes[i].reshape(inputs[i].shape))[0] for i in range(len(blocks))]
    )


def sublayer_model(name, **kw):
    extra = {"use_parallel_residual": False} if name == "gpt_neox" else {}
    return tiny_model(name, **extra, **kw)


# ------------------------------------------------------------------------ a random lens


def random_lens(model, seed: int = 0, scale: float = 0.3, dtype=torch.float32) -> Lens:
    """A random affine lens near the identity for ``model``: A_L = I + scale·N/√d,
    b_L = scale·N, at every depth L < n (a "tuned" lens as it looks mid-training)."""
    config = model.config
    n, d = config.num_hidden_layers, config.hidden_size
    g = torch.Generator().manual_seed(seed)
    matrices = {
        L: (torch.eye(d, dtype=torch.float64) + scale * torch.randn(d, d, generator=g) / d**0.5)
        for L in range(n)
    }
    biases = {L: scale * torch.randn(d, generator=g, dtype=torch.float64) for L in range(n)}
    return Lens(
        "tuned",
        n,
        d,
        {L: m.to(dtype) for L, m in matrices.items()},
        {L: b.to(dtype) for L, b in biases.items()},
        fingerprint=model_fingerprint(model),
        settings={"name": "random"},
    )
