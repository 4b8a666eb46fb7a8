"""The compiled absmean range (``kernels.absmean``, BitNet b1.58's ``a = mean|r|``) against
the eager float64 mean: the same float32 bit for bit, or ``None`` (the eager path decides)
where its error window holds a float32 rounding boundary; and the facts its proof uses.
"""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quant_core import (
    Backend,
    Format,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    kernels,
    quantize,
    use_backend,
)
from quant_core.kernels.passes import _gamma, _pieces, _window
from quant_core.ranges import _absmean

FORCED_EAGER = kernels.backend_from_env() is Backend.EAGER
needs_compiled = pytest.mark.skipif(FORCED_EAGER, reason="QLAB_COMPILE=0 forces the eager path")

F32_MAX = torch.finfo(torch.float32).max


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view({4: torch.int32, 8: torch.int64}[t.element_size()])


def _eager(blocks: torch.Tensor) -> torch.Tensor:
    with use_backend(Backend.EAGER):
        return _absmean(blocks).hi


def _fast(blocks: torch.Tensor) -> torch.Tensor | None:
    with use_backend(Backend.COMPILED, min_elements=1):
        return kernels.absmean(blocks)


def _assert_fast_is_eager(blocks: torch.Tensor) -> bool:
    """The compiled mean equals the eager one bit for bit; ``True`` when it decided."""
    fast = _fast(blocks)
    if fast is None:
        return False
    ref = _eager(blocks)
    assert fast.shape == ref.shape and fast.dtype == ref.dtype == torch.float32
    assert torch.equal(_bits(fast), _bits(ref)), (fast, ref)
    return True


def _both_quantize(x: torch.Tensor, cfg: QuantConfig) -> None:
    """quantize + dequantize on both paths: codes, scales, ranges and values alike."""
    out = []
    for backend in (Backend.COMPILED, Backend.EAGER):
        with use_backend(backend, min_elements=1):
            qt = quantize(x, cfg)
            out.append((qt, qt.dequantize()))
    (fast, fast_hat), (ref, ref_hat) = out
    assert torch.equal(fast.codes, ref.codes)
    assert torch.equal(_bits(fast.scale), _bits(ref.scale))
    assert fast.chosen_range is not None and ref.chosen_range is not None
    assert torch.equal(_bits(fast.chosen_range.lo), _bits(ref.chosen_range.lo))
    assert torch.equal(_bits(fast.chosen_range.hi), _bits(ref.chosen_range.hi))
    assert torch.equal(_bits(fast_hat), _bits(ref_hat))


# -- the facts the proof uses ------------------------------------------------------------


def test_torch_mean_is_the_sum_divided_by_the_length() -> None:
    # a = f32(f64(S_t / L)): absmean applies the same division to the window's ends
    gen = torch.Generator().manual_seed(1)
    for length in (3, 7, 1000, 4097, 65536):
        for rows in (1, 5, 300):
            m = torch.rand(rows, length, generator=gen, dtype=torch.float64)
            m = m * torch.exp(torch.randn(rows, length, generator=gen, dtype=torch.float64) * 5)
            a = m.mean(dim=1, keepdim=True)
            assert torch.equal(_bits(a), _bits(m.sum(dim=1, keepdim=True) / length))


@pytest.mark.parametrize("length", [1000, 1 << 16, 1 << 20])
def test_torch_float64_sum_is_within_the_bound(length: int) -> None:
    # |S_t - S*| <= gamma_{L-1} S*, S* the exact sum (fsum rounds it once, far inside)
    gen = torch.Generator().manual_seed(2)
    mags = (torch.randn(1, length, generator=gen) * 3).exp().abs().to(torch.float64)
    exact = math.fsum(mags.reshape(-1).tolist())
    got = float(mags.sum(dim=1))
    assert abs(got - exact) <= _gamma(length - 1) * exact


def test_pieces_split_long_rows_near_their_square_root() -> None:
    assert _pieces(4096 * 4096) == 4096
    assert _pieces(1000) == 1  # short rows: one piece
    assert _pieces(65537) == 1  # a prime: one piece
    assert _pieces(3 << 17) == 512  # 393216 = 512 * 768
    assert _window(1 << 24, 2 * 4095) == pytest.approx(2.0**-29, rel=3e-3)
    assert _window(1 << 45, 1 << 44) is None


# -- equal bit for bit ---------------------------------------------------------------------


