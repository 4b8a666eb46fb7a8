"""The explorer's export reopens through the library's reader (``quant_core.files``) as
the same tensor, bit for bit, and a lying export names what is wrong."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load

from dashboard.services.explorer import exports
from dashboard.services.explorer.explore import explore
from quant_core import Format, Mode, PerChannel, PerGroup, QuantConfig, ScaleDtype, ZeroPoint
from quant_core.files import FileKind, QuantizedFileError, open_quantized


@pytest.mark.parametrize(
    "cfg",
    [
        QuantConfig(4, Mode.ASYMMETRIC, PerGroup(8)),
        QuantConfig(4, Mode.ASYMMETRIC, PerGroup(8), zero_point=ZeroPoint.FLOAT_MIN),
        QuantConfig(6, Mode.SYMMETRIC, PerChannel(0), scale_dtype=ScaleDtype.BF16),
        QuantConfig(format=Format.NF4, granularity=PerGroup(16)),
    ],
    ids=lambda c: c.describe(),
)
def test_export_opens_as_a_quantized_file(tmp_path, cfg):
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(2))
    exp = explore(x, cfg)
    path = tmp_path / "layer.safetensors"
    path.write_bytes(exports.quantized_safetensors(exp))
    f = open_quantized(path)
    assert f.kind is FileKind.LAB_EXPORT
    (entry,) = f.tensors
    assert (entry.name, entry.shape, entry.type_name) == ("layer", (8, 32), cfg.name)
    st = f.load("layer")
    assert st.quantized is not None and st.quantized.config == cfg
    assert torch.equal(st.quantized.codes.to(torch.int32), exp.qt.codes.to(torch.int32))
    assert torch.equal(st.dequantize(), exp.qt.dequantize())
    thin = exports.read_quantized_safetensors(path.read_bytes())
    assert torch.equal(thin.dequantize(), st.dequantize())


def test_a_lying_export_names_the_problem(tmp_path):
    exp = explore(torch.randn(4, 16), QuantConfig(4, Mode.ASYMMETRIC, PerGroup(8)))
    data = exports.quantized_safetensors(exp)
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    header["__metadata__"]["shape"] = json.dumps([4096, 4096])
    text = json.dumps(header).encode()
    path = tmp_path / "lie.safetensors"
    path.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n :])
    with pytest.raises(QuantizedFileError, match=r"lie\.safetensors: tensor 'codes' is U8 \[32\]"):
        open_quantized(path).load("lie")
    with pytest.raises(ValueError, match="tensor 'codes' is U8"):
        exports.read_quantized_safetensors(path.read_bytes())


@pytest.mark.parametrize(
    "name",
    [
        *("Q4_0", "Q5_1", "Q8_0", "TQ1_0", "Q1_0", "MXFP4", "MXFP6_E2M3"),
        *("NVFP4", "NVFP4_GGUF", "NF4_DQ", "BITNET"),
    ],
)
def test_shipped_formats_reopen_bit_for_bit(tmp_path, name):
    """A shipped format's export reopens as the same tensor: the same config, codes,
    scales and second level (a GGUF type's as llama.cpp's block bytes, exactly the bits
    the page counts)."""
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(4))
    exp = explore(x, QuantConfig.from_name(name))
    data = exports.quantized_safetensors(exp)
    back = exports.read_quantized_safetensors(data)
    assert back.config == exp.config
    assert torch.equal(back.codes.to(torch.int32), exp.qt.codes.to(torch.int32))
    assert torch.equal(back.scale, exp.qt.scale)
    assert torch.equal(back.dequantize(), exp.qt.dequantize())
    if exp.qt.stored is not None:
        for field in ("codes", "min_codes", "super_scale", "super_min"):
            mine, theirs = getattr(back.stored, field), getattr(exp.qt.stored, field)
            assert (mine is None) == (theirs is None)
            if mine is not None:
                assert torch.equal(mine, theirs.to(mine.dtype).reshape(mine.shape))
    tensors = load(data)
    if exp.config.gguf_type is not None:
        assert set(tensors) == {"ggml_blocks"}
        assert tensors["ggml_blocks"].numel() == exp.storage.total_bytes
    path = tmp_path / "x.safetensors"
    path.write_bytes(data)
    assert open_quantized(path).entry("x").type_name == name
