"""Fixtures shared by the whole suite; the helpers behind them live in :mod:`tests.support`."""

import pytest

from tests.support.tiny_models import tiny_model, tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Llama and its word-level tokenizer saved as a local model folder."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_model("llama").save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def llama():
    """A tiny random Llama, shared by a module's tests."""
    return tiny_model("llama")


@pytest.fixture
def lens(llama):
    """A fresh engine per test (its cache starts empty) on ``llama``."""
    from iglens_viz import IGLens

    return IGLens(llama, tiny_tokenizer())


@pytest.fixture
def forward_calls(llama):
    """The list that grows by one at every forward pass of ``llama`` during the test."""
    calls = []
    handle = llama.register_forward_hook(lambda *args: calls.append(1))
    yield calls
    handle.remove()


@pytest.fixture(scope="session")
def default_model():
    """The embedded default model and its tokenizer, loaded once per run (real_model tests)."""
    from tests.support.real_model import default_model

    return default_model()


@pytest.fixture(scope="session")
def default_site(default_model, tmp_path_factory):
    """The default model's kernel-free site folder (``export_site``), exported once per run for
    every test that reads it (minutes on two cores); ``IGLENS_SITE_DIR`` names a folder
    exported before instead (its page is rewritten from this checkout's bundle)."""
    import os
    from pathlib import Path

    from iglens_viz.export.site import export_site, read_manifest
    from iglens_viz.export.site_page import write_page

    reuse = os.environ.get("IGLENS_SITE_DIR")
    if reuse:
        folder = Path(reuse)
        write_page(folder, read_manifest(folder)["model"]["name"])
        return folder
    folder = tmp_path_factory.mktemp("default-site") / "site"
    export_site(folder, *default_model)
    return folder


@pytest.fixture
def kernel():
    """A started ipykernel (:class:`tests.support.kernel.Kernel`), shut down after the test."""
    pytest.importorskip("jupyter_client")
    pytest.importorskip("ipykernel")
    from tests.support.kernel import Kernel

    k = Kernel()
    try:
        yield k
    finally:
        k.close()


@pytest.fixture
def fake_default(monkeypatch, tmp_path):
    """The embedded default faked (:func:`tests.support.model_files.fake_default_model`):
    ``(conversions, folder)``."""
    from tests.support.model_files import fake_default_model

    return fake_default_model(monkeypatch, tmp_path)


@pytest.fixture(scope="session")
def dists(tmp_path_factory):
    """The wheel and sdist built from the checkout, npm hidden, once per run
    (:func:`tests.support.packaging.build_dists`): ``{"wheel": path, "sdist": path}``."""
    from tests.support.packaging import build_dists

    return build_dists(tmp_path_factory.mktemp("dist"))
