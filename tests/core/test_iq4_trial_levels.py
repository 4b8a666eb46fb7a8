"""IQ4_NL / IQ4_XS's scale search without a search per trial (``kquants._iq4_trial_levels``
and ``_iq4_trial_sums``): the same sums, bit for bit, as evaluating ``best_index_int8`` at
every trial, compiled and eager; and the two facts the shortcut rests on."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from quant_core import Backend, QuantConfig, kernels, quantize, use_backend
from quant_core.formats import kquants as K
from quant_core.formats.codebooks import IQ4_NL_VALUES
from quant_core.kernels import switch

FORCED_EAGER = kernels.backend_from_env() is Backend.EAGER
needs_compiled = pytest.mark.skipif(FORCED_EAGER, reason="QLAB_COMPILE=0 forces the eager path")


def _c_best_index(a: float) -> int:
    """``best_index_int8(16, kvalues_iq4nl, a)`` as the C code runs it, in float32."""
    v = IQ4_NL_VALUES
    a = np.float32(a)
    if a <= v[0]:
        return 0
    if a >= v[-1]:
        return len(v) - 1
    ml, mu = 0, len(v) - 1
    while mu - ml > 1:
        mav = (ml + mu) // 2
        if a < v[mav]:
            mu = mav
        else:
            ml = mav
    below, above = np.float32(a - np.float32(v[mu - 1])), np.float32(np.float32(v[mu]) - a)
    return mu - 1 if below < above else mu


def test_best_index_is_the_count_of_midpoints_at_or_below() -> None:
    # every float32 within 2^12 steps of each midpoint and level, both signs of zero, ends
    probes = [0.0, -0.0, -200.0, 200.0, 1e-30, -1e-30]
    for c in (*K._IQ4_MIDS, *IQ4_NL_VALUES):
        bits = np.array([c], dtype=np.float32).view(np.int32)[0]
        span = np.arange(-(1 << 12), 1 << 12, dtype=np.int64)
        probes += np.array(bits + span, dtype=np.int32).view(np.float32).tolist()
    a = torch.tensor(probes, dtype=torch.float32)
    counted = sum((a >= m).to(torch.int64) for m in K._IQ4_MIDS)
    eager = K._iq4_nearest(a)[0].to(torch.int64)  # the bracket search, as before
    assert torch.equal(counted, eager)
    for value in probes[:: 97] + [float(m) for m in K._IQ4_MIDS]:
        assert _c_best_index(value) == sum(value >= m for m in K._IQ4_MIDS), value


def test_no_two_midpoints_fit_between_the_trials_ends() -> None:
    # a_7 / a_-7 = 120 / 134: a ratio of two same-signed midpoints that close would let a
    # value's level move two steps across the trials
    mids = K._IQ4_MIDS
    closest = max(
        min(abs(a), abs(b)) / max(abs(a), abs(b))
        for a, b in itertools.pairwise(mids)
        if a * b > 0
    )
    assert closest < 120 / 134 - 0.05


def _reference_sums(x: torch.Tensor, w: torch.Tensor, inv: torch.Tensor):
    """Every trial's sums with ``best_index_int8`` evaluated at every trial (the C loop)."""
    sumqx = torch.zeros_like(inv)
    sumq2 = torch.zeros_like(inv)
    for i in range(x.shape[0]):
        q = K._iq4_nearest(inv * x[i])[1]
        wq = w[i] * q
        sumqx = sumqx + wq * x[i]
        sumq2 = sumq2 + wq * q
    return sumqx, sumq2


def _inputs(x: torch.Tensor, w: torch.Tensor | None = None):
    """``quantize_row_iq4_nl_impl``'s trial ``id``s for blocks ``x`` ``[32, B]``."""
    _, _, mx = K._first_absmax_rows(x)
    first = K._div_const(-mx, float(IQ4_NL_VALUES[0])).reciprocal()
    ks = torch.tensor([float(k + IQ4_NL_VALUES[0]) for k in range(-7, 8)]).unsqueeze(1)
    return (x * x if w is None else w), torch.cat([first.unsqueeze(0), ks / mx])


