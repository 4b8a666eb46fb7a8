"""``shows_stored`` decides which explorer view a file's tensor gets from the stored tensor
alone. It used to run the tensor's whole exploration (without an original) to see whether
it had codes to draw: the same decision, checked here against that exploration over the
kinds of tensor a file holds."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import gguf
import numpy as np
import pytest
import torch

from dashboard.components.quantized_view import shows_stored
from dashboard.services.files.tensor import FileTensor, file_exploration
from quant_core import PerChannel, PerGroup, QuantConfig, quantize
from quant_core.files import StoredTensor, TensorEntry, open_quantized
from tests.core.quantized_files import GGML, random_blocks, write_gguf

GEN = torch.Generator().manual_seed(0)
UP = torch.randn(64, 256, generator=GEN)


@pytest.fixture(scope="module")
def gguf_tensors(tmp_path_factory: pytest.TempPathFactory) -> list[FileTensor]:
    """Decoded GGUF types (2-D and 3-D), a lattice type the lab does not decode (IQ2_XXS),
    F32 and F16 tensors."""
    path: Path = tmp_path_factory.mktemp("gguf") / "m.gguf"
    rng = np.random.default_rng(7)
    experts = torch.randn(3, 8, 64, generator=GEN)
    write_gguf(
        path,
        {
            "blk.0.ffn_up.weight": (gguf.quants.quantize(UP.numpy(), GGML.Q4_0), GGML.Q4_0),
            "blk.0.ffn_down.weight": (gguf.quants.quantize(UP.numpy(), GGML.Q8_0), GGML.Q8_0),
            "blk.0.ffn_up_exps.weight": (
                gguf.quants.quantize(experts.numpy(), GGML.Q8_0),
                GGML.Q8_0,
            ),
            "blk.0.attn_k.weight": (random_blocks(rng, GGML.Q4_K, 16, 256), GGML.Q4_K),
            "blk.0.attn_q.weight": (random_blocks(rng, GGML.IQ2_XXS, 2, 512), GGML.IQ2_XXS),
            "token_embd.weight": (UP.numpy().astype(np.float16), None),
            "output_norm.weight": (np.ones(64, dtype=np.float32), None),
        },
        metadata={"llama.block_count": 1},
    )
    f = open_quantized(path)
    return [FileTensor(f, f.load(t.name)) for t in f.tensors]


def _lab_tensor(shape: tuple[int, ...], cfg: QuantConfig) -> FileTensor:
    """A stored tensor of the lab's own ``quantize`` (blocks ``cfg``'s, any shape)."""
    qt = quantize(torch.randn(shape, generator=GEN), cfg)
    entry = TensorEntry("w", cfg.name, shape, 0, "w.safetensors", quantized=True)
    return FileTensor(None, StoredTensor(entry, qt))  # type: ignore[arg-type]  # no file read


LAB_CASES = {
    "per-channel 2-D": ((8, 64), QuantConfig(bits=8, granularity=PerChannel(0))),
    "per-channel 3-D: rows of 8 x 64 lose the channels": (
        (2, 8, 64),
        QuantConfig(bits=8, granularity=PerChannel(0)),
    ),
    "per-group 3-D": ((2, 8, 64), QuantConfig(bits=4, granularity=PerGroup(32))),
    "per-group 1-D": ((256,), QuantConfig(bits=4, granularity=PerGroup(64))),
}


def _old_decision(ft: FileTensor) -> bool:
    """What ``shows_stored`` computed before: the exploration without an original."""
    if ft.stored.quantized is None:
        return False
    return file_exploration(ft).stored is not None


def test_the_decision_is_the_one_the_exploration_gave(gguf_tensors: list[FileTensor]) -> None:
    lab = {name: _lab_tensor(*case) for name, case in LAB_CASES.items()}
    cases = {t.entry.name: t for t in gguf_tensors} | lab
    seen = {}
    for name, ft in cases.items():
        decision = shows_stored(SimpleNamespace(file_tensor=ft, nonfinite=None))  # type: ignore[arg-type]
        assert decision == _old_decision(ft), name
        seen[name] = decision
    # every kind of answer was asked for
    assert seen == {
        "blk.0.ffn_up.weight": True,
        "blk.0.ffn_down.weight": True,
        "blk.0.ffn_up_exps.weight": True,
        "blk.0.attn_k.weight": True,
        "blk.0.attn_q.weight": False,  # IQ2_XXS: not decoded
        "token_embd.weight": False,  # F16
        "output_norm.weight": False,  # F32
        "per-channel 2-D": True,
        "per-channel 3-D: rows of 8 x 64 lose the channels": False,
        "per-group 3-D": True,
        "per-group 1-D": True,
    }
    assert not shows_stored(SimpleNamespace(file_tensor=None, nonfinite=None))  # type: ignore[arg-type]
