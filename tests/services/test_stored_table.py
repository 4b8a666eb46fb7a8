"""The explorer's worked table shows the code a GGUF block really stores: the byte (or
nibble) llama.cpp writes, read back from ``to_ggml_bytes``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dashboard.services.explorer.explore import explore
from dashboard.services.explorer.stored import stored_table
from quant_core import QuantConfig


def _first_block_bytes_codes(name: str, qt_bytes: bytes) -> list[int]:
    """The first block's 32 stored codes, unpacked by hand from llama.cpp's layouts:
    Q8_0 = fp16 d + 32 int8; Q4_0 = fp16 d + 16 bytes, value j in the low nibble of byte j
    and value j + 16 in the high nibble."""
    raw = np.frombuffer(qt_bytes, dtype=np.uint8)
    if name == "Q8_0":
        return raw[2:34].view(np.int8).astype(int).tolist()
    qs = raw[2:18].astype(int)
    return (qs & 0x0F).tolist() + (qs >> 4).tolist()


@pytest.mark.parametrize("name", ["Q8_0", "Q4_0"])
def test_code_stored_is_the_byte_llama_cpp_writes(name: str) -> None:
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(3))
    exp = explore(x, QuantConfig.from_name(name))
    table = stored_table(exp, block=0, n_values=32)
    expected = _first_block_bytes_codes(name, exp.qt.to_ggml_bytes())
    assert table["code stored"].tolist() == expected
    if name == "Q8_0":  # int8 codes are stored as they are: no second column
        assert "lab code q" not in table.columns
    else:
        assert table["lab code q"].tolist() == [c - 8 for c in expected]
