"""The sweep's scheme grid (a form) and its run with a progress bar."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
import torch

from dashboard.components.config import divisors
from dashboard.services.compare.sweep import (
    GridExpansion,
    SchemeGrid,
    SweepResult,
    expand_grid,
    run_sweep,
)
from dashboard.services.state.scheme import GranularityKind
from quant_core import Format, Mode, QuantConfig, RangeMethod, ScaleDtype

_GRID = "_sweep_grid"
_RESULT = "_sweep_result"
_FORMATS = {
    Format.INT: "int",
    Format.NF4: "NF4",
    Format.FP4_E2M1: "FP4 E2M1",
    Format.FP8_E4M3: "FP8 E4M3",
    Format.FP8_E5M2: "FP8 E5M2",
}


@dataclass(frozen=True)
class SweepRequest:
    """The submitted grid, expanded for the tensor; ``key`` names grid and source."""

    key: str
    grid: SchemeGrid
    expansion: GridExpansion


def sweep_grid_form(shape: tuple[int, int], source_key: str) -> SweepRequest | None:
    """The grid form for a ``[R, C]`` matrix; returns the last submitted grid expanded for
    it (``None`` before the first submit)."""
    cols = shape[1]
    groups = [g for g in (16, 32, 64, 128, 256) if g in divisors(cols)] or [cols]
    with st.form("sweep_form"):
        c1, c2, c3 = st.columns(3)
        bits = c1.multiselect(
            "Bit widths (int)", list(range(2, 17)), [2, 3, 4, 6, 8], key="sw_bits"
        )
        modes = c1.multiselect(
            "Modes (int)", list(Mode), list(Mode), format_func=lambda m: m.value, key="sw_modes"
        )
        kinds = c2.multiselect(
            "Granularities",
            list(GranularityKind),
            list(GranularityKind),
            format_func=lambda k: f"per {k.value}",
            key="sw_kinds",
        )
        sizes = c2.multiselect(
            f"Group sizes (divisors of {cols})", divisors(cols), groups[:3], key="sw_groups"
        )
        formats = c3.multiselect(
            "Formats",
            list(Format),
            [Format.INT, Format.NF4],
            format_func=_FORMATS.__getitem__,
            key="sw_formats",
        )
        range_method = c3.selectbox(
            "Range", list(RangeMethod), format_func=lambda r: r.value, key="sw_range"
        )
        scale_dtype = c3.selectbox(
            "Scale dtype",
            list(ScaleDtype),
            index=1,
            format_func=lambda d: d.value,
            key="sw_sdtype",
        )
        submitted = st.form_submit_button("Run sweep", type="primary")
    if submitted:
        empty = [
            name
            for name, chosen, needed in (
                ("formats", formats, True),
                ("granularities", kinds, True),
                ("bit widths", bits, Format.INT in formats),
                ("modes", modes, Format.INT in formats),
                ("group sizes", sizes, GranularityKind.GROUP in kinds),
            )
            if needed and not chosen
        ]
        if empty:
            st.warning(f"Pick at least one of: {', '.join(empty)}. Nothing was run.")
            return None
        try:
            grid = SchemeGrid(
                bits=tuple(sorted(bits)) or (4,),
                modes=tuple(modes) or (Mode.SYMMETRIC,),
                kinds=tuple(kinds),
                group_sizes=tuple(sorted(sizes)) or (groups[0],),
                formats=tuple(formats),
                base=QuantConfig(range_method=range_method, scale_dtype=scale_dtype),
            )
        except (TypeError, ValueError) as exc:
            st.error(f"That grid is not valid: {exc}")
            return None
        st.session_state[_GRID] = grid
    grid = st.session_state.get(_GRID)
    if grid is None:
        return None
    return SweepRequest(f"{source_key}|{grid!r}", grid, expand_grid(grid, shape))


def run_with_progress(request: SweepRequest, matrix: torch.Tensor) -> SweepResult:
    """Run the sweep once per request and source (kept for this session), with a progress
    bar while it runs."""
    stored = st.session_state.get(_RESULT)
    if stored is not None and stored[0] == request.key:
        return stored[1]
    bar = st.progress(0.0, text="Running the sweep…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"{done} of {total} schemes")

    result = run_sweep(matrix, request.expansion.configs, progress=progress)
    bar.empty()
    st.session_state[_RESULT] = (request.key, result)
    return result
