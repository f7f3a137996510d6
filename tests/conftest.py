import sys
from pathlib import Path

import pytest

# The tests share helpers (tiny_models.py) that live beside them.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Llama and its word-level tokenizer saved as a local model folder."""
    from tiny_models import tiny_model, tiny_tokenizer

    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_model("llama").save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return str(folder)


# The widget tests' model, lens and forward-pass counter (test_widget, test_lazy_path).


@pytest.fixture(scope="module")
def llama():
    """A tiny random Llama, shared by a module's tests."""
    from tiny_models import tiny_model

    return tiny_model("llama")


@pytest.fixture
def lens(llama):
    """A fresh lens per test (its cache starts empty) on ``llama``."""
    from tiny_models import tiny_tokenizer

    from iglens_viz import IGLens

    return IGLens(llama, tiny_tokenizer())


@pytest.fixture
def forward_calls(llama):
    """The list that grows by one at every forward pass of ``llama`` during the test."""
    calls = []
    handle = llama.register_forward_hook(lambda *args: calls.append(1))
    yield calls
    handle.remove()
