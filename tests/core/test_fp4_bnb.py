"""bitsandbytes' FP4 (``quant_type="fp4"``) as the lab's ``Format.FP4_BNB`` / preset
``FP4_BNB``: bit for bit against bitsandbytes 0.50 on the CPU (``quantize_4bit``'s packed
codes and absmax, ``dequantize_4bit``'s values, with and without double quantization), a
hand-derived block, and a bitsandbytes FP4 folder opened as a ``QuantizedTensor``."""

from __future__ import annotations

import bitsandbytes.functional as bnbf
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from quantized_files import bnb_state_dict, write_folder

from quant_core import Format, PerGroup, QuantConfig, quantize
from quant_core.config import DoubleQuantScales
from quant_core.files import FileKind, compare_with_original, open_quantized
from quant_core.formats import codebook_for
from quant_core.kernels import Backend, use_backend
from quant_core.quantize import quantize_dequantize
from quant_core.storage import storage_cost

FP4_BNB = QuantConfig.from_name("FP4_BNB")
FP4_BNB_DQ = QuantConfig(
    format=Format.FP4_BNB, granularity=PerGroup(64), scale_format=DoubleQuantScales(256)
)
MODULE = "model.layers.0.mlp.up_proj"


def _bits(t: torch.Tensor) -> torch.Tensor:
    """float32 values as their bit patterns: -0.0 and +0.0 differ."""
    return t.contiguous().view(torch.int32)


def _bnb(x: torch.Tensor, double_quant: bool = False):  # type: ignore[no-untyped-def]
    """bitsandbytes' codes (one per value, high nibble first), its state and its dequant."""
    packed, state = bnbf.quantize_4bit(
        x, blocksize=64, compress_statistics=double_quant, quant_type="fp4"
    )
    raw = packed.view(torch.uint8).reshape(-1)
    codes = torch.stack([raw >> 4, raw & 0x0F], dim=1).reshape(-1)[: x.numel()]
    return codes.reshape(x.shape), state, bnbf.dequantize_4bit(packed, state)


def _assert_bnb_exact(x: torch.Tensor) -> None:
    """On both backends (the compiled one down to one element), by ``quantize`` and by
    the fused ``quantize_dequantize``."""
    codes, state, ref = _bnb(x)
    for backend in (Backend.EAGER, Backend.COMPILED):
        with use_backend(backend, min_elements=1):
            qt = quantize(x, FP4_BNB)
            both = quantize_dequantize(x, FP4_BNB)
        assert torch.equal(qt.codes, codes), backend
        assert torch.equal(both.quantized.codes, codes), backend
        # an all-zero block: bitsandbytes stores absmax 0, the lab scale 1 (its convention
        # for every format: any scale will do); its codes are 0 and its values +0.0 either way
        lab, ref_absmax = qt.scale.reshape(-1), state.absmax
        zero = ref_absmax == 0
        assert torch.equal(_bits(lab[~zero]), _bits(ref_absmax[~zero]))
        assert bool((lab[zero] == 1).all())
        assert torch.equal(_bits(qt.dequantize()), _bits(ref)), backend
        assert torch.equal(_bits(both.values), _bits(ref)), backend


def test_the_table_is_bitsandbytes_own() -> None:
    """By code, the values bitsandbytes saves as ``quant_map`` (``get_4bit_type``) and the
    values its dequantize gives (absmax 1): code 8 is +0.0 in the first, -0.0 in the
    second, which the lab's decode table holds."""
    table = codebook_for(Format.FP4_BNB).decode_table
    saved = bnbf.get_4bit_type("fp4", device="cpu")
    assert torch.equal(table, saved)  # -0.0 == +0.0
    assert torch.equal(_bits(table[torch.arange(16) != 8]), _bits(saved[torch.arange(16) != 8]))
    codes = torch.arange(16, dtype=torch.uint8)
    packed = ((codes[::2] << 4) | codes[1::2]).repeat(4).unsqueeze(1)  # one block of 64
    dq = torch.ops.bitsandbytes.dequantize_4bit.default(
        packed, torch.ones(1), 64, "fp4", (1, 64), torch.float32
    )
    assert torch.equal(_bits(dq[0, :16]), _bits(table))
    assert bool(torch.signbit(table[8])) and float(table[8]) == 0.0


