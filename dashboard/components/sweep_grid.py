"""The sweep's scheme grid (a form, seeded from the URL's ``sw.`` keys) and its run with a
progress bar.

The URL holds the last submitted grid (``SweepRequest.query``): a link opened anywhere
restores and runs it; Back/Forward restore the previous grid, or an address without one
clears it. Values a link holds that this tensor cannot use are left out with a warning.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import streamlit as st
import torch

from dashboard import cache
from dashboard.components import cost_gate, persist, url
from dashboard.components.config import divisors
from dashboard.components.fitted import fit_choice, forget_fitted
from dashboard.components.persist import PERSIST
from dashboard.services.compare.frontier import ErrorAxis
from dashboard.services.compare.grid import fit_grid
from dashboard.services.compare.sweep import GridExpansion, SchemeGrid, SweepResult, expand_grid
from dashboard.services.compare.sweep import run_sweep as run_schemes
from dashboard.services.compare.weights import calibration_note, offered_algorithms
from dashboard.services.display.labels import FORMAT_LABELS
from dashboard.services.display.text import literal
from dashboard.services.sources.choice import SourceChoice
from dashboard.services.state.algorithm import parse_sentences
from dashboard.services.state.compare import SWEEP_PREFIX, sweep_from_query, sweep_to_query
from dashboard.services.state.group_size import nearest_size
from dashboard.services.state.scale_storage import DEFAULT_SCALE_DTYPE
from dashboard.services.state.scheme import GranularityKind
from dashboard.services.state.source import SOURCE_KEYS
from quant_core import (
    Algorithm,
    Format,
    Mode,
    QuantConfig,
    RangeMethod,
    ScaleDtype,
    ZeroPoint,
    presets,
)
from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES
from quant_core.formats.registry import SHIPPED_SET

__all__ = [
    "SweepRequest",
    "has_result",
    "run_with_progress",
    "seed_sweep_from_url",
    "sweep_grid_form",
]

_GRID = "_sweep_grid"
_RESULT = "_sweep_result"
_AXIS = "sw_axis"
_PRESET_LABELS = {p.name: f"{p.label} ({p.family})" for p in presets()}
_ZERO_POINTS = {
    ZeroPoint.INCLUDE_ZERO: "include zero",
    ZeroPoint.FLOAT_MIN: "float min (m)",
    ZeroPoint.COURSE_CLAMP: "course clamp",
}
_OWN_TEXT = (
    "The link was made with its author's own calibration sentences, which links do not "
    "carry: calibrating on the bundled sentences."
)


@dataclass(frozen=True)
class _Submitted:
    grid: SchemeGrid
    calibration: tuple[str, ...] = CALIBRATION_SENTENCES
    custom: bool = False


@dataclass(frozen=True)
class SweepRequest:
    """The submitted grid, expanded for the tensor; ``layer``: the bundled-model layer it
    is (output errors, GPTQ/AWQ), else ``None``; ``key`` names grid, source and the
    calibration sentences."""

    key: str
    grid: SchemeGrid
    expansion: GridExpansion
    layer: str | None
    calibration: tuple[str, ...]
    custom_calibration: bool

    def query(self, axis: ErrorAxis | None = None) -> dict[str, str]:
        return sweep_to_query(self.grid, self.custom_calibration, axis)


def _add_shipped() -> None:
    """The button's callback: runs before the form's widgets are drawn again."""
    ss = st.session_state
    ss["sw_presets"] = list(dict.fromkeys([*ss.get("sw_presets", []), *SHIPPED_SET]))


def _kind_label(kind: GranularityKind) -> str:
    return "per 128×128 block" if kind is GranularityKind.BLOCK else f"per {kind.value}"


def default_group_sizes(cols: int) -> tuple[int, ...]:
    return tuple([g for g in (16, 32, 64, 128, 256) if cols % g == 0][:3] or [cols])


def default_grid(cols: int) -> SchemeGrid:
    """The form's first grid: 20 integer schemes per granularity family, NF4, RTN."""
    return SchemeGrid(
        bits=(2, 3, 4, 6, 8),
        modes=tuple(Mode),
        kinds=tuple(GranularityKind),
        group_sizes=default_group_sizes(cols),
        formats=(Format.INT, Format.NF4),
        base=QuantConfig(scale_dtype=DEFAULT_SCALE_DTYPE),
    )