def _blocks() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(11)
    n = 2048
    normal = torch.randn(32, n, generator=gen) * torch.randn(1, n, generator=gen).exp()
    # values whose trial products land exactly on midpoints: max = 134 so id_-7 x = -x
    ties = torch.tensor(K._IQ4_MIDS + tuple(-m for m in K._IQ4_MIDS) + (0.0, 134.0))
    tie_blocks = ties.repeat(64, 1)[:, :32].t().contiguous()
    tie_blocks[0] = 134.0  # the block's max, first
    zeros = torch.zeros(32, 64)
    zeros[5, 3] = 1e-16  # below GROUP_MAX_EPS
    sub = torch.randn(32, 64, generator=gen) * 1e-40
    sub[7] = 2e-38
    huge = torch.randn(32, 64, generator=gen) * 1e37
    huge[0] = -3.4e38
    one_big = torch.randn(32, 64, generator=gen) * 1e-3
    one_big[9] = 50.0
    eighths = torch.randint(-8, 8, (32, 256), generator=gen) * 0.125
    return {
        "normal": normal,
        "ties": tie_blocks,
        "zeros": zeros,
        "subnormal": sub,
        "huge": huge,
        "one-big": one_big,
        "eighths": eighths.to(torch.float32),
    }


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=needs_compiled)])
@pytest.mark.parametrize("name", list(_blocks()))
def test_trial_sums_equal_the_search_at_every_trial(name: str, compiled: bool) -> None:
    x = _blocks()[name]
    w, inv = _inputs(x)
    ref = _reference_sums(x, w, inv)

    def run(fn, *args):  # type: ignore[no-untyped-def]
        if compiled:
            out = switch._run(fn, "kquants_test", *args)
            assert out is not switch._FAILED
            return out
        return fn(*args)

    xb, wb, inv_t = x.t().contiguous(), w.t().contiguous(), inv.t().contiguous()
    levels = run(K._iq4_trial_levels, xb, inv_t[:, :1], inv_t[:, 1:2], inv_t[:, -1:])
    sums = run(K._iq4_trial_sums, xb, wb, *levels, inv_t)
    for got, want in zip((sums[0].t(), sums[1].t()), ref, strict=True):
        assert torch.equal(got.contiguous().view(torch.int32), want.view(torch.int32))


@needs_compiled
@pytest.mark.parametrize("name", ["IQ4_NL", "IQ4_XS"])
def test_compiled_iq4_bytes_equal_eager(name: str) -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(64, 1024, generator=gen) * torch.randn(64, 1, generator=gen).exp()
    x[0, :256] = 0
    x[1, :32] = torch.tensor(K._IQ4_MIDS + (0.0,) * 17)
    cfg = QuantConfig.from_name(name)
    with use_backend(Backend.COMPILED, min_elements=1):
        fast = quantize(x, cfg).to_ggml_bytes()
    with use_backend(Backend.EAGER):
        ref = quantize(x, cfg).to_ggml_bytes()
    assert fast == ref


@pytest.fixture(scope="module")
def c_quantizer(tmp_path_factory):  # type: ignore[no-untyped-def]
    from tests.tools import llama_cpp_reference as ref

    why = ref.available()
    if why:
        pytest.skip(f"llama.cpp's C reference cannot be built here: {why}")
    return ref.CQuantizer.load(ref.build(ref.DEFAULT_SOURCE, tmp_path_factory.mktemp("ggml")))


@pytest.mark.parametrize("backend", [Backend.EAGER, Backend.COMPILED], ids=["eager", "compiled"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "importance"])
@pytest.mark.parametrize("name", ["IQ4_NL", "IQ4_XS"])
def test_bytes_equal_llama_cpp_on_both_paths(c_quantizer, name, weighted, backend) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((96, 512)) * np.exp(rng.uniform(-8, 8, (96, 1)))).astype(np.float32)
    x[0, :64] = 0
    x[1, :15] = np.array(K._IQ4_MIDS, dtype=np.float32)
    imp = rng.exponential(1.0, 512).astype(np.float32) if weighted else None
    with use_backend(backend, min_elements=1):
        qt = quantize(
            torch.from_numpy(x),
            QuantConfig.from_name(name),
            importance=None if imp is None else torch.from_numpy(imp),
        )
    assert qt.to_ggml_bytes() == c_quantizer.quantize(name, x, imp)