def test_a_hand_derived_block() -> None:
    """absmax 1 (so ``x * (1 / 1)`` is exact): each value's code read off the table
    ``0, 1/192, 2/3, 1, 1/3, 1/2, 1/6, 1/4`` (codes 0..7; 8..15 the negatives), nearest
    wins, a tie goes to the lower value, a positive value rounding to zero takes code 8."""
    mags = codebook_for(Format.FP4_BNB).decode_table[:8]
    tie_third_half = float((mags[4] + mags[5]) / 2)  # the float32 midpoint of 1/3 and 1/2
    cases = [
        (1.0, 3),
        (0.5, 5),
        (0.25, 7),
        (-1.0, 11),
        (-0.5, 13),
        (0.0, 0),
        (-0.0, 0),
        (0.001, 8),  # below 1/384 (half of 1/192) and positive: the second zero
        (-0.001, 0),
        (0.4, 4),  # below 5/12, between 1/3 and 1/2
        (0.45, 5),
        (-0.45, 13),
        (0.004, 1),  # above 1/384: 1/192
        (0.1, 6),  # above (1/192 + 1/6) / 2 = 0.0859
        (0.2, 6),  # below (1/6 + 1/4) / 2 = 0.2083
        (0.7, 2),  # below (2/3 + 1) / 2
        (tie_third_half, 4),  # a tie: down to 1/3
        (-tie_third_half, 13),  # a tie: down to -1/2
    ]
    x = torch.zeros(64)
    x[: len(cases)] = torch.tensor([v for v, _ in cases])
    x[1] = 0.5
    want = torch.zeros(64, dtype=torch.uint8)
    want[: len(cases)] = torch.tensor([c for _, c in cases], dtype=torch.uint8)
    x[6] = -0.0  # torch.tensor keeps -0.0; restated: the sign matters here
    qt = quantize(x.reshape(1, 64), FP4_BNB)
    assert torch.equal(qt.codes.reshape(-1), want)
    assert float(qt.scale) == 1.0
    hat = qt.dequantize().reshape(-1)
    assert torch.equal(_bits(hat), _bits(codebook_for(Format.FP4_BNB).decode_table[want.long()]))
    assert bool(torch.signbit(hat[7]))  # code 8 decodes to -0.0, as bitsandbytes' C does
    codes, _, ref = _bnb(x.reshape(1, 64))
    assert torch.equal(codes.reshape(-1), want)
    assert torch.equal(_bits(ref.reshape(-1)), _bits(hat))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("magnitude", [1e-30, 1e-3, 1.0, 1e3, 1e30])
def test_codes_absmax_and_values_are_bitsandbytes(seed: int, magnitude: float) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 256, generator=g) * magnitude
    x[0] = 0  # an all-zero block: absmax 0, codes 0
    x[1, :64] *= 1e-39  # an absmax below 1e-38: bitsandbytes codes on 1 / 1e-38
    x[2, ::3] = 0.0
    x[2, 1::3] = -0.0
    _assert_bnb_exact(x)


def test_midpoint_ties_are_bitsandbytes() -> None:
    """Every float32 midpoint of the sorted table, each sign, in blocks of absmax 1."""
    values = codebook_for(Format.FP4_BNB).values
    mids = (values[1:] + values[:-1]) / 2
    row = torch.cat([torch.tensor([1.0]), mids, -mids, mids.nextafter(torch.ones(()))])
    row = torch.cat([row, torch.zeros(64 - row.numel())])
    x = torch.stack([row, -row, row * 4, row * 3])  # 3: the reciprocal is inexact
    _assert_bnb_exact(x)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 6),
    blocks=st.integers(1, 4),
    data=st.data(),
)
def test_property_any_values_any_shape_are_bitsandbytes(rows: int, blocks: int, data) -> None:  # type: ignore[no-untyped-def]
    """Drawn float32 values (zeros of both signs, subnormals, huge and tiny) in any
    ``rows x 64k`` matrix: codes, absmax and dequantized values as bitsandbytes'."""
    n = rows * 64 * blocks
    finite = st.floats(width=32, allow_nan=False, allow_infinity=False)
    values = data.draw(st.lists(finite, min_size=n, max_size=n))
    x = torch.tensor(values, dtype=torch.float32).reshape(rows, 64 * blocks)
    _assert_bnb_exact(x)