def _state_from_grid(grid: SchemeGrid) -> dict[str, object]:
    return {
        "sw_bits": list(grid.bits),
        "sw_modes": list(grid.modes),
        "sw_kinds": list(grid.kinds),
        "sw_groups": list(grid.group_sizes),
        "sw_formats": list(grid.formats),
        "sw_range": grid.base.range_method,
        "sw_sdtype": grid.base.scale_dtype,
        "sw_algos": list(grid.algorithms),
        "sw_zps": list(grid.zero_points),
        "sw_presets": list(grid.presets),
    }


def _own_address(params: dict[str, str]) -> bool:
    """Whether ``params`` is an address this page writes (source and ``sw.`` keys only).

    ``st.switch_page`` ("Open in the explorer") sets the explorer's keys while the browser
    still shows this page, which leaves a history entry of this page with the explorer's
    keys: Back lands there, and it must not clear the sweep (its results stay shown)."""
    return all(k in SOURCE_KEYS or k.startswith(SWEEP_PREFIX) for k in params)


def seed_sweep_from_url(cols: int, layer: str | None) -> None:
    """When the address is new to the session (``url.first_run``), put its grid and axis
    into the form (warning about each value it cannot use here) and take it as submitted;
    an address with other keys but no grid clears the submitted grid."""
    if not url.first_run("sweep"):
        return
    params = url.query_snapshot()
    q = sweep_from_query(params)
    for problem in q.problems:
        url.add_warning(f"Ignored the link's {problem}.")
    if q.axis is not None:
        axis = q.axis
        if axis.needs_layer and layer is None:
            url.add_warning(f"Link: {axis.label} needs a linear layer of the bundled model.")
            axis = ErrorAxis.MSE
        persist.set_values({_AXIS: axis})
    if not q.has_grid:
        if params and _own_address(params):
            st.session_state.pop(_GRID, None)
        return
    fitted = fit_grid(
        q.grid(default_grid(cols)), cols, offered_algorithms(layer), default_group_sizes(cols)
    )
    for fix in fitted.fixes:
        url.add_warning(f"Link: {fix}.")
    if q.custom_calibration:
        url.add_warning(_OWN_TEXT)
    persist.set_values({**_state_from_grid(fitted.grid), "sw_custom": False})
    forget_fitted("sw_groups")  # the link's sizes are the choice
    st.session_state[_GRID] = _Submitted(fitted.grid)
    cost_gate.link_restored("sweep")  # a heavy grid waits for a click (issue 29)


def _calibration_key(sentences: tuple[str, ...]) -> str:
    digest = hashlib.sha1("\n".join(sentences).encode()).hexdigest()[:12]
    return f"{len(sentences)}:{digest}"


def _calibration_inputs() -> tuple[tuple[str, ...], bool]:
    """The expander with the calibration sentences (inside the form)."""
    with st.expander("Calibration sentences (GPTQ, AWQ)"):
        custom = st.checkbox(
            "Calibrate on my own sentences (below)", key="sw_custom", persist_state=PERSIST
        )
        text = st.text_area(
            "Sentences, one per line", key="sw_text", height=120, persist_state=PERSIST
        )
    if not custom:
        return CALIBRATION_SENTENCES, False
    try:
        return parse_sentences(text), True
    except ValueError as exc:
        st.error(f"Calibration text: {literal(exc)}. Using the bundled sentences.")
        return CALIBRATION_SENTENCES, False


