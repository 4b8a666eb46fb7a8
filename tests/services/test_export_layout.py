"""The explorer's export stores what a two-level format stores (version 2): its size is the
format's bits plus the header, it reopens bit for bit, files in the older layout still
open, and a file that lies about its second level is refused naming file, tensor and
problem."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load, save

from dashboard.services.explorer import exports
from dashboard.services.explorer.explore import explore
from quant_core import (
    Format,
    Mode,
    PerGroup,
    QuantConfig,
    QuantizedTensor,
    ScaleDtype,
    ZeroPoint,
    quantize,
    storage_cost,
)
from quant_core.config import DoubleQuantScales, SuperBlockScales
from quant_core.files import QuantizedFileError, open_quantized, read_lab_export_bytes
from quant_core.files.lab_export import EXPORT_VERSION

DATA = Path(__file__).parents[1] / "core" / "data"


def _export(qt: QuantizedTensor) -> bytes:
    """The explorer's export of ``qt`` (it reads only the config and the tensor)."""
    return exports.quantized_safetensors(SimpleNamespace(config=qt.config, qt=qt))


def _header(data: bytes) -> tuple[int, dict]:
    n = int.from_bytes(data[:8], "little")
    return n, json.loads(data[8 : 8 + n])


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Bit for bit: dtype, shape, every bit (float32 compared as int32)."""
    if a is None or b is None:
        return a is b
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == torch.float32:
        a, b = a.view(torch.int32), b.view(torch.int32)
    return torch.equal(a, b)


def _assert_same_tensor(back: QuantizedTensor, qt: QuantizedTensor) -> None:
    assert back.config == qt.config
    assert torch.equal(back.codes.to(torch.int32), qt.codes.to(torch.int32))
    for field in ("scale", "zero_point", "offset"):
        assert _same(getattr(back, field), getattr(qt, field)), field
    assert (back.stored is None) == (qt.stored is None)
    if qt.stored is not None:
        for field in ("codes", "min_codes", "super_scale", "super_min"):
            assert _same(getattr(back.stored, field), getattr(qt.stored, field)), field
    assert _same(back.dequantize(), qt.dequantize())


# Bytes of each format's tensors at R x C (n = R C values), from its bits per value:
def _nvfp4(n: int) -> int:  # 4-bit FP4 codes, one E4M3 byte per 16 values, fp32 tensor scale
    return n // 2 + n // 16 + 4


def _mxfp8(n: int) -> int:  # 8-bit FP8 codes, one E8M0 byte per 32 values
    return n + n // 32


def _mxfp4(n: int) -> int:  # GGUF's MXFP4 blocks: 16 bytes of FP4 codes + 1 E8M0 byte per 32
    return n // 2 + n // 32


def _nf4_dq(n: int) -> int:  # 4-bit codes, one 8-bit scale code per 64 values, an fp32
    blocks = n // 64  # absmax per 256 scale codes and one fp32 mean
    return n // 2 + blocks + 4 * math.ceil(blocks / 256) + 4


FORMAT_BYTES = {"NVFP4": _nvfp4, "MXFP8_E4M3": _mxfp8, "MXFP4": _mxfp4, "NF4_DQ": _nf4_dq}


@pytest.mark.parametrize("shape", [(1, 64), (3, 192), (128, 256), (40, 1024)], ids=str)
@pytest.mark.parametrize("name", list(FORMAT_BYTES))
def test_file_size_is_the_formats_bits_plus_the_header(name: str, shape: tuple[int, int]) -> None:
    """NVFP4 at 128 x 256: 16,384 + 2,048 + 4 = 18,436 bytes of tensors (4.5 bits per value
    + 32 per tensor), where version 1 wrote 33,980 bytes (float32 and int32 scales)."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    exp = explore(x, QuantConfig.from_name(name))
    data = exports.quantized_safetensors(exp)
    want = FORMAT_BYTES[name](shape[0] * shape[1])
    assert exp.storage.total_bytes == want
    tensors = load(data)
    assert sum(t.numel() * t.element_size() for t in tensors.values()) == want
    n, header = _header(data)
    assert len(data) == 8 + n + want and n < 2_000
    assert header["__metadata__"]["export_version"] == EXPORT_VERSION
    assert "scale" not in tensors  # the scales are computed from what the format stores
    if (name, shape) == ("NVFP4", (128, 256)):
        assert want == 18_436