@pytest.mark.parametrize("seed", range(4))
def test_double_quantization_is_bitsandbytes(seed: int) -> None:
    g = torch.Generator().manual_seed(seed + 40)
    x = torch.randn(24, 768, generator=g) * torch.rand(24, 1, generator=g) * 5  # 288 blocks
    x[3] = 0
    codes, state, ref = _bnb(x, double_quant=True)
    qt = quantize(x, FP4_BNB_DQ)
    assert torch.equal(qt.codes, codes)
    assert torch.equal(qt.stored.codes.reshape(-1), state.absmax.to(torch.int32))
    assert torch.equal(_bits(qt.stored.super_scale), _bits(state.state2.absmax))
    assert torch.equal(_bits(qt.dequantize()), _bits(ref))


def test_the_preset_and_its_bits() -> None:
    assert QuantConfig(format=Format.FP4_BNB, granularity=PerGroup(64)) == FP4_BNB
    assert FP4_BNB.name == "FP4_BNB" and QuantConfig.from_name("fp4_bnb") == FP4_BNB
    # 4-bit codes and a float32 absmax per 64 values, as bitsandbytes stores them
    assert storage_cost((128, 256), FP4_BNB).bits_per_element == 4 + 32 / 64


@pytest.mark.parametrize("double_quant", [False, True], ids=["no-dq", "dq"])
def test_a_bitsandbytes_fp4_folder_decodes_to_the_lab_format(tmp_path, double_quant) -> None:  # type: ignore[no-untyped-def]
    """``bitsandbytes.nn.Linear4bit``'s own state dict, FP4: a ``QuantizedTensor`` of
    ``FP4_BNB`` (or its double quantization), bit for bit bitsandbytes' dequantize, with
    the codes and scales the lab's FP4_BNB of the original stores; compared with the
    original beside the lab's round-to-nearest (the same codes: the same error)."""
    from bitsandbytes.functional import QuantState

    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(7))
    sd = bnb_state_dict(w, MODULE, "fp4", double_quant)
    config = {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "fp4",
        "bnb_4bit_use_double_quant": double_quant,
    }
    write_folder(tmp_path, sd, config)
    f = open_quantized(tmp_path)
    assert f.kind is FileKind.BITSANDBYTES
    st_ = f.load(MODULE + ".weight")
    assert st_.type_name == "bnb FP4 b64" + (" + DQ" if double_quant else "")
    qt = st_.quantized
    want = FP4_BNB_DQ if double_quant else FP4_BNB
    assert qt is not None and qt.config == want
    state = QuantState.from_dict(
        {k[len(MODULE) + 8 :]: v for k, v in sd.items() if k != MODULE + ".weight"},
        torch.device("cpu"),
    )
    ref = bnbf.dequantize_4bit(sd[MODULE + ".weight"], state)
    assert torch.equal(_bits(st_.dequantize()), _bits(ref))
    lab = quantize(w, want)
    assert torch.equal(lab.codes, qt.codes)
    assert torch.equal(_bits(lab.scale), _bits(qt.scale))
    cmp = compare_with_original(st_, w, MODULE + ".weight")
    assert cmp.rtn_metrics is not None and cmp.file_metrics.mse > 0
    assert cmp.file_metrics.mse == cmp.rtn_metrics.mse


@pytest.mark.parametrize("backend", [Backend.EAGER, Backend.COMPILED])
@pytest.mark.parametrize("cfg", [FP4_BNB, FP4_BNB_DQ], ids=["FP4_BNB", "FP4_BNB_DQ"])
def test_either_backend_and_the_fused_round_trip_are_bitsandbytes(backend, cfg) -> None:  # type: ignore[no-untyped-def]
    """Both backends (the compiled one down to one element), with and without double
    quantization, by ``quantize`` and by the fused ``quantize_dequantize``."""
    g = torch.Generator().manual_seed(50)
    x = torch.randn(32, 512, generator=g) * torch.rand(32, 1, generator=g)
    codes, _, ref = _bnb(x, double_quant=cfg is FP4_BNB_DQ)
    with use_backend(backend, min_elements=1):
        qt = quantize(x, cfg)
        both = quantize_dequantize(x, cfg)
    assert torch.equal(qt.codes, codes) and torch.equal(both.quantized.codes, codes)
    assert torch.equal(_bits(qt.dequantize()), _bits(ref))
    assert torch.equal(_bits(both.values), _bits(ref))
