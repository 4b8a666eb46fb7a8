"""quant_core.mixed.sums: the table's one-pass sums of squares against the formula they
replace (float32 squares, float64 column sums), and ``measure_tensor`` compiled against eager.

Tolerance (``sums``' docstring): ``n`` non-negative float32 terms summed in any order are
within ``(n - 1) 2^-24`` of their exact sum; rounding ``a`` to float32 and the one more
product of the weighted sum add ``2 * 2^-24``; the reference's float64 sums and the float64
total of the row sums add under ``numel * 2^-53``. So ``rel = (in + 2) 2^-24 + numel 2^-53``.
"""

from __future__ import annotations

import math

import pytest
import torch

from quant_core import (
    Backend,
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    Rounding,
    ScaleDtype,
    ZeroPoint,
    chunks,
    kernels,
    quantize,
    use_backend,
)
from quant_core.formats import codebook_for
from quant_core.mixed import LAB_CANDIDATES, Candidate, candidate_named, measure_tensor
from quant_core.mixed import sums as sums_module
from quant_core.mixed.sums import (
    RowExtremes,
    codebook_error_sums,
    energy_sums,
    error_sums,
    scheme_error_sums,
)

FORCED_EAGER = kernels.backend_from_env() is Backend.EAGER
needs_compiled = pytest.mark.skipif(FORCED_EAGER, reason="QLAB_COMPILE=0 forces the eager path")

SHAPES = [(96, 1024), (33, 1536)]  # above MIN_ELEMENTS; an odd number of rows


def rel_tolerance(shape: tuple[int, int]) -> float:
    return (shape[1] + 2) * 2.0**-24 + shape[0] * shape[1] * 2.0**-53


def slow_sums(
    w: torch.Tensor, w_hat: torch.Tensor | None, a: torch.Tensor | None
) -> tuple[float, float]:
    """The table's formula before ``sums``: float32 squares, float64 column sums."""
    d = w if w_hat is None else w - w_hat
    col = d.square().sum(dim=0, dtype=torch.float64)
    total = float(col.sum())
    return total, total if a is None else float(col @ a.to(torch.float64))


@pytest.fixture
def compiled_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail if the reference runs: these tensors must take the compiled path."""

    def refuse(*args: object) -> None:
        raise AssertionError("the reference ran where the compiled path should")

    monkeypatch.setattr(sums_module, "_reference", refuse)


@needs_compiled
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_compiled_sums_match_the_float64_column_sums(
    gen: torch.Generator, compiled_only: None, shape: tuple[int, int], weighted: bool
) -> None:
    w = torch.randn(shape, generator=gen) * 0.02
    w_hat = quantize(w, QuantConfig(bits=3)).dequantize()
    a = torch.rand(shape[1], generator=gen, dtype=torch.float64) if weighted else None
    rel = rel_tolerance(shape)
    with use_backend(Backend.COMPILED):
        got_error = error_sums(w, w_hat, a)
        got_energy = energy_sums(w, a)
    for got, want in ((got_error, slow_sums(w, w_hat, a)), (got_energy, slow_sums(w, None, a))):
        assert got[0] == pytest.approx(want[0], rel=rel)
        assert got[1] == pytest.approx(want[1], rel=rel)
        if not weighted:
            assert got[0] == got[1]


@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_the_eager_path_is_the_float64_formula(gen: torch.Generator, weighted: bool) -> None:
    # 200 rows: more than one piece of the reference's 64 rows, and a partial last piece
    w = torch.randn(200, 96, generator=gen)
    w_hat = w + 0.01 * torch.randn(200, 96, generator=gen)
    a = torch.rand(96, generator=gen, dtype=torch.float64) if weighted else None
    with use_backend(Backend.EAGER):
        got = error_sums(w, w_hat, a), energy_sums(w, a)
    # column sums of 64-row pieces in float64: only the float64 order differs
    want = slow_sums(w, w_hat, a), slow_sums(w, None, a)
    for g, e in zip(got, want, strict=True):
        assert g == pytest.approx(e, rel=200 * 96 * 2.0**-53)


@needs_compiled
def test_a_float32_row_sum_that_overflows_is_recomputed_in_float64() -> None:
    # 1e19² = 1e38 is a finite float32, but 1024 of them are not: float64 sums them
    w = torch.full((64, 1024), 1e19)
    with use_backend(Backend.COMPILED):
        plain, _ = energy_sums(w)
    assert math.isfinite(plain) and plain == pytest.approx(64 * 1024 * float(w[0, 0]) ** 2)
    w[3, 5] = math.inf
    (row,) = measure_tensor("t", w, [candidate_named("int8_pc")])
    assert row.skipped == f"the weight holds 0 NaN and 1 Inf values of {w.numel():,}"


def test_bad_shapes_are_named() -> None:
    with pytest.raises(ValueError, match=r"w_hat must be float32 of w's shape \(2, 4\)"):
        error_sums(torch.ones(2, 4), torch.ones(4, 2))
    with pytest.raises(ValueError, match=r"importance must have shape \[4\]"):
        energy_sums(torch.ones(2, 4), torch.ones(3))
    with pytest.raises(TypeError, match="2-D float32"):
        energy_sums(torch.ones(2, 4, dtype=torch.float64))


@needs_compiled
def test_measure_tensor_compiled_matches_the_eager_table(gen: torch.Generator) -> None:
    """The whole row, compiled kernels against the eager path (the slow path the table had):
    quantize is bit for bit, so only the sums' order differs."""
    shape = (96, 1024)
    w = (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)
    a = torch.rand(shape[1], generator=gen, dtype=torch.float64)
    names = ("nf4_g64", "fp4_g32", "fp8_pc")
    codebooks = tuple(Candidate(n, c) for n, c in zip(names, CODEBOOKS, strict=True))
    cands = (*LAB_CANDIDATES, candidate_named("Q4_K"), *codebooks)
    with use_backend(Backend.COMPILED):
        fast = measure_tensor("t", w, cands, importance=a)
    with use_backend(Backend.EAGER):
        slow = measure_tensor("t", w, cands, importance=a)
    rel = rel_tolerance(shape)
    for f, s in zip(fast, slow, strict=True):
        assert f.ok and s.ok and f.scheme == s.scheme
        assert f.total_bits == s.total_bits and f.stored_bits == s.stored_bits == 16 * w.numel()
        assert f.mse == pytest.approx(s.mse, rel=rel)
        assert f.weighted_error == pytest.approx(s.weighted_error, rel=rel)
        assert f.energy == pytest.approx(s.energy, rel=rel)
        # sqnr_db = 10 log10(E / sse): each relative error moves it by 10/ln(10) * rel
        assert f.sqnr_db == pytest.approx(s.sqnr_db, abs=2 * 10 / math.log(10) * rel)


