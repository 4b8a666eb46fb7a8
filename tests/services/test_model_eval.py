"""model: linear weights of a safetensors file, layer by layer; embeddings before/after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from dashboard.services.io import LoadError, TensorInfo, list_safetensors_file
from dashboard.services.model import embeddings
from dashboard.services.model.embeddings import MAX_SENTENCES, compare_embeddings
from dashboard.services.model.evaluate import LAYER_COLUMNS, evaluate_safetensors, layer_table
from dashboard.services.model.files import (
    bundled_model_file,
    is_linear_weight,
    list_linear_weights,
    stored_bytes,
)
from quant_core import (
    Mode,
    PerChannel,
    PerGroup,
    QuantConfig,
    QuantizedLinear,
    error_metrics,
    quantize,
    storage_cost,
)

LINEAR = (
    "encoder.layer.0.attention.self.query.weight",
    "encoder.layer.0.output.dense.weight",
    "lm_head.weight",
)


def _tiny_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)

    def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    return {
        "embeddings.word_embeddings.weight": randn(10, 8),
        "embeddings.LayerNorm.weight": randn(8),
        "encoder.layer.0.attention.self.query.weight": randn(8, 16),
        "encoder.layer.0.attention.self.query.bias": randn(8),
        "encoder.layer.0.output.dense.weight": randn(8, 12, dtype=torch.float16),
        "encoder.layer.0.output.LayerNorm.weight": randn(8),
        "lm_head.weight": randn(16, 8, dtype=torch.bfloat16),
        "position_ids": torch.arange(8).reshape(1, 8),
        "model.norm.weight": randn(8),
        "rms_norm_2d.weight": randn(2, 8),
        "conv.weight": randn(4, 2, 3, 3),
        "transformer.wte.weight": randn(10, 8),
        "int_table.weight": torch.ones(4, 4, dtype=torch.int32),
    }


@pytest.fixture
def tiny_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.safetensors"
    save_file(_tiny_tensors(), str(path))
    return path


@pytest.mark.parametrize(
    ("name", "shape", "dtype", "expected"),
    [
        ("encoder.layer.0.attention.self.query.weight", (384, 384), "float32", True),
        ("encoder.layer.0.intermediate.dense.weight", (1536, 384), "float16", True),
        ("lm_head.weight", (30522, 384), "bfloat16", True),
        ("weight", (4, 4), "float64", True),
        ("encoder.layer.0.attention.self.query.bias", (384,), "float32", False),
        ("embeddings.word_embeddings.weight", (30522, 384), "float32", False),
        ("model.embed_tokens.weight", (32000, 4096), "bfloat16", False),
        ("transformer.wte.weight", (50257, 768), "float32", False),
        ("transformer.wpe.weight", (1024, 768), "float32", False),
        ("encoder.layer.0.output.LayerNorm.weight", (384,), "float32", False),
        ("model.layers.0.input_layernorm.weight", (4096,), "bfloat16", False),
        ("some.norm_2d.weight", (2, 8), "float32", False),
        ("conv.weight", (4, 2, 3, 3), "float32", False),
        ("int_table.weight", (4, 4), "int32", False),
        ("fp8.weight", (4, 4), "float8_e4m3fn", False),
        ("position_ids", (1, 512), "int64", False),
        ("dense.weight_scale", (4, 4), "float32", False),
    ],
)
def test_linear_weight_rule(name: str, shape: tuple[int, ...], dtype: str, expected: bool) -> None:
    assert is_linear_weight(name, shape, dtype) is expected


def test_listing_reads_the_header(tiny_file: Path) -> None:
    entries = {e.name: e for e in list_safetensors_file(tiny_file)}
    assert set(entries) == set(_tiny_tensors())
    assert entries["lm_head.weight"] == TensorInfo("lm_head.weight", (16, 8), "bfloat16")
    assert stored_bytes(entries["lm_head.weight"]) == 16 * 8 * 2
    assert stored_bytes(entries["position_ids"]) is None
    linear = list_linear_weights(tiny_file)
    assert sorted(e.name for e in linear) == sorted(LINEAR)
    assert [e.name for e in linear] == [n for n in entries if n in LINEAR]


def test_every_linear_layer_is_evaluated_or_skipped(tiny_file: Path) -> None:
    cfg = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(8))
    calls: list[tuple[int, int]] = []
    result = evaluate_safetensors(tiny_file, cfg, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert result.config == cfg
    (skip,) = result.skipped
    assert skip.name == "encoder.layer.0.output.dense.weight"
    assert skip.shape == (8, 12)
    assert "group size 8" in skip.reason and "12" in skip.reason
    tensors = _tiny_tensors()
    names = [r.entry.name for r in result.layers]
    assert sorted(names) == ["encoder.layer.0.attention.self.query.weight", "lm_head.weight"]
    for r in result.layers:
        w = tensors[r.entry.name]
        assert r.report.name == r.entry.name
        assert r.report.shape == tuple(w.shape)
        assert r.report.metrics == error_metrics(w, quantize(w, cfg).dequantize())
        assert r.report.storage == storage_cost(w.shape, cfg)
    assert result.fp32_bytes == 4 * (8 * 16 + 16 * 8)
    assert result.stored_bytes == 4 * 8 * 16 + 2 * 16 * 8
    # int4 asym g8, fp32 scales: 4 + (32 + 4) / 8 = 8.5 bits per element
    assert result.quantized_bytes == 2 * (128 * 85 // 80)


def test_tensors_are_read_one_at_a_time_and_only_linear_ones(
    tiny_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import safetensors

    read: list[str] = []
    real_open = safetensors.safe_open

    class Spy:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._inner = real_open(*args, **kwargs)

        def __enter__(self) -> Spy:
            self._f = self._inner.__enter__()
            return self

        def __exit__(self, *exc: object) -> None:
            self._inner.__exit__(*exc)

        def keys(self) -> list[str]:
            return self._f.keys()

        def get_slice(self, name: str) -> Any:
            return self._f.get_slice(name)

        def get_tensor(self, name: str) -> torch.Tensor:
            read.append(name)
            return self._f.get_tensor(name)

    monkeypatch.setattr(safetensors, "safe_open", Spy)
    list_linear_weights(tiny_file)
    assert read == []
    evaluate_safetensors(tiny_file, QuantConfig(bits=8, granularity=PerChannel(0)))
    assert sorted(read) == sorted(LINEAR)


def test_layer_table_puts_the_most_sensitive_first(tiny_file: Path) -> None:
    result = evaluate_safetensors(tiny_file, QuantConfig(bits=3, granularity=PerChannel(0)))
    table = layer_table(result)
    assert tuple(table.columns) == LAYER_COLUMNS
    assert len(table) == 3
    assert list(table["sqnr_db"]) == sorted(table["sqnr_db"])
    row = table.set_index("name").loc["lm_head.weight"]
    assert row["shape"] == "16×8"
    assert row["dtype"] == "bfloat16"
    assert row["stored_bytes"] == 256
    assert row["fp32_bytes"] == 512


def test_bad_files_raise_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"cannot read missing\.safetensors"):
        list_linear_weights(tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match=r"junk\.safetensors"):
        evaluate_safetensors(junk, QuantConfig())
    with pytest.raises(TypeError):
        evaluate_safetensors(junk, "int8")  # type: ignore[arg-type]


# --- embeddings -----------------------------------------------------------------------------


class ToyEncoder(nn.Module):
    """A stand-in for a SentenceTransformer: characters -> embedding -> three linears."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(128, 16)
        self.body = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 12), nn.Tanh())
        self.head = nn.Linear(12, 8)
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) / 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(ids).mean(dim=0)))

    def encode(self, sentences: list[str], **kwargs: Any) -> torch.Tensor:
        assert kwargs["convert_to_tensor"] is True
        return torch.stack([self(torch.tensor([ord(c) % 128 for c in s])) for s in sentences])


