"""ONNX graphs of a model for the kernel-free site (issue 38, first stage): a body and a readout.

* The **body** takes ``input_ids`` ``(1, T)`` (int64) and a KV cache of P earlier positions,
  ``past_keys``/``past_values`` ``(n, 1, H_kv, P, d_head)`` (P = 0 for a prompt), and returns
  ``states`` ``(n+1, T, d)``: h_0 (the embeddings) and every block's output h_1 … h_n of the T
  new positions, pre-norm, as the engine reads them (:func:`iglens_viz.adapters.adapter_for`),
  and the cache extended to P+T positions (``keys``, ``values``): a prompt, then one
  generated token per call.
* The **readout** takes a row tile of states ``(R, d)`` and their ``target_ids`` ``(R,)`` and
  returns, in float32, ``target_prob`` ``(R,)``, ``log_normalizer`` ``(R,)`` (the logsumexp of
  the logits), ``top_ids`` ``(R, K)`` and ``top_probs`` ``(R, K)``. Its memory is one
  ``(R, V)`` logit tile: the caller bounds it by the rows it passes (:func:`run_readout`).

Weights go to external data files next to each graph (``body.onnx`` + ``body.onnx.data``,
…), so the graph files stay small; :func:`file_sizes` lists what was written.

>>> paths = export_site_graphs(model, "site/graphs")          # doctest: +SKIP
>>> prompt = run_body(paths.body, input_ids)                 # doctest: +SKIP
>>> step = run_body(paths.body, [next_id], past=prompt)      # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from torch import nn

from ..adapters import ModelAdapter, adapter_for
from ..errors import MissingPackageError, UnsupportedModelError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "DEFAULT_TOP_K",
    "BodyGraph",
    "BodyOutput",
    "ReadoutGraph",
    "SiteGraphs",
    "export_site_graphs",
    "file_sizes",
    "require_onnx",
    "run_body",
    "run_readout",
]

DEFAULT_TOP_K = 5
"""Top-k tokens the readout returns per row (the widget's default lens top-k)."""
READOUT_TILE_ROWS = 64
"""Rows per readout call in :func:`run_readout`: a 64 × 49,152 float32 logit tile is 12 MiB."""
OPSET = 18


def require_onnx() -> Any:
    """Import and return ``onnxruntime``, after checking ``onnx`` and ``onnxscript`` import
    too; a :class:`~iglens_viz.errors.MissingPackageError` naming the install command if not."""
    modules = []
    for name in ("onnx", "onnxscript", "onnxruntime"):
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as err:
            raise MissingPackageError(
                f"exporting the site's graphs needs the {name} package, which is not "
                f"installed: pip install 'iglens_viz[site]'"
            ) from err
    return modules[-1]


class BodyGraph(nn.Module):
    """The model's embeddings and blocks with a KV cache, returning every boundary's state.

    ``forward(input_ids (1, T), past_keys, past_values)`` with the past ``(n, 1, H_kv, P,
    d_head)`` (P = 0: no past) returns ``states (n+1, T, d)`` of the T new positions (at
    positions P … P+T−1) and the cache ``keys``, ``values`` ``(n, 1, H_kv, P+T, d_head)``.
    h_0 … h_{n-1} are the model's own ``hidden_states`` (block inputs); h_n is the final
    norm's input (the last block's output), read with a pre-hook, since transformers' last
    hidden state is already normed.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.adapter = adapter_for(model)
        if self.adapter.final_norm is None:
            raise UnsupportedModelError(
                f"{self.adapter.family.name}: this model has no final norm (post-norm), so its "
                f"last block's output is not the head's input; the site's graphs read pre-norm "
                f"models only: export a model of another family"
            )
        # transformers 5 names the argument ``cache``; earlier versions ``past_key_values``
        params = inspect.signature(model.forward).parameters
        self.cache_argument = "cache" if "cache" in params else "past_key_values"

    def forward(
        self, input_ids: torch.Tensor, past_keys: torch.Tensor, past_values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The new positions' states ``(n+1, T, d)`` (float32) and the extended cache."""
        n = self.adapter.n_blocks
        cache = self._new_cache()
        for block in range(n):
            cache.update(past_keys[block], past_values[block], block)
        start = past_keys.shape[3]
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None] + start
        last: list[torch.Tensor] = []
        norm = self.adapter.final_norm
        assert norm is not None
        handle = norm.register_forward_pre_hook(lambda module, args: last.append(args[0]))
        try:
            out = self.model(
                input_ids=input_ids,
                position_ids=positions,
                output_hidden_states=True,
                use_cache=True,
                **{self.cache_argument: cache},
            )
        finally:
            handle.remove()
        states = torch.cat([*out.hidden_states[:n], last[0]], dim=0).float()
        keys, values = zip(*(_layer_cache(cache, block) for block in range(n)))
        return states, torch.stack(keys), torch.stack(values)

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=getattr(self.model, "config", None))

    def empty_cache(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """A cache of no positions, ``(n, 1, H_kv, 0, d_head)`` (keys or values alike)."""
        probe = torch.zeros((1, 1), dtype=torch.long)
        cache = self._new_cache()
        with torch.no_grad():
            self.model(input_ids=probe, use_cache=True, **{self.cache_argument: cache})
        keys = _layer_cache(cache, 0)[0]
        return torch.zeros((self.adapter.n_blocks, *keys.shape[:2], 0, keys.shape[3]), dtype=dtype)


def _layer_cache(cache: Any, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One block's cached keys and values ``(1, H_kv, P, d_head)`` (transformers' layers)."""
    layer = cache.layers[block]
    return layer.keys, layer.values


class BodyOutput(NamedTuple):
    """What the body graph returns for T new positions after P cached ones."""

    states: np.ndarray
    """``(n+1, T, d)`` float32: h_0 … h_n of the new positions."""
    keys: np.ndarray
    """``(n, 1, H_kv, P+T, d_head)``: the cache's keys, to pass back as ``past_keys``."""
    values: np.ndarray
    """``(n, 1, H_kv, P+T, d_head)``: the cache's values."""


class ReadoutGraph(nn.Module):
    """Final norm, optional projection, head and soft-cap of a row tile, in float32.

    ``forward(states (R, d), target_ids (R,))`` returns ``target_prob (R,)``,
    ``log_normalizer (R,)``, ``top_ids (R, K)`` and ``top_probs (R, K)``.
    """

    def __init__(self, adapter: ModelAdapter, top_k: int = DEFAULT_TOP_K) -> None:
        super().__init__()
        self.final_norm = adapter.final_norm
        self.project_out = adapter.project_out
        self.head = adapter.head
        self.softcap = adapter.softcap
        self.top_k = top_k

    def forward(
        self, states: torch.Tensor, target_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The target's probability, the logsumexp and the top-k of each row."""
        x = states.float()
        if self.final_norm is not None:
            x = self.final_norm(x)
        if self.project_out is not None:
            x = self.project_out(x)
        logits = self.head(x).float()
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        lse = torch.logsumexp(logits, dim=-1)
        target = torch.gather(logits, 1, target_ids[:, None])[:, 0]
        top_logits, top_ids = torch.topk(logits, self.top_k, dim=-1)
        return torch.exp(target - lse), lse, top_ids, torch.exp(top_logits - lse[:, None])


@dataclass(frozen=True)
class SiteGraphs:
    """The paths of an export's two graphs (each with its external data file beside it)."""

    body: Path
    readout: Path


def _export(module: nn.Module, args: tuple[torch.Tensor, ...], path: Path, **kw: Any) -> None:
    program = torch.onnx.export(
        module.eval(), args, dynamo=True, opset_version=OPSET, optimize=True, verbose=False, **kw
    )
    assert program is not None
    program.save(str(path), external_data=True)


def export_site_graphs(
    model: nn.Module, directory: str | os.PathLike[str], *, top_k: int = DEFAULT_TOP_K
) -> SiteGraphs:
    """Export ``model``'s body and readout graphs to ``directory`` (``body.onnx``,
    ``readout.onnx``, each with a ``.data`` file of its float32 weights).

    The model is exported as it is, in float32 (a half-precision model is cast to a float32
    copy first). Needs the ``site`` extra: ``pip install 'iglens_viz[site]'``.
    """
    require_onnx()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    if next(model.parameters()).dtype != torch.float32:
        import copy

        model = copy.deepcopy(model).float()
    body = BodyGraph(model)
    tokens = torch.export.Dim("tokens", min=1, max=_max_positions(model))
    past = torch.export.Dim("past", min=0, max=_max_positions(model))
    rows = torch.export.Dim("rows", min=1, max=2**16)
    paths = SiteGraphs(out / "body.onnx", out / "readout.onnx")
    with torch.no_grad():
        empty = body.empty_cache()
        _, keys, values = body(torch.zeros((1, 4), dtype=torch.long), empty, empty)
        _export(
            body,
            (torch.zeros((1, 3), dtype=torch.long), keys, values),  # 3 tokens after 4
            paths.body,
            input_names=["input_ids", "past_keys", "past_values"],
            output_names=["states", "keys", "values"],
            dynamic_shapes={
                "input_ids": {1: tokens},
                "past_keys": {3: past},
                "past_values": {3: past},
            },
        )
        readout = ReadoutGraph(body.adapter, top_k)
        states = torch.zeros((4, _width(body)), dtype=torch.float32)
        targets = torch.zeros((4,), dtype=torch.long)
        _export(
            readout,
            (states, targets),
            paths.readout,
            input_names=["states", "target_ids"],
            output_names=["target_prob", "log_normalizer", "top_ids", "top_probs"],
            dynamic_shapes={"states": {0: rows}, "target_ids": {0: rows}},
        )
    return paths


def _max_positions(model: nn.Module) -> int:
    config = getattr(model, "config", None)
    return int(getattr(config, "max_position_embeddings", 2048) or 2048)


def _width(body: BodyGraph) -> int:
    """The residual width d: the final norm's weight length."""
    norm = body.adapter.final_norm
    assert norm is not None
    return int(next(norm.parameters()).shape[-1])


def _session(path: str | os.PathLike[str]) -> Any:
    ort = require_onnx()
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def run_body(
    path: str | os.PathLike[str] | Any,
    input_ids: Sequence[int] | np.ndarray,
    past: BodyOutput | None = None,
) -> BodyOutput:
    """Run a body graph (a path, or an ``onnxruntime.InferenceSession``) on one prompt's new
    ids after ``past`` (a previous call's output; None: no past): the new positions' states
    and the extended cache."""
    session = _session(path) if isinstance(path, (str, os.PathLike)) else path
    ids = np.asarray(input_ids, dtype=np.int64).reshape(1, -1)
    if past is None:
        shape = session.get_inputs()[1].shape  # (n, 1, H_kv, "past", d_head)
        empty = np.zeros((shape[0], 1, shape[2], 0, shape[4]), dtype=np.float32)
        keys, values = empty, empty
    else:
        keys, values = past.keys, past.values
    feed = {"input_ids": ids, "past_keys": keys, "past_values": values}
    return BodyOutput(*session.run(["states", "keys", "values"], feed))


def run_readout(
    path: str | os.PathLike[str] | Any,
    states: np.ndarray,
    target_ids: Sequence[int] | np.ndarray,
    *,
    tile_rows: int = READOUT_TILE_ROWS,
) -> dict[str, np.ndarray]:
    """Run a readout graph over ``states (..., d)`` and their ``target_ids (...)`` in tiles of
    ``tile_rows`` rows; a dict of ``target_prob``, ``log_normalizer``, ``top_ids`` and
    ``top_probs``, each shaped like the rows (plus K for the top-k)."""
    session = _session(path) if isinstance(path, (str, os.PathLike)) else path
    lead = states.shape[:-1]
    flat = np.ascontiguousarray(states.reshape(-1, states.shape[-1]), dtype=np.float32)
    targets = np.asarray(target_ids, dtype=np.int64).reshape(-1)
    names = [o.name for o in session.get_outputs()]
    parts: list[list[np.ndarray]] = [[] for _ in names]
    for start in range(0, len(flat), tile_rows):
        rows, tgt = flat[start : start + tile_rows], targets[start : start + tile_rows]
        outs = session.run(names, {"states": rows, "target_ids": tgt})
        for part, value in zip(parts, outs):
            part.append(value)
    result = {}
    for name, part in zip(names, parts):
        joined = np.concatenate(part)
        result[name] = joined.reshape(*lead, *joined.shape[1:])
    return result


def file_sizes(directory: str | os.PathLike[str]) -> dict[str, int]:
    """Bytes of every file in an export's directory, by name (graphs and their data files)."""
    return {p.name: p.stat().st_size for p in sorted(Path(directory).iterdir()) if p.is_file()}
