"""llama.cpp's legacy and ternary quantizers (``formats.llama_cpp``) on their corners: the
compiled passes give the eager path's codes and bytes bit for bit, signed zeros included
(Q4_1/Q5_1 store ``fp16(min)``, whose sign a reduction's order decides) and blocks whose
max and min tie in magnitude (Q4_0/Q5_0 take the first), and a block whose
``1/d`` overflows (``d`` subnormal) or whose ``max - min`` overflows gets code 0 where
``x id`` is not finite, as llama.cpp's casts and the ``gguf`` package give on x86."""

from __future__ import annotations

import platform
import warnings

import gguf
import numpy as np
import pytest
import torch

from quant_core import QuantConfig, kernels, quantize, quantize_dequantize
from quant_core.config import Format

TYPES = ("Q4_0", "Q5_0", "Q4_1", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0")
_FORCED_EAGER = kernels.backend_from_env() is kernels.Backend.EAGER
_NEEDS_COMPILED = pytest.mark.skipif(
    _FORCED_EAGER, reason=f"{kernels.ENV_VAR}=0 forces the eager path"
)
BACKENDS = [
    pytest.param(b, marks=_NEEDS_COMPILED if b is kernels.Backend.COMPILED else ())
    for b in kernels.Backend
]
# and the types whose passes compile in part: GGUF's NVFP4 (its absmax and FP4 search) and
# Q1_0 (its ordered sum runs eagerly on either backend)
COMPILED_TYPES = (*TYPES, "NVFP4_GGUF", "Q1_0")


def _signed_zeros(g: torch.Generator) -> torch.Tensor:
    """Non-negative blocks with +0 and -0 mixed in (so min is a zero of either sign), their
    negation (max a zero), and whole blocks of mixed zeros: 8 x 512."""
    x = torch.randn(8, 512, generator=g).abs()
    zero = torch.rand(x.shape, generator=g) < 0.3
    neg = torch.rand(x.shape, generator=g) < 0.5
    x[zero] = torch.where(neg[zero], -0.0, 0.0)
    x[2:4] = -x[2:4]
    x[4:6] = torch.where(neg[4:6], -0.0, 0.0)
    x[6, :256] = -0.0
    return x


def _degenerate(g: torch.Generator) -> torch.Tensor:
    """Rows 0-3: blocks of subnormals (``d`` subnormal, ``1/d = inf``); rows 4-7: values near
    float32's largest, both signs in every block of 32 (``max - min`` overflows to inf)."""
    x = torch.randn(8, 512, generator=g)
    x[:4] *= 1e-41
    x[4:] = torch.where(x[4:] < 0, -1.0e38, 1.0e38) * torch.rand(4, 512, generator=g).add(0.5)
    x[4:, 0::32] = 3.0e38
    x[4:, 1::32] = -3.0e38
    return x


def _magnitude_ties(g: torch.Generator) -> torch.Tensor:
    """Small integers where most blocks hold both +m and -m (m their largest magnitude),
    which comes first varying: Q4_0/Q5_0 take the first (its sign is d's)."""
    x = torch.randint(-3, 4, (8, 512), generator=g).float()
    x[:, 0::32] = torch.where(torch.rand(8, 16, generator=g) < 0.5, -4.0, 4.0)
    x[:, 5::32] = -x[:, 0::32]
    x[:6, 0::64] = 2.0  # some blocks without a tie: m = 4 once
    return x


def _quantize(x: torch.Tensor, name: str, backend: kernels.Backend):
    with kernels.use_backend(backend, min_elements=1):
        return quantize(x, QuantConfig.from_name(name))


@pytest.mark.parametrize("name", COMPILED_TYPES)
@pytest.mark.parametrize("case", ["signed_zeros", "degenerate", "ties"])
@_NEEDS_COMPILED
def test_compiled_equals_eager(name: str, case: str) -> None:
    g = torch.Generator().manual_seed(5)
    make = {"signed_zeros": _signed_zeros, "degenerate": _degenerate, "ties": _magnitude_ties}
    x = make[case](g)
    e = _quantize(x, name, kernels.Backend.EAGER)
    c = _quantize(x, name, kernels.Backend.COMPILED)
    assert torch.equal(e.codes, c.codes)
    assert e.to_ggml_bytes() == c.to_ggml_bytes()  # fp16 d and min, signs of zero included


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_non_finite_x_id_gives_code_zero(name: str, backend: kernels.Backend) -> None:
    x = _degenerate(torch.Generator().manual_seed(6))
    codes = _quantize(x, name, backend).codes
    cfg = QuantConfig.from_name(name)
    # the lab's code of stored u = 0 (Q4_0..Q5_1: q = u + qmin) or of q = 0 (Q8_0; TQ's
    # stored code is q + 1)
    zero = {"Q8_0": 0, "TQ1_0": 1, "TQ2_0": 1}.get(name, cfg.qmin)
    # subnormal rows: x id is +-inf (or NaN for 0 and, in Q4_1/Q5_1, for the minimum)
    assert bool((codes[:4] == zero).all())
    if name in ("Q4_1", "Q5_1"):  # d = inf, id = 0: (x - min) 0 is 0 or (inf 0) NaN
        assert bool((codes[4:] == zero).all())


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"),
    reason="the gguf package's NaN/inf -> uint8 casts are x86's here",
)
@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_degenerate_blocks_equal_the_gguf_package(name: str, backend: kernels.Backend) -> None:
    x = _degenerate(torch.Generator().manual_seed(7))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the package's overflow in 1 / d
        expected = gguf.quants.quantize(x.numpy(), gguf.GGMLQuantizationType[name]).reshape(-1)
    got = np.frombuffer(_quantize(x, name, backend).to_ggml_bytes(), dtype=np.uint8)
    assert np.array_equal(got, expected)