CODEBOOKS = [
    QuantConfig(format=Format.NF4, granularity=PerGroup(64)),
    QuantConfig(format=Format.FP4_E2M1, granularity=PerGroup(32), scale_dtype=ScaleDtype.FP16),
    QuantConfig(format=Format.FP8_E4M3, granularity=PerChannel(0)),
]


@needs_compiled
@pytest.mark.parametrize("cfg", CODEBOOKS, ids=lambda c: c.describe())
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_codebook_sums_decode_as_dequantize_does(
    gen: torch.Generator, cfg: QuantConfig, weighted: bool
) -> None:
    shape = (96, 1024)
    w = torch.randn(shape, generator=gen) * 0.02
    a = torch.rand(shape[1], generator=gen, dtype=torch.float64) if weighted else None
    with use_backend(Backend.COMPILED):
        qt = quantize(w, cfg)
        got = codebook_error_sums(w, qt, a)
    assert got is not None
    want = slow_sums(w, qt.dequantize(), a)
    rel = rel_tolerance(shape)
    assert got[0] == pytest.approx(want[0], rel=rel)
    assert got[1] == pytest.approx(want[1], rel=rel)


def test_codebook_sums_leave_what_they_do_not_fit_to_dequantize(gen: torch.Generator) -> None:
    w = torch.randn(96, 1024, generator=gen)
    for cfg in (
        QuantConfig(bits=4, granularity=PerGroup(64)),  # integer codes
        QuantConfig(format=Format.FP8_E4M3, granularity=PerChannel(1)),  # blocks are columns
        QuantConfig(format=Format.NF4, granularity=PerTensor()),  # one block over all rows
    ):
        assert codebook_error_sums(w, quantize(w, cfg)) is None, cfg.describe()
    with use_backend(Backend.EAGER):
        assert codebook_error_sums(w, quantize(w, CODEBOOKS[0])) is None


FUSED = [
    QuantConfig(bits=8, granularity=PerChannel(0), scale_dtype=ScaleDtype.FP16),
    QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(128)),
    QuantConfig(bits=3, mode=Mode.ASYMMETRIC, granularity=PerGroup(64),
                zero_point=ZeroPoint.FLOAT_MIN),
    QuantConfig(bits=2, mode=Mode.ASYMMETRIC, granularity=PerGroup(32),
                zero_point=ZeroPoint.COURSE_CLAMP),
    QuantConfig(bits=12, granularity=PerGroup(256)),  # int16 codes
    *CODEBOOKS,
    QuantConfig(format=Format.FP8_E5M2, granularity=PerGroup(128)),
    QuantConfig(format=Format.FP6_E2M3, granularity=PerGroup(32)),
    QuantConfig(format=Format.IQ4_NL, granularity=PerGroup(32)),
    QuantConfig(format=Format.TERNARY, granularity=PerGroup(64)),
]  # fmt: skip


