"""The Hugging Face model inside an interpretability wrapper.

Researchers often hold their model inside a wrapper: a TransformerLens ≥ 4
``TransformerBridge``, an nnsight ``NNsight`` / ``LanguageModel``, or an nnterp
``StandardizedTransformer`` (an nnsight ``LanguageModel``). :func:`unwrap_model` finds the
``*ForCausalLM`` module inside (and the tokenizer the wrapper holds), so ``IGLens(wrapper)``
reads the same weights with the same arithmetic as ``IGLens(hf_model)``.

Wrappers are recognised by the module their class comes from, so none of these packages is
imported here (none needs to be installed).

* **nnsight** (and nnterp) keeps the module it wraps unchanged in the root envoy's
  ``_module`` (nnsight 0.8; ``_model`` before it) and the tokenizer in ``tokenizer``; a
  wrapper built from a repo id without ``dispatch=True`` holds a meta-device skeleton until
  its first trace, and is refused until then.
* **TransformerLens** boots a bridge by splicing its components *into* the Hugging Face
  module tree (``bridge.original_model.lm_head`` becomes an ``UnembeddingBridge`` around the
  original ``Linear``). The model is read through a *view*: a copy of the tree's container
  modules with every bridge component replaced by the module it wraps, sharing every
  parameter and buffer (nothing is copied but module objects; the wrapper is left as it
  is). TransformerLens also switches the model to eager attention and gives a bias-less head
  a zero bias, both in place, so the view computes what the bare model computes in eager
  mode. A bridge whose weights were processed (``enable_compatibility_mode()`` without
  ``no_processing=True``, ``process_weights()``) no longer holds the model's own weights and
  is refused.
"""

from __future__ import annotations

import copy
from typing import Any

from torch import nn

from ..errors import IGLensError, InvalidRequestError, ModelLoadError

__all__ = ["unwrap_model", "wrapper_name"]

_PACKAGES = {"transformer_lens": "TransformerLens", "nnsight": "nnsight", "nnterp": "nnterp"}
"""Top-level package of a wrapper class → the name its users know it by."""

_WHAT_WORKS = (
    "pass a Hugging Face *ForCausalLM of a supported family (iglens_viz.supported_families()), "
    "bare or inside a TransformerLens TransformerBridge, an nnsight NNsight / LanguageModel or "
    "an nnterp StandardizedTransformer"
)


def wrapper_name(obj: object) -> str | None:
    """The wrapper ``obj`` is (``"TransformerLens TransformerBridge"``, ``"nnsight
    LanguageModel"``, ``"nnterp StandardizedTransformer"``, …), or None for anything else.

    Decided from the modules of the classes in ``type(obj).__mro__``, without importing the
    wrappers' packages.
    """
    cls = type(obj)
    for base in cls.__mro__:
        package = base.__module__.split(".")[0]
        if package in _PACKAGES:
            own = cls.__module__.split(".")[0]
            return f"{_PACKAGES.get(own, _PACKAGES[package])} {cls.__name__}"
    return None


def unwrap_model(obj: Any) -> tuple[Any, Any, str | None]:
    """``(hf_model, tokenizer_or_None, wrapper_name_or_None)`` for a model or a wrapper.

    A bare model comes back as it is, with no tokenizer and no wrapper name. A wrapper gives
    the Hugging Face model inside it (for a TransformerLens bridge, the view described in
    the module docstring), the tokenizer it holds (None when it holds none) and its name.
    Wrappers inside wrappers are unwrapped in turn.

    Raises
    ------
    ModelLoadError
        An nnsight wrapper has not loaded its weights yet (built lazily from a repo id).
    InvalidRequestError
        The wrapper holds no local module (a remote TransformerLens driver), its weights were
        processed, or what it wraps is not a supported Hugging Face causal LM.
    """
    tokenizer = None
    names: list[str] = []
    while (name := wrapper_name(obj)) is not None and len(names) < 4:
        names.append(name)
        if name.startswith("TransformerLens"):
            inner, held = _from_bridge(obj, name)
        else:
            inner, held = _from_envoy(obj, name)
        tokenizer = tokenizer if tokenizer is not None else held
        obj = inner
    if not names:
        return obj, None, None
    name = " in ".join(reversed(names))
    _check_supported(obj, name)
    return obj, tokenizer, name


