"""The lens cache checks what it reads as the model cache does (issue 32, item 3).

Every cached file (a fitted lens, a sampled corpus, a fit's checkpoint) has a checksum record
beside it; a read hashes the file again whenever its stamp (size, mtime, ctime, inode)
changed since it last matched (iglens_viz.files.checksum_problem, the model cache's check).
A damaged file is not used: the lens is fitted again (a one-line warning names the file),
never read into a lens. The probe's case: 1 MiB zeroed inside a cached shortcut lens changed
contributions by up to 1.1e-3 with no message.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
import torch

from iglens_viz import files
from iglens_viz.core.coordinates import Lens
from iglens_viz.lenses import fit_lens
from iglens_viz.lenses.cache import (
    CHECKSUM_SUFFIX,
    cache_problem,
    cached_corpus,
    cached_lens,
    lens_cache_dir,
    store_lens,
)
from tests.support.tiny_models import tiny_tokenizer

MIB = 1 << 20


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def tokenizer():  # beside conftest's tiny `llama`
    return tiny_tokenizer()


def _big_lens() -> Lens:
    """A shortcut lens of 2 × 384 × 384 float32 (1.2 MB of matrices): room for a zeroed MiB."""
    g = torch.Generator().manual_seed(0)
    d = 384
    return Lens(
        "shortcut",
        n_blocks=2,
        width=d,
        matrices={L: torch.randn(d, d, generator=g) for L in range(2)},
        biases={L: torch.randn(d, generator=g) for L in range(2)},
        fingerprint="0" * 64,
        settings={"ridge": 0.0},
    )


def _zero(path: Path, start: int, size: int, *, keep_times: bool = False) -> None:
    """Overwrite ``size`` bytes at ``start`` with zeros in place (same size, same inode),
    the modification time put back when ``keep_times``."""
    before = path.stat()
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(size))
    if keep_times:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _data_start(path: Path) -> int:
    with open(path, "rb") as f:
        return 8 + int.from_bytes(f.read(8), "little")


def _count_hashing(monkeypatch) -> list[str]:
    hashed: list[str] = []
    real = files.sha256_file

    def counted(path):
        hashed.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(files, "sha256_file", counted)
    return hashed


@pytest.mark.parametrize("keep_times", [False, True])
def test_a_zeroed_mib_inside_a_cached_lens_is_found(tmp_path, keep_times):
    path = lens_cache_dir() / "shortcut-big.safetensors"
    lens = _big_lens()
    assert store_lens(lens, path) == path
    intact = cached_lens(path)
    assert intact is not None and torch.equal(intact.matrices[1], lens.matrices[1])
    start = _data_start(path) + 4096
    assert path.stat().st_size >= start + MIB
    _zero(path, start, MIB, keep_times=keep_times)
    # the file still parses as a lens, only with zeros where numbers were
    from iglens_viz.lenses.io import read_own

    damaged = read_own(path)
    assert not torch.equal(damaged.matrices[0], lens.matrices[0])
    with pytest.warns(RuntimeWarning) as caught:
        assert cached_lens(path) is None  # not used
    (warning,) = caught
    message = str(warning.message)
    assert str(path) in message and "\n" not in message
    assert "does not match the sha256 checksum recorded when it was written" in message
    assert "fitting the lens again replaces it" in message
    # written again, the new file is trusted again
    assert store_lens(lens, path) == path and cached_lens(path) is not None


def test_an_unchanged_lens_is_read_without_hashing_a_changed_stamp_is_hashed(monkeypatch):
    path = lens_cache_dir() / "shortcut-big.safetensors"
    store_lens(_big_lens(), path)
    hashed = _count_hashing(monkeypatch)
    assert cached_lens(path) is not None and cached_lens(path) is not None
    assert hashed == []  # proven when written, unchanged since: one stat
    path.write_bytes(path.read_bytes())  # the same bytes, a new stamp
    assert cached_lens(path) is not None
    assert hashed == [path.name]  # hashed once, found intact, trusted again
    assert cached_lens(path) is not None and hashed == [path.name]


def test_a_lens_without_its_checksum_record_is_not_used():
    path = lens_cache_dir() / "shortcut-big.safetensors"
    store_lens(_big_lens(), path)
    Path(str(path) + CHECKSUM_SUFFIX).unlink()
    problem = cache_problem(path)
    assert problem is not None and "no checksum record" in problem
    with pytest.warns(RuntimeWarning, match="no checksum record"):
        assert cached_lens(path) is None
    Path(str(path) + CHECKSUM_SUFFIX).write_text("[1, 2]")
    with pytest.warns(RuntimeWarning, match="checksum record is malformed"):
        assert cached_lens(path) is None


def test_fit_lens_fits_again_over_a_damaged_cached_lens(llama, tokenizer):
    first = fit_lens(llama, tokenizer, "shortcut")
    (path,) = lens_cache_dir().glob("shortcut-*.safetensors")
    record = json.loads(Path(str(path) + CHECKSUM_SUFFIX).read_text())
    assert record == {"file": path.name, "sha256": files.sha256_file(path)}
    start = _data_start(path)
    _zero(path, start, min(MIB, path.stat().st_size - start), keep_times=True)
    with pytest.warns(RuntimeWarning, match=path.name):
        again = fit_lens(llama, tokenizer, "shortcut")
    # fitted again, the same numbers as the first fit, and the cache file replaced
    for L in first.matrices:
        assert torch.equal(again.matrices[L], first.matrices[L])
        assert torch.equal(again.biases[L], first.biases[L])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = fit_lens(llama, tokenizer, "shortcut")  # read from the cache, no warning
    assert torch.equal(third.matrices[0], first.matrices[0]) and cache_problem(path) is None


def test_a_damaged_corpus_or_checkpoint_is_not_used(llama, tokenizer):
    from iglens_viz.lenses.fit import model_corpus

    corpus = model_corpus(llama, tokenizer, "fit")
    (path,) = lens_cache_dir().glob("corpus-*.safetensors")
    name = path.name.removeprefix("corpus-").rsplit("-", 1)[0]
    fingerprint_prefix = path.stem.rsplit("-", 1)[1]
    start = _data_start(path)
    with open(path, "r+b") as f:  # the first token id changed: a valid file, another corpus
        f.seek(start)
        first = f.read(1)[0]
        f.seek(start)
        f.write(bytes([(first + 1) % 97]))
    with pytest.warns(RuntimeWarning, match="it is sampled again"):
        assert cached_corpus(fingerprint_prefix, name) is None
    with pytest.warns(RuntimeWarning):
        resampled = model_corpus(llama, tokenizer, "fit")
    assert all(torch.equal(a, b) for a, b in zip(corpus, resampled))

    class Stop(Exception):
        pass

    def stop_at_step(r):
        if r.phase == "fit" and r.done == 3:
            raise Stop

    with pytest.raises(Stop):
        fit_lens(llama, tokenizer, "tuned", steps=6, batch_rows=16, progress=stop_at_step)
    (partial,) = lens_cache_dir().glob("tuned-*.partial.pt")
    _zero(partial, partial.stat().st_size // 2, 64)
    reports: list = []
    with pytest.warns(RuntimeWarning, match="the fit starts afresh"):
        fit_lens(llama, tokenizer, "tuned", steps=6, batch_rows=16, progress=reports.append)
    assert {r.resumed_at for r in reports if r.phase == "fit"} == {0}
    assert not list(lens_cache_dir().glob("*.partial.pt*"))  # removed with its record