def test_mx_formats_and_super_blocks_store_their_bits() -> None:
    """The other MX elements (one E8M0 byte per 32) and a super-block format llama.cpp has
    no type for (5-bit scales and mins packed, fp16 d and dmin per 256)."""
    x = torch.randn(4, 512, generator=torch.Generator().manual_seed(6))
    for name in ("MXFP6_E2M3", "MXFP6_E3M2", "MXFP8_E5M2", "MXINT8"):
        cfg = QuantConfig.from_name(name)
        data = _export(quantize(x, cfg))
        stored = sum(t.numel() * t.element_size() for t in load(data).values())
        assert stored == storage_cost(x.shape, cfg).total_bytes, name
    cfg = QuantConfig(
        4,
        Mode.ASYMMETRIC,
        PerGroup(32),
        scale_dtype=ScaleDtype.FP16,
        zero_point=ZeroPoint.FLOAT_MIN,
        scale_format=SuperBlockScales(5, 256),
    )
    assert cfg.gguf_type is None
    data = _export(quantize(x, cfg))
    tensors = load(data)
    # 2048 values: 1024 code bytes; 64 blocks x 5 bits = 40 bytes of scales, 40 of mins;
    # 8 super-blocks x (2 + 2) bytes of d and dmin
    assert {k: t.numel() * t.element_size() for k, t in tensors.items()} == {
        "codes": 1024,
        "stored_codes": 40,
        "stored_min_codes": 40,
        "stored_super_scale": 16,
        "stored_super_min": 16,
    }
    assert sum(t.nbytes for t in tensors.values()) == storage_cost(x.shape, cfg).total_bytes


_CONFIGS = {
    "NVFP4": QuantConfig.from_name("NVFP4"),
    "MXFP8_E4M3": QuantConfig.from_name("MXFP8_E4M3"),
    "MXFP6_E3M2": QuantConfig.from_name("MXFP6_E3M2"),
    "MXINT8": QuantConfig.from_name("MXINT8"),
    "NF4_DQ": QuantConfig.from_name("NF4_DQ"),
    # runs of 4 scales: several runs per tensor, the last one partial
    "nf4 g64 dq/4": QuantConfig(
        format=Format.NF4, granularity=PerGroup(64), scale_format=DoubleQuantScales(4)
    ),
    "int4 float-min u5/256 fp16": QuantConfig(
        4,
        Mode.ASYMMETRIC,
        PerGroup(32),
        scale_dtype=ScaleDtype.FP16,
        zero_point=ZeroPoint.FLOAT_MIN,
        scale_format=SuperBlockScales(5, 256),
    ),
    "int3 sym s6/128 bf16": QuantConfig(
        3,
        Mode.SYMMETRIC,
        PerGroup(16),
        scale_dtype=ScaleDtype.BF16,
        scale_format=SuperBlockScales(6, 128, signed=True),
    ),
}


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(_CONFIGS)),
    rows=st.integers(1, 5),
    units=st.integers(1, 3),
    exponents=st.lists(st.integers(-140, 120), min_size=5, max_size=5),
    zero_rows=st.lists(st.booleans(), min_size=5, max_size=5),
    seed=st.integers(0, 2**16),
)
def test_two_level_exports_reopen_bit_for_bit(name, rows, units, exponents, zero_rows, seed):
    """Any shape (rows of 256 x ``units``), magnitudes from float32 subnormals to 2^120
    per row, all-zero rows: codes, scales, offsets, zero points, the second level and the
    dequantized values come back bit for bit, from a version 2 file."""
    cfg = _CONFIGS[name]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 256 * units, generator=g)
    for r in range(rows):
        x[r] = 0.0 if zero_rows[r] else x[r] * 2.0 ** exponents[r]
    qt = quantize(x, cfg)
    data = _export(qt)
    assert _header(data)[1]["__metadata__"]["export_version"] == EXPORT_VERSION
    _assert_same_tensor(read_lab_export_bytes(data), qt)


@pytest.mark.parametrize(
    ("name", "shape"), [("NVFP4", (4, 32)), ("MXFP8_E4M3", (4, 64)), ("NF4_DQ", (4, 128))]
)
def test_version_1_files_still_open(tmp_path: Path, name: str, shape: tuple[int, int]) -> None:
    """Files the export wrote before version 2 (``tests/core/data/lab_export_v1_*``,
    written by ``exports.quantized_safetensors`` at 65afc6b from ``randn`` seeded 11):
    float32 ``scale`` beside int32 ``stored_codes``, no ``export_version``."""
    data = (DATA / f"lab_export_v1_{name}.safetensors").read_bytes()
    _, header = _header(data)
    assert "export_version" not in header["__metadata__"]
    assert header["scale"]["dtype"] == "F32" and header["stored_codes"]["dtype"] == "I32"
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(11))
    qt = quantize(x, QuantConfig.from_name(name))
    _assert_same_tensor(exports.read_quantized_safetensors(data), qt)
    path = tmp_path / "old.safetensors"
    path.write_bytes(data)
    f = open_quantized(path)
    assert f.entry("old").type_name == name
    loaded = f.load("old").quantized
    assert loaded is not None
    assert _same(loaded.dequantize(), qt.dequantize())
    # the same tensor today: version 2, the format's bytes without float32 scales and
    # int32 codes
    def nbytes(d: bytes) -> int:
        return sum(t.nbytes for t in load(d).values())

    assert nbytes(_export(qt)) == storage_cost(shape, qt.config).total_bytes < nbytes(data)


