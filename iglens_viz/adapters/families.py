"""The explicit table of supported decoder families.

Each entry says where a family keeps its blocks, its final norm, the optional projection
between norm and head, and its unembedding head, plus which norm formula applies. Nothing
here is guessed from module names at run time: a model whose ``config.model_type`` is not in
the table is refused (see :func:`iglens_viz.adapters.adapter_for`), and every forward pass
checks numerically that the readout reproduces the model's own probabilities.

Adding a family is one :class:`Family` entry; the tiny-model tests in
``tests/adapters/test_families.py`` then show whether it is right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

NormKind = Literal["layernorm", "rmsnorm", "rmsnorm_plus_one"]
"""The final norm's formula (:attr:`Family.norm_kind`)."""
NORM_KINDS: tuple[NormKind, ...] = get_args(NormKind)

NORM_LAYERNORM: NormKind = "layernorm"  # (x - mean) / std * w + b
NORM_RMS: NormKind = "rmsnorm"  # x / rms(x) * w
NORM_RMS_PLUS_ONE: NormKind = "rmsnorm_plus_one"  # Gemma: x / rms(x) * (1 + w)


@dataclass(frozen=True)
class Family:
    """Where one decoder family keeps the pieces of its readout.

    Module attributes are dotted attribute paths from the ``*ForCausalLM`` module.
    """

    name: str
    """Human-readable family name, shown in errors and docs."""
    model_types: tuple[str, ...]
    """``config.model_type`` values that belong to this family."""
    blocks: str
    """The ``ModuleList`` of decoder blocks."""
    final_norm: str | None
    """The final norm applied to the residual stream before the head (None: post-norm models)."""
    norm_kind: NormKind
    """One of ``layernorm``, ``rmsnorm``, ``rmsnorm_plus_one``."""
    head: str = "lm_head"
    """The unembedding ``Linear`` (``a|b``: the first path that exists)."""
    project_out: str | None = None
    """An optional ``Linear`` between final norm and head (OPT's ``project_out``)."""
    softcap_attr: str | None = None
    """Config attribute holding a final-logit soft-capping constant (Gemma-2/3)."""
    block_count_attr: str = "num_hidden_layers"
    """Config attribute with the number of blocks that run in the forward pass."""
    mid_state: str | None = None
    """The module inside a block whose input is the residual stream between the attention
    write and the MLP (h_{L-1} plus the attention's write, as it enters the stream); None for
    blocks whose attention and MLP run in parallel on h_{L-1}: they have no such state."""
    post_norm_mid_state: str | None = None
    """``mid_state`` for the post-norm sizes of a family (config ``do_layer_norm_before``
    false: OPT-350m), whose MLP reads the stream directly."""
    parallel_attr: str | None = None
    """Config attribute that, when true, makes the blocks parallel (no ``mid_state``)."""
    attn_out: str | None = None
    """The attention's output projection inside a block (``Linear``, or GPT-2's ``Conv1D``):
    its input is the concatenated head outputs, so head i writes ``W_o[:, i] z_i``."""
    attn_write_normed: bool = False
    """True when a norm sits between the output projection and the residual stream (Gemma-2/3
    sandwich norms): the attention's write is then not linear in its heads."""
    attn_write: str | None = None
    """The module inside a block whose output (its first element when a tuple) is the
    attention's write to the residual stream exactly as it is added to it: the attention module
    itself, or the norm after it where one sits between attention and the sum (Gemma-2/3's
    ``post_attention_layernorm``). Dropout after it is the identity in eval mode."""
    mlp_write: str | None = None
    """The module inside a block whose output (its first element when a tuple) is the MLP's
    write to the residual stream exactly as it is added to it: the MLP module, OPT's ``fc2``,
    or Gemma-2/3's ``post_feedforward_layernorm``. (For post-norm configs, OPT-350m, a norm
    follows the residual sum, so neither write is a term of the stream.)"""

    def __post_init__(self) -> None:
        if self.norm_kind not in NORM_KINDS:  # the table is also extended by hand
            raise ValueError(
                f"{self.name}: norm_kind {self.norm_kind!r} is not one of {', '.join(NORM_KINDS)}"
            )


_LLAMA_MID = "post_attention_layernorm"  # pre-MLP norm: its input is h_{L-1} + attention
_SANDWICH_MID = "pre_feedforward_layernorm"  # Gemma-2/3 norm the attention write first
_O_PROJ = "self_attn.o_proj"
_SANDWICH_ATTN_WRITE = "post_attention_layernorm"  # Gemma-2/3: the norm after attention
_SANDWICH_MLP_WRITE = "post_feedforward_layernorm"  # Gemma-2/3: the norm after the MLP

