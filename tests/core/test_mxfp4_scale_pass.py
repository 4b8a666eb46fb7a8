"""GGUF MXFP4's E8M0 exponents from one pass (``formats.llama_cpp._mxfp4_scale_pass``):
the float32 exponent field plus a table of numpy's log2 roundings
(``_log2_rounds_up_table``), against numpy's ``floor(log2 a)`` itself
(``_mxfp4_exponents_numpy``, what the ``gguf`` package computes) on every mantissa of
sample binades and on random float32 patterns; and MXFP4_GGUF compiled with the scale
kernel against the numpy exponents, bit for bit."""

from __future__ import annotations

import pytest
import torch

from quant_core import Backend, QuantConfig, quantize, quantize_dequantize, use_backend
from quant_core.formats import llama_cpp
from quant_core.formats.llama_cpp import (
    _log2_rounds_up_table,
    _mxfp4_exponents_numpy,
    _mxfp4_scale_pass,
)

# the smallest binades (where the clip to 0 ends), around 1, the largest; 2^23 each
BINADES = [1, 2, 3, 4, 5, 60, 126, 127, 128, 129, 200, 253, 254]


def _exponents(a: torch.Tensor) -> torch.Tensor:
    """``_mxfp4_scale_pass``'s exponents (eagerly) of the one-value blocks ``a``."""
    return _mxfp4_scale_pass(a.reshape(-1, 1), _log2_rounds_up_table())[1]


@pytest.mark.parametrize("b", BINADES)
def test_exponents_equal_numpy_on_every_mantissa(b):
    m = torch.arange(1 << 23, dtype=torch.int32)
    a = ((b << 23) | m).view(torch.float32)
    for x in (a, -a):  # |x|: both signs give the same block maximum
        want = _mxfp4_exponents_numpy(x.abs().reshape(-1, 1))
        assert torch.equal(_exponents(x), want)


def test_exponents_equal_numpy_on_random_patterns():
    """Random float32 bits (subnormals, Inf, NaN included), zeros."""
    gen = torch.Generator().manual_seed(3)
    bits = torch.randint(-(1 << 31), 1 << 31, (1 << 20,), generator=gen, dtype=torch.int64)
    x = torch.cat([bits.to(torch.int32).view(torch.float32), torch.tensor([0.0, -0.0])])
    want = _mxfp4_exponents_numpy(x.abs().reshape(-1, 1))
    assert torch.equal(_exponents(x), want)


@pytest.mark.parametrize("scale_kernel", [True, False], ids=["kernel", "numpy"])
def test_mxfp4_gguf_round_trip_equals_eager(scale_kernel, monkeypatch):
    """MXFP4_GGUF with the scale kernel (compiled where available) or numpy's exponents,
    against eager ``quantize`` with numpy's: codes, scales, bytes and values."""
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(256, 512, generator=gen) * torch.exp2(
        torch.randint(-130, 120, (256, 1), generator=gen).float()
    )
    x[0] = 0.0
    x[1, :32] = torch.tensor(7.99999952316)  # just below a power of two
    cfg = QuantConfig.from_name("MXFP4_GGUF")
    monkeypatch.setattr(llama_cpp, "_MXFP4_SCALE_KERNEL", False)
    with use_backend(Backend.EAGER):
        ref = quantize(x, cfg)
        ref_values = ref.dequantize()
    monkeypatch.setattr(llama_cpp, "_MXFP4_SCALE_KERNEL", scale_kernel)
    with use_backend(Backend.COMPILED, min_elements=1):
        rt = quantize_dequantize(x, cfg)
    assert torch.equal(rt.quantized.codes, ref.codes)
    assert torch.equal(rt.quantized.scale.view(torch.int32), ref.scale.view(torch.int32))
    assert rt.quantized.to_ggml_bytes() == ref.to_ggml_bytes()
    assert torch.equal(rt.values.view(torch.int32), ref_values.view(torch.int32))
