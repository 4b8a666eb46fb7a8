"""The per-block scale passes moved into compiled kernels (``formats.scales._fp8``'s
absmax, GGUF NVFP4's scale values by arithmetic): the same bits as the formulas they
replace, eagerly and through ``quantize``."""

from __future__ import annotations

import pytest
import torch

from quant_core import Backend, QuantConfig, quantize, quantize_dequantize, use_backend
from quant_core.formats.llama_cpp import _ue4m3_value
from quant_core.formats.scales import fit_from_blocks, ue4m3_values


def test_ue4m3_value_is_the_table_for_every_code():
    """Every code ``ue4m3_from_float`` writes (0..0x7E) and 0x7F: the table's float32."""
    codes = torch.arange(0x80, dtype=torch.int32).reshape(-1, 1)
    got = _ue4m3_value(codes)
    want = ue4m3_values(codes)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def _blocks(gen: torch.Generator) -> torch.Tensor:
    """Rows across 70 binades, zero rows and a row at float32's max."""
    x = torch.randn(128, 512, generator=gen) * torch.exp2(
        torch.randint(-60, 10, (128, 1), generator=gen).float()
    )
    x[0] = 0.0
    x[1, :16] = -0.0
    x[2, 7] = 3.0e38
    return x


def test_nvfp4_presets_compiled_equal_eager():
    """NVFP4 (tensor scale, absmax in the scale kernel) and NVFP4_GGUF (scale values from
    the kernel): compiled ``quantize_dequantize`` against eager ``quantize`` then
    ``dequantize``: codes, scales, stored scale codes and values, bit for bit."""
    x = _blocks(torch.Generator().manual_seed(11))
    for name in ("NVFP4", "NVFP4_GGUF"):
        cfg = QuantConfig.from_name(name)
        with use_backend(Backend.EAGER):
            ref = quantize(x, cfg)
            ref_values = ref.dequantize()
        with use_backend(Backend.COMPILED, min_elements=1):
            rt = quantize_dequantize(x, cfg)
        got = rt.quantized
        assert torch.equal(got.codes, ref.codes), name
        assert torch.equal(got.scale.view(torch.int32), ref.scale.view(torch.int32)), name
        assert torch.equal(rt.values.view(torch.int32), ref_values.view(torch.int32)), name
        assert got.to_ggml_bytes() == ref.to_ggml_bytes() if cfg.gguf_type else True


def test_q1_0_scale_pass_compiled_equals_eager():
    """Q1_0's ``fp16(sum|x| / 128)`` in the sums' kernel: compiled against eager, on
    means in float16's subnormal range, at its rounding edges and past its max (``d``
    overflows to inf: ``dequantize`` decodes those blocks), bit for bit in the codes,
    scales, bytes and values."""
    gen = torch.Generator().manual_seed(12)
    x = torch.randn(64, 1024, generator=gen) * torch.exp2(
        torch.randint(-30, 20, (64, 1), generator=gen).float()
    )
    x[0] = 0.0
    x[1, :128] = 65504.0
    x[2, :128] = 65520.0  # rounds to inf in float16
    x[3, :128] = 2.0**-24 * 1.5  # a float16 subnormal tie
    cfg = QuantConfig.from_name("Q1_0")
    with use_backend(Backend.EAGER):
        ref = quantize(x, cfg)
        ref_values = ref.dequantize()
    with use_backend(Backend.COMPILED, min_elements=1):
        rt = quantize_dequantize(x, cfg)
    got = rt.quantized
    assert torch.equal(got.codes, ref.codes)
    assert torch.equal(got.scale.view(torch.int32), ref.scale.view(torch.int32))
    assert got.to_ggml_bytes() == ref.to_ggml_bytes()
    assert torch.equal(rt.values.view(torch.int32), ref_values.view(torch.int32))


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


