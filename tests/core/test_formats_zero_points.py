"""The two-level lab formats' zero points (``formats.scales._zeros``): all zero; one zero
expanded (stride 0) for codebook elements (MXFP4/6/8, NVFP4, NF4 with double
quantization), a dense tensor for integer elements (MXINT8), whose encoders take it as a
kernel input. Everything downstream reads the expanded zero as it read the dense one: the
same values, export bytes and saved tensors."""

from __future__ import annotations

import dataclasses
import io

import pytest
import torch

from quant_core import Backend, QuantConfig, quantize, quantize_dequantize, use_backend
from quant_core.config import Format
from quant_core.files.lab_export import export_tensors
from quant_core.kernels.switch import backend_from_env

_EXPANDED = ("MXFP4", "MXFP6_E3M2", "MXFP6_E2M3", "MXFP8_E4M3", "MXFP8_E5M2", "NVFP4", "NF4_DQ")
_BACKENDS = [Backend.EAGER] + (
    [Backend.COMPILED] if backend_from_env() is Backend.COMPILED else []
)


def _weights() -> torch.Tensor:
    """``[256, 768]``: rows across binades, a zero block, a ``-0`` block, an outlier."""
    gen = torch.Generator().manual_seed(25)
    x = torch.randn(256, 768, generator=gen) * torch.exp2(
        torch.randint(-20, 8, (256, 1), generator=gen).float()
    )
    x[0, :64] = 0.0
    x[1, :32] = -0.0
    x[2, 5] = 1.0e30
    return x


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def _dense(qt):  # type: ignore[no-untyped-def]
    """``qt`` with its zero points as a fresh dense tensor: what ``_zeros`` gave before."""
    return dataclasses.replace(qt, zero_point=qt.zero_point.contiguous().clone())


@pytest.mark.parametrize("backend", _BACKENDS, ids=lambda b: b.value)
@pytest.mark.parametrize("name", [*_EXPANDED, "MXINT8"])
def test_zero_points_are_zero_and_read_as_a_dense_zero(name, backend):
    cfg = QuantConfig.from_name(name)
    x = _weights()
    with use_backend(backend, min_elements=1):
        qt = quantize(x, cfg)
        rt = quantize_dequantize(x, cfg)
        dense = _dense(qt)
        z = qt.zero_point
        assert z.dtype == torch.int32 and tuple(z.shape) == tuple(qt.layout.scale_shape)
        assert not bool(z.any())
        assert not bool(rt.quantized.zero_point.any())
        if cfg.format is Format.INT:
            assert z.is_contiguous()
        else:
            assert set(z.stride()) == {0}, z.stride()  # one zero, expanded
            assert dense.zero_point.stride() != z.stride()
        values = qt.dequantize()
        assert torch.equal(_bits(values), _bits(dense.dequantize()))
        assert torch.equal(_bits(rt.values), _bits(values))
        into = torch.empty_like(x)
        assert torch.equal(_bits(qt.dequantize(out=into)), _bits(values))
        # the explorer's export: the same tensors, bytes and metadata
        mine, meta = export_tensors(qt)
        theirs, meta_dense = export_tensors(dense)
        assert meta == meta_dense and mine.keys() == theirs.keys()
        for k in mine:
            a, b = mine[k], theirs[k]
            assert a.dtype == b.dtype and torch.equal(_bits(a), _bits(b)), k
        if cfg.gguf_type is not None:  # MXFP4's GGUF blocks
            assert qt.to_ggml_bytes() == dense.to_ggml_bytes()
        # saved and loaded back (torch.save keeps the one zero's storage)
        buf = io.BytesIO()
        torch.save(qt.zero_point, buf)
        buf.seek(0)
        loaded = torch.load(buf)
        assert torch.equal(loaded, dense.zero_point) and loaded.stride() == z.stride()
