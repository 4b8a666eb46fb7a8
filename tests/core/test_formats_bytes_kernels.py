"""The GGUF bytes decoding kernels (``quant_core.formats.bytes_kernels``): compiled and
eager give the readable formulas' bits, and decoding does not depend on the backend or
on where the bytes start."""

from __future__ import annotations

import pytest
import torch

from quant_core import Backend, QuantConfig, QuantizedTensor, kernels, quantize
from quant_core.formats import bytes_kernels
from quant_core.formats.kquant_bytes import _unk4_scales, _unnibbles

pytestmark = pytest.mark.usefixtures("backend")


def _random_words(gen: torch.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randint(-(2**31), 2**31 - 1, shape, dtype=torch.int32, generator=gen)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def test_signed_nibbles_are_the_low_then_high_nibbles_minus_8(gen):
    # rows of 36 words, nibbles in words 4.. (Q4_K's layout): a strided view
    rows = _random_words(gen, (300, 36))
    w = rows[:, 4:].reshape(300, 4, 8)
    got = bytes_kernels.signed_nibbles(w).view(torch.int8).reshape(300, 256)
    want = (_unnibbles(w.reshape(300, 32).view(torch.uint8), 32).to(torch.int16) - 8).to(torch.int8)
    assert torch.equal(got, want)
    assert torch.equal(
        bytes_kernels.signed_nibbles_eager(w).view(torch.int8).reshape(300, 256), want
    )


def test_k4_scales_follow_get_scale_min_k4_and_convert_every_half(gen):
    n = 1 << 16
    w = _random_words(gen, (n, 6))[:, 1:5]  # strided, as the blocks' first 4 words
    h = torch.arange(n, dtype=torch.int32)
    w[:, 0] = h | (h.flip(0) << 16)  # every fp16 bit pattern as d and as dmin
    d, dmin, sc, m, scale, offset = bytes_kernels.k4_scales(w)
    halves = w[:, 0].contiguous().view(torch.float16).reshape(n, 2).to(torch.float32)
    want_sc, want_m = _unk4_scales(w[:, 1:].contiguous().view(torch.uint8))
    assert torch.equal(_bits(d), _bits(halves[:, 0]))
    assert torch.equal(_bits(dmin), _bits(halves[:, 1]))
    assert torch.equal(sc, want_sc) and torch.equal(m, want_m)
    assert torch.equal(_bits(scale), _bits(halves[:, :1] * want_sc.to(torch.float32)))
    assert torch.equal(_bits(offset), _bits(-(halves[:, 1:] * want_m.to(torch.float32))))


@pytest.mark.parametrize("type_name", ["Q4_K", "Q5_K"])
def test_decoding_does_not_depend_on_the_backend_or_the_bytes_alignment(gen, type_name):
    x = torch.randn(8, 512, generator=gen)
    data = quantize(x, QuantConfig.from_name(type_name)).to_ggml_bytes()
    with kernels.use_backend(Backend.EAGER):
        want = QuantizedTensor.from_ggml_bytes(data, type_name, (8, 512))
    shifted = memoryview(bytearray(b"\0" + data))[1:]  # starts on an odd address
    for source in (data, shifted):
        got = QuantizedTensor.from_ggml_bytes(source, type_name, (8, 512))
        for name in ("codes", "scale", "zero_point", "offset"):
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(_bits(a), _bits(b)), name
        for name in ("codes", "min_codes", "super_scale", "super_min"):
            assert torch.equal(
                _bits(getattr(got.stored, name)), _bits(getattr(want.stored, name))
            ), name
    assert torch.equal(want.dequantize(), got.dequantize())


@pytest.mark.parametrize("type_name", ["Q4_0", "Q4_1", "Q8_0", "IQ4_NL", "MXFP4"])
def test_block_decoding_does_not_depend_on_the_bytes_alignment(gen, type_name):
    x = torch.randn(4, 256, generator=gen)
    data = quantize(x, QuantConfig.from_name(type_name)).to_ggml_bytes()
    want = QuantizedTensor.from_ggml_bytes(data, type_name, (4, 256))
    shifted = memoryview(bytearray(b"\0" + data))[1:]  # fp16 halves on odd addresses
    got = QuantizedTensor.from_ggml_bytes(shifted, type_name, (4, 256))
    for name in ("codes", "scale", "zero_point"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and torch.equal(_bits(a), _bits(b)), name
    assert torch.equal(want.dequantize(), got.dequantize())


@pytest.mark.parametrize("signed", [False, True])
def test_block_nibbles_are_the_low_then_high_nibbles(gen, signed):
    raw = torch.randint(0, 256, (50, 18), dtype=torch.uint8, generator=gen)
    b = raw[:, 2:].to(torch.int16)
    want = torch.cat([b & 15, b >> 4], dim=1) - (8 if signed else 0)
    got = bytes_kernels.block_nibbles(raw, 2, signed=signed)
    assert got.dtype == (torch.int8 if signed else torch.uint8)
    assert torch.equal(got.to(torch.int16), want)
