"""The site's weights in the form a browser loads (issue 38, second stage): parts under the
static hosts' per-file limit, the tied embedding stored once, the body's weights in float16.

:func:`pack_site_graphs` rewrites the two float32 graphs of
:func:`~iglens_viz.export.site_graphs.export_site_graphs` into ``body.onnx`` and
``readout.onnx`` (graph files of a few hundred kB) and weight parts ``weights-00.bin``,
``weights-01.bin``, … beside them:

* **Every file under 100 MiB**: GitHub refuses a file over 100 MiB in the repository Pages
  serves (and warns at 50 MiB), so each part holds at most :data:`PART_BYTES` (48 MiB,
  50.3 MB); a tensor larger than that
  (the float32 embedding, 113 MB for the default model) is stored as row blocks and joined
  by a ``Concat`` node in the graph.
* **The embedding once**: the body's embedding and the readout's head are one matrix when
  the model ties them (the default does). Both graphs reference the same row blocks of the
  same parts (ONNX external data: a file name, an offset, a length), so the page fetches each
  part once and hands the same bytes to both sessions (onnxruntime-web's ``externalData``
  session option takes ``{path, data}`` pairs; the manifest lists each graph's parts). This
  is the simplest layout onnxruntime-web loads: two ordinary ONNX files with external data,
  no graph that feeds another graph's weights at run time, no custom loader.
* **Body in float16, arithmetic in float32**: each block's matrix is stored in float16 (one
  with an entry beyond float16's range stays float32) and cast to float32 by a ``Cast``
  node in the graph, so the download halves and every backend
  runs it (onnxruntime's CPU/WASM kernels have few float16 kernels; a ``Cast`` of a constant
  is folded once when the session loads). The embedding stays float32 (it is the readout's
  head too) and the readout is float32 throughout, as the issue asks: on the same states the
  readout equals Python's within float32 rounding. Small tensors (norm weights, constants)
  stay inside the graph files in float32.

What float16 weights change (measured, not derived: no bound on how 30 blocks amplify a
weight's rounding is tight enough to use): the default model's per-block target
probabilities against the float32 torch ``attribute``, over every block and position of the
lesson's question and three shipped prompts with 12 generated tokens each, moved by at most
1.7e-3 (1.57e-3, 1.09e-3, 1.45e-3, 1.67e-3; docs/data/site_default.json), and the greedy
answers were the same tokens as torch's ``generate``. :data:`HALF_BODY_TOLERANCE` states
2.5e-3; tests/export/test_site.py asserts it on every run of its real-model test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "HALF_BODY_TOLERANCE",
    "PART_BYTES",
    "PackedGraphs",
    "pack_site_graphs",
]

PART_BYTES = 48 * 2**20
"""The most bytes in one weight part: under GitHub's 50 MiB warning and 100 MiB limit."""

HALF_BODY_TOLERANCE = 2.5e-3
"""The stated bound on |Δp| between the float16-weight body (then the float32 readout) and
the float32 torch ``attribute``, any block and position: the 1.7e-3 measured (module text)
with 1.5x margin for other CPUs' kernels and prompts; the manifest carries it."""

HALF_MIN_ELEMENTS = 256
"""A float32 weight of at least this many elements and two or more axes goes to the parts in
float16 (the body's matrices); smaller ones (norm weights, scalars) stay in the graph file."""


@dataclass(frozen=True)
class PackedGraphs:
    """What :func:`pack_site_graphs` wrote: the two graph files and the parts each reads."""

    body: Path
    readout: Path
    body_parts: tuple[str, ...]
    """Part file names the body references (its ``externalData`` paths in the page)."""
    readout_parts: tuple[str, ...]
    shared: bool
    """Whether the embedding and the head are one stored matrix (a tied model)."""


class _Parts:
    """Appends tensors' bytes to ``weights-NN.bin`` files of at most ``limit`` bytes each."""

    def __init__(self, directory: Path, limit: int) -> None:
        self.directory, self.limit = directory, limit
        self.files: list[Path] = []
        self.size = limit  # no open part: the first tensor opens one

    def add(self, data: bytes) -> tuple[str, int, int]:
        """Store ``data``; its (file name, offset, length)."""
        if len(data) > self.limit:
            raise ValueError(f"a block of {len(data)} bytes exceeds a part's {self.limit}")
        if self.size + len(data) > self.limit:
            self.files.append(self.directory / f"weights-{len(self.files):02d}.bin")
            self.files[-1].write_bytes(b"")
            self.size = 0
        with self.files[-1].open("ab") as f:
            f.write(data)
        offset, self.size = self.size, self.size + len(data)
        return self.files[-1].name, offset, len(data)


def _external(name: str, array: np.ndarray, where: tuple[str, int, int]) -> Any:
    """An initializer ``name`` of ``array``'s type and shape whose bytes are at ``where``."""
    import onnx

    tensor = onnx.TensorProto()
    tensor.name = name
    tensor.data_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    tensor.dims.extend(array.shape)
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in zip(("location", "offset", "length"), map(str, where)):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


