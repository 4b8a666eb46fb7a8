"""Defect pass 8: why GPTQ/HQQ cannot run a shipped format, said of that format only."""

from __future__ import annotations

import pytest

from quant_core import Algorithm, QuantConfig


@pytest.mark.parametrize("name", ["Q4_0", "Q8_0", "Q5_1"])
def test_a_one_level_gguf_type_is_not_said_to_store_two_level_scales(name: str) -> None:
    """HQQ on Q8_0 read "Q8_0 stores its scales in two levels or is fitted by its owner's
    own search": Q8_0 keeps one fp16 scale per block of 32, and the "or" left the learner
    to guess which half was true."""
    reason = Algorithm.HQQ.unavailable_reason(QuantConfig.from_name(name), has_calibration=True)
    assert reason is not None
    assert "two levels" not in reason and " or is " not in reason, reason
    assert f"{name} follows llama.cpp's own quantizer" in reason, reason


@pytest.mark.parametrize("name", ["Q4_K", "Q6_K", "NF4_DQ", "MXFP4", "NVFP4"])
def test_a_two_level_format_says_so(name: str) -> None:
    cfg = QuantConfig.from_name(name)
    for algorithm in (Algorithm.GPTQ, Algorithm.HQQ):
        reason = algorithm.unavailable_reason(cfg, has_calibration=True)
        assert reason is not None
        assert " or is " not in reason, reason
