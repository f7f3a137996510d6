"""The kernel-free site's folder (issue 38): the model's graphs and weights, the tokenizer and
its chat template, and a manifest, for a page that runs the model in the browser.

:func:`export_site` writes::

    DIR/
      manifest.json            every other file's bytes and sha256; the model's shape; each
                               graph's inputs (with their shapes, axes named where dynamic),
                               outputs, weight dtype and parts; the tolerance
      graphs/body.onnx         ids + KV cache -> h_0 … h_n and the extended cache
      graphs/readout.onnx      row tiles of states -> target prob, logsumexp, top-k (float32)
      graphs/weights-NN.bin    the weight parts, each at most 48 MiB; the embedding stored once
                               and read by both graphs (see iglens_viz.export.site_weights)
      tokenizer/tokenizer.json the fast tokenizer (what @huggingface/tokenizers reads)
      tokenizer/chat.json      the chat template (Jinja, for @huggingface/jinja) and the
                               special tokens' ids
      index.html, page/        the page: the bundle (js/site.js) and onnxruntime-web's
                               WebAssembly files (iglens_viz.export.site_page)
      lessons/lesson-NN.json   questions attributed in Python at export time, shown at first
                               paint (iglens_viz.export.site_lessons)

The folder appears whole or not at all: it is written to a temporary folder beside
``directory`` and renamed into place at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import InvalidRequestError, UnsupportedModelError
from ..files import OutputFileError
from .site_graphs import DEFAULT_TOP_K, export_site_graphs, require_onnx
from .site_lessons import DEFAULT_LESSONS, Lesson, write_lessons
from .site_page import PAGE_FILES, require_page_bundle, write_page
from .site_weights import HALF_BODY_TOLERANCE, PART_BYTES, pack_site_graphs

__all__ = ["SITE_FORMAT", "SiteProgress", "export_site", "read_manifest", "site_files"]

SITE_FORMAT = 1
"""The manifest's ``format``: raised when the folder's layout changes."""

STEPS = (
    "exporting the float32 graphs",
    "packing the weights",
    "writing the tokenizer",
    "writing the page and the lessons",
    "writing the manifest",
)
"""What :func:`export_site` does, in order (its progress reports name these)."""


class SiteProgress(NamedTuple):
    """One progress report of :func:`export_site`: step ``step`` of ``total`` is starting
    (or, with ``step == total``, all are done), ``seconds`` since the export started."""

    step: int
    total: int
    what: str
    seconds: float

    def __str__(self) -> str:
        if self.step >= self.total:
            return f"done in {self.seconds:.0f} s"
        return f"{self.step + 1}/{self.total} {self.what} ({self.seconds:.0f} s so far)"


def _check_target(directory: Path, overwrite: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise OutputFileError(f"{directory} is a file, not a folder: choose a folder for the site")
    if directory.is_dir() and any(directory.iterdir()) and not overwrite:
        raise OutputFileError(
            f"{directory} is not empty: choose an empty or new folder, or pass overwrite=True "
            f"(--overwrite) to replace it"
        )
    if not directory.parent.is_dir():
        raise OutputFileError(f"{directory.parent} does not exist: create it first")


def _check_model(model: Any, tokenizer: Any) -> None:
    from torch import nn

    if not isinstance(model, nn.Module):
        raise InvalidRequestError(
            f"export_site needs a torch model (transformers' AutoModelForCausalLM), not "
            f"{type(model).__name__}"
        )
    if tokenizer is None:
        raise InvalidRequestError("export_site was given a model but no tokenizer: pass both")
    if not getattr(tokenizer, "is_fast", False):
        raise UnsupportedModelError(
            f"the site needs a fast tokenizer (a tokenizer.json the browser reads); "
            f"{type(tokenizer).__name__} is not one"
        )


def _write_tokenizer(tokenizer: Any, directory: Path) -> None:
    directory.mkdir()
    tokenizer.backend_tokenizer.save(str(directory / "tokenizer.json"))
    special = {
        str(t): int(tokenizer.convert_tokens_to_ids(t)) for t in tokenizer.all_special_tokens
    }
    chat = {
        "chat_template": getattr(tokenizer, "chat_template", None),
        "bos_token": tokenizer.bos_token,
        "eos_token": tokenizer.eos_token,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "special_tokens": special,
    }
    (directory / "chat.json").write_text(json.dumps(chat, indent=1, ensure_ascii=False) + "\n")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _graph_entry(path: Path, parts: tuple[str, ...], weights: str) -> dict[str, Any]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)

    def shape(value: Any) -> list[int | str]:
        dims = value.type.tensor_type.shape.dim
        return [d.dim_param if d.dim_param else int(d.dim_value) for d in dims]

    return {
        "file": f"graphs/{path.name}",
        "external_data": list(parts),
        "inputs": [i.name for i in model.graph.input],
        "outputs": [o.name for o in model.graph.output],
        "input_shapes": {i.name: shape(i) for i in model.graph.input},
        "weights": weights,
        "compute": "float32",
    }


def _manifest(
    root: Path,
    model: Any,
    name: str,
    top_k: int,
    graphs: dict[str, Any],
    tied: bool,
    part_bytes: int,
    lessons: list[dict[str, Any]],
) -> dict[str, Any]:
    from .._version import __version__
    from ..adapters import adapter_for

    adapter = adapter_for(model)
    embedding = model.get_input_embeddings().weight
    files = {
        p.relative_to(root).as_posix(): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    return {
        "format": SITE_FORMAT,
        "iglens_viz": __version__,
        "model": {
            "name": name,
            "n_blocks": adapter.n_blocks,
            "d_model": int(embedding.shape[1]),
            "vocab_size": int(embedding.shape[0]),
            "top_k": top_k,
            "tied_embedding": tied,
            "family": adapter.family.name,
        },
        "graphs": graphs,
        "tokenizer": {"tokenizer": "tokenizer/tokenizer.json", "chat": "tokenizer/chat.json"},
        "page": {"index": PAGE_FILES[0], "files": list(PAGE_FILES)},
        "tolerance": {
            "max_abs_diff_block_probability": HALF_BODY_TOLERANCE,
            "against": "iglens_viz.attribute in float32 (torch), shipped prompts",
        },
        "part_bytes_max": part_bytes,
        "lessons": lessons,
        "files": files,
    }


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``manifest.json`` of an exported site folder, parsed."""
    data: dict[str, Any] = json.loads(Path(directory, "manifest.json").read_text())
    return data


