"""Forward hooks on a model's modules: registered together, always removed, and the block
calling conventions they read and write.

Capture (:mod:`.capture`), ablation and the batched ablation of a study
(:mod:`iglens_viz.causal`) all hook the same decoder blocks: what a block's input and output
look like (a tensor in transformers 5, a tuple in 4.x; the input positional or the keyword
``hidden_states``) is decided here once, with one error text.

>>> with Hooks() as hooks:                                  # doctest: +SKIP
...     hooks.after(adapter.blocks[3], keep_output)
...     model(input_ids=ids)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = [
    "Hooks",
    "block_input",
    "block_output_states",
    "by_row",
    "projection_input",
    "replace_block_output",
    "run_until",
]

_BLOCK_OUTPUT = (
    "decoder block returned {kind}; expected a tensor or a tuple whose first item "
    "is the hidden states"
)


class Hooks:
    """Forward hooks registered through this object and removed together when the ``with``
    block ends, also when it raises (as TransformerLens's ``hooks()`` context manager)."""

    def __init__(self) -> None:
        self._handles: list[Any] = []

    def after(
        self, module: nn.Module, hook: Callable[..., Any], *, with_kwargs: bool = False
    ) -> None:
        """A forward hook: ``hook(module, args, output)`` (``args, kwargs, output`` with
        ``with_kwargs``) runs after ``module``; a value it returns replaces the output."""
        self._handles.append(module.register_forward_hook(hook, with_kwargs=with_kwargs))

    def before(
        self, module: nn.Module, hook: Callable[..., Any], *, with_kwargs: bool = False
    ) -> None:
        """A forward pre-hook: ``hook(module, args)`` (``args, kwargs`` with
        ``with_kwargs``) runs before ``module``; a value it returns replaces the input."""
        self._handles.append(module.register_forward_pre_hook(hook, with_kwargs=with_kwargs))

    def remove(self) -> None:
        """Remove every hook registered so far."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __enter__(self) -> Hooks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class _Stopped(Exception):
    """Raised by :func:`run_until`'s hook: nothing after its module is needed."""


def run_until(module: nn.Module, forward: Callable[[], Any]) -> Any:
    """Call ``forward()`` (a forward pass of the model holding ``module``) and stop it right
    after ``module`` has run; returns ``module``'s output, as every hook registered on it
    before left it. The rest of the model (later blocks, the final norm, the head) never
    runs."""
    kept: list[Any] = []

    def stop(module: nn.Module, args: tuple, output: Any) -> None:
        kept.append(output)
        raise _Stopped

    handle = module.register_forward_hook(stop)
    try:
        forward()
    except _Stopped:
        pass
    finally:
        handle.remove()
    if not kept:
        raise RuntimeError(f"the forward pass never ran {type(module).__name__}")
    return kept[0]


def block_output_states(value: Any) -> torch.Tensor:
    """The hidden states in a decoder block's output (a tensor in transformers 5, a tuple
    in 4.x)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    raise TypeError(_BLOCK_OUTPUT.format(kind=type(value).__name__))


def replace_block_output(output: Any, hidden: torch.Tensor) -> Any:
    """``output`` with its hidden states replaced, keeping the block's return structure."""
    if isinstance(output, torch.Tensor):
        return hidden
    if isinstance(output, tuple):
        return (hidden, *output[1:])
    if isinstance(output, list):
        return [hidden, *output[1:]]
    raise TypeError(_BLOCK_OUTPUT.format(kind=type(output).__name__))


def block_input(args: tuple, kwargs: dict) -> torch.Tensor:
    """A decoder block's input hidden states, from a ``with_kwargs`` hook's arguments."""
    if args:
        return args[0]
    if "hidden_states" in kwargs:
        return kwargs["hidden_states"]
    raise TypeError(
        "cannot find the decoder block's input hidden states (neither positional "
        "argument 0 nor keyword 'hidden_states')"
    )


def by_row(x: torch.Tensor, rows: int) -> torch.Tensor:
    """``x`` as ``[rows, T, …]`` (OPT flattens the batch into ``[rows·T, d]`` inside a block)."""
    if x.dim() >= 3 and x.shape[0] == rows:
        return x
    return x.reshape(rows, -1, x.shape[-1])


def projection_input(
    args: tuple, kwargs: dict
) -> tuple[torch.Tensor, Callable[[torch.Tensor], tuple[tuple, dict]]]:
    """The output projection's input and a function that puts a replacement in its place."""
    if args:
        return args[0], lambda new: ((new, *args[1:]), kwargs)
    key = next((k for k in ("input", "x", "hidden_states") if k in kwargs), None)
    if key is not None:
        return kwargs[key], lambda new: (args, {**kwargs, key: new})
    raise TypeError(
        "cannot find the attention output projection's input (neither positional "
        "argument 0 nor keyword 'input', 'x' or 'hidden_states')"
    )
