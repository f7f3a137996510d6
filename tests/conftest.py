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