def export_site(
    directory: str | os.PathLike[str],
    model: Any = None,
    tokenizer: Any = None,
    *,
    name: str | None = None,
    top_k: int = DEFAULT_TOP_K,
    overwrite: bool = False,
    progress: Callable[[SiteProgress], None] | None = None,
    part_bytes: int = PART_BYTES,
    lessons: Iterable[Lesson | str] | None = None,
) -> dict[str, Any]:
    """Write the kernel-free site's folder for ``model`` (default: the embedded
    SmolLM2-135M-Instruct, :func:`iglens_viz.load_model`) to ``directory``; its manifest.

    ``directory`` must be new or empty unless ``overwrite`` (then it is replaced, whole, at
    the end). ``name`` is the model's name in the manifest (default:
    :func:`~iglens_viz.core.result.display_name`). ``progress`` receives a
    :class:`SiteProgress` as each step starts and when all are done (the export of the
    default model takes minutes). ``part_bytes``: the most bytes in one weight part.
    ``lessons``: the questions attributed now (:func:`iglens_viz.attribute`) and shown by the
    page at first paint, each a string (chat, 12 new tokens) or a
    :class:`~iglens_viz.export.site_lessons.Lesson`; default
    :data:`~iglens_viz.export.site_lessons.DEFAULT_LESSONS` (the README's question, asked with
    the chat template) when the tokenizer has a chat template, else none; ``()`` for none.
    Needs the ``site`` extra: ``pip install 'iglens_viz[site]'`` and the site's bundle
    (``make js``). The layout is the module's text.
    """
    from ..core.result import display_name

    target = Path(directory)
    _check_target(target, overwrite)
    require_onnx()
    require_page_bundle()  # before minutes of export
    if model is None:
        if tokenizer is not None:
            raise InvalidRequestError("export_site was given a tokenizer but no model: pass both")
        from ..loading import load_model

        model, tokenizer = load_model()
    _check_model(model, tokenizer)
    label = display_name(model, name)
    started = time.monotonic()

    def report(step: int) -> None:
        if progress is not None:
            progress(
                SiteProgress(
                    step, len(STEPS), STEPS[min(step, len(STEPS) - 1)], time.monotonic() - started
                )
            )

    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        report(0)
        raw = export_site_graphs(model, work / "float32", top_k=top_k)
        report(1)
        embedding = model.get_input_embeddings().weight.detach().float().cpu().numpy()
        packed = pack_site_graphs(
            raw.body, raw.readout, work / "graphs", embedding, part_bytes=part_bytes
        )
        shutil.rmtree(work / "float32")
        report(2)
        _write_tokenizer(tokenizer, work / "tokenizer")
        report(3)
        write_page(work, label)
        if lessons is None:
            lessons = DEFAULT_LESSONS if getattr(tokenizer, "chat_template", None) else ()
        shipped = write_lessons(work, model, tokenizer, lessons, name=name, top_k=top_k)
        report(4)
        graphs = {
            "body": _graph_entry(packed.body, packed.body_parts, "float16, cast to float32"),
            "readout": _graph_entry(packed.readout, packed.readout_parts, "float32"),
        }
        manifest = _manifest(work, model, label, top_k, graphs, packed.shared, part_bytes, shipped)
        text = json.dumps(manifest, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
        (work / "manifest.json").write_text(text)
        _replace(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    report(len(STEPS))
    return manifest


def _replace(work: Path, target: Path) -> None:
    """Move the finished folder ``work`` to ``target``, replacing what is there."""
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
        old.rmdir()
        target.rename(old)
        work.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        work.rename(target)


def site_files(manifest: dict[str, Any]) -> list[tuple[str, int]]:
    """(path, bytes) of every file a manifest lists, the manifest itself not included."""
    return [(path, int(entry["bytes"])) for path, entry in manifest["files"].items()]
