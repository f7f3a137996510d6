"""Lens files are untrusted input (issue 32, items 2–5 and 8): hostile files written here.

A lens file comes from someone else — a Jacobian lens from Neuronpedia, a tuned-lens
checkpoint, an iglens_viz ``.safetensors`` lens — so every malformed, damaged, mis-sized or
unreadable one must be refused with one line (a :class:`LensFileError` naming the file and
the field), never a traceback, never a silent wrong lens, and nothing allocated from a size
the file declares before that size is checked. Each case here writes one such file the way
the package it imitates writes its files (``safetensors.torch.save``, ``torch.save`` of a
``jlens`` dict, a ``TunedLens.save`` folder) with one thing wrong, and loads it with and
without the model it claims to be for. Then: through ``attribute(..., lens=path)`` and the
CLI, the memory a declared ``d_model`` of 60,000 costs, a :class:`Lens` made in code with
NaN, and ``~`` in a lens path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

import iglens_viz
from iglens_viz import IGLensError, InvalidRequestError
from iglens_viz.core.coordinates import Lens, model_fingerprint
from iglens_viz.lenses import LensFileError, load_lens, resolve_lens, save_lens
from tests.support.tiny_models import tiny_tokenizer

D, N = 32, 4  # tiny_model("llama"): hidden_size 32, 4 blocks


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))


# --- the files, as their packages write them ------------------------------------------------


def _translators(seed: int = 0) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    eye = torch.eye(D)
    matrices = {L: eye + 0.05 * torch.randn(D, D, generator=g) for L in range(N)}
    biases = {L: 0.05 * torch.randn(D, generator=g) for L in range(N)}
    return matrices, biases


def own_file(path: Path, meta: object = None, tensors: dict | None = None, **changes) -> Path:
    """An iglens_viz lens file written with safetensors itself: ``matrix.L`` / ``bias.L`` and
    the ``iglens_lens`` metadata (``changes`` replace its fields; ``meta`` replaces it)."""
    matrices, biases = _translators()
    if tensors is None:
        tensors = {f"matrix.{L}": m for L, m in matrices.items()}
        tensors.update({f"bias.{L}": b for L, b in biases.items()})
    fields = {"format": 1, "kind": "shortcut", "n_blocks": N, "width": D, "settings": {}}
    fields.update(changes)
    text = json.dumps(fields) if meta is None else meta
    metadata = None if text is False else {"iglens_lens": text}
    path.write_bytes(safetensors.torch.save(tensors, metadata=metadata))
    return path


def jlens_file(path: Path, **changes) -> Path:
    """As ``JacobianLens.save`` writes it: ``torch.save`` of a dict, J in float16 keyed by
    the source layer (``changes`` replace its entries)."""
    matrices, _ = _translators(1)
    J = {layer: matrices[layer].half() for layer in range(N - 1)}
    data = {"J": J, "n_prompts": 3, "source_layers": sorted(J), "d_model": D}
    data.update(changes)
    torch.save(data, path)
    return path


def tuned_folder(path: Path, config: object = None, state: object = None, **changes) -> Path:
    """As ``TunedLens.save`` writes it: ``params.pt`` (the state dict of its
    ``layer_translators``, one ``nn.Linear(d, d)`` per layer) and ``config.json``."""
    path.mkdir()
    if state is None:
        torch.manual_seed(2)
        linears = torch.nn.ModuleList([torch.nn.Linear(D, D) for _ in range(N)])
        state = linears.state_dict()
    torch.save(state, path / "params.pt")
    fields = {
        "base_model_name_or_path": "tiny-llama",
        "d_model": D,
        "num_hidden_layers": N,
        "bias": True,
        "lens_type": "linear_tuned_lens",
    }
    fields.update(changes)
    text = json.dumps(fields) if config is None else config
    (path / "config.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _linear_state(**changes) -> dict:
    torch.manual_seed(2)
    state = dict(torch.nn.ModuleList([torch.nn.Linear(D, D) for _ in range(N)]).state_dict())
    state.update(changes)
    return {k: v for k, v in state.items() if v is not None}


class _Exec:
    """A pickled call: what a hostile checkpoint holds to run code when unpickled."""

    def __reduce__(self):
        return (print, ("this ran",))


def _unreadable(path: Path) -> Path:
    """``path`` as a file that exists and cannot be read: a link to ``/proc/self/mem``,
    whose read at offset 0 fails with EIO (chmod 000 stops no read when the tests run as
    root, as they do here)."""
    if not Path("/proc/self/mem").exists():
        pytest.skip("no /proc/self/mem on this system")
    path.symlink_to("/proc/self/mem")
    return path


def _truncated(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _nan_at(tensor: torch.Tensor, value: float = float("nan")) -> torch.Tensor:
    tensor = tensor.clone()
    tensor.view(-1)[7] = value
    return tensor


M, B = _translators()
OWN_TENSORS = {**{f"matrix.{L}": m for L, m in M.items()}, **{f"bias.{L}": b for L, b in B.items()}}

# (case, the file it writes in a folder, words the message must hold)
Case = tuple[str, Callable[[Path], Path], str]
CASES: list[Case] = [
    # iglens_viz's own .safetensors lens
    ("own: metadata a JSON list", lambda t: own_file(t / "l.safetensors", "[1, 2]"), "mapping"),
    ("own: metadata not JSON", lambda t: own_file(t / "l.safetensors", "{n_blocks"), "not JSON"),
    ("own: no iglens_lens metadata", lambda t: own_file(t / "l.safetensors", False), "iglens_lens"),
    (
        "own: n_blocks missing",
        lambda t: own_file(t / "l.safetensors", json.dumps({"format": 1, "kind": "shortcut"})),
        "n_blocks is missing",
    ),
    ("own: n_blocks a word", lambda t: own_file(t / "l.safetensors", n_blocks="four"), "n_blocks"),
    ("own: n_blocks 4.7", lambda t: own_file(t / "l.safetensors", n_blocks=4.7), "n_blocks"),
    ("own: n_blocks true", lambda t: own_file(t / "l.safetensors", n_blocks=True), "n_blocks"),
    ("own: n_blocks -1", lambda t: own_file(t / "l.safetensors", n_blocks=-1), "n_blocks"),
    ("own: width '32'", lambda t: own_file(t / "l.safetensors", width="32"), "width"),
    ("own: settings a list", lambda t: own_file(t / "l.safetensors", settings=[1]), "settings"),
    (
        "own: fingerprint a list",
        lambda t: own_file(t / "l.safetensors", fingerprint=[1]),
        "fingerpr",
    ),
    ("own: kind unknown", lambda t: own_file(t / "l.safetensors", kind="magic"), "'magic'"),
    (
        "own: no tensors, 10^12 blocks",
        lambda t: own_file(t / "l.safetensors", tensors={}, n_blocks=10**12),
        "no matrix or bias",
    ),
    ("own: no tensors", lambda t: own_file(t / "l.safetensors", tensors={}), "no matrix or bias"),
    (
        "own: NaN in a matrix",
        lambda t: own_file(t / "l.safetensors", tensors={"matrix.1": _nan_at(M[1])}),
        "'matrix.1' holds 1 NaN",
    ),
    (
        "own: inf in a bias",
        lambda t: own_file(t / "l.safetensors", tensors={"bias.2": _nan_at(B[2], float("inf"))}),
        "'bias.2' holds 1 NaN or infinite",
    ),
    (
        "own: a matrix of shape [d]",
        lambda t: own_file(t / "l.safetensors", tensors={"matrix.0": B[0]}),
        "'matrix.0' has shape (32,)",
    ),
    (
        "own: width 60000 declared, tensors 32 wide",
        lambda t: own_file(t / "l.safetensors", width=60000),
        "width 60000",
    ),
    (
        "own: integer matrix",
        lambda t: own_file(t / "l.safetensors", tensors={"matrix.0": torch.ones(D, D).long()}),
        "not floating-point",
    ),
    (
        "own: unexpected tensor name",
        lambda t: own_file(t / "l.safetensors", tensors={"weights.0": M[0]}),
        "'weights.0'",
    ),
    (
        "own: depth beyond n_blocks",
        lambda t: own_file(t / "l.safetensors", tensors={"matrix.7": M[0]}),
        "depth 7",
    ),
    (
        "own: depth written 01",
        lambda t: own_file(t / "l.safetensors", tensors={"matrix.01": M[0], "matrix.1": M[1]}),
        "'matrix.01'",
    ),
    (
        "own: logit kind holding matrices",
        lambda t: own_file(t / "l.safetensors", kind="logit"),
        "'logit'",
    ),
    (
        "own: truncated",
        lambda t: _truncated(own_file(t / "l.safetensors")),
        "not an iglens_viz lens file",
    ),
    ("own: unreadable", lambda t: _unreadable(t / "l.safetensors"), "cannot be read"),
    # jlens (JacobianLens.save)
    (
        "jlens: layer key 'a'",
        lambda t: jlens_file(t / "j.pt", J={"a": M[0].half()}),
        "J's key 'a'",
    ),
    ("jlens: layer key -1", lambda t: jlens_file(t / "j.pt", J={-1: M[0].half()}), "J's key -1"),
    ("jlens: layer key 1.0", lambda t: jlens_file(t / "j.pt", J={1.0: M[0].half()}), "J's key"),
    (
        "jlens: J values are lists",
        lambda t: jlens_file(t / "j.pt", J={0: M[0].tolist()}),
        "J[0] is list",
    ),
    ("jlens: J of shape [d]", lambda t: jlens_file(t / "j.pt", J={0: B[0]}), "J[0] has shape"),
    ("jlens: d_model 60000", lambda t: jlens_file(t / "j.pt", d_model=60000), "60000"),
    ("jlens: d_model '32'", lambda t: jlens_file(t / "j.pt", d_model="32"), "d_model"),
    ("jlens: d_model 0", lambda t: jlens_file(t / "j.pt", d_model=0), "d_model"),
    ("jlens: NaN in J", lambda t: jlens_file(t / "j.pt", J={0: _nan_at(M[0])}), "J[0] holds 1 NaN"),
    ("jlens: no Jacobian", lambda t: jlens_file(t / "j.pt", J={}), "no Jacobian"),
    ("jlens: J a list", lambda t: jlens_file(t / "j.pt", J=[M[0]]), "not a jlens file"),
    (
        "jlens: a bare tensor",
        lambda t: (torch.save(M[0], t / "j.pt"), t / "j.pt")[1],
        "not a jlens file",
    ),
    (
        "jlens: n_prompts a tensor",
        lambda t: jlens_file(t / "j.pt", n_prompts=torch.tensor(3)),
        "n_prompts",
    ),
    (
        "jlens: a pickled call",
        lambda t: jlens_file(t / "j.pt", J={0: _Exec()}),
        "never runs code",
    ),
    ("jlens: truncated", lambda t: _truncated(jlens_file(t / "j.pt")), "cannot be read"),
    # tuned-lens (TunedLens.save)
    ("tuned: d_model 60000", lambda t: tuned_folder(t / "tl", d_model=60000), "60000"),
    ("tuned: d_model 1000000", lambda t: tuned_folder(t / "tl", d_model=10**6), "1000000"),
    ("tuned: d_model -1", lambda t: tuned_folder(t / "tl", d_model=-1), "d_model is -1"),
    ("tuned: d_model '32'", lambda t: tuned_folder(t / "tl", d_model="32"), "d_model is '32'"),
    ("tuned: d_model null", lambda t: tuned_folder(t / "tl", d_model=None), "d_model is None"),
    (
        "tuned: num_hidden_layers 10^12",
        lambda t: tuned_folder(t / "tl", num_hidden_layers=10**12),
        "1000000000000",
    ),
    ("tuned: config a list", lambda t: tuned_folder(t / "tl", config="[1]"), "mapping"),
    ("tuned: config not JSON", lambda t: tuned_folder(t / "tl", config="{d_model"), "not JSON"),
    (
        "tuned: config not UTF-8",
        lambda t: tuned_folder(t / "tl", config=b'{"d_model": "\xff"}'),
        "not JSON",
    ),
    (
        "tuned: config over 1 MiB",
        lambda t: tuned_folder(t / "tl", base_model_name_or_path="x" * (1 << 20)),
        "config.json",
    ),
    ("tuned: another lens type", lambda t: tuned_folder(t / "tl", lens_type="mlp"), "'mlp'"),
    (
        "tuned: params.pt a tensor",
        lambda t: tuned_folder(t / "tl", state=torch.zeros(3)),
        "holds a Tensor",
    ),
    (
        "tuned: translators of shape [d]",
        lambda t: tuned_folder(t / "tl", state={f"{i}.weight": B[i] for i in range(N)}),
        "'0.weight' has shape (32,)",
    ),
    (
        "tuned: translators of shape [1, d]",
        lambda t: tuned_folder(t / "tl", state={f"{i}.weight": B[i][None] for i in range(N)}),
        "'0.weight' has shape (1, 32)",
    ),
    (
        "tuned: a bias of shape [d, d]",
        lambda t: tuned_folder(t / "tl", state=_linear_state(**{"2.bias": M[2]})),
        "'2.bias' has shape (32, 32)",
    ),
    (
        "tuned: inf in a translator",
        lambda t: tuned_folder(
            t / "tl", state=_linear_state(**{"3.weight": _nan_at(M[3], float("-inf"))})
        ),
        "'3.weight' holds 1 NaN or infinite",
    ),
    (
        "tuned: an entry no translator has",
        lambda t: tuned_folder(t / "tl", state=_linear_state(**{"unembed.weight": M[0]})),
        "'unembed.weight'",
    ),
    (
        "tuned: a translator missing",
        lambda t: tuned_folder(t / "tl", state=_linear_state(**{"2.weight": None})),
        "no translator 2",
    ),
    (
        "tuned: integer translators",
        lambda t: tuned_folder(t / "tl", state=_linear_state(**{"0.weight": M[0].long()})),
        "not floating-point",
    ),
    (
        "tuned: params.pt a pickled call",
        lambda t: tuned_folder(t / "tl", state={"0.weight": _Exec()}),
        "never runs code",
    ),
]


def _refusal(path: Path, model=None) -> str:
    """The one-line message ``load_lens`` refuses ``path`` with."""
    with pytest.raises(LensFileError) as info:
        load_lens(path, model)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    assert str(path) in message  # the file (or the folder's file)
    assert "weights_only" not in message  # torch's advice to unpickle it is not passed on
    return message


@pytest.mark.parametrize("with_model", [False, True], ids=["alone", "with model"])
@pytest.mark.parametrize(("name", "make", "words"), CASES, ids=[c[0] for c in CASES])
def test_every_hostile_lens_file_is_refused_with_one_line(
    llama, tmp_path, name, make, words, with_model
):
    path = make(tmp_path)
    assert words in _refusal(path, llama if with_model else None)


def test_the_same_files_written_right_load(llama, tmp_path):
    # The control for the cases above: each builder with nothing changed makes a lens that
    # loads for the model and transforms as its package does.
    h = torch.randn(5, D)
    own = load_lens(own_file(tmp_path / "l.safetensors"), llama)
    assert torch.equal(own.transform(h, 2), h @ M[2].T + B[2])
    jlens = load_lens(jlens_file(tmp_path / "j.pt"), llama)
    J1 = _translators(1)[0][1].half().float()
    assert torch.equal(jlens.transform(h, 2), h @ J1.T)  # jlens's layer 1 is depth 2
    tuned = load_lens(tuned_folder(tmp_path / "tl"), llama)
    state = _linear_state()
    want = h + h @ state["3.weight"].T + state["3.bias"]  # tuned-lens: h + translator(h)
    assert torch.allclose(tuned.transform(h, 3), want, atol=1e-6, rtol=1e-6)


def test_a_lens_whose_header_length_starts_with_a_pickle_byte_loads(llama, tmp_path):
    # A safetensors file starts with its header's length (8 bytes, little-endian); one of
    # 128 + 256·k bytes starts with 0x80, the first byte of a pickle. Such a lens (found
    # here by padding its settings) was read as a jlens file and refused.
    matrices, biases = _translators()
    for pad in range(256):
        lens = Lens("shortcut", N, D, matrices, biases, settings={"note": "x" * pad})
        path = save_lens(lens, tmp_path / "l.safetensors")
        if path.read_bytes()[:1] == b"\x80":
            break
    else:
        raise AssertionError("no padding gave a header of 128 + 256·k bytes")
    back = load_lens(path, llama)
    assert back.settings["note"] == "x" * pad
    assert all(torch.equal(back.matrices[L], matrices[L]) for L in matrices)


def test_unreadable_without_root_too(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads a chmod-000 file; the /proc/self/mem case covers unreadable")
    path = own_file(tmp_path / "l.safetensors")
    path.chmod(0)
    assert "Permission denied" in _refusal(path)


def test_a_fifo_named_like_a_lens_is_not_read(tmp_path):
    path = tmp_path / "l.safetensors"
    os.mkfifo(path)  # opening it for reading would wait for a writer for ever
    assert "not a regular file" in _refusal(path)


# --- memory: nothing sized by a declared number before it is checked -----------------------


def _peak_rss_growth(run: Callable[[], object]) -> tuple[int, BaseException | None]:
    """Bytes the process's peak resident size grows by while ``run`` runs (Linux: the peak
    is reset through /proc/self/clear_refs first), and the exception it raised."""

    def peak() -> int:
        with open("/proc/self/status") as status:
            line = next(row for row in status if row.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024

    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pytest.skip("the peak resident size cannot be reset here")
    before = peak()
    try:
        run()
    except Exception as err:  # measured first, judged by the caller
        return peak() - before, err
    return peak() - before, None


@pytest.mark.parametrize("d_model", [6000, 60000, 10**6])
@pytest.mark.parametrize("with_model", [False, True], ids=["alone", "with model"])
def test_a_declared_width_allocates_nothing_before_it_is_checked(
    llama, tmp_path, d_model, with_model
):
    # The probe's 1 kB config.json with d_model 60000 built a 14.4 GB identity matrix
    # (torch.eye(d) before any check). The refusal's cost is the files' own size: budget
    # 4× the folder's bytes (torch.load's copy and our float32 one), plus 16 MiB for the
    # interpreter's own churn — 144 MB would be the identity of d 6000 alone, 14.4 GB of
    # d 60000.
    folder = tuned_folder(tmp_path / "tl", d_model=d_model)
    size = sum(f.stat().st_size for f in folder.iterdir())
    load_lens(tuned_folder(tmp_path / "warm"), llama)  # torch.load's first-use imports
    growth, err = _peak_rss_growth(lambda: load_lens(folder, llama if with_model else None))
    assert growth < 4 * size + (16 << 20), f"{growth / 2**20:.1f} MiB"
    assert isinstance(err, LensFileError) and str(d_model) in str(err), err


# --- through attribute(lens=…) and the CLI ---------------------------------------------------


def test_attribute_with_a_hostile_lens_path_is_refused_with_one_line(llama, tmp_path):
    tokenizer = tiny_tokenizer()
    for path in (
        tuned_folder(tmp_path / "tl", d_model=60000),
        own_file(tmp_path / "empty.safetensors", tensors={}, n_blocks=10**12),
        jlens_file(tmp_path / "nan.pt", J={0: _nan_at(M[0])}),
    ):
        with pytest.raises(LensFileError) as info:
            iglens_viz.attribute(llama, tokenizer, "w1 w2 w3 w4", lens=str(path))
        assert str(path) in str(info.value) and "\n" not in str(info.value)
    # the control: the same kind of file written right reads through the same path
    fine = own_file(tmp_path / "fine.safetensors")
    result = iglens_viz.attribute(llama, tokenizer, "w1 w2 w3 w4", lens=str(fine))
    assert result.lens_name == "shortcut"


def test_cli_lens_flag_with_hostile_files(tiny_model_dir, tmp_path, capsys):
    from iglens_viz.cli.commands import main

    argv = ["w1 w2 w3 w4", "--model", tiny_model_dir, "--no-chat", "--lens"]
    for path in (
        jlens_file(tmp_path / "key.pt", J={"a": M[0].half()}),
        tuned_folder(tmp_path / "tl", state=torch.zeros(3)),
        own_file(tmp_path / "list.safetensors", "[1, 2]"),
        jlens_file(tmp_path / "exec.pt", J={0: _Exec()}),
    ):
        assert main([*argv, str(path)]) == 2
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("iglens: error: "), captured.err
        assert str(path) in lines[0] and "this ran" not in captured.out + captured.err


def test_cli_in_a_subprocess_prints_one_line_and_exits_2(tiny_model_dir, tmp_path):
    folder = tuned_folder(tmp_path / "tl", d_model=60000)
    argv = ["w1 w2 w3 w4", "--model", tiny_model_dir, "--no-chat", "--lens", str(folder)]
    env = {**os.environ, "IGLENS_CACHE": str(tmp_path / "cache")}
    # (causal/patching.py's @torch.no_grad() on a class warns at import, on every command:
    # not this test's subject, and reported)
    env["PYTHONWARNINGS"] = "ignore:Decorating classes is deprecated:FutureWarning"
    done = subprocess.run(
        [sys.executable, "-m", "iglens_viz", *argv], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("iglens: error: "), done.stderr
    assert "config.json" in lines[0] and "Traceback" not in done.stderr


# --- a Lens made in code ---------------------------------------------------------------------


def test_a_lens_made_in_code_with_nan_names_the_depth():
    matrices, biases = _translators()
    with pytest.raises(InvalidRequestError, match="matrix at depth 2 holds 1 NaN"):
        Lens("shortcut", N, D, {**matrices, 2: _nan_at(matrices[2])}, biases)
    with pytest.raises(InvalidRequestError, match="bias at depth 0 holds 1 NaN or infinite"):
        Lens("tuned", N, D, matrices, {**biases, 0: _nan_at(biases[0], float("inf"))})
    for bad in (
        dict(kind="logit", n_blocks=N, width=D, matrices=matrices),  # a logit lens that is not
        dict(kind="shortcut", n_blocks=True, width=D, matrices=matrices),
        dict(kind="shortcut", n_blocks=N, width=D, matrices={"1": matrices[1]}),
        dict(kind="shortcut", n_blocks=N, width=D, matrices={1: matrices[1].int()}),
        dict(kind="shortcut", n_blocks=N, width=D, settings=[("name", "x")]),
    ):
        with pytest.raises(InvalidRequestError):
            Lens(**bad)


def test_an_empty_fitted_lens_is_still_checked_against_the_model(llama):
    # A fitted kind without translators reads states as they are (a tuned lens at zero
    # steps), but it is not the logit lens: its declared sizes must be the model's.
    assert resolve_lens(Lens("tuned", N, D), llama).kind == "tuned"
    with pytest.raises(InvalidRequestError, match="1000000000000 blocks"):
        resolve_lens(Lens("tuned", 10**12, D), llama)


# --- "~" in a lens path --------------------------------------------------------------------


def test_a_lens_path_with_a_tilde_is_the_home_folder(llama, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    matrices, biases = _translators()
    lens = Lens("shortcut", N, D, matrices, biases, model_fingerprint(llama))
    written = save_lens(lens, "~/x.safetensors")
    assert written == tmp_path / "x.safetensors" and written.is_file()
    back = load_lens("~/x.safetensors", llama)
    assert all(torch.equal(back.matrices[L], matrices[L]) for L in matrices)
    result = iglens_viz.attribute(llama, tiny_tokenizer(), "w1 w2 w3", lens="~/x.safetensors")
    direct = iglens_viz.attribute(llama, tiny_tokenizer(), "w1 w2 w3", lens=lens)
    np.testing.assert_array_equal(result.lens_probs, direct.lens_probs)
    with pytest.raises(LensFileError, match=re.escape(str(tmp_path / "missing.safetensors"))):
        load_lens("~/missing.safetensors")


def test_lens_file_errors_are_iglens_errors():
    assert issubclass(LensFileError, IGLensError) and issubclass(LensFileError, ValueError)