def _fp4_search_corners() -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of values around every midpoint of llama.cpp's FP4 levels (``0, 1, 2, 3, 4, 6,
    8, 12`` times ``d``: each midpoint and 3 float32 steps either side, both signs, ``-0``),
    one ``d`` per row: powers of two from subnormal to large (MXFP4's ``d_half``) and
    UE4M3 values over 2 with 3 mantissa bits (NVFP4's)."""
    levels = (0, 1, 2, 3, 4, 6, 8, 12)
    ds = [2.0**e for e in range(-133, 120, 9)]
    ds += [m / 16 * 2.0**e for m in (9, 11, 15) for e in (-7, 0, 5)]
    rows = []
    for d in ds:
        d32 = np.float32(d)
        pts = {0.0, float(np.float32(13) * d32)}
        for i, lo in enumerate(levels):
            for hi in levels[i:]:
                v = np.float32((lo + hi) / 2) * d32
                for step in (np.inf, -np.inf):
                    w = v
                    for _ in range(4):
                        pts.add(float(w))
                        w = np.nextafter(w, np.float32(step), dtype=np.float32)
        row = sorted(pts)
        rows.append(([*row, *(-v for v in row), -0.0], float(d32)))
    width = -(-max(len(r) for r, _ in rows) // 32) * 32
    x = torch.zeros(len(rows), width)
    d_half = torch.zeros(len(rows), 1)
    for i, (row, d) in enumerate(rows):
        x[i, : len(row)] = torch.tensor(row)
        d_half[i, 0] = d
    return x, d_half


@_NEEDS_COMPILED
def test_fp4_search_compiled_equals_the_eager_argmin_at_every_midpoint() -> None:
    # the compiled search tries only the 7 levels of x's sign; the eager one is llama.cpp's
    # loop over all 16 (an argmin of float32 errors): the same code on every tie and near-tie
    from quant_core.formats import llama_cpp

    x, d_half = _fp4_search_corners()
    with kernels.use_backend(kernels.Backend.COMPILED, min_elements=1):
        compiled = llama_cpp._fp4_codes(x, d_half)
    eager = llama_cpp._fp4_codes_eager(x, d_half)
    assert torch.equal(compiled, eager)
    assert int((eager >= 9).sum()) > 0 and int(((eager > 0) & (eager < 8)).sum()) > 0


_NON_FINITE = {
    "nan": (float("nan"), torch.float32, r"1 NaN and 0 Inf values of 1,024;"),
    "-inf": (float("-inf"), torch.float32, r"0 NaN and 1 Inf values of 1,024;"),
    "float64-overflow": (1e300, torch.float64, r"1 torch\.float64 value beyond the float32"),
}


@pytest.mark.parametrize("name", [*COMPILED_TYPES, "Q4_K", "IQ4_NL"])
@pytest.mark.parametrize("case", list(_NON_FINITE))
@pytest.mark.parametrize("backend", BACKENDS)
def test_non_finite_input_is_refused(name: str, case: str, backend: kernels.Backend) -> None:
    # the legacy types check finiteness on their own pass's per-block peaks, after it
    # (``llama_cpp.checks_finiteness``); the others before: the same error either way, for
    # a bad value in any block, and beside values whose fp16 scale overflows
    value, dtype, message = _NON_FINITE[case]
    for where in (0, 700):
        x = torch.randn(4, 256, generator=torch.Generator().manual_seed(3)).to(dtype)
        x[1, :32] = 6.0e4 * 127  # Q8_0's d overflows fp16 here: finite all the same
        x.view(-1)[where] = value
        with pytest.raises(ValueError, match=message):
            _quantize(x, name, backend)
        x.view(-1)[where] = 1.0
        _quantize(x, name, backend)


@_NEEDS_COMPILED
def test_fp4_counted_search_equals_the_running_minimum_at_every_midpoint() -> None:
    # ``_mxfp4_code_numbers_counted`` counts midpoints instead of llama.cpp's running
    # minimum of float32 errors; ``_fp4_counted_values`` adds the level up beside it: the
    # same codes and the FP4 decode's value bits on every tie and near-tie, subnormal and
    # huge ``d_half``, ``-0``, both paths
    from quant_core.formats import llama_cpp
    from quant_core.formats.codebooks import codebook_for

    x, d_half = _fp4_search_corners()
    ref = llama_cpp._mxfp4_code_numbers(x, d_half)
    assert torch.equal(llama_cpp._mxfp4_code_numbers_counted(x, d_half), ref)
    s = 2 * d_half
    table = codebook_for(Format.FP4_E2M1, x.device).decode_table
    with kernels.use_backend(kernels.Backend.COMPILED, min_elements=1):
        codes, values = llama_cpp._fp4_counted_values(x, d_half, s)
        compiled = kernels.encode_values_with(
            llama_cpp._mxfp4_code_numbers, "llama_cpp_fp4", table, s, x, d_half
        )
    assert compiled is not None
    assert torch.equal(codes, ref.to(torch.uint8))
    assert torch.equal(codes, compiled[0])
    assert torch.equal(values.view(torch.int32), compiled[1].view(torch.int32))
    eager_values = llama_cpp._fp4_counted_values(x, d_half, s)[1]
    assert torch.equal(eager_values.view(torch.int32), compiled[1].view(torch.int32))


@pytest.mark.parametrize("name", ["NVFP4_GGUF", "MXFP4_GGUF"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_fp4_wide_blocks_keep_the_running_minimum(name: str, backend: kernels.Backend) -> None:
    # a block whose amax / 6 clamps to UE4M3's 448 holds values past 2^20 d_half, where
    # llama.cpp's rounded errors tie and keep the first level: the scale pass flags it
    # (``_wide``) and the whole call takes the running minimum; the same bits as eager
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(4))
    x[3, :16] = torch.tensor([1e12, -3e11, 1e9, 2.4e8, 5e7, 1.0, -2.0, 0.0] * 2)
    cfg = QuantConfig.from_name(name)
    with kernels.use_backend(kernels.Backend.EAGER):
        ref = quantize(x, cfg)
        ref_values = ref.dequantize()
    with kernels.use_backend(backend, min_elements=1):
        rt = quantize_dequantize(x, cfg)
    assert torch.equal(rt.quantized.codes, ref.codes)
    assert torch.equal(rt.quantized.scale.view(torch.int32), ref.scale.view(torch.int32))
    assert torch.equal(rt.values.view(torch.int32), ref_values.view(torch.int32))
    assert rt.quantized.to_ggml_bytes() == ref.to_ggml_bytes()
