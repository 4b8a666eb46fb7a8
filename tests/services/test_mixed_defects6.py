"""Service tests: review mends and defects of the Mixed precision page (defects6)."""

from __future__ import annotations

import dataclasses
import math
import pickle
from functools import partial
from pathlib import Path

import pytest
import torch

from quant_core.mixed import BudgetOutOfRange, SensitivityRow, allocate, build_problem


def _row(tensor: str, scheme: str, bits: int, n: int, *, stored_bits: int) -> SensitivityRow:
    ok = bits > 0
    nan = math.nan
    return SensitivityRow(tensor, scheme, (n // 64, 64), stored_bits, bits,
                          bits / n if ok else nan, 0.0 if ok else nan, 0.0 if ok else nan,
                          1.0 / bits if ok else nan, 100.0 if ok else nan, True, None,
                          None if ok else "the weight holds 1 NaN and 0 Inf values of 4,096",
                          0.0)  # fmt: skip


def test_the_note_and_the_refusal_say_the_kept_tensors_in_one_sentence() -> None:
    """Two tensors kept as stored (16 and 32 bits per weight): the problem's note and the
    budget's refusal wrote two variants of one sentence ("2 tensors no candidate can take,
    kept as stored: ..." and "2 tensors kept as stored (no candidate can take them) take
    ..."); now one, with its thousands separated as ``_tensors`` writes them."""
    n = 4096
    rows = [
        _row("a.weight", "int4", 0, n, stored_bits=16 * n),
        _row("a.weight", "int8", 0, n, stored_bits=16 * n),
        _row("c.weight", "int4", 0, n, stored_bits=32 * n),
        _row("c.weight", "int8", 0, n, stored_bits=32 * n),
        _row("b.weight", "int4", 4 * n, n, stored_bits=32 * n),
        _row("b.weight", "int8", 8 * n, n, stored_bits=32 * n),
    ]
    problem = build_problem(rows)
    sentence = "2 tensors no candidate can take, kept as stored: 24 bits per weight, 24,576 bytes"
    assert problem.notes == (f"{sentence}, counted in the budget and the size",)
    with pytest.raises(BudgetOutOfRange) as caught:
        allocate(problem, 8 * n)
    assert str(caught.value).endswith(f"; {sentence}, counted in that.")


def test_a_gguf_and_a_safetensors_weight_are_measured_by_one_outline(tmp_path: Path) -> None:
    """The same float32 values in a ``.safetensors`` shard and in a GGUF give the same rows,
    bit for bit (one task function, ``measure_task``, with either reader); the task
    functions pickle, so a worker process takes them."""
    from safetensors.torch import save_file

    from dashboard.services.mixed import sources, tasks
    from quant_core.files import open_quantized
    from quant_core.mixed import candidate_named
    from tests.core.quantized_files import write_gguf

    g = torch.Generator().manual_seed(6)
    w = torch.randn(16, 64, generator=g)
    w[3, 5] = 40.0  # an outlier, so the schemes differ
    save_file({"blk.0.ffn_up.weight": w}, str(tmp_path / "model.safetensors"))
    write_gguf(tmp_path / "w.gguf", {"blk.0.ffn_up.weight": (w.numpy(), None)})
    cands = [candidate_named("Q8_0"), candidate_named("Q4_K")]
    file = open_quantized(tmp_path / "w.gguf")
    ckpt = sources.gguf_checkpoint(file)
    assert ckpt is not None
    (g_task,) = tasks.tasks_for(ckpt, cands, None)
    (s_task,) = tasks.tasks_for(
        sources.file_checkpoint(tmp_path / "model.safetensors"), cands, None
    )
    g_rows = _untimed(sources.gguf_task(file)(g_task).rows)
    s_rows = _untimed(tasks.run_task(s_task).rows)
    assert [r.skipped for r in g_rows] == [None, None]
    assert repr(g_rows) == repr(s_rows)  # every field, NaN-safe
    assert pickle.loads(pickle.dumps(tasks.run_task)) is tasks.run_task
    again = pickle.loads(pickle.dumps(partial(tasks.measure_task, tasks.SAFETENSORS)))
    assert repr(_untimed(again(s_task).rows)) == repr(s_rows)


def _untimed(rows: tuple[SensitivityRow, ...]) -> tuple[SensitivityRow, ...]:
    """The rows without the seconds each took (the clock, not the measurement)."""
    return tuple(dataclasses.replace(r, seconds=0.0) for r in rows)


def test_the_heatmap_marks_a_tensor_kept_as_stored() -> None:
    """A tensor kept as stored (a NaN in it) has no cell of its choice: its row had no ring,
    as if the allocation had left it out. Now a last, blank column "kept as stored" holds
    its ring; with no tensor kept the figure is as it was."""
    from dashboard.services.mixed.figures import KEPT_COLUMN, heatmap_figure

    n = 4096
    rows = [
        _row("a.weight", "int4", 0, n, stored_bits=32 * n),
        _row("a.weight", "int8", 0, n, stored_bits=32 * n),
        _row("b.weight", "int4", 4 * n, n, stored_bits=32 * n),
        _row("b.weight", "int8", 8 * n, n, stored_bits=32 * n),
    ]
    alloc = allocate(build_problem(rows), 36 * n)
    assert alloc.recipe() == {"b.weight": "int4", "a.weight": "stored"}
    heat = heatmap_figure(rows, alloc.recipe())
    assert list(heat.data[0].x) == ["int4", "int8", KEPT_COLUMN] and KEPT_COLUMN == (
        "kept as stored"
    )
    assert all(math.isnan(v) for v in heat.data[0].z[:, 2])  # no colour: nothing measured
    assert list(zip(heat.data[1].x, heat.data[1].y, strict=True)) == [
        ("int4", "b.weight"),
        ("kept as stored", "a.weight"),
    ]
    plain = heatmap_figure(rows[2:], {"b.weight": "int4"})
    assert list(plain.data[0].x) == ["int4", "int8"]
    assert list(zip(plain.data[1].x, plain.data[1].y, strict=True)) == [("int4", "b.weight")]


def test_the_page_counts_kept_tensors_with_no_line_by_why() -> None:
    """The caption's count of the tensors with no --tensor-type line: a tensor kept as
    stored has a line now, unless its type is one llama-quantize does not write."""
    from dashboard.services.mixed.figures import skip_reasons
    from quant_core.mixed.exports import NoLine, NoLineWhy, kept_type_reason

    skipped = (
        NoLine("a.weight", NoLineWhy.KEPT_TYPE, kept_type_reason("float64")),
        NoLine("b.weight", NoLineWhy.KEPT_TYPE, kept_type_reason(None)),
        NoLine("c.weight", NoLineWhy.NO_NAME, NoLineWhy.NO_NAME.value),
    )
    assert skip_reasons(skipped) == (
        "1 with no llama.cpp name (the export knows Llama-family and BERT names); "
        "2 kept as stored in a type llama-quantize does not write"
    )