def _from_envoy(envoy: Any, name: str) -> tuple[nn.Module, Any]:
    """The module an nnsight envoy (``NNsight``, ``LanguageModel``, nnterp's
    ``StandardizedTransformer``) wraps, and its tokenizer."""
    state = vars(envoy)  # not getattr: an envoy forwards unknown names to its module's tree
    module = next(
        (state[key] for key in ("_module", "_model") if isinstance(state.get(key), nn.Module)),
        None,
    )
    if module is None:
        raise InvalidRequestError(f"the {name} holds no torch module that iglens_viz can find")
    if state.get("dispatched") is False:
        raise ModelLoadError(
            f"the {name} has not loaded its weights yet (nnsight builds a model named by a "
            f"repo id on the meta device until its first trace): construct it with "
            f"dispatch=True, call its .dispatch(), or pass a loaded model to it"
        )
    return module, state.get("tokenizer")


def _from_bridge(bridge: Any, name: str) -> tuple[nn.Module, Any]:
    """A view of the Hugging Face model a TransformerLens bridge wraps, and its tokenizer."""
    try:
        model = bridge.original_model
    except AttributeError as err:
        raise InvalidRequestError(
            f"the {name} holds no local torch module ({err}); IG-Lens runs the model "
            f"itself: {_WHAT_WORKS}"
        ) from None
    if getattr(bridge, "_weights_processed", False):
        raise InvalidRequestError(
            f"the {name}'s weights were processed (enable_compatibility_mode() / "
            f"process_weights() fold and centre them), so it no longer holds the model's own "
            f"weights: use a bridge without weight processing (enable_compatibility_mode("
            f"no_processing=True) keeps them), or pass the Hugging Face model"
        )
    if not isinstance(model, nn.Module):
        raise InvalidRequestError(f"the {name} wraps {type(model).__name__}, not a torch module")
    return _unbridged(model, {}), getattr(bridge, "tokenizer", None)


def _bridged(module: nn.Module) -> nn.Module | None:
    """The module a TransformerLens bridge component wraps (None: not a bridge component)."""
    if not type(module).__module__.startswith("transformer_lens."):
        return None
    original = module._modules.get("_original_component")
    return original if isinstance(original, nn.Module) else None


def _unbridged(module: nn.Module, seen: dict[int, nn.Module]) -> nn.Module:
    """``module`` with every TransformerLens bridge component below it replaced by the module
    it wraps: the module itself when nothing below it is bridged, else a shallow copy with its
    own child table and hook tables (its parameters and buffers shared), so hooks registered
    on the view never reach the bridged tree."""
    if id(module) in seen:
        return seen[id(module)]
    original = _bridged(module)
    if original is not None:
        view = _unbridged(original, seen)
    else:
        children = {
            key: child if child is None else _unbridged(child, seen)
            for key, child in module._modules.items()
        }
        if all(children[key] is child for key, child in module._modules.items()):
            view = module
        else:
            state = vars(module)
            if "forward" in state or "_hf_hook" in state:
                raise InvalidRequestError(
                    f"{type(module).__name__} inside the TransformerLens bridge has its forward "
                    f"replaced (by accelerate's offloading hooks or another wrapper), so it "
                    f"cannot be read apart from the bridge: boot the bridge over a model held "
                    f"in memory, or pass IG-Lens the offloaded model itself, loaded without a "
                    f"bridge (booting one changes the modules of the model it wraps)"
                )
            view = copy.copy(module)
            for key, value in state.items():
                if "hooks" in key and isinstance(value, dict):
                    view.__dict__[key] = copy.copy(value)
            view.__dict__["_parameters"] = dict(module._parameters)
            view.__dict__["_buffers"] = dict(module._buffers)
            view.__dict__["_non_persistent_buffers_set"] = set(module._non_persistent_buffers_set)
            view.__dict__["_modules"] = children
    seen[id(module)] = view
    return view


def _check_supported(model: Any, name: str) -> None:
    """An error naming the wrapper when what it wraps is not a model IG-Lens can read."""
    from ..adapters import adapter_for

    try:
        adapter_for(model)
    except IGLensError as err:
        raise InvalidRequestError(
            f"the {name} wraps {type(model).__name__}, which IG-Lens cannot read ({err}). "
            f"{_WHAT_WORKS[0].upper()}{_WHAT_WORKS[1:]}."
        ) from err
