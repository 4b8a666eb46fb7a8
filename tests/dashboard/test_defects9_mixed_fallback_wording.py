"""Defect: the Mixed precision page said "TQ1_0 is stored as Q4_0 on 34 tensors
(llama-quantize's fallback: its blocks do not divide their rows)" where the Whole model page
says of the same fallback "whose super-blocks hold 256 values"; the reader of both pages
could not tell the two were one rule, nor what size the rows miss."""

from __future__ import annotations

from dashboard.services.mixed.figures import cell_notes
from quant_core.mixed import SensitivityRow


def _row(scheme: str, stored_as: str) -> SensitivityRow:
    fields = {f: None for f in SensitivityRow.__dataclass_fields__}
    fields |= {"tensor": "blk.0.attn_q.weight", "scheme": scheme, "stored_as": stored_as}
    fields |= {"skipped": None}
    return SensitivityRow(**fields)


def test_the_fallback_note_names_the_super_block_as_the_whole_model_page() -> None:
    (note,) = cell_notes([_row("TQ1_0", "Q4_0")])
    assert "its super-blocks of 256 values do not divide their rows" in note, note