FAMILIES: tuple[Family, ...] = (
    Family(
        "GPT-2",
        ("gpt2",),
        "transformer.h",
        "transformer.ln_f",
        NORM_LAYERNORM,
        block_count_attr="n_layer",
        mid_state="ln_2",
        attn_out="attn.c_proj",
        attn_write="attn",
        mlp_write="mlp",
    ),
    Family(
        "GPT-Neo",
        ("gpt_neo",),
        "transformer.h",
        "transformer.ln_f",
        NORM_LAYERNORM,
        mid_state="ln_2",
        attn_out="attn.attention.out_proj",
        attn_write="attn",
        mlp_write="mlp",
    ),
    Family(
        "GPT-J",
        ("gptj",),
        "transformer.h",
        "transformer.ln_f",
        NORM_LAYERNORM,
        block_count_attr="n_layer",
        attn_out="attn.out_proj",  # parallel attn and MLP
        attn_write="attn",
        mlp_write="mlp",
    ),
    Family(
        "GPT-NeoX / Pythia",
        ("gpt_neox",),
        "gpt_neox.layers",
        "gpt_neox.final_layer_norm",
        NORM_LAYERNORM,
        head="lm_head|embed_out",  # embed_out before transformers 5
        mid_state=_LLAMA_MID,
        parallel_attr="use_parallel_residual",
        attn_out="attention.dense",
        attn_write="attention",
        mlp_write="mlp",
    ),
    Family(
        "Llama / SmolLM",
        ("llama",),
        "model.layers",
        "model.norm",
        NORM_RMS,
        mid_state=_LLAMA_MID,
        attn_out=_O_PROJ,
        attn_write="self_attn",
        mlp_write="mlp",
    ),
    Family(
        "Mistral",
        ("mistral",),
        "model.layers",
        "model.norm",
        NORM_RMS,
        mid_state=_LLAMA_MID,
        attn_out=_O_PROJ,
        attn_write="self_attn",
        mlp_write="mlp",
    ),
    Family(
        "Qwen2",
        ("qwen2",),
        "model.layers",
        "model.norm",
        NORM_RMS,
        mid_state=_LLAMA_MID,
        attn_out=_O_PROJ,
        attn_write="self_attn",
        mlp_write="mlp",
    ),
    Family(
        "Qwen3",
        ("qwen3",),
        "model.layers",
        "model.norm",
        NORM_RMS,
        mid_state=_LLAMA_MID,
        attn_out=_O_PROJ,
        attn_write="self_attn",
        mlp_write="mlp",
    ),
    Family(
        "Gemma",
        ("gemma",),
        "model.layers",
        "model.norm",
        NORM_RMS_PLUS_ONE,
        mid_state=_LLAMA_MID,
        attn_out=_O_PROJ,
        attn_write="self_attn",
        mlp_write="mlp",
    ),
    Family(
        "Gemma-2",
        ("gemma2",),
        "model.layers",
        "model.norm",
        NORM_RMS_PLUS_ONE,
        softcap_attr="final_logit_softcapping",
        mid_state=_SANDWICH_MID,
        attn_out=_O_PROJ,
        attn_write_normed=True,
        attn_write=_SANDWICH_ATTN_WRITE,
        mlp_write=_SANDWICH_MLP_WRITE,
    ),
    Family(
        "Gemma-3",
        ("gemma3_text",),
        "model.layers",
        "model.norm",
        NORM_RMS_PLUS_ONE,
        softcap_attr="final_logit_softcapping",
        mid_state=_SANDWICH_MID,
        attn_out=_O_PROJ,
        attn_write_normed=True,
        attn_write=_SANDWICH_ATTN_WRITE,
        mlp_write=_SANDWICH_MLP_WRITE,
    ),
    Family(
        "OPT",
        ("opt",),
        "model.decoder.layers",
        "model.decoder.final_layer_norm",
        NORM_LAYERNORM,
        project_out="model.decoder.project_out",
        mid_state="final_layer_norm",
        post_norm_mid_state="fc1",
        attn_out="self_attn.out_proj",
        attn_write="self_attn",
        mlp_write="fc2",
    ),
    Family(
        "Phi-1/2",
        ("phi",),
        "model.layers",
        "model.final_layernorm",
        NORM_LAYERNORM,
        attn_out="self_attn.dense",  # parallel attention and MLP
        attn_write="self_attn",
        mlp_write="mlp",
    ),
    Family(
        "Phi-3",
        ("phi3",),
        "model.layers",
        "model.norm",
        NORM_RMS,
        mid_state=_LLAMA_MID,
        attn_out=_O_PROJ,
        attn_write="self_attn",
        mlp_write="mlp",
    ),
)

FAMILY_BY_MODEL_TYPE: dict[str, Family] = {t: f for f in FAMILIES for t in f.model_types}
