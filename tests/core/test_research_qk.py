"""The q_k variants of research code, in DoReFa and the min-max-levels quantizer, and the
per-step data a teaching panel shows."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from quant_core import (
    QkVariant,
    dorefa_quantize_weights,
    minmax_levels_quantize,
    q_k,
    q_k_codes,
    q_k_levels,
)

U = torch.tensor([0.0, 0.2, 0.5, 0.9, 1.0])


@pytest.mark.parametrize(
    ("variant", "codes", "values"),
    [
        # round(3u) = round(0, 0.6, 1.5, 2.7, 3): 1.5 -> 2 (even); c / 3
        (QkVariant.ORIGINAL, [0, 1, 2, 3, 3], [0.0, 1 / 3, 2 / 3, 1.0, 1.0]),
        # AdaBits: floor(4u).clamp(max=3) = floor(0, 0.8, 2, 3.6, 4 -> 3); c / 4, so the
        # levels stop at 1 - 2^-2 = 0.75 (dividing by 3 gave [0, 0, .667, 1, 1])
        (QkVariant.MODIFIED, [0, 0, 2, 3, 3], [0.0, 0.0, 0.5, 0.75, 0.75]),
        # same codes, (c + 1/2) / 4
        (QkVariant.CENTERED, [0, 0, 2, 3, 3], [1 / 8, 1 / 8, 5 / 8, 7 / 8, 7 / 8]),
    ],
    ids=["original", "modified", "centered"],
)
def test_q_k_by_hand(variant, codes, values):
    assert q_k_codes(U, 2, variant).tolist() == codes
    torch.testing.assert_close(q_k(U, 2, variant), torch.tensor(values), rtol=0, atol=0)
    assert q_k(U, 2, variant.value).tolist() == q_k(U, 2, variant).tolist()  # str accepted


def test_q_k_levels():
    torch.testing.assert_close(q_k_levels(2), torch.tensor([0.0, 1 / 3, 2 / 3, 1.0]))
    assert q_k_levels(2, "modified").tolist() == [0.0, 0.25, 0.5, 0.75]  # c / 2^k
    assert q_k_levels(3, "modified").tolist() == [c / 8 for c in range(8)]
    assert q_k_levels(2, "centered").tolist() == [0.125, 0.375, 0.625, 0.875]
    assert q_k_levels(1, "centered").tolist() == [0.25, 0.75]


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_floor_variants_use_every_code_equally_and_original_halves_the_ends(k):
    n_codes = 1 << k
    u = (torch.arange(n_codes * 64, dtype=torch.float32) + 0.5) / (n_codes * 64)  # uniform
    for variant in (QkVariant.MODIFIED, QkVariant.CENTERED):
        counts = torch.bincount(q_k_codes(u, k, variant), minlength=n_codes)
        assert counts.tolist() == [64] * n_codes
    counts = torch.bincount(q_k_codes(u, k), minlength=n_codes).tolist()
    if k > 1:  # the end bins are half as wide: [0, 1/(2n)) and [1 - 1/(2n), 1]
        inner = n_codes * 64 / (n_codes - 1)
        assert abs(counts[0] - inner / 2) <= 1 and abs(counts[-1] - inner / 2) <= 1
        assert all(abs(c - inner) <= 1 for c in counts[1:-1])


@settings(max_examples=60, deadline=None)
@given(
    u=st.lists(st.floats(0.0, 1.0, allow_subnormal=False), min_size=1, max_size=40),
    k=st.integers(1, 16),
    variant=st.sampled_from(list(QkVariant)),
)
def test_q_k_error_bounds(u, k, variant):
    x = torch.tensor(u, dtype=torch.float32)
    codes = q_k_codes(x, k, variant)
    assert int(codes.min()) >= 0 and int(codes.max()) <= (1 << k) - 1
    err = (q_k(x, k, variant).double() - x.double()).abs().max().item()
    n_codes = 1 << k
    # half a step for round-to-nearest and for bin centres; a whole bin for floor-then-rescale
    bound = {
        QkVariant.ORIGINAL: 0.5 / (n_codes - 1),
        QkVariant.CENTERED: 0.5 / n_codes,
        QkVariant.MODIFIED: 1.0 / n_codes,
    }[variant]
    assert err <= bound * (1 + 1e-6) + 1e-7  # float32 levels and products


def test_dorefa_variants_by_hand():
    # u = tanh(w) / (2 tanh(1)) + 1/2 = 0.5, 0.80339, 0, 1 (see test_dorefa_by_hand)
    w = torch.tensor([0.0, 0.5, -1.0, 1.0])
    mod = dorefa_quantize_weights(w, 2, variant="modified")
    assert mod.codes.tolist() == [2, 3, 0, 3]  # floor(2, 3.21, 0, 4 -> 3)
    # q_k = c / 4 = 0.5, 0.75, 0, 0.75; w_q = 2 q_k - 1
    assert mod.dequantized.tolist() == [0.0, 0.5, -1.0, 0.5]
    assert mod.levels.tolist() == [-1.0, -0.5, 0.0, 0.5]  # a level at 0, none at 1
    cen = dorefa_quantize_weights(w, 2, variant=QkVariant.CENTERED)
    assert cen.codes.tolist() == [2, 3, 0, 3]
    assert cen.dequantized.tolist() == [0.25, 0.75, -0.75, 0.75]  # (2c + 1)/4 - 1
    assert cen.levels.tolist() == [-0.75, -0.25, 0.25, 0.75]  # no level at 0
    orig = dorefa_quantize_weights(w, 2)
    assert orig.variant is QkVariant.ORIGINAL and orig.codes.tolist() == [2, 2, 0, 3]


@pytest.mark.parametrize("variant", list(QkVariant), ids=lambda v: v.value)
@pytest.mark.parametrize("rescale", [False, True], ids=["plain", "rescaled"])
def test_dorefa_steps_are_the_intermediates(variant, rescale, gen):
    w = torch.randn(6, 10, generator=gen) * 0.7
    r = dorefa_quantize_weights(w, 3, rescale=rescale, variant=variant)
    t = torch.tanh(w)
    assert torch.equal(r.tanh, t) and r.tanh_max == float(t.abs().max())
    torch.testing.assert_close(r.normalized, t / (2 * t.abs().max()) + 0.5)
    assert float(r.normalized.min()) >= 0.0 and float(r.normalized.max()) <= 1.0
    assert torch.equal(r.unit, q_k(r.normalized, 3, variant))
    assert torch.equal(r.dequantized, (2 * r.unit - 1) * r.scale)
    assert torch.equal(r.levels[r.codes], r.dequantized)
    assert r.levels.shape == (8,) and bool((r.levels.diff() > 0).all())
    names = [s.name for s in r.steps]
    assert names == ["normalise", "q_k", "rescale"]
    normalise, qk, rescale_step = r.steps
    assert "tanh" in normalise.formula and torch.equal(normalise.values, r.normalized)
    assert qk.formula == variant.formula and torch.equal(qk.values, r.unit)
    assert torch.equal(rescale_step.values, r.dequantized)
    assert ("max|w|" in rescale_step.formula) == rescale
    assert r.scale == (float(w.abs().max()) if rescale else 1.0)


def test_tanh_makes_the_grid_finer_near_zero_than_clipping_would():
    # The DoReFa grid is uniform in tanh(w): mapped back to w (atanh) its steps grow
    # toward the tails, unlike the uniform grid of min-max levels on the same range.
    w = torch.linspace(-2.0, 2.0, 101)
    r = dorefa_quantize_weights(w, 3)
    t_max = r.tanh_max
    # the w that each level's u corresponds to: u = tanh(w)/(2 t_max) + 1/2
    unit = q_k_levels(3)
    w_of_level = torch.atanh(((unit - 0.5) * 2 * t_max).clamp(-0.999999, 0.999999))
    steps = w_of_level.diff()
    assert float(steps[3]) < float(steps[0])  # the middle step is finer than the end one
    uniform = minmax_levels_quantize(w, 3).levels.diff()
    torch.testing.assert_close(uniform, torch.full((7,), 4.0 / 7), rtol=1e-5, atol=0)


@pytest.mark.parametrize(
    ("variant", "codes", "levels"),
    [
        (QkVariant.ORIGINAL, [0, 1, 2, 3], [0.0, 1.0, 2.0, 3.0]),
        # u = 0, 1/3, 2/3, 1: floor(4u) = 0, 1, 2, 4 -> 3; levels 0 + c * 3/4
        (QkVariant.MODIFIED, [0, 1, 2, 3], [0.0, 0.75, 1.5, 2.25]),
        # bin centres: 0 + (c + 1/2) * 3/4
        (QkVariant.CENTERED, [0, 1, 2, 3], [0.375, 1.125, 1.875, 2.625]),
    ],
    ids=["original", "modified", "centered"],
)
def test_minmax_levels_variants_by_hand(variant, codes, levels):
    r = minmax_levels_quantize(torch.tensor([0.0, 1.0, 2.0, 3.0]), 2, variant)
    assert r.codes.tolist() == codes and r.levels.tolist() == levels
    assert r.dequantized.tolist() == [levels[c] for c in codes]
    assert r.variant is variant and (r.x_min, r.x_max) == (0.0, 3.0)


def test_minmax_levels_modified_differs_from_original_between_bins():
    # x = 0.9 of [0, 3]: original rounds 0.9 -> code 1; modified: floor(4 * 0.3) = 1;
    # x = 0.6: original round(0.6) = 1, modified floor(0.8) = 0.
    x = torch.tensor([0.0, 0.6, 0.9, 3.0])
    assert minmax_levels_quantize(x, 2).codes.tolist() == [0, 1, 1, 3]
    assert minmax_levels_quantize(x, 2, "modified").codes.tolist() == [0, 0, 1, 3]


@pytest.mark.parametrize("variant", list(QkVariant), ids=lambda v: v.value)
def test_minmax_levels_steps_and_constants(variant, gen):
    x = torch.randn(5, 7, generator=gen)
    r = minmax_levels_quantize(x, 3, variant)
    torch.testing.assert_close(r.normalized, (x - x.min()) / (x.max() - x.min()))
    assert torch.equal(r.unit, q_k_levels(3, variant)[r.codes])
    assert [s.name for s in r.steps] == ["normalise", "q_k", "rescale"]
    assert torch.equal(r.steps[2].values, r.dequantized)
    const = minmax_levels_quantize(torch.full((4,), 2.5), 2, variant)
    assert const.dequantized.tolist() == [2.5] * 4


def test_bad_variants_and_bits_raise():
    with pytest.raises(ValueError, match=r"unknown q_k variant 'floor'; expected one of: original"):
        dorefa_quantize_weights(torch.ones(3), 2, variant="floor")
    with pytest.raises(TypeError, match=r"variant must be a QkVariant or str, got int"):
        minmax_levels_quantize(torch.ones(3), 2, 1)
    with pytest.raises(ValueError, match=r"bits=0 is outside the supported range 1\.\.16"):
        q_k(torch.ones(3), 0)
    with pytest.raises(TypeError, match=r"u has dtype torch.int64"):
        q_k_codes(torch.ones(3, dtype=torch.int64), 2)
    with pytest.raises(TypeError, match=r"rescale must be a bool"):
        dorefa_quantize_weights(torch.ones(3), 2, rescale=1)
