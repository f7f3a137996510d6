"""The study tests share the library tests' helpers (:mod:`tests.support`: tiny models,
tolerances; the root's ``pythonpath`` puts the checkout on ``sys.path``) and their
``tiny_model_dir`` fixture."""

import pytest

from tests.support.tiny_models import tiny_model, tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Llama and its word-level tokenizer saved as a local model folder."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_model("llama").save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def default_model():
    """The embedded default model and its tokenizer, loaded once per run (real_model tests)."""
    from tests.support.real_model import default_model

    return default_model()