@needs_compiled
@pytest.mark.parametrize("cfg", FUSED, ids=lambda c: c.describe())
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_the_fused_pass_is_quantize_dequantize_and_the_sums(
    gen: torch.Generator, compiled_only: None, cfg: QuantConfig, weighted: bool
) -> None:
    """One pass without codes or Ŵ: the same D as ``quantize(...).dequantize()`` (so the
    float64 formula's sums within the float32 bound), on extremes shared by lengths."""
    shape = (33, 1536)
    w = torch.randn(shape, generator=gen) * 0.02
    w[3, :64] = 0.0  # a block of zeros: +0 extremes, s = 1
    a = torch.rand(shape[1], generator=gen, dtype=torch.float64) if weighted else None
    extremes = RowExtremes(w)
    extremes.prepare([32, 64, 128, 256, 1536])
    with use_backend(Backend.COMPILED):
        got = scheme_error_sums(w, cfg, a, extremes)
        want = slow_sums(w, quantize(w, cfg).dequantize(), a)
    assert got is not None
    rel = rel_tolerance(shape)
    assert got[0] == pytest.approx(want[0], rel=rel)
    assert got[1] == pytest.approx(want[1], rel=rel)
    if not weighted:
        assert got[0] == got[1]


def test_shared_extremes_are_those_of_each_layout(gen: torch.Generator) -> None:
    w = torch.randn(8, 768, generator=gen)
    w[1, :96] = 0.0
    w[2, :32] = -0.0
    extremes = RowExtremes(w)
    extremes.prepare([32, 96, 768])
    for block_len in (32, 96, 192, 768):
        rng = extremes.get(block_len)
        lo, hi = rng.lo, rng.hi
        blocks = w.reshape(-1, block_len)
        with use_backend(Backend.EAGER):
            want = chunks.block_extremes(blocks)
        assert torch.equal(lo.view(torch.int32), want[0].view(torch.int32)), block_len
        assert torch.equal(hi.view(torch.int32), want[1].view(torch.int32)), block_len


def test_the_fused_pass_leaves_what_it_does_not_fit(gen: torch.Generator) -> None:
    w = torch.randn(96, 1024, generator=gen)
    extremes = RowExtremes(w)
    for cfg in (
        QuantConfig(format=Format.FP8_E4M3, granularity=PerChannel(1)),  # blocks are columns
        QuantConfig(format=Format.NF4, granularity=PerTensor()),  # one block over all rows
        QuantConfig(bits=4, rounding=Rounding.STOCHASTIC),
        QuantConfig.from_name("Q4_K"),  # llama.cpp's recipe
        QuantConfig.from_name("MXFP4"),  # two-level scales
    ):
        assert scheme_error_sums(w, cfg, None, extremes) is None, cfg.describe()
    with use_backend(Backend.EAGER):
        assert scheme_error_sums(w, FUSED[0], None, extremes) is None
    with pytest.raises(ValueError, match="group size"):
        scheme_error_sums(w, QuantConfig(granularity=PerGroup(100)), None, extremes)


def test_the_kernel_entry_points_leave_the_eager_path_to_the_caller(gen: torch.Generator) -> None:
    """``kernels``' table passes return ``None`` (the caller's reference runs) on the eager
    path, and ``runs_compiled`` says so before any input is prepared."""
    w = torch.randn(96, 1024, generator=gen)
    a = torch.rand(1024, generator=gen)
    x = w.view(96, 32, 32)
    q = torch.zeros(x.shape, dtype=torch.uint8)
    s = torch.ones(96 * 32)
    nf4 = codebook_for(Format.NF4)
    with use_backend(Backend.EAGER):
        assert not kernels.runs_compiled(w)
        assert kernels.row_square_sums(w, w, a) is None
        assert kernels.codebook_square_sums(x, q, s, nf4.decode_table, a) is None
        assert kernels.fused_int_block_sums(x, s, s, None, -8, 7, has_zero_point=False) is None
        assert kernels.fused_codebook_block_sums(x, s, nf4, None, s, a) is None


def test_decodes_without_gather_names_the_tables_the_fused_pass_takes() -> None:
    for fmt in (Format.NF4, Format.FP4_E2M1, Format.FP6_E2M3, Format.FP8_E4M3, Format.IQ4_NL):
        assert kernels.decodes_without_gather(codebook_for(fmt).decode_table), fmt
    assert not kernels.decodes_without_gather(torch.linspace(-1, 1, 5))  # not a power of 2
    assert not kernels.decodes_without_gather(torch.linspace(-1, 1, 128))  # above 64, no float