SENTENCES = ["The cat sat on the mat.", "  ", "Quantization trades bits for error. "]


def test_embeddings_before_and_after() -> None:
    model = ToyEncoder()
    cfg = QuantConfig(bits=8, granularity=PerChannel(0))
    cmp = compare_embeddings(model, cfg, SENTENCES)
    assert [s.sentence for s in cmp.sentences] == [
        "The cat sat on the mat.",
        "Quantization trades bits for error.",
    ]
    assert all(0.999 < s.cosine <= 1.0 for s in cmp.sentences)
    assert cmp.min_cosine <= cmp.mean_cosine
    assert [layer.name for layer in cmp.report.layers] == ["body.0", "body.2", "head"]
    assert cmp.skipped == ()
    n_params = 128 * 16 + (16 * 32 + 32) + (32 * 12 + 12) + (12 * 8 + 8)
    assert cmp.model_bytes == 4 * n_params
    assert cmp.replaced_weight_bytes == cmp.report.fp32_bytes == 4 * (16 * 32 + 32 * 12 + 12 * 8)
    assert cmp.model_quantized_bytes == (
        cmp.model_bytes - cmp.report.fp32_bytes + cmp.report.quantized_bytes
    )
    assert cmp.model_quantized_bytes < cmp.model_bytes
    # The loaded model is left as it was.
    assert isinstance(model.head, nn.Linear)
    assert sum(isinstance(m, QuantizedLinear) for m in model.modules()) == 0