@pytest.mark.parametrize(
    "name", ["MXINT8", "MXFP4", "MXFP6_E2M3", "MXFP6_E3M2", "MXFP8_E4M3", "MXFP8_E5M2", "NVFP4"]
)
def test_fit_from_blocks_is_the_eager_steps(name):
    """``scales.fit_from_blocks`` (extremes, finiteness, symmetric range and scales in one
    compiled pass) gives the eager steps' bits: the scales, encoder scales and
    reciprocals, stored scale codes and tensor scale, the chosen range (``-0`` of a zero
    block's ``-a`` included), then codes and values through ``quantize`` and
    ``quantize_dequantize``; it runs compiled (not ``None``) and refuses NaN and Inf
    with ``quantize``'s message; its ``scale_peaks`` are the scales' ``aminmax``. Eagerly it
    returns ``None`` (the eager steps run)."""
    x = _blocks(torch.Generator().manual_seed(13))
    x[3, :32] = 2.0**-140  # subnormal extremes: E8M0's smallest scales
    cfg = QuantConfig.from_name(name)
    with use_backend(Backend.EAGER):
        assert fit_from_blocks(x.reshape(-1, 16), cfg) is None
        ref = quantize(x, cfg)
        ref_values = ref.dequantize()
    with use_backend(Backend.COMPILED, min_elements=1):
        block = 16 if name == "NVFP4" else 32
        fitted = fit_from_blocks(x.reshape(-1, block), cfg)
        assert fitted is not None
        got = quantize(x, cfg)
        rt = quantize_dequantize(x, cfg)
        for bad in (float("nan"), float("inf"), -float("inf")):
            y = x.clone()
            y[5, 9] = bad
            with pytest.raises(ValueError, match="NaN"):
                quantize(y, cfg)
    params, rng = fitted.params, fitted.range
    assert torch.equal(_bits(params.scale.reshape(ref.scale.shape)), _bits(ref.scale))
    # the scales' extremes from the same pass (``quantize_dequantize`` skips
    # ``scales_finite`` on them): ``aminmax``'s over the eager scales
    want_peaks = torch.stack(torch.aminmax(ref.scale))
    assert torch.equal(_bits(fitted.scale_peaks), _bits(want_peaks))
    assert torch.equal(_bits(rng.lo), _bits(ref.chosen_range.lo))
    for q in (got, rt.quantized):
        assert torch.equal(q.codes, ref.codes), name
        for field in ("scale", "zero_point"):
            assert torch.equal(_bits(getattr(q, field)), _bits(getattr(ref, field))), field
        assert torch.equal(q.stored.codes, ref.stored.codes)
        if ref.stored.super_scale is not None:
            assert torch.equal(_bits(q.stored.super_scale), _bits(ref.stored.super_scale))
        for end in ("lo", "hi"):
            want = getattr(ref.chosen_range, end)
            assert torch.equal(_bits(getattr(q.chosen_range, end)), _bits(want)), end
    assert torch.equal(_bits(rt.values), _bits(ref_values))
    assert torch.equal(_bits(got.dequantize()), _bits(ref_values))


def test_q1_0_sum_overflow_on_finite_values_still_quantizes():
    """Q1_0 checks finiteness on its largest sum of ``|x|`` (``llama_cpp._q1_0``): a block
    of finite values whose sum overflows float32 (128 x 3e38) must not be refused; the
    caller then checks the values themselves, and a NaN beside it is still refused. Both
    paths, bit for bit against the eager ``quantize`` and ``dequantize``."""
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(5))
    x[2, :128] = 3.0e38  # sum inf, scale inf: dequantize decodes the block as IEEE does
    cfg = QuantConfig.from_name("Q1_0")
    with use_backend(Backend.EAGER):
        ref = quantize(x, cfg)
        ref_values = ref.dequantize()
    for backend in (Backend.EAGER, Backend.COMPILED):
        with use_backend(backend, min_elements=1):
            rt = quantize_dequantize(x, cfg)
            assert torch.equal(rt.quantized.codes, ref.codes)
            assert torch.equal(
                rt.quantized.scale.view(torch.int32), ref.scale.view(torch.int32)
            )
            assert torch.equal(rt.values.view(torch.int32), ref_values.view(torch.int32))
            bad = x.clone()
            bad[5, 7] = float("nan")
            with pytest.raises(ValueError, match="NaN"):
                quantize_dequantize(bad, cfg)
