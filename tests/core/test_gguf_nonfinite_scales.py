"""A GGUF block whose stored fp16 scale is +-inf or NaN (a damaged or hand-made file)
decodes as llama.cpp's own reader decodes it: ``gguf.quants.dequantize``, IEEE arithmetic
(+-inf, NaN for code 0 or a zero sub-scale), bit for bit, on the compiled and the eager
path. ``dequantize`` saturated such blocks to +-float32's maximum before, so a Q8_0 block
with ``d = inf`` showed +-3.4e38 and passed for finite values."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as GGML

from quant_core import QuantizedTensor
from quant_core.kernels import Backend, use_backend

# Byte offset of the first fp16 super-scale ``d`` in each type's block (ggml-common.h).
D_OFFSET = {
    "Q4_0": 0, "Q4_1": 0, "Q5_0": 0, "Q5_1": 0, "Q8_0": 0,
    "Q2_K": 80, "Q3_K": 108, "Q4_K": 0, "Q5_K": 0, "Q6_K": 208,
    "IQ4_NL": 0, "IQ4_XS": 0, "TQ1_0": 52, "TQ2_0": 64,
}  # fmt: skip


def _blocks(type_name: str) -> np.ndarray:
    w = np.random.default_rng(3).standard_normal((4, 256)).astype(np.float32)
    kind = GGML[type_name]
    try:
        return gguf.quants.quantize(w, kind).copy()
    except NotImplementedError:  # the package quantizes the legacy types only: the lab's
        from quant_core import QuantConfig, quantize

        raw = quantize(torch.from_numpy(w), QuantConfig.from_name(type_name)).to_ggml_bytes()
        return np.frombuffer(raw, np.uint8).reshape(4, -1).copy()


@pytest.mark.parametrize("backend", [Backend.COMPILED, Backend.EAGER])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("type_name", sorted(D_OFFSET))
def test_a_non_finite_stored_scale_decodes_as_llama_cpp_does(type_name, value, backend):
    raw = _blocks(type_name)
    at = D_OFFSET[type_name]
    raw[0, at : at + 2] = np.array([value], np.float16).view(np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = gguf.quants.dequantize(raw, GGML[type_name])
    with use_backend(backend, min_elements=1):
        qt = QuantizedTensor.from_ggml_bytes(raw.tobytes(), type_name, (4, 256))
        got = qt.dequantize().numpy()
    assert not np.isfinite(ref[0]).all()  # the damaged block: the test can fail
    assert np.isfinite(ref[1:]).all()
    np.testing.assert_array_equal(got, ref)  # NaN where NaN, the same infinities


def test_finite_scales_still_saturate_to_float32s_range():
    """The lab's rule for finite scales stands: at float32's maximum, ``127 s`` rounds past
    it and gives +-float32's maximum, never inf."""
    from quant_core import QuantConfig, quantize

    top = torch.finfo(torch.float32).max
    values = quantize(torch.tensor([[top, -top, 1.0]]), QuantConfig(8)).dequantize()
    assert values.tolist() == [[top, -top, 0.0]]


def test_the_labs_q8_0_past_fp16s_scales_decodes_as_llama_cpp_does():
    """Q8_0 of 1e7: ``d = 1e7 / 127`` overflows fp16 to inf, in llama.cpp's bytes and the
    lab's alike; the lab's values are now the package's (+-inf), not +-float32's maximum."""
    from quant_core import QuantConfig, quantize, quantize_dequantize

    x = torch.tensor([[1e7, -3e6] * 16])
    qt = quantize(x, QuantConfig.from_name("Q8_0"))
    raw = np.frombuffer(qt.to_ggml_bytes(), np.uint8).reshape(1, -1)
    with np.errstate(over="ignore"):
        ref = gguf.quants.dequantize(raw, GGML.Q8_0)
    assert np.isinf(ref).all()
    np.testing.assert_array_equal(qt.dequantize().numpy(), ref)
    # quantize_dequantize's one pass saturates; for such a tensor it decodes as dequantize
    for backend in (Backend.COMPILED, Backend.EAGER):
        with use_backend(backend, min_elements=1):
            both = quantize_dequantize(x, QuantConfig.from_name("Q8_0"))
        assert not both.quantized.scales_finite()
        np.testing.assert_array_equal(both.values.numpy(), ref)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.float8_e4m3fn]
)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), None])
@pytest.mark.parametrize("where", [0, 517, 999])
def test_all_finite_agrees_with_isfinite(dtype: torch.dtype, bad: float | None, where: int) -> None:
    """``scales_finite``'s check reads the least and greatest scale instead of writing
    ``isfinite``'s boolean tensor: the same answer wherever the one bad scale sits."""
    from quant_core.quantized_tensor import _all_finite

    t = torch.linspace(-3, 3, 1000).to(dtype)
    if bad is not None:
        t[where] = bad
    assert _all_finite(t) == bool(torch.isfinite(t.float()).all())
    if t.element_size() > 1:  # float8_e4m3fn has no inf: the cast saturates it
        assert _all_finite(t) == (bad is None)


@pytest.mark.parametrize("backend", [Backend.COMPILED, Backend.EAGER])
def test_finite_scales_whose_sum_overflows_still_saturate(backend):
    """``_unsaturate`` first sums the scales (finite sum: all finite); 256 finite scales of
    ``max / 127`` sum past float32's range, and the exact check after it must still find no
    block to rewrite: every value stays +-float32's maximum, none becomes inf."""
    from quant_core import PerGroup, QuantConfig, quantize

    top = torch.finfo(torch.float32).max
    x = torch.tensor([[top, -top] * 16] * 256).reshape(1, -1)
    with use_backend(backend, min_elements=1):
        qt = quantize(x, QuantConfig(8, granularity=PerGroup(32)))
        assert torch.isfinite(qt.scale).all() and not torch.isfinite(qt.scale.sum())
        values = qt.dequantize()
    assert torch.equal(values, x)
