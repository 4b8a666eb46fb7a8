"""The GGUF bytes decoding kernels (``quant_core.formats.bytes_kernels``): compiled and
eager give the readable formulas' bits, and decoding does not depend on the backend or
on where the bytes start."""

from __future__ import annotations

import pytest
import torch

from quant_core import Backend, QuantConfig, QuantizedTensor, kernels, quantize
from quant_core.formats import bytes_kernels
from quant_core.formats.gguf_bytes import _unhigh_bits, _unnibble, _unpack_trits
from quant_core.formats.gguf_types import ggml_type
from quant_core.formats.kquant_bytes import (
    _readable_codes,
    _unk4_scales,
    _unnibbles,
    _unq3_scales,
)

pytestmark = pytest.mark.usefixtures("backend")


def _random_words(gen: torch.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randint(-(2**31), 2**31 - 1, shape, dtype=torch.int32, generator=gen)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def test_signed_nibbles_are_the_low_then_high_nibbles_minus_8(gen):
    # rows of 36 words, nibbles in words 4.. (Q4_K's layout): a strided view; the compiled
    # codes are q4_k_blocks' (on the compiled backend), the eager ones signed_nibbles_eager
    rows = _random_words(gen, (300, 36))
    w = rows[:, 4:].reshape(300, 4, 8)
    got = bytes_kernels.q4_k_blocks(rows)[-1].view(torch.int8).reshape(300, 256)
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


def test_q4_k_blocks_are_the_scales_and_the_nibbles_of_whole_blocks(gen):
    rows = _random_words(gen, (300, 36))  # whole Q4_K blocks: scale words, then nibbles
    rows[:, 0] = torch.arange(300, dtype=torch.int32) * 219 | (0x7C00 << 16)  # inf dmin
    *scales, codes = bytes_kernels.q4_k_blocks(rows)
    want_codes = bytes_kernels.signed_nibbles_eager(rows[:, 4:].reshape(300, 4, 8))
    assert codes.shape == (300, 4, 2, 8) and codes.dtype == torch.int32
    assert torch.equal(codes, want_codes)
    for got, want in zip(scales, bytes_kernels.k4_scales(rows[:, :4]), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(_bits(got), _bits(want))


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


@pytest.mark.parametrize(
    "type_name",
    ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "MXFP4", "TQ1_0", "TQ2_0", "Q2_K",
     "Q3_K", "Q6_K"],
)
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


def _readable_block_codes(name: str, raw: torch.Tensor) -> torch.Tensor:
    """The codes of GGUF blocks ``raw`` by the readable byte-wide formulas (the layouts in
    ``gguf_bytes``' and ``kquant_bytes``' docstrings)."""
    n = raw.shape[0]
    if name in ("Q5_0", "Q5_1"):
        at = 2 if name == "Q5_0" else 4
        high = _unhigh_bits(raw[:, at : at + 4]).to(torch.uint8) << 4
        u = _unnibble(raw[:, at + 4 : at + 20]) | high
        return (u.to(torch.int16) - 16).to(torch.int8)
    if name == "Q8_0":
        return raw[:, 2:].contiguous().view(torch.int8)
    if name == "TQ2_0":
        q = raw[:, :64].to(torch.int64).reshape(n, 2, 1, 32) >> torch.tensor(
            [0, 2, 4, 6]
        ).reshape(1, 1, 4, 1)
        return (q & 3).reshape(n, 256).to(torch.uint8)
    if name == "TQ1_0":
        return _unpack_trits(raw[:, :52]).to(torch.uint8)
    return _readable_codes(name, raw, ggml_type(name).config.qmin)


@pytest.mark.parametrize("type_name", bytes_kernels.block_codes_types)
def test_block_codes_follow_the_readable_layouts(gen, monkeypatch, type_name):
    # random bytes: every code pattern; one block more than a SIMD multiple, and an odd
    # address (the kernels read int16 halves of an aligned copy); eagerly in pieces of a
    # few rows, the last one short
    monkeypatch.setattr(bytes_kernels, "_PIECE_WORDS", 1000)
    size = ggml_type(type_name).type_size
    raw = torch.randint(0, 256, (301, size), dtype=torch.uint8, generator=gen)
    want = _readable_block_codes(type_name, raw)
    shifted = torch.cat([torch.zeros(1, dtype=torch.uint8), raw.reshape(-1)])[1:]
    for source in (raw, shifted.reshape(301, size)):
        got = bytes_kernels.block_codes(type_name, source)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
        assert torch.equal(bytes_kernels.block_codes(type_name, source, eager=True), want)


def _half_at(raw: torch.Tensor, at: int) -> torch.Tensor:
    """The fp16 at byte ``at`` of each block, as float32 (torch's conversion)."""
    return raw[:, at : at + 2].contiguous().view(torch.float16).reshape(-1).to(torch.float32)


def _readable_legacy(name: str, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_0's, Q8_0's, Q5_0's or IQ4_NL's codes and ``d`` by the readable formulas
    (``gguf_bytes``' and ``kquant_bytes``' layouts)."""
    d = _half_at(raw, 0)
    if name == "Q8_0":
        return raw[:, 2:].contiguous().view(torch.int8), d
    if name == "Q5_0":
        return _readable_block_codes(name, raw), d
    if name == "IQ4_NL":  # the level indices u
        return _unnibble(raw[:, 2:18]), d
    return (_unnibble(raw[:, 2:18]).to(torch.int16) - 8).to(torch.int8), d


def _finite_halves(raw: torch.Tensor, *at: int) -> None:
    """Clear bit 14 of the fp16 at each byte ``at``: exponents below 31, finite values.
    For counts of blocks that are not whole SIMD vectors: the compiled kernels' scalar
    loops convert some fp16 NaNs to other NaN bits than eager torch (``k4_scales``'
    tail loop too, ``docs/maintainers.md``); 4096 blocks take every class of fp16."""
    for a in at:
        raw[:, a + 1] &= 0xBF


@pytest.mark.parametrize("type_name", ["Q4_0", "Q8_0", "Q5_0", "IQ4_NL"])
@pytest.mark.parametrize("n", [1, 2, 3, 301, 4096])
def test_legacy_blocks_are_the_codes_and_d_of_whole_blocks(gen, type_name, n):
    # random bytes: every code pattern and every kind of fp16 d (NaN, inf, subnormal);
    # one block, a SIMD multiple and one more, and an odd address (an aligned copy)
    size = ggml_type(type_name).type_size
    raw = torch.randint(0, 256, (n, size), dtype=torch.uint8, generator=gen)
    if n == 4096:
        raw[:, :2] = torch.arange(4096, dtype=torch.int16).mul_(16).view(torch.uint8).reshape(n, 2)
    elif type_name in ("Q5_0", "IQ4_NL"):
        _finite_halves(raw, 0)
    want_codes, want_d = _readable_legacy(type_name, raw)
    shifted = torch.cat([torch.zeros(1, dtype=torch.uint8), raw.reshape(-1)])[1:]
    for source in (raw, shifted.reshape(n, size)):
        for eager in (False, True):
            codes, d = bytes_kernels.legacy_blocks(type_name, source, eager=eager)
            assert codes.dtype == want_codes.dtype and codes.shape == (n, 32)
            assert d.dtype == torch.float32 and d.shape == (n,)
            assert torch.equal(codes, want_codes)
            assert torch.equal(_bits(d), _bits(want_d))


@pytest.mark.parametrize("type_name", ["Q4_1", "Q5_1"])
@pytest.mark.parametrize("n", [1, 2, 3, 301, 4096])
def test_min_blocks_are_the_codes_d_and_min_of_whole_blocks(gen, type_name, n):
    # random bytes (every code pattern), both paths, an odd address; 4096 blocks take
    # 4096 fp16 patterns of d and of min (NaN, inf, subnormal), shorter counts finite ones
    size = ggml_type(type_name).type_size
    raw = torch.randint(0, 256, (n, size), dtype=torch.uint8, generator=gen)
    if n == 4096:
        h = torch.arange(4096, dtype=torch.int32) * 16
        raw[:, :4] = (h | (h.flip(0) << 16)).view(torch.uint8).reshape(n, 4)
    else:
        _finite_halves(raw, 0, 2)
    if type_name == "Q4_1":  # d | min | qs: u - 8
        want_codes = (_unnibble(raw[:, 4:20]).to(torch.int16) - 8).to(torch.int8)
    else:  # d | min | qh | qs: u - 16
        want_codes = _readable_block_codes(type_name, raw)
    want_d, want_m = _half_at(raw, 0), _half_at(raw, 2)
    shifted = torch.cat([torch.zeros(1, dtype=torch.uint8), raw.reshape(-1)])[1:]
    for source in (raw, shifted.reshape(n, size)):
        for eager in (False, True):
            codes, d, m = bytes_kernels.min_blocks(type_name, source, eager=eager)
            assert codes.dtype == torch.int8 and codes.shape == (n, 32)
            assert d.dtype == m.dtype == torch.float32 and d.shape == m.shape == (n,)
            assert torch.equal(codes, want_codes)
            assert torch.equal(_bits(d), _bits(want_d))
            assert torch.equal(_bits(m), _bits(want_m))


@pytest.mark.parametrize("n", [1, 2, 3, 301, 4096, 4097])
def test_mxfp4_blocks_are_the_codes_and_exponents_of_whole_blocks(gen, n, backend):
    # pairs of blocks on the compiled path (an odd count: a copy with a zero block after
    # it, the results its first n rows), and the eager path; random bytes: every FP4
    # code in every position, every E8M0 exponent (0: the subnormal 2^-127, 255: inf);
    # code 8 read as 0 or kept (signed_zero); an odd address
    raw = torch.randint(0, 256, (n, 17), dtype=torch.uint8, generator=gen)
    if n >= 4096:
        raw[:, 0] = torch.arange(n).remainder(256).to(torch.uint8)
    u = _unnibble(raw[:, 1:17])  # c[j] | c[j + 16] << 4
    e = raw[:, 0].to(torch.int32)
    want_s = torch.tensor([2.0**k for k in range(-127, 129)], dtype=torch.float64)[e.long()]
    want_s = want_s.to(torch.float32)  # exact: powers of two (2^128 -> inf)
    shifted = torch.cat([torch.zeros(1, dtype=torch.uint8), raw.reshape(-1)])[1:]
    for source in (raw, shifted.reshape(n, 17)):
        for plus_zero in (True, False):
            want_codes = torch.where(u == 8, 0, u) if plus_zero else u
            for eager in (False, True):
                codes, got_e, s = bytes_kernels.mxfp4_blocks(source, plus_zero, eager=eager)
                assert codes.dtype == torch.uint8 and codes.shape == (n, 32)
                assert got_e.dtype == torch.int32 and s.dtype == torch.float32
                assert torch.equal(codes, want_codes)
                assert torch.equal(got_e, e)
                assert torch.equal(_bits(s), _bits(want_s))
                for t in (codes, got_e, s):  # views of the first n rows: contiguous
                    assert t.is_contiguous() and t.shape[0] == n
                if backend is Backend.COMPILED and not eager:  # the kernel ran, odd n too
                    assert codes.untyped_storage().nbytes() == (n + n % 2) * 32


@pytest.mark.parametrize("n", [1, 2, 3, 300, 301, 4096])
def test_q6_k_blocks_are_the_codes_scales_and_d_of_whole_blocks(gen, n):
    # widened blocks on the compiled path (any count), block_codes eagerly; random
    # bytes (every code, every int8 scale, every kind of fp16 d), an odd address
    raw = torch.randint(0, 256, (n, 210), dtype=torch.uint8, generator=gen)
    if n == 4096:  # 4096 fp16 patterns of d, spread over the range
        d_bits = torch.arange(4096, dtype=torch.int16).mul_(16)
        raw[:, 208:] = d_bits.view(torch.uint8).reshape(n, 2)
    want_codes = _readable_codes("Q6_K", raw, -32)
    want_sc = raw[:, 192:208].contiguous().view(torch.int8).to(torch.int32)
    want_d = raw[:, 208:].contiguous().view(torch.float16).reshape(n).to(torch.float32)
    want_scale = want_d.unsqueeze(1) * want_sc.to(torch.float32)
    shifted = torch.cat([torch.zeros(1, dtype=torch.uint8), raw.reshape(-1)])[1:]
    for source in (raw, shifted.reshape(n, 210)):
        for eager in (False, True):
            codes, sc, d, scale = bytes_kernels.q6_k_blocks(source, eager=eager)
            assert codes.dtype == torch.int8 and codes.shape == (n, 256)
            assert sc.dtype == torch.int32 and sc.shape == (n, 16)
            assert d.dtype == torch.float32 and d.shape == (n,)
            assert scale.dtype == torch.float32 and scale.shape == (n, 16)
            assert torch.equal(codes, want_codes)
            assert torch.equal(sc, want_sc)
            assert torch.equal(_bits(d), _bits(want_d))
            assert torch.equal(_bits(scale), _bits(want_scale))


@pytest.mark.parametrize("n", [1, 2, 3, 301, 4096])
def test_q5_k_blocks_are_the_scales_and_codes_of_whole_blocks(gen, n):
    # random bytes (every code pattern), an odd address, both paths. d and dmin finite
    # in the short and odd counts: k4_scales' compiled tail loop (n % 8 rows) converts
    # some fp16 NaNs to other NaN bits than eager torch (before q5_k_blocks too); 4096
    # blocks (whole vectors) take 4096 patterns of each, NaNs and infinities included
    raw = torch.randint(0, 256, (n, 176), dtype=torch.uint8, generator=gen)
    if n == 4096:
        h = torch.arange(4096, dtype=torch.int32) * 16
        raw[:, :4] = (h | (h.flip(0) << 16)).view(torch.uint8).reshape(n, 4)
    else:
        raw[:, 1] &= 0xBF  # fp16 exponents below 31: d, dmin finite
        raw[:, 3] &= 0xBF
    want_codes = _readable_codes("Q5_K", raw, -16)
    head = raw[:, :16].clone(memory_format=torch.contiguous_format)  # d | dmin | scales
    halves = head[:, :4].reshape(-1).view(torch.float16).reshape(n, 2).to(torch.float32)
    want_sc, want_m = _unk4_scales(head[:, 4:])
    want = (
        halves[:, 0],
        halves[:, 1],
        want_sc,
        want_m,
        halves[:, :1] * want_sc.to(torch.float32),
        -(halves[:, 1:] * want_m.to(torch.float32)),
        want_codes,
    )
    shifted = torch.cat([torch.zeros(1, dtype=torch.uint8), raw.reshape(-1)])[1:]
    for source in (raw, shifted.reshape(n, 176)):
        for eager in (False, True):
            got = bytes_kernels.q5_k_blocks(source, eager=eager)
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape
                assert torch.equal(_bits(a), _bits(b))


def _fp16_patterns(n: int) -> torch.Tensor:
    """``n`` fp16 bit patterns as int16, spread over all 65,536 (NaNs, infinities,
    subnormals, both zeros, the largest finite values) where ``n`` is large."""
    return (torch.arange(n, dtype=torch.int32) * (65536 // n if n >= 16 else 4099)).to(
        torch.int16
    )


@pytest.mark.parametrize("n", [1, 2, 3, 301, 4096])
def test_q2_k_blocks_are_the_scales_and_codes_of_whole_blocks(gen, n):
    # random bytes (every code, every 4-bit scale and min), an odd address, both paths;
    # 4096 blocks take 4096 fp16 patterns of d and of dmin (NaN and inf included), the
    # short counts finite ones (k4_scales' tail loop: the Q5_K test above says why)
    raw = torch.randint(0, 256, (n, 84), dtype=torch.uint8, generator=gen)
    if n == 4096:
        h = _fp16_patterns(n)
        raw[:, 80:84] = torch.stack([h, h.flip(0)], dim=1).view(torch.uint8).reshape(n, 4)
    else:
        raw[:, [81, 83]] &= 0xBF  # fp16 exponents below 31: d, dmin finite
    b = raw[:, :16].to(torch.int32)
    tail = raw[:, 80:].clone(memory_format=torch.contiguous_format)
    halves = tail.reshape(-1).view(torch.float16).reshape(n, 2).to(torch.float32)
    want_sc, want_m = b & 0xF, b >> 4
    want = (
        halves[:, 0],
        halves[:, 1],
        want_sc,
        want_m,
        halves[:, :1] * want_sc.to(torch.float32),
        -(halves[:, 1:] * want_m.to(torch.float32)),
        _readable_codes("Q2_K", raw, -2),
    )
    shifted = torch.cat([torch.zeros(1, dtype=torch.uint8), raw.reshape(-1)])[1:]
    for source in (raw, shifted.reshape(n, 84)):
        for eager in (False, True):
            got = bytes_kernels.q2_k_blocks(source, eager=eager)
            for a, w in zip(got, want, strict=True):
                assert a.dtype == w.dtype and a.shape == w.shape
                assert torch.equal(_bits(a), _bits(w))


@pytest.mark.parametrize("n", [1, 2, 3, 301, 4096])
def test_q3_k_blocks_are_the_codes_scales_and_d_of_whole_blocks(gen, n):
    # random bytes (every code, every 6-bit scale), an odd address, both paths; 4096
    # blocks take 4096 fp16 patterns of d (NaN, inf, subnormals), the others finite ones
    raw = torch.randint(0, 256, (n, 110), dtype=torch.uint8, generator=gen)
    if n == 4096:
        raw[:, 108:] = _fp16_patterns(n).view(torch.uint8).reshape(n, 2)
    else:
        raw[:, 109] &= 0xBF
    want_codes = _readable_codes("Q3_K", raw, -4)
    want_sc = _unq3_scales(raw[:, 96:108]) - 32
    d_bytes = raw[:, 108:].clone(memory_format=torch.contiguous_format)
    want_d = d_bytes.view(torch.float16).reshape(n).to(torch.float32)
    want_scale = want_d.unsqueeze(1) * want_sc.to(torch.float32)
    shifted = torch.cat([torch.zeros(1, dtype=torch.uint8), raw.reshape(-1)])[1:]
    for source in (raw, shifted.reshape(n, 110)):
        for eager in (False, True):
            codes, sc, d, scale = bytes_kernels.q3_k_blocks(source, eager=eager)
            assert codes.dtype == torch.int8 and codes.shape == (n, 256)
            assert sc.dtype == torch.int32 and sc.shape == (n, 16)
            assert d.dtype == torch.float32 and d.shape == (n,)
            assert scale.dtype == torch.float32 and scale.shape == (n, 16)
            assert torch.equal(codes, want_codes)
            assert torch.equal(sc, want_sc)
            assert torch.equal(_bits(d), _bits(want_d))
            assert torch.equal(_bits(scale), _bits(want_scale))


@pytest.mark.parametrize(
    "type_name",
    ["Q4_0", "Q8_0", "Q6_K", "Q5_K", "Q2_K", "Q3_K", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "MXFP4"],
)
def test_whole_block_decodes_do_not_depend_on_the_backend(gen, type_name):
    """``from_ggml_bytes`` of random blocks (an even and an odd count of them): every
    field, dtype and shape the same compiled (the fixture's backend) and eagerly."""
    record = ggml_type(type_name)
    for rows in (6, 3):
        shape = (rows, 2 * record.block_size)
        size = 2 * rows * record.type_size
        raw = torch.randint(0, 256, (size,), dtype=torch.uint8, generator=gen)
        if type_name == "Q5_K":  # finite d, dmin (the Q5_K test above says why)
            raw.view(-1, 176)[:, [1, 3]] &= 0xBF
        elif type_name == "Q2_K":
            raw.view(-1, 84)[:, [81, 83]] &= 0xBF
        elif type_name == "Q3_K":
            raw.view(-1, 110)[:, 109] &= 0xBF
        elif type_name in ("Q4_1", "Q5_1"):  # finite d, min (_finite_halves says why)
            raw.view(-1, record.type_size)[:, [1, 3]] &= 0xBF
        elif type_name in ("Q5_0", "IQ4_NL"):
            raw.view(-1, record.type_size)[:, 1] &= 0xBF
        data = raw.numpy().tobytes()
        got = QuantizedTensor.from_ggml_bytes(data, type_name, shape)
        with kernels.use_backend(Backend.EAGER):
            want = QuantizedTensor.from_ggml_bytes(data, type_name, shape)
        for name in ("codes", "scale", "zero_point", "offset"):
            a, b = getattr(got, name), getattr(want, name)
            assert (a is None) == (b is None), name
            if a is not None:
                assert a.dtype == b.dtype and a.shape == b.shape
                assert torch.equal(_bits(a), _bits(b)), name
        if want.stored is not None:
            for name in ("codes", "min_codes", "super_scale", "super_min"):
                a, b = getattr(got.stored, name), getattr(want.stored, name)
                assert (a is None) == (b is None), name
                if a is not None:
                    assert a.dtype == b.dtype and a.shape == b.shape
                    assert torch.equal(_bits(a), _bits(b)), name


@pytest.mark.parametrize("shape", [(4096, 32), (3, 64), (5, 3), (16,)])
def test_fp4_plus_zero_maps_code_8_to_0_and_keeps_the_rest(gen, shape):
    """Every code 0..15 in every byte position of a word (a random draw of 131k codes),
    and shapes whose codes do not fill whole words (the eager path): code 8 becomes 0,
    the others stay, on both backends."""
    codes = torch.randint(0, 16, shape, dtype=torch.uint8, generator=gen)
    codes.view(-1)[:16] = torch.arange(16, dtype=torch.uint8)[: codes.numel()]
    before = codes.clone()
    got = bytes_kernels.fp4_plus_zero(codes)
    want = codes.clone()
    want[want == 8] = 0
    assert int((codes == 8).sum()) > 0
    assert got.dtype == torch.uint8 and got.shape == codes.shape
    assert torch.equal(got, want)
    assert torch.equal(codes, before)  # a new tensor: the input is not written


def test_fp4_plus_zero_refuses_other_dtypes():
    with pytest.raises(TypeError, match="uint8"):
        bytes_kernels.fp4_plus_zero(torch.zeros(8, dtype=torch.int8))