def test_scales_that_do_not_rebuild_are_written_in_version_1() -> None:
    """A tensor whose scales were changed after quantizing no longer equals what its
    second level computes to: it is written in version 1, and still reopens as itself."""
    qt = quantize(torch.randn(4, 64), QuantConfig.from_name("NVFP4"))
    changed = QuantizedTensor(
        codes=qt.codes,
        scale=qt.scale * 2,
        zero_point=qt.zero_point,
        config=qt.config,
        layout=qt.layout,
        input_dtype=qt.input_dtype,
        stored=qt.stored,
    )
    data = _export(changed)
    assert _header(data)[1]["__metadata__"]["export_version"] == "1"
    _assert_same_tensor(read_lab_export_bytes(data), changed)


def _rewrite(data: bytes, change) -> bytes:
    """``data`` with its tensors and metadata passed through ``change(tensors, meta)``."""
    tensors = load(data)
    meta = dict(_header(data)[1]["__metadata__"])
    change(tensors, meta)
    return save(tensors, metadata=meta)


def _nvfp4_export() -> bytes:
    return _export(quantize(torch.randn(4, 32), QuantConfig.from_name("NVFP4")))


def _nf4_dq_export() -> bytes:
    return _export(quantize(torch.randn(4, 128), QuantConfig.from_name("NF4_DQ")))


def _mx_export() -> bytes:
    return _export(quantize(torch.randn(4, 64), QuantConfig.from_name("MXFP8_E4M3")))


def _set(name: str, value: torch.Tensor):
    return lambda t, m: t.__setitem__(name, value)


def _drop(name: str):
    return lambda t, m: t.pop(name)


def _nan_e4m3(t, m):
    t["stored_codes"][0] = 0x7F


@pytest.mark.parametrize(
    ("build", "change", "problem"),
    [
        (_nvfp4_export, _drop("stored_super_scale"), r"tensor 'stored_super_scale' is missing"),
        (
            _nvfp4_export,
            _set("stored_super_scale", torch.ones((), dtype=torch.float16)),
            r"tensor 'stored_super_scale' is F16 \[\]; a \[4, 32\] tensor under NVFP4 stores "
            r"\[\] F32: float32 tensor scale",
        ),
        (
            _nvfp4_export,
            _set("stored_codes", torch.ones(8, dtype=torch.float32)),
            r"tensor 'stored_codes' is F32 \[8\]; .* stores \[8\] U8: FP8 E4M3 block scales",
        ),
        (
            _nvfp4_export,
            _set("stored_codes", torch.ones(2, 4, dtype=torch.uint8)),
            r"tensor 'stored_codes' is U8 \[2, 4\]",
        ),
        (
            _nvfp4_export,
            _set("stored_codes", torch.ones(7, dtype=torch.uint8)),
            r"tensor 'stored_codes' is U8 \[7\]",
        ),
        (_nvfp4_export, _nan_e4m3, r"tensor 'stored_codes' holds code 0x7f, which is NaN"),
        (
            _nvfp4_export,
            _set("stored_super_scale", torch.tensor(float("inf"))),
            r"tensor 'stored_super_scale' \(float32 tensor scale\) holds a value that is not "
            "finite",
        ),
        (
            _nvfp4_export,
            _set("scale", torch.ones(4, 2)),
            r"tensor 'scale' is not part of a version 2 export of NVFP4",
        ),
        (
            _nvfp4_export,
            lambda t, m: m.__setitem__("export_version", "3"),
            r"export_version '3' is not one this reader knows",
        ),
        (
            _nf4_dq_export,
            _set("stored_super_scale", torch.ones(2)),
            r"tensor 'stored_super_scale' is F32 \[2\]; .* NF4_DQ stores \[1\] F32: float32 "
            "absmax per 256 scales",
        ),
        (_nf4_dq_export, _drop("stored_super_min"), r"tensor 'stored_super_min' is missing"),
        (
            _mx_export,
            _set("stored_codes", torch.full((8,), 255, dtype=torch.uint8)),
            r"tensor 'stored_codes' holds code 0xff, which is NaN in E8M0",
        ),
    ],
    ids=[
        "no-tensor-scale",
        "tensor-scale-f16",
        "codes-f32",
        "codes-2d",
        "codes-short",
        "e4m3-nan",
        "tensor-scale-inf",
        "float-scale-too",
        "version-3",
        "dq-absmax-count",
        "dq-no-mean",
        "e8m0-nan",
    ],
)
def test_a_lying_second_level_names_file_tensor_and_problem(tmp_path, build, change, problem):
    data = _rewrite(build(), change)
    path = tmp_path / "lie.safetensors"
    path.write_bytes(data)
    with pytest.raises(QuantizedFileError, match=r"lie\.safetensors: " + problem):
        open_quantized(path).load("lie")
    with pytest.raises(ValueError, match=r"upload\.safetensors: " + problem):
        read_lab_export_bytes(data, "upload.safetensors")