def test_layers_the_scheme_cannot_fit_stay_full_precision() -> None:
    model = ToyEncoder()
    cfg = QuantConfig(bits=2, granularity=PerGroup(16))  # divides 16 and 32, not 12
    cmp = compare_embeddings(model, cfg, SENTENCES[:1])
    assert [layer.name for layer in cmp.report.layers] == ["body.0", "body.2"]
    (skip,) = cmp.skipped
    assert (skip.name, skip.shape) == ("head", (8, 12))
    assert "group size 16" in skip.reason
    assert cmp.replaced_weight_bytes == 4 * (16 * 32 + 32 * 12)
    assert cmp.sentences[0].cosine < 0.9999


def test_nothing_fits_means_identical_embeddings() -> None:
    cmp = compare_embeddings(ToyEncoder(), QuantConfig(granularity=PerGroup(7)), ["a b c"])
    assert cmp.report.layers == ()
    assert len(cmp.skipped) == 3
    assert cmp.sentences[0].cosine == pytest.approx(1.0, abs=1e-12)
    assert cmp.model_quantized_bytes == cmp.model_bytes


@pytest.mark.parametrize(
    ("sentences", "error"),
    [
        ([], ValueError),
        (["", "   "], ValueError),
        (["x" * 1001], ValueError),
        (["s"] * (MAX_SENTENCES + 1), ValueError),
        ("a single string", TypeError),
        ([1, 2], TypeError),
    ],
)
def test_sentence_validation(sentences: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        compare_embeddings(ToyEncoder(), QuantConfig(), sentences)


def test_model_must_be_an_encoder_module() -> None:
    with pytest.raises(TypeError):
        compare_embeddings(nn.Linear(2, 2), QuantConfig(), ["a"])


# --- the bundled model (slow: loading takes ~8 s) -------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> nn.Module:
    return embeddings.load_bundled_model()


def _hf_linear_names(model: nn.Module) -> set[str]:
    transformer = model[0]  # type: ignore[index]
    hf = getattr(transformer, "auto_model", None) or transformer.model
    return {f"{n}.weight" for n, m in hf.named_modules() if isinstance(m, nn.Linear)}


@pytest.mark.slow
def test_bundled_model(minilm: nn.Module) -> None:
    path = bundled_model_file()
    selected = {e.name for e in list_linear_weights(path)}
    in_file = {e.name for e in list_safetensors_file(path)}
    module_linears = _hf_linear_names(minilm)
    assert len(selected) == 37
    assert sum(name.startswith("encoder.") for name in selected) == 36
    assert selected - {n for n in selected if n.startswith("encoder.")} == {"pooler.dense.weight"}
    assert selected == module_linears
    assert module_linears <= in_file

    cfg = QuantConfig(bits=8, granularity=PerChannel(0))
    result = evaluate_safetensors(path, cfg)
    assert len(result.layers) == 37 and result.skipped == ()
    assert min(r.report.metrics.sqnr_db for r in result.layers) > 30
    assert len(evaluate_safetensors(path, QuantConfig(granularity=PerGroup(100))).skipped) == 37

    cmp = compare_embeddings(minilm, cfg, ["A man is eating food.", "The sky is blue today."])
    assert cmp.min_cosine > 0.99
    # Module names carry the SentenceTransformer's prefix ("0.model." or "0.auto_model.").
    reported = [layer.name.split(".", 2)[2] + ".weight" for layer in cmp.report.layers]
    assert len(reported) == 37 and set(reported) == selected
    assert cmp.model_bytes == 4 * sum(p.numel() for p in minilm.parameters())
    assert cmp.model_quantized_bytes < cmp.model_bytes
    assert _hf_linear_names(minilm) == module_linears  # the cached model is untouched

    int2 = compare_embeddings(minilm, QuantConfig(bits=2), ["A man is eating food."])
    assert int2.min_cosine < cmp.min_cosine
