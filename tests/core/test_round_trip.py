"""``quantize_dequantize``: the ``QuantizedTensor`` and its values in one call, bit for bit
``quantize(x, cfg)`` and its ``dequantize()`` (codes, scales, zero points, offsets, stored
scales, values, ``-0`` and NaN bits included), for every shipped preset on both paths.

The fused passes (``formats.llama_cpp.fuses_values``: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0,
TQ2_0) compute the values from the float code in the loop that writes the codes, with the
fp16 scale rounded inside the compiled reduction (Inductor drops such a round trip unless
told to emulate casts): the corners below are where that could differ: signed zeros (a
``roundf`` of a small negative value is ``-0``, a code converts to ``+0``), ties in
magnitude (Q4_0/Q5_0's first), blocks of zeros, subnormal ``d`` (``1/d = inf``), ``max -
min`` overflowing, fp16 overflowing (``d`` beyond 65504), and values near fp16's ties."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quant_core import (
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    QuantizedTensor,
    RoundTrip,
    kernels,
    preset_names,
    quantize,
    quantize_dequantize,
)
from quant_core.config import ZeroPoint
from quant_core.formats import kquants, llama_cpp

FUSED = ("Q4_0", "Q5_0", "Q4_1", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0")
GGUF_COMPILED_FUSED = ("MXFP4_GGUF", "NVFP4_GGUF", "Q1_0", "IQ4_NL", "IQ4_XS")
"""GGUF presets whose codes' pass gives the values too on the compiled path only
(``llama_cpp.fuses_values_compiled``: llama.cpp's own rounding, ``kernels.encode_values_with``)."""
CODEBOOK_FUSED = ("MXFP4", "NVFP4", "MXFP6_E2M3", "MXFP6_E3M2", "NF4_DQ", "BITNET")
"""Presets whose codes and values come from one compiled pass on the compiled path
(``kernels.encode_codebook_values``): FP4, FP6, NF4 and ternary codebooks, not FP8."""
_FORCED_EAGER = kernels.backend_from_env() is kernels.Backend.EAGER
_NEEDS_COMPILED = pytest.mark.skipif(
    _FORCED_EAGER, reason=f"{kernels.ENV_VAR}=0 forces the eager path"
)
_RUNNABLE = [b for b in kernels.Backend if b is kernels.Backend.EAGER or not _FORCED_EAGER]
BACKENDS = [
    pytest.param(b, marks=_NEEDS_COMPILED if b is kernels.Backend.COMPILED else (), id=b.value)
    for b in kernels.Backend
]


def _bits(t: torch.Tensor | None) -> torch.Tensor | None:
    """``t``'s bits as integers (so ``-0`` differs from ``+0`` and NaNs compare equal)."""
    if t is None or not t.is_floating_point():
        return t
    width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(width)


def _assert_same(a: torch.Tensor | None, b: torch.Tensor | None, what: str) -> None:
    if a is None or b is None:
        assert a is b, what
        return
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert torch.equal(_bits(a), _bits(b)), what


def _assert_round_trip(
    x: torch.Tensor, name: str | QuantConfig, backend: kernels.Backend
) -> None:
    cfg = QuantConfig.from_name(name) if isinstance(name, str) else name
    with kernels.use_backend(backend, min_elements=1):
        try:
            ref = quantize(x, cfg)
        except Exception as exc:  # the same error (NF4_DQ on values near float32's max)
            with pytest.raises(type(exc)):
                quantize_dequantize(x, cfg)
            return
        ref_values = ref.dequantize()
        trip = quantize_dequantize(x, cfg)
    assert isinstance(trip, RoundTrip) and isinstance(trip.quantized, QuantizedTensor)
    got = trip.quantized
    for field in ("codes", "scale", "zero_point", "offset"):
        _assert_same(getattr(got, field), getattr(ref, field), f"{name} {field}")
    for field in ("codes", "min_codes", "super_scale", "super_min"):
        _assert_same(
            getattr(got.stored, field, None), getattr(ref.stored, field, None), f"stored {field}"
        )
    _assert_same(trip.values, ref_values, f"{name} values")
    assert trip.values.shape == x.shape


def _corners(g: torch.Generator) -> torch.Tensor:
    """``[128, 512]`` float32 (two K-quant super-blocks per row, 4 x FP8_BLOCK tiles): normal
    values at several scales with each corner in rows of its own."""
    x = torch.randn(128, 512, generator=g) * torch.logspace(-3, 3, 128).unsqueeze(1)
    x[0, :8] = torch.tensor([0.5, -0.5, 1.5, 2.5, -0.0, 0.0, 1e-30, -1e-30])
    x[1] = 0.0
    x[2] = -0.0
    zero = torch.rand(512, generator=g) < 0.3
    x[3] = torch.where(zero, torch.where(torch.rand(512, generator=g) < 0.5, -0.0, 0.0), x[3])
    x[4] = torch.randn(512, generator=g) * 1e-41  # subnormal d
    x[5] = torch.where(x[5] < 0, -1.0e38, 1.0e38)  # max - min overflows
    x[5, 0::32] = 3.0e38
    x[6] = torch.randint(-3, 4, (512,), generator=g).float()  # ties in magnitude
    x[6, 0::32] = 4.0
    x[6, 5::32] = -4.0
    x[7] = torch.randn(512, generator=g) * 1e7  # fp16(d) overflows for Q8_0, TQ
    x[8] = torch.randn(512, generator=g).abs()  # one-signed blocks (Q4_1's min > 0)
    x[9] = -torch.randn(512, generator=g).abs()
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", preset_names())
def test_every_preset_round_trips_as_quantize_then_dequantize(
    name: str, backend: kernels.Backend
) -> None:
    _assert_round_trip(_corners(torch.Generator().manual_seed(3)), name, backend)


def test_the_fused_types_are_the_legacy_and_ternary_ones() -> None:
    fused = {n for n in preset_names() if llama_cpp.fuses_values(QuantConfig.from_name(n))}
    assert fused == set(FUSED)
    compiled = {
        n for n in preset_names() if llama_cpp.fuses_values_compiled(QuantConfig.from_name(n))
    }
    assert compiled == set(GGUF_COMPILED_FUSED)


_FLOATS = st.one_of(
    st.floats(-1e4, 1e4, width=32),
    st.sampled_from([0.0, -0.0, 1e-41, -1e-41, 6.55e4, -6.55e4, 3e38, -3e38, 0.5, -0.5]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 3),
    blocks=st.integers(1, 2),
    fill=st.lists(_FLOATS, min_size=1, max_size=64),
    scale=st.sampled_from([1.0, 1e-3, 1e3, 1e-38]),
    name=st.sampled_from(FUSED),
    backend=st.sampled_from(_RUNNABLE),
)
def test_fused_types_round_trip_on_any_values(
    rows: int, blocks: int, fill: list[float], scale: float, name: str, backend: kernels.Backend
) -> None:
    """Random blocks of 256 (the ternary types' length) tiled from drawn values, zeros,
    subnormals, fp16's edge and float32's largest among them."""
    n = rows * blocks * 256
    base = torch.tensor(fill, dtype=torch.float32).repeat(n // len(fill) + 1)[:n]
    g = torch.Generator().manual_seed(len(fill))
    x = (base[torch.randperm(n, generator=g)] * scale).reshape(rows, blocks * 256)
    _assert_round_trip(x, name, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["Q8_0", "Q4_1", "Q4_K"])
def test_non_finite_input_raises_as_quantize(name: str, backend: kernels.Backend) -> None:
    x = torch.randn(4, 256)
    x[2, 7] = float("nan")
    with kernels.use_backend(backend, min_elements=1):
        with pytest.raises(ValueError) as plain:
            quantize(x, QuantConfig.from_name(name))
        with pytest.raises(ValueError) as fused:
            quantize_dequantize(x, QuantConfig.from_name(name))
    assert str(fused.value) == str(plain.value)


def test_importance_reaches_the_weighted_quantizer() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 512, generator=g)
    w = torch.rand(512, generator=g)
    cfg = QuantConfig.from_name("Q4_K")
    trip = quantize_dequantize(x, cfg, importance=w)
    ref = quantize(x, cfg, importance=w)
    _assert_same(trip.quantized.codes, ref.codes, "codes")
    _assert_same(trip.values, ref.dequantize(), "values")


def test_non_matrix_shapes_keep_their_shape() -> None:
    x = torch.randn(2, 3, 256, dtype=torch.float16)
    trip = quantize_dequantize(x, QuantConfig.from_name("Q8_0"))
    assert trip.values.shape == x.shape and trip.values.dtype == torch.float32
    _assert_same(trip.values, quantize(x, QuantConfig.from_name("Q8_0")).dequantize(), "values")


def _int_configs() -> list[QuantConfig]:
    """The lab's integer configs over every layout class and zero-point convention: the
    fused encoder (``kernels.encode_int_values``, int8 codes) and int16's two passes."""
    cfgs = []
    for gran in (PerTensor(), PerChannel(0), PerChannel(1), PerGroup(32)):
        for bits in (2, 4, 8, 12):
            cfgs.append(QuantConfig(bits, Mode.SYMMETRIC, gran))
            for zp in ZeroPoint:
                cfgs.append(QuantConfig(bits, Mode.ASYMMETRIC, gran, zero_point=zp))
    return cfgs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cfg", _int_configs(), ids=lambda c: c.describe())
def test_integer_configs_round_trip(cfg: QuantConfig, backend: kernels.Backend) -> None:
    """Random values with signed zeros, one-signed rows (an offset far from 0) and
    subnormal rows, where a rounded ``-0`` or a zero point could show."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(64, 256, generator=g) * 3
    x[0, :8] = torch.tensor([0.5, -0.5, 1.5, 2.5, -0.0, 0.0, 1e-30, -1e-30])
    x[1] = -0.0
    x[2] = x[2].abs() + 5
    x[3] = -x[3].abs() - 5
    x[4] *= 1e-40
    _assert_round_trip(x, cfg, backend)


def _spy_codebook_values(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, per call, whether ``kernels.encode_codebook_values`` gave a result."""
    hits: list[bool] = []
    original = kernels.encode_codebook_values

    def spy(*args: object, **kwargs: object) -> object:
        out = original(*args, **kwargs)  # type: ignore[arg-type]
        hits.append(out is not None)
        return out

    monkeypatch.setattr(kernels, "encode_codebook_values", spy)
    return hits


@_NEEDS_COMPILED
@pytest.mark.parametrize("name", [*CODEBOOK_FUSED, "MXFP8_E4M3", "MXFP8_E5M2", "FP8_BLOCK"])
def test_codebook_presets_take_the_fused_pass_except_fp8_block(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hits = _spy_codebook_values(monkeypatch)
    x = torch.randn(128, 256, generator=torch.Generator().manual_seed(5))
    with kernels.use_backend(kernels.Backend.COMPILED, min_elements=1):
        quantize_dequantize(x, QuantConfig.from_name(name))
    if name in CODEBOOK_FUSED or name.startswith("MXFP8"):
        assert hits == [True]  # MXFP8: FP8 codes by rounding the float32 bits, one pass
    else:  # FP8_BLOCK: encode, then decode (its tiles may not ask at all)
        assert True not in hits


@_NEEDS_COMPILED
def test_mxfp4_fused_pass_on_a_hand_derived_block() -> None:
    """One MX block of 32 whose largest magnitude is 6 (E8M0 scale 2^0): the FP4 E2M1
    levels themselves, their midpoints (ties to the even code: 0.25 -> 0, 0.75 -> 1, 1.25
    -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4), values beyond 6 (none: 6 is the peak) and
    signed zeros (-0 keeps the sign code 8 and the value -0)."""
    levels = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    mids = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    row = levels + [-v for v in levels] + mids + [-v for v in mids] + [-0.0, 0.1]
    x = torch.tensor(row, dtype=torch.float32).reshape(1, 32).repeat(4, 1)
    want_mags = levels + levels + [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0] * 2 + [0.0, 0.0]
    want = torch.tensor(want_mags) * torch.tensor([1.0] * 8 + [-1.0] * 8 + [1.0] * 7
                                                  + [-1.0] * 7 + [-1.0, 1.0])
    cfg = QuantConfig.from_name("MXFP4")
    with kernels.use_backend(kernels.Backend.COMPILED, min_elements=1):
        trip = quantize_dequantize(x, cfg)
        ref = quantize(x, cfg)
    assert torch.equal(_bits(trip.values[0]), _bits(want))
    assert torch.equal(trip.quantized.codes, ref.codes)
    assert int(trip.quantized.codes[0, 8]) == 8 and int(trip.quantized.codes[0, 30]) == 8  # -0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 3),
    fill=st.lists(_FLOATS, min_size=1, max_size=64),
    scale=st.sampled_from([1.0, 1e-3, 1e3, 1e-38, 1e30]),
    name=st.sampled_from(CODEBOOK_FUSED),
    backend=st.sampled_from(_RUNNABLE),
)
def test_fused_codebook_formats_round_trip_on_any_values(
    rows: int, fill: list[float], scale: float, name: str, backend: kernels.Backend
) -> None:
    """Rows of 256 (NF4_DQ's super-block) tiled from drawn values: zeros of both signs,
    ties, subnormals and values near float32's largest, whose scales saturate."""
    n = rows * 256
    base = torch.tensor(fill, dtype=torch.float32).repeat(n // len(fill) + 1)[:n]
    g = torch.Generator().manual_seed(len(fill))
    x = (base[torch.randperm(n, generator=g)] * scale).reshape(rows, 256)
    _assert_round_trip(x, name, backend)


def _spy_llama_cpp_values(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, per call, whether ``encode_values_with`` gave a result (as ``llama_cpp`` and
    ``kquants``, IQ4's quantizer, call it), or the FP4 types' counted pass
    (``llama_cpp._counted_values_pass``) did."""
    hits: list[bool] = []

    def spying(original: Callable[..., object]) -> Callable[..., object]:
        def spy(*args: object, **kwargs: object) -> object:
            out = original(*args, **kwargs)
            hits.append(out is not None)
            return out

        return spy

    monkeypatch.setattr(llama_cpp, "encode_values_with", spying(kernels.encode_values_with))
    monkeypatch.setattr(kquants, "encode_values_with", spying(kernels.encode_values_with))
    monkeypatch.setattr(
        llama_cpp, "_counted_values_pass", spying(llama_cpp._counted_values_pass)
    )
    return hits


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", GGUF_COMPILED_FUSED)
def test_gguf_compiled_fused_presets_take_the_pass_only_compiled(
    name: str, backend: kernels.Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    hits = _spy_llama_cpp_values(monkeypatch)
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(5))
    with kernels.use_backend(backend, min_elements=1):
        trip = quantize_dequantize(x, QuantConfig.from_name(name))
    # eagerly the pass is not asked for (IQ4) or gives nothing (the others)
    assert hits == [True] if backend is kernels.Backend.COMPILED else True not in hits
    assert trip.values.shape == x.shape


def _gguf_values(qt: QuantizedTensor) -> torch.Tensor:
    """``gguf.quants.dequantize`` of ``qt.to_ggml_bytes()`` (llama.cpp's numpy port)."""
    import gguf
    import numpy as np

    raw = np.frombuffer(qt.to_ggml_bytes(), dtype=np.uint8).reshape(qt.codes.shape[0], -1)
    qtype = gguf.GGMLQuantizationType[qt.config.gguf_type]
    return torch.from_numpy(np.ascontiguousarray(gguf.quants.dequantize(raw, qtype)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_mxfp4_gguf_fused_pass_on_a_hand_derived_block(backend: kernels.Backend) -> None:
    """One block of 32 whose largest magnitude is 6: ``e = floor(log2 6) - 2 + 127 = 127``,
    a scale of 2^0, so the values are the FP4 E2M1 levels themselves. llama.cpp sends an
    exact midpoint towards zero (0.25 -> 0, 0.75 -> 0.5, 1.25 -> 1, 1.75 -> 1.5, 2.5 -> 2,
    3.5 -> 3, 5 -> 4; the lab's MXFP4 rounds 0.75, 1.75, 3.5 and 5 up, to the even code),
    and ``-0``, like a negative value rounding to zero, takes code 0 and the value ``+0``.
    The same values from ``gguf.quants.dequantize`` of the block's bytes."""
    levels = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    mids = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    row = levels + [-v for v in levels] + mids + [-v for v in mids] + [-0.0, -0.1]
    x = torch.tensor(row, dtype=torch.float32).reshape(1, 32).repeat(4, 8)
    mags = levels + levels + [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0] * 2 + [0.0, 0.0]
    signs = [1.0] * 8 + [-1.0] * 8 + [1.0] * 7 + [-1.0] * 7 + [1.0, 1.0]
    # a negative that rounds to zero is +0 (code 0), so is -0 itself
    want = torch.tensor([m * sg if m else 0.0 for m, sg in zip(mags, signs, strict=True)])
    cfg = QuantConfig.from_name("MXFP4_GGUF")
    with kernels.use_backend(backend, min_elements=1):
        trip = quantize_dequantize(x, cfg)
        ref = quantize(x, cfg)
    assert torch.equal(_bits(trip.values[0, :32]), _bits(want))
    assert torch.equal(trip.quantized.codes, ref.codes)
    assert int(trip.quantized.codes[0, 8]) == 0 and int(trip.quantized.codes[0, 30]) == 0
    assert torch.equal(_bits(_gguf_values(trip.quantized)), _bits(trip.values))


@pytest.mark.parametrize("backend", BACKENDS)
def test_q1_0_fused_pass_on_a_hand_derived_block(backend: kernels.Backend) -> None:
    """One block of 128: ``d = fp16(sum |x| / 128)``; a set bit (``+d``) for ``x >= 0``,
    ``-0`` and ``+0`` included, ``-d`` below. 63 values of magnitude 1, 63 of 3 and two
    zeros: ``sum |x| = 252`` (exact in any order), ``d = 252 / 128 = 1.96875``, exact in
    fp16 (``1 + 31/32``)."""
    row = [1.0, -1.0] * 16 + [3.0, -3.0] * 16 + [1.0, 3.0] * 31 + [0.0, -0.0]
    x = torch.tensor(row, dtype=torch.float32).reshape(1, 128).repeat(2, 2)
    d = (32 + 96 + 31 * 4) / 128
    want = torch.tensor([d if v >= 0 else -d for v in row])
    cfg = QuantConfig.from_name("Q1_0")
    with kernels.use_backend(backend, min_elements=1):
        trip = quantize_dequantize(x, cfg)
        ref = quantize(x, cfg)
    assert torch.equal(_bits(trip.values[0, :128]), _bits(want))
    _assert_same(trip.quantized.codes, ref.codes, "codes")
    _assert_same(trip.values, ref.dequantize(), "values")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 3),
    fill=st.lists(_FLOATS, min_size=1, max_size=64),
    scale=st.sampled_from([1.0, 1e-3, 1e3, 1e-38, 1e30]),
    name=st.sampled_from(GGUF_COMPILED_FUSED),
    backend=st.sampled_from(_RUNNABLE),
)
def test_gguf_compiled_fused_round_trip_on_any_values(
    rows: int, fill: list[float], scale: float, name: str, backend: kernels.Backend
) -> None:
    """Rows of 256 tiled from drawn values (signed zeros, llama.cpp's ties, subnormals,
    float32's largest, whose FP4 values saturate): as quantize then dequantize, and, for
    the types the ``gguf`` package decodes, as its decode of the bytes."""
    n = rows * 256
    base = torch.tensor(fill, dtype=torch.float32).repeat(n // len(fill) + 1)[:n]
    g = torch.Generator().manual_seed(len(fill))
    x = (base[torch.randperm(n, generator=g)] * scale).reshape(rows, 256)
    _assert_round_trip(x, name, backend)
    # the package names Q1_0 but has no numpy decode for it; beyond float32 raises
    if name != "Q1_0" and bool(x.isfinite().all()):
        with kernels.use_backend(backend, min_elements=1):
            trip = quantize_dequantize(x, QuantConfig.from_name(name))
        assert torch.equal(_bits(_gguf_values(trip.quantized)), _bits(trip.values))


@_NEEDS_COMPILED
@pytest.mark.parametrize(
    "name", ["MXFP4", "MXFP6_E2M3", "MXFP8_E4M3", "MXINT8", "NVFP4", "MXFP4_GGUF", "NVFP4_GGUF"]
)
def test_compiled_scale_fits_equal_the_eager_ones(name: str) -> None:
    """The E8M0 and NVFP4 E4M3 scale fits run as one compiled pass over the blocks'
    ranges (``formats.scales``; NVFP4_GGUF's UE4M3 with its blocks' maxima,
    ``llama_cpp._nvfp4_scale_pass``): the same scales, stored codes and tensor scale as the
    eager operations, on the corners (zero blocks, subnormals, float32's largest) and on
    values whose scaled maxima are E4M3 midpoints (ties to even)."""
    x = _corners(torch.Generator().manual_seed(9))
    mids = torch.arange(1, 120, dtype=torch.float32)  # E4M3 ties: (k + 0.5) 2^e for NVFP4
    x[10, : len(mids) * 4 : 4] = (mids + 0.5) * 6.0 / 64
    cfg = QuantConfig.from_name(name)
    with kernels.use_backend(kernels.Backend.COMPILED, min_elements=1):
        fast = quantize_dequantize(x, cfg)
    with kernels.use_backend(kernels.Backend.EAGER):
        ref = quantize(x, cfg)
        ref_values = ref.dequantize()
    for field in ("codes", "scale", "zero_point"):
        _assert_same(getattr(fast.quantized, field), getattr(ref, field), f"{name} {field}")
    for field in ("codes", "super_scale"):
        _assert_same(
            getattr(fast.quantized.stored, field), getattr(ref.stored, field), f"{field}"
        )
    _assert_same(fast.values, ref_values, f"{name} values")


@_NEEDS_COMPILED
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fill=st.lists(
        st.one_of(
            _FLOATS,
            st.sampled_from([0.25, 0.75, 1.75, 2.5, 3.5, 5.0, 7.0, float("inf"), float("nan")]),
        ),
        min_size=1,
        max_size=64,
    ),
    scale=st.sampled_from([1.0, 0.5, 2.0**-126, 1e-3, 3.0, 2.0**100]),
    inverse=st.booleans(),
)
def test_fp4_rounding_pass_equals_counting_midpoints(
    fill: list[float], scale: float, inverse: bool
) -> None:
    """FP4's fused pass by rounding (``bodies._fp4_rounding_values_body``) gives the
    codes and values of the midpoint-counting encoder and the FP4 decode, bit for bit,
    on any floats: exact midpoints (ties to the even code), beyond 6, infinities, NaN,
    signed zeros, subnormals; dividing by a scale or multiplying by a reciprocal."""
    from quant_core.config import Format
    from quant_core.formats import codebook_for
    from quant_core.kernels import passes

    n = 64 * 32
    base = torch.tensor(fill, dtype=torch.float32).repeat(n // len(fill) + 1)[:n]
    blocks = (base * torch.linspace(0.1, 8.0, n)).reshape(64, 32)
    s = torch.full((64, 1), scale)
    stored = torch.full((64, 1), 0.75)
    cb = codebook_for(Format.FP4_E2M1)
    inv = s.reciprocal() if inverse else None
    got = {}
    with kernels.use_backend(kernels.Backend.COMPILED, min_elements=1):
        try:
            for rounding in (True, False):
                passes._FP4_ROUNDING = rounding
                got[rounding] = kernels.encode_codebook_values(blocks, s, cb, inv, stored)
        finally:
            passes._FP4_ROUNDING = True
    assert got[True] is not None and got[False] is not None
    _assert_same(got[True][0], got[False][0], "codes")
    _assert_same(got[True][1], got[False][1], "values")