@st.composite
def matrices(draw) -> torch.Tensor:
    """Float32 ``[R, C]`` of mixed magnitudes, subnormals and signed zeros included."""
    rows = draw(st.integers(1, 6))
    cols = 4 * draw(st.integers(1, 12))
    elements = st.floats(-1e6, 1e6, width=32, allow_nan=False, allow_infinity=False)
    extra = st.sampled_from([-0.0, 1e-45, -3e-39, 3e38, -3e38])
    arr = draw(hnp.arrays(np.float32, (rows, cols), elements=elements | extra))
    return torch.from_numpy(arr)


ABSMEAN_CONFIGS = [
    QuantConfig.from_name("BITNET"),
    QuantConfig(format=Format.TERNARY, granularity=PerChannel(0), range_method=RangeMethod.ABSMEAN),
    QuantConfig(format=Format.TERNARY, granularity=PerChannel(1), range_method=RangeMethod.ABSMEAN),
    QuantConfig(format=Format.TERNARY, granularity=PerGroup(4), range_method=RangeMethod.ABSMEAN),
    QuantConfig(bits=4, granularity=PerTensor(), range_method=RangeMethod.ABSMEAN),
]


@needs_compiled
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(x=matrices(), cfg=st.sampled_from(ABSMEAN_CONFIGS))
def test_compiled_absmean_quantizes_as_eager(x: torch.Tensor, cfg: QuantConfig) -> None:
    _both_quantize(x, cfg)


def _degenerate() -> dict[str, torch.Tensor]:
    n = 1 << 17
    zeros = torch.zeros(1, n)
    huge = torch.zeros(1, n)
    huge[0, 5] = 3e38
    extremes = torch.full((1, n), F32_MAX)
    extremes[0, ::2] *= -1
    ties = torch.tensor([0.5, -0.5, 1.5, -1.5, 1.0, -1.0, 0.0, 2.0]).repeat(1, n // 8)
    return {
        "all-zero": zeros,
        "signed-zeros": torch.where(torch.arange(n) % 2 == 0, 0.0, -0.0).reshape(1, n),
        "one-huge": huge,
        "float32-max": extremes,
        "smallest-subnormal": torch.full((1, n), 2.0**-149),
        "subnormals": torch.randn(1, n, generator=torch.Generator().manual_seed(5)) * 1e-40,
        "ties": ties,  # mean 1: values at -1.5 .. 1.5, exact midpoints
    }


@needs_compiled
@pytest.mark.parametrize("name", list(_degenerate()))
def test_degenerate_inputs_equal_bit_for_bit(name: str) -> None:
    x = _degenerate()[name]
    assert _assert_fast_is_eager(x), f"{name}: the window should decide"
    _both_quantize(x, QuantConfig.from_name("BITNET"))


@needs_compiled
@pytest.mark.parametrize(
    "shape",
    [(1, 4096 * 1024), (1, 3 << 17), (1, 65537), (64, 1 << 16), (2048, 512), (1000, 257)],
    ids=str,
)
def test_large_rows_equal_bit_for_bit(shape: tuple[int, int]) -> None:
    gen = torch.Generator().manual_seed(7)
    decided = 0
    for spread in (0.0, 2.0, 8.0):
        x = torch.randn(shape, generator=gen) * (torch.randn(shape, generator=gen) * spread).exp()
        decided += _assert_fast_is_eager(x)
        decided += _assert_fast_is_eager(x.t().contiguous().t())  # a transposed layout
    assert decided >= 4  # a boundary in the window is rare (a few % of long rows)


@needs_compiled
def test_a_boundary_in_the_window_leaves_it_to_eager() -> None:
    # half the values a, half the next float32 up: the mean is exactly their midpoint, so
    # the order of summation decides the rounding, and only the eager path may
    a = torch.tensor(0.3)
    b = torch.nextafter(a, torch.tensor(1.0))
    x = torch.cat([a.repeat(1 << 16), -b.repeat(1 << 16)]).reshape(1, -1)
    assert _fast(x) is None
    _both_quantize(x, QuantConfig.from_name("BITNET"))


def test_eager_backend_runs_no_kernel() -> None:
    x = torch.randn(1, 1 << 16)
    with use_backend(Backend.EAGER):
        assert kernels.absmean(x) is None
    with use_backend(Backend.COMPILED):  # below MIN_ELEMENTS
        assert kernels.absmean(x[:, :100]) is None
    assert kernels.absmean(x.double()) is None
