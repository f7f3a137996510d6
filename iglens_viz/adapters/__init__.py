"""Architecture adapters: find a model's blocks, final norm and head from an explicit table.

>>> adapter = adapter_for(model)        # doctest: +SKIP
>>> adapter.family.name, adapter.n_blocks  # doctest: +SKIP
('Llama / SmolLM', 30)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import torch
from torch import nn

from ..errors import UnsupportedModelError
from .families import FAMILIES, FAMILY_BY_MODEL_TYPE, Family

if TYPE_CHECKING:
    from transformers import PretrainedConfig

__all__ = [
    "FAMILIES",
    "Family",
    "ModelAdapter",
    "UnsupportedModelError",
    "adapter_for",
    "supported_families",
]


def supported_families() -> list[str]:
    """Names of the supported decoder families, in table order."""
    return [f.name for f in FAMILIES]


def _resolve(root: nn.Module, paths: str) -> nn.Module | None:
    """The module at a dotted path; ``a|b`` tries each alternative in turn (an alternative
    that names no module, or something other than a module, is skipped)."""
    for dotted in paths.split("|"):
        obj: object = root
        for part in dotted.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.Module):
            return obj
    return None


def _weight(module: nn.Module, family: Family) -> torch.Tensor:
    """A projection's weight tensor (``Linear`` or GPT-2's ``Conv1D``)."""
    weight = module.weight
    if not isinstance(weight, torch.Tensor):
        raise UnsupportedModelError(
            f"{family.name}: the attention output projection {type(module).__name__} has no "
            f"weight tensor; update the {family.name} entry in iglens_viz/adapters/families.py"
        )
    return weight


@dataclass(frozen=True)
class ModelAdapter:
    """The resolved readout pieces of one model instance."""

    family: Family
    blocks: tuple[nn.Module, ...]
    final_norm: nn.Module | None
    project_out: nn.Module | None
    head: nn.Linear
    softcap: float | None
    mid_modules: tuple[nn.Module, ...] | None = None
    """Per block, the module whose input is the stream between attention and MLP (h_L.attn);
    None when the blocks are parallel (see :meth:`require_sublayers`)."""
    attn_out_modules: tuple[nn.Module, ...] = ()
    """Per block, the attention's output projection (input: the concatenated head outputs)."""
    n_heads: int = 0
    """Attention heads per block (query heads: the output projection's input groups)."""
    heads_split: bool = False
    """Whether the attention's write to the stream is linear in its heads (no norm after the
    output projection), so it splits exactly into one write per head."""
    attn_write_modules: tuple[nn.Module, ...] = ()
    """Per block, the module whose output (its first element when a tuple) is the attention's
    write to the residual stream as it enters it (``Family.attn_write``); empty when the write
    is not a term of the stream (post-norm OPT: a norm follows the residual sum)."""
    mlp_write_modules: tuple[nn.Module, ...] = ()
    """Per block, the module whose output (its first element when a tuple) is the MLP's write
    to the residual stream as it enters it (``Family.mlp_write``); empty as above."""
    post_norm: bool = False
    """Whether a norm follows each residual sum (OPT-350m: ``do_layer_norm_before`` false),
    so the attention's and the MLP's outputs are not terms of the stream."""

    @property
    def n_blocks(self) -> int:
        """Number of decoder blocks (n); states run h_0 … h_n."""
        return len(self.blocks)

    def require_sublayers(self) -> tuple[nn.Module, ...]:
        """The per-block mid-state modules; an error when this model's blocks are parallel.

        A parallel block computes attention and MLP from the same input and adds both at
        once, so no residual state lies between them: a sub-layer boundary would be an
        invention, not a state of the model.
        """
        if self.mid_modules is None:
            raise UnsupportedModelError(
                f"{self.family.name} blocks run attention and MLP in parallel on the same "
                f"input, so there is no residual state between them and no sub-layer "
                f"boundary to attribute to; attribute whole blocks instead (boundaries "
                f"'all'), or split a block's contribution by component"
            )
        return self.mid_modules

    def output_projection(self, block: int) -> torch.Tensor:
        """W_o of block ``block`` (0-based) as ``[d, H·d_head]``: head i writes
        ``W_o[:, i·d_head:(i+1)·d_head] @ z_i`` (GPT-2's ``Conv1D`` stores it transposed)."""
        module = self.attn_out_modules[block]
        weight = _weight(module, self.family)
        return weight if isinstance(module, nn.Linear) else weight.T

    def require_heads(self) -> tuple[nn.Module, ...]:
        """The per-block output projections; an error when the heads cannot be told apart."""
        if not self.attn_out_modules:
            raise UnsupportedModelError(
                f"{self.family.name} has no attention output projection in the family table; "
                f"add attn_out to its entry in iglens_viz/adapters/families.py"
            )
        return self.attn_out_modules


def _not_supported_message(model: nn.Module, model_type: object) -> str:
    cls = type(model).__name__
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "is_encoder_decoder", False):
        why = f"{cls} is an encoder-decoder model; IG-Lens reads decoder-only causal LMs."
    elif not (cls.endswith("ForCausalLM") or cls.endswith("LMHeadModel")):
        why = (
            f"{cls} is not a causal language model (expected a *ForCausalLM class, "
            f"e.g. from AutoModelForCausalLM); encoder-only and headless models have no "
            f"next-token distribution to attribute."
        )
    else:
        why = f"{cls} (model_type={model_type!r}) is not in the adapter table."
    return (
        f"{why} Supported families: {', '.join(supported_families())}. To add one, append a "
        f"Family entry to iglens_viz/adapters/families.py (blocks, final norm, head paths "
        f"and norm kind); the per-forward self-check then verifies it against the model's "
        f"own probabilities."
    )