def _fit_groups(cols: int) -> None:
    """Keep the group sizes valid for ``cols`` columns: those the visitor (or a link)
    chose that divide ``cols``, else the divisor nearest to each; the choice survives a
    visit to a 7-column tensor (see ``fitted``: the list emptied for good, and back at 512
    columns the sweep said "Pick at least one of: group sizes")."""

    def fit(chosen: list[int]) -> list[int]:
        fitting = [g for g in chosen if cols % g == 0]
        if fitting or not chosen:
            return fitting
        return sorted({nearest_size(g, divisors(cols)) for g in chosen})

    fit_choice("sw_groups", lambda groups: [int(g) for g in groups], fit)


def sweep_grid_form(
    shape: tuple[int, int],
    source_key: str,
    layer: str | None,
    choice: SourceChoice | None = None,
) -> SweepRequest | None:
    """The grid form for a ``[R, C]`` matrix (``layer``: the bundled-model layer it is, or
    ``None``; ``choice``: where the matrix comes from, for the calibration note); returns
    the last submitted grid expanded for it (``None`` before the first submit)."""
    cols = shape[1]
    offered = list(offered_algorithms(layer))
    ss = st.session_state
    persist.defaults(
        {
            **_state_from_grid(default_grid(cols)),
            "sw_custom": False,
            "sw_text": "\n".join(CALIBRATION_SENTENCES),
        }
    )
    # Keep the choices valid for this tensor (the last one may have had other columns).
    # Set only when they change: a value set through session state is sent back to the
    # browser, overwriting what the visitor picked meanwhile (see config_picker's bits).
    _fit_groups(cols)
    algos = [a for a in ss["sw_algos"] if a in offered] or [Algorithm.RTN]
    if algos != list(ss["sw_algos"]):
        ss["sw_algos"] = algos
    with st.form("sweep_form"):
        c1, c2, c3, c4 = st.columns(4)
        kw = {"persist_state": PERSIST}
        # In a column a multiselect keeps its chips on one row that scrolls sideways, so a
        # grid of several values showed only the first few, cut off: let them wrap.
        chips = {**kw, "wrap": True}
        bits = c1.multiselect("Bit widths (int)", list(range(2, 17)), key="sw_bits", **chips)
        modes = c1.multiselect(
            "Modes (int)", list(Mode), format_func=lambda m: m.value, key="sw_modes", **chips
        )
        zero_points = c1.multiselect(
            "Zero points (int asym)",
            list(ZeroPoint),
            format_func=lambda z: _ZERO_POINTS[z],
            key="sw_zps",
            help="How an asymmetric block whose values are all of one sign is stored: "
            "include zero widens its range to 0 (PyTorch, torchao); float min stores the "
            "offset m in the scale dtype (GGUF Q4_1, tinygemm; costs its bits); course "
            "clamp pins the integer zero point (the course's formula).",
            **chips,
        )
        kinds = c2.multiselect(
            "Granularities",
            list(GranularityKind),
            format_func=_kind_label,
            key="sw_kinds",
            **chips,
        )
        sizes = c2.multiselect(
            f"Group sizes (divisors of {cols})", divisors(cols), key="sw_groups", **chips
        )
        formats = c3.multiselect(
            "Formats",
            list(Format),
            format_func=FORMAT_LABELS.__getitem__,
            key="sw_formats",
            **chips,
        )
        ranges = [r for r in RangeMethod if r is not RangeMethod.ABSMEAN]  # symmetric-only
        range_method = c3.selectbox(
            "Range", ranges, format_func=lambda r: r.value, key="sw_range", **kw
        )
        scale_dtype = c3.selectbox(
            "Scale dtype", list(ScaleDtype), format_func=lambda d: d.value, key="sw_sdtype", **kw
        )
        algorithms = c4.multiselect(
            "Algorithms",
            offered,
            format_func=lambda a: a.label,
            key="sw_algos",
            help="RTN rounds to nearest; HQQ refits zero points (or scales) without data; "
            "GPTQ and AWQ learn from the layer's inputs on calibration sentences.",
            **chips,
        )
        with c4:
            if layer is not None:
                calibration, custom = _calibration_inputs()
            else:
                calibration, custom = CALIBRATION_SENTENCES, False
        shipped = st.multiselect(
            "Shipped formats (each a whole scheme, added to the grid's)",
            list(_PRESET_LABELS),
            format_func=_PRESET_LABELS.__getitem__,
            key="sw_presets",
            **chips,
        )
        submitted = st.form_submit_button("Run sweep", type="primary", key="sw_run")
    st.button(
        "Add the formats people ship",
        key="sw_shipped",
        on_click=_add_shipped,
        help="Picks GGUF Q4_0, Q8_0, Q4_K, Q5_K, Q6_K and IQ4_XS, MXFP4, NVFP4 and NF4 with "
        "double quantization among the shipped formats above; run the sweep to compare them.",
    )
    n_cal = len(ss[_GRID].calibration) if isinstance(ss.get(_GRID), _Submitted) else None
    st.caption(
        calibration_note(
            layer, n_cal or len(CALIBRATION_SENTENCES), len(HELD_OUT_SENTENCES), choice
        )
    )
    if submitted:
        empty = [
            name
            for name, chosen, needed in (
                ("formats or shipped formats", formats or shipped, True),
                ("granularities", kinds, bool(formats)),
                ("algorithms", algorithms, True),
                ("bit widths", bits, Format.INT in formats),
                ("modes", modes, Format.INT in formats),
                ("zero points", zero_points, Mode.ASYMMETRIC in modes),
                ("group sizes", sizes, GranularityKind.GROUP in kinds),
            )
            if needed and not chosen
        ]
        if empty:
            st.warning(f"Pick at least one of: {', '.join(empty)}. Nothing was run.")
            ss.pop(_GRID, None)
            return None
        try:
            grid = SchemeGrid(
                bits=tuple(sorted(bits)) or (4,),
                modes=tuple(modes) or (Mode.SYMMETRIC,),
                kinds=tuple(kinds),
                group_sizes=tuple(sorted(sizes)) or default_group_sizes(cols),
                formats=tuple(formats),
                base=QuantConfig(range_method=range_method, scale_dtype=scale_dtype),
                algorithms=tuple(algorithms),
                zero_points=tuple(zero_points) or (ZeroPoint.INCLUDE_ZERO,),
                presets=tuple(shipped),
            )
        except (TypeError, ValueError) as exc:
            st.error(f"That grid is not valid: {literal(exc)}")
            return None
        ss[_GRID] = _Submitted(grid, calibration, custom)
    sub = ss.get(_GRID)
    if not isinstance(sub, _Submitted):
        return None
    key = f"{source_key}|{sub.grid!r}|{layer}|{_calibration_key(sub.calibration)}"
    expansion = expand_grid(sub.grid, shape, has_calibration=layer is not None)
    return SweepRequest(key, sub.grid, expansion, layer, sub.calibration, sub.custom)


def has_result(request: SweepRequest) -> bool:
    """Whether this session already holds ``request``'s results (shown without running)."""
    stored = st.session_state.get(_RESULT)
    return stored is not None and stored[0] == request.key


def run_with_progress(request: SweepRequest, matrix: torch.Tensor) -> SweepResult:
    """Run the sweep once per request (kept for this session), with a progress bar while
    it runs; a layer's inputs are captured first (cached), for GPTQ/AWQ and the held-out
    output errors."""
    stored = st.session_state.get(_RESULT)
    if stored is not None and stored[0] == request.key:
        return stored[1]
    inputs = None
    if request.layer is not None:
        inputs = cache.compare_layer(request.layer, request.calibration)
    bar = st.progress(0.0, text="Running the sweep…")
    start = time.perf_counter()

    def progress(done: int, total: int) -> None:
        spent = time.perf_counter() - start
        bar.progress(done / max(total, 1), text=f"{done} of {total} schemes · {spent:.0f} s")

    result = run_schemes(matrix, request.expansion.schemes, progress=progress, inputs=inputs)
    bar.empty()
    st.session_state[_RESULT] = (request.key, result)
    return result