class _Stored:
    """A matrix stored once in the parts as row blocks, referenced by any number of graphs."""

    def __init__(self, array: np.ndarray, parts: _Parts, key: str) -> None:
        self.key, self.dtype = key, array.dtype
        rows = max(1, parts.limit // max(1, array[0].nbytes))
        self.blocks = []
        for start in range(0, len(array), rows):
            block = np.ascontiguousarray(array[start : start + rows])
            self.blocks.append((block, parts.add(block.tobytes())))

    def files(self) -> set[str]:
        """The part files holding this matrix."""
        return {where[0] for _, where in self.blocks}

    def attach(self, output: str, tensors: list[Any], nodes: list[Any]) -> None:
        """Append this matrix's block initializers to ``tensors`` and the nodes making
        ``output`` of them to ``nodes``: a ``Concat`` of the blocks (an ``Identity`` of one),
        then a ``Cast`` to float32 when stored in float16."""
        import onnx

        names = []
        for i, (block, where) in enumerate(self.blocks):
            names.append(f"{self.key}.{i}")
            tensors.append(_external(names[-1], block, where))
        joined = output if self.dtype == np.float32 else f"{self.key}.joined"
        if len(names) == 1:
            nodes.append(onnx.helper.make_node("Identity", names, [joined]))
        else:
            nodes.append(onnx.helper.make_node("Concat", names, [joined], axis=0))
        if joined != output:
            nodes.append(
                onnx.helper.make_node("Cast", [joined], [output], to=onnx.TensorProto.FLOAT)
            )


def _matches(array: np.ndarray, matrix: np.ndarray) -> str | None:
    """``"same"`` or ``"transposed"`` when ``array`` holds ``matrix`` (or its transpose)."""
    if array.shape == matrix.shape and np.array_equal(array, matrix):
        return "same"
    if array.shape == matrix.shape[::-1] and np.array_equal(array, matrix.T):
        return "transposed"
    return None


def _rewrite(
    source: Path, target: Path, parts: _Parts, shared: _Stored, *, half: bool, prefix: str
) -> tuple[tuple[str, ...], bool]:
    """Rewrite the graph at ``source`` to ``target``: a copy of the shared matrix (the
    embedding, or its transpose) replaced by the stored one, other large float32 weights
    moved to the parts (in float16 when ``half``). The part files it references, and whether
    it found the shared matrix."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source), load_external_data=True)
    graph = model.graph
    matrix = np.concatenate([block for block, _ in shared.blocks]).astype(np.float32)
    tensors: list[Any] = []
    nodes: list[Any] = []
    files: set[str] = set()
    found = False
    for tensor in graph.initializer:
        array = numpy_helper.to_array(tensor)
        large = array.dtype == np.float32 and array.ndim >= 2 and array.size >= HALF_MIN_ELEMENTS
        how = _matches(array, matrix) if large and array.ndim == 2 else None
        if how is not None:
            found = True
            out = tensor.name if how == "same" else f"{tensor.name}.untransposed"
            shared.attach(out, tensors, nodes)
            if how == "transposed":
                nodes.append(onnx.helper.make_node("Transpose", [out], [tensor.name], perm=[1, 0]))
            files |= shared.files()
        elif large:
            # a weight beyond float16's range would become inf: kept in float32
            fits = half and float(np.abs(array).max()) <= float(np.finfo(np.float16).max)
            stored = _Stored(
                array.astype(np.float16) if fits else array, parts, f"{prefix}.{tensor.name}"
            )
            stored.attach(tensor.name, tensors, nodes)
            files |= stored.files()
        else:
            tensors.append(tensor)
    del graph.initializer[:]
    graph.initializer.extend(tensors)
    old = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + old)  # the weights' nodes first: the graph stays sorted
    onnx.save(model, str(target))
    return tuple(sorted(files)), found


def pack_site_graphs(
    body: str | os.PathLike[str],
    readout: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    embedding: np.ndarray,
    *,
    part_bytes: int = PART_BYTES,
) -> PackedGraphs:
    """Rewrite the float32 ``body`` and ``readout`` graphs (with their external data) into
    ``directory``: ``body.onnx``, ``readout.onnx`` and ``weights-NN.bin`` parts of at most
    ``part_bytes`` each (the module's text). ``embedding`` is the model's input embedding
    matrix ``(V, d)``; the body must hold it, and the readout's head is stored once with it
    when it is the same matrix."""
    from ..errors import UnsupportedModelError

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    parts = _Parts(out, part_bytes)
    shared = _Stored(np.ascontiguousarray(embedding, dtype=np.float32), parts, "embedding")
    body_parts, found = _rewrite(
        Path(body), out / "body.onnx", parts, shared, half=True, prefix="body"
    )
    if not found:
        raise UnsupportedModelError(
            "the body graph holds no copy of the model's input embedding matrix, so the "
            "site's weights cannot be packed (the embedding must be a plain lookup table)"
        )
    readout_parts, tied = _rewrite(
        Path(readout), out / "readout.onnx", parts, shared, half=False, prefix="readout"
    )
    return PackedGraphs(out / "body.onnx", out / "readout.onnx", body_parts, readout_parts, tied)