def adapter_for(model: nn.Module) -> ModelAdapter:
    """Resolve the readout pieces of ``model`` from the family table.

    Raises :class:`UnsupportedModelError` (a ``TypeError``) naming the model class and the
    supported families when the model is not a supported decoder-only causal LM.
    """
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    family = FAMILY_BY_MODEL_TYPE.get(model_type) if isinstance(model_type, str) else None
    if family is None or getattr(config, "is_encoder_decoder", False):
        raise UnsupportedModelError(_not_supported_message(model, model_type))

    blocks = _resolve(model, family.blocks)
    head = _resolve(model, family.head)
    if not isinstance(blocks, nn.ModuleList | nn.Sequential) or not isinstance(head, nn.Linear):
        raise UnsupportedModelError(
            f"{type(model).__name__} looks like {family.name} but has no {family.blocks} "
            f"block list or no {family.head} linear head; this transformers version may have "
            f"renamed them. Update the {family.name} entry in iglens_viz/adapters/families.py."
        )
    n_blocks = getattr(config, family.block_count_attr, None) or len(blocks)
    softcap = getattr(config, family.softcap_attr, None) if family.softcap_attr else None
    running = tuple(blocks)[:n_blocks]
    return ModelAdapter(
        family=family,
        blocks=running,
        final_norm=_resolve(model, family.final_norm) if family.final_norm else None,
        project_out=_resolve(model, family.project_out) if family.project_out else None,
        head=head,
        softcap=float(softcap) if softcap else None,
        mid_modules=_mid_modules(family, config, running),
        post_norm=_post_norm(family, config),
        **_attention_outputs(family, config, running),
        **_write_modules(family, config, running),
    )


class _AttentionOutputs(TypedDict, total=False):
    attn_out_modules: tuple[nn.Module, ...]
    n_heads: int
    heads_split: bool


class _WriteModules(TypedDict, total=False):
    attn_write_modules: tuple[nn.Module, ...]
    mlp_write_modules: tuple[nn.Module, ...]


def _in_every_block(
    family: Family, blocks: tuple[nn.Module, ...], path: str
) -> tuple[nn.Module, ...]:
    """The module at ``path`` inside each block; an error naming the table entry if missing."""
    found = [_resolve(block, path) for block in blocks]
    modules = tuple(m for m in found if m is not None)
    if len(modules) < len(found):
        raise UnsupportedModelError(
            f"{family.name} blocks have no {path!r} module; this transformers version may "
            f"have renamed it. Update the {family.name} entry in "
            f"iglens_viz/adapters/families.py."
        )
    return modules


def _post_norm(family: Family, config: PretrainedConfig | None) -> bool:
    """A post-norm size of a family (OPT-350m: ``do_layer_norm_before`` false); the one test
    of it, kept as :attr:`ModelAdapter.post_norm`."""
    return bool(family.post_norm_mid_state) and not getattr(config, "do_layer_norm_before", True)


def _mid_modules(
    family: Family, config: PretrainedConfig | None, blocks: tuple[nn.Module, ...]
) -> tuple[nn.Module, ...] | None:
    """Each block's ``mid_state`` module (the config decides for OPT and GPT-NeoX)."""
    if family.parallel_attr and getattr(config, family.parallel_attr, False):
        return None
    path = family.post_norm_mid_state if _post_norm(family, config) else family.mid_state
    return None if path is None else _in_every_block(family, blocks, path)


def _attention_outputs(
    family: Family, config: PretrainedConfig | None, blocks: tuple[nn.Module, ...]
) -> _AttentionOutputs:
    """Each block's attention output projection, the head count, and whether the attention's
    write is linear in its heads (not with a norm after it: Gemma-2/3, post-norm OPT)."""
    if family.attn_out is None:
        return {}
    modules = _in_every_block(family, blocks, family.attn_out)
    n_heads = getattr(config, "num_attention_heads", None)
    if not n_heads:
        raise UnsupportedModelError(f"{family.name}: the config has no num_attention_heads")
    first = modules[0]
    # nn.Linear stores [out, in]; GPT-2's Conv1D stores [in, out].
    width = first.in_features if isinstance(first, nn.Linear) else _weight(first, family).shape[0]
    if width % n_heads:
        raise UnsupportedModelError(
            f"{family.name}: the attention output projection's "
            f"input width {width} is not a multiple of "
            f"{n_heads} heads"
        )
    return _AttentionOutputs(
        attn_out_modules=modules,
        n_heads=int(n_heads),
        heads_split=not (family.attn_write_normed or _post_norm(family, config)),
    )


def _write_modules(
    family: Family, config: PretrainedConfig | None, blocks: tuple[nn.Module, ...]
) -> _WriteModules:
    """Each block's attention-write and MLP-write modules (``Family.attn_write`` and
    ``mlp_write``); none for post-norm configs (OPT ``do_layer_norm_before`` false), whose
    norm after the residual sum leaves no write that enters the stream unchanged."""
    found = _WriteModules()
    if _post_norm(family, config):
        return found
    if family.attn_write is not None:
        found["attn_write_modules"] = _in_every_block(family, blocks, family.attn_write)
    if family.mlp_write is not None:
        found["mlp_write_modules"] = _in_every_block(family, blocks, family.mlp_write)
    return found


def execution_device(module: nn.Module) -> torch.device:
    """The device a module computes on, also when accelerate offloads its weights."""
    hook = getattr(module, "_hf_hook", None)
    device = getattr(hook, "execution_device", None)
    if device is not None:
        return torch.device(device if not isinstance(device, int) else f"cuda:{device}")
    return next(module.parameters()).device
