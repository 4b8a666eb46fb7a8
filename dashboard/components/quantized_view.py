"""The explorer's view of a quantized file's tensor: what the file stores (codes, scale
and zero-point or min maps, dequantized values, the bits per weight it really spends, the
format's teaching panel) and, given the original weights, the file's error beside the
lab's own round-to-nearest of the original under the same format."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import cache
from dashboard.components import url
from dashboard.components.charts import histogram_chart, image_maps, static_table
from dashboard.components.metrics import metrics_row
from dashboard.components.model_source import model_roots
from dashboard.components.persist import PERSIST
from dashboard.components.stored_maps import stored_maps
from dashboard.components.tables import with_error_formats
from dashboard.components.view import block_chooser, overview_maps, view_options
from dashboard.services.display.bits import bits_text
from dashboard.services.display.labels import format_label, stored_type_label
from dashboard.services.display.reduce import needs_reduction
from dashboard.services.display.sizes import compact_bytes
from dashboard.services.display.text import literal
from dashboard.services.explorer.map_image import MapImage
from dashboard.services.explorer.overview import MapView
from dashboard.services.files.open import not_float_note, path_key
from dashboard.services.files.tensor import (
    FileExploration,
    extra_bytes_note,
    fits_matrix,
    matrix_shape,
)
from dashboard.services.sources.prepared import PreparedSource
from dashboard.services.state.source import source_to_query
from quant_core.files import QuantizedFile, StoredTensor

__all__ = [
    "nonfinite_stored_note",
    "original_picker",
    "quantized_file_view",
    "shows_stored",
    "undecoded_comparison",
]

_NONE, _FOLDER, _UPLOAD = "none", "folder", "upload"
_LABELS = {
    _NONE: "No original",
    _FOLDER: "A model folder or file on this machine",
    _UPLOAD: "Upload the original (.safetensors, .gguf)",
}


def original_picker(prefix: str) -> QuantizedFile | None:
    """The original weights to compare with (keys ``{prefix}_orig*``): a folder or file
    under the model roots, or an upload (a plain ``.safetensors`` checkpoint, or an F16
    ``.gguf``); ``None`` when none is given or it cannot be read (said on the page)."""
    roots = model_roots()
    kinds = [_NONE, _FOLDER, _UPLOAD] if roots.enabled else [_NONE, _UPLOAD]
    kind = st.radio(
        "Original weights",
        kinds,
        format_func=_LABELS.__getitem__,
        key=f"{prefix}_orig",
        horizontal=True,
        persist_state=PERSIST,
        help="The unquantized model the file was made from; its tensors are matched by name "
        "(GGUF's names mapped back to Hugging Face's).",
    )
    try:
        if kind == _FOLDER:
            path = st.text_input(
                "Path of the original (folder or file)",
                key=f"{prefix}_orig_path",
                persist_state=PERSIST,
                placeholder=str(roots.roots[0]),
            ).strip()
            if not path:
                return None
            return cache.quantized_folder(path_key(path, roots), path, roots)
        if kind == _UPLOAD:
            upload = st.file_uploader(
                "Original weights", type=["safetensors", "gguf"], key=f"{prefix}_orig_upload"
            )
            if upload is None:
                return None
            return cache.quantized_upload(upload.file_id, upload.name, upload.getvalue())
    except ValueError as exc:  # PathRefused, QuantizedFileError
        st.error(f"Original refused: {literal(exc)}")
    return None


def _no_original(prefix: str) -> str:
    """The caption's opening without an original: "No original given", or "No original
    read" once a folder or upload is picked (its path may be empty, or refused above:
    "Original refused: … does not exist" read beside "No original given")."""
    picked = st.session_state.get(f"{prefix}_orig", _NONE) != _NONE
    return "No original read" if picked else "No original given"


def _original_of(
    source: PreparedSource, original: QuantizedFile
) -> tuple[str, StoredTensor] | None:
    ft = source.file_tensor
    if ft is None:
        return None
    match = ft.file.original_name(ft.entry.name, {t.name for t in original.tensors})
    if match is None:
        st.warning(
            f"The original ({literal(original.name)}) holds no tensor named "
            f"{literal(ft.entry.name)}"
            + (" nor any Hugging Face name it maps back to." if ft.entry.original_names else ".")
        )
        return None
    note = not_float_note(original, match)
    if note is not None:
        st.warning(literal(note[0].upper() + note[1:] + "."))
    return match, cache.file_tensor(original.key, original, match).stored


def _titled(view: MapView, title: str) -> MapView:
    if isinstance(view, MapImage):
        return replace(view, title=title)
    fig = go.Figure(view)
    fig.update_layout(title={"text": title})
    return fig


def _metrics_table(fexp: FileExploration, type_name: str) -> pd.DataFrame:
    cmp = fexp.comparison
    rows = []
    if cmp is not None:
        for label, m in (
            (f"the file ({type_name})", cmp.file_metrics),
            ("the lab's round-to-nearest, same format", cmp.rtn_metrics),
        ):
            if m is not None:
                rows.append(
                    {
                        "quantization": label,
                        "mse": m.mse,
                        "rmse": m.rmse,
                        "max |error|": m.max_abs,
                        "sqnr (dB)": m.sqnr_db,
                        "cosine": m.cosine,
                    }
                )
    return pd.DataFrame(rows)


def _show_metrics(fexp: FileExploration, type_name: str) -> None:
    # errors at three significant digits: the default 4 decimals showed an MSE of 2.05e-6
    # as 0.000002, the file's and the lab's alike however much they differ
    table = _metrics_table(fexp, type_name)
    st.dataframe(
        table, hide_index=True, key="qf_table", column_config=with_error_formats(table.columns)
    )


def shows_stored(source: PreparedSource) -> bool:
    """Whether ``source``'s file tensor has codes and scales of its own to draw: a type the
    lab decodes, in blocks that fit the explorer's matrix (``fits_matrix``), decided from
    the stored tensor alone. A tensor stored as floats (GGUF's F32 norms, a checkpoint's
    unquantized embeddings) or in a type the lab does not decode has none: its values go
    to the ordinary explorer instead of an empty page."""
    ft = source.file_tensor
    if ft is None or ft.stored.quantized is None or source.nonfinite is not None:
        # non-finite stored values (a NaN or Inf scale in the file) have no exploration of
        # their codes: the ordinary explorer offers to quantize the finite ones
        return False
    return fits_matrix(ft.stored.quantized, *matrix_shape(ft.stored.shape))


def nonfinite_stored_note(source: PreparedSource) -> str | None:
    """Why a quantized file's tensor is shown as values, not as the file's codes: its stored
    scales decode to NaN or Inf (``shows_stored`` is False for it); else ``None``."""
    ft = source.file_tensor
    if ft is None or ft.stored.quantized is None or source.nonfinite is None:
        return None
    return (
        f"The file's {stored_type_label(ft.entry.type_name)} blocks of this tensor decode to "
        "values that are not finite (a scale stored as NaN or Inf): its codes are not drawn, "
        "and its values are explored as floats under the scheme picked here."
    )


def undecoded_comparison(source: PreparedSource) -> None:
    """The original picker (keys ``qf_orig*``) and the file's error against the original
    for a tensor the file stores quantized in a type the lab does not decode (GGUF's
    lattice IQ1/IQ2/IQ3 types, a bitsandbytes quant map other than its NF4 or FP4 table):
    its values go to the ordinary explorer (``shows_stored`` is False), which offered no
    original, while the whole model page compared it. Nothing
    for any other source or tensor. The lab's round-to-nearest is said to be unavailable
    (no format of the lab's to round in)."""
    ft = source.file_tensor
    if ft is None or not ft.entry.quantized or ft.stored.quantized is not None:
        return
    with st.expander("Compare with the original", expanded=False):
        original = original_picker("qf")
    match = None if original is None else _original_of(source, original)
    if original is None or match is None:
        return
    key = f"{source.key}|{original.key}|{match[0]}"
    try:
        fexp = cache.quantized_exploration(key, ft, match[1].dequantize(), match[0])
    except ValueError as exc:
        st.error(f"Cannot compare: {literal(exc)}")
        return
    if fexp.comparison is None:
        return
    st.subheader("The file against the original")
    _show_metrics(fexp, stored_type_label(ft.entry.type_name))
    if fexp.comparison.rtn_unavailable:
        st.caption(literal(fexp.comparison.rtn_unavailable))


def quantized_file_view(source: PreparedSource) -> None:
    """The explorer page for a tensor of a quantized file (``source.file_tensor``)."""
    ft = source.file_tensor
    if ft is None:
        raise TypeError("the quantized-file view needs a file tensor")
    url.write(source_to_query(source.choice))
    entry = ft.entry
    stored_type = stored_type_label(entry.type_name)  # "NF4 + double quant", not NF4_DQ
    st.caption(
        f"**{literal(source.label)}** · shape {list(entry.shape)} · stored as "
        f"**{literal(stored_type)}**"
    )
    # a row that wraps, each metric as wide as its text: in a third of the page a long
    # type was cut off ("GPTQ int4 g128 a…" at 1400 px, "NF4 + dou…" at 1100 px)
    row = st.container(horizontal=True, gap="medium", key="qf_stored")
    row.metric("Stored type", stored_type, width="content")
    row.metric("Bytes in the file", compact_bytes(entry.nbytes, 1), width="content")
    row.metric("Bits per weight, as stored", bits_text(entry.bits_per_weight), width="content")
    for note in source.notes:
        st.info(literal(note))

    with st.expander("Compare with the original", expanded=False):
        original = original_picker("qf")
    match = None if original is None else _original_of(source, original)
    original_name, original_values = (
        (None, None) if match is None else (match[0], match[1].dequantize())
    )
    key = f"{source.key}|{None if original is None else original.key}|{original_name}"
    try:
        fexp = cache.quantized_exploration(key, ft, original_values, original_name)
    except ValueError as exc:
        st.error(f"Cannot compare: {literal(exc)}")
        fexp = cache.quantized_exploration(f"{source.key}|none", ft, None, None)
    for note in fexp.order_notes:
        st.caption(literal(note))
    if fexp.unmodelled is not None:
        st.info(f"Only the values are shown: {literal(fexp.unmodelled)}.")
        if fexp.comparison is not None:
            _show_metrics(fexp, stored_type)
        return
    exp = fexp.stored
    if exp is None:
        return
    extra = extra_bytes_note(entry, exp.storage, ft.file.kind)
    if extra is not None:
        st.caption(literal(extra))
    name, described = format_label(exp.config), exp.config.describe()
    # a GPTQ or AWQ tensor's config is named by its description: say it once
    spelled = "" if exp.config.name == described else f" ({literal(described)})"
    st.caption(f"As the lab models it: **{literal(name)}**{spelled}.")
    rows, cols = exp.original.shape
    opts = view_options(reduced=needs_reduction((rows, cols)))
    figs = cache.overview(f"{key}|{opts!r}", exp, opts)
    if fexp.comparison is None:
        # an original given but not compared (no tensor of the name, another shape) is
        # said above; "No original given" under that warning or error read as if the
        # path typed had been lost
        st.caption(
            (
                f"{_no_original('qf')}: the 'original' map shows the stored values and the "
                "error is zero. Give the original above to see what the file's quantization "
                "changed."
            )
            if original is None
            else (
                f"Not compared with {literal(original.name)} (said above): the 'original' map "
                "shows the stored values and the error is zero."
            )
        )
    else:
        metrics_row(exp)
        st.subheader("The file against the lab's round-to-nearest of the original")
        _show_metrics(fexp, stored_type)
        if fexp.comparison.rtn_unavailable:
            st.caption(literal(fexp.comparison.rtn_unavailable))
        if fexp.rtn is not None:
            rtn_figs = cache.overview(f"{key}|rtn|{opts!r}", fexp.rtn, opts)
            pair = {
                "error": _titled(figs.error, f"Error of the file ({stored_type})"),
                "rtn_error": _titled(rtn_figs.error, "Error of the lab's round-to-nearest"),
            }
            if all(isinstance(v, MapImage) for v in pair.values()):
                image_maps(pair, key="qf_errors")  # type: ignore[arg-type]
            else:
                left, right = st.columns(2)
                for col, (name, fig) in zip((left, right), pair.items(), strict=True):
                    col.plotly_chart(fig, key=f"qf_{name}", config={"displaylogo": False})
    st.subheader("What the file stores")
    overview_maps(figs)
    stored_maps(key, exp)

    st.subheader("How a value becomes a code")
    block = block_chooser(exp.config, exp.n_blocks, key="qf_block")
    stats = cache.block_stats(f"{key}|{block}", exp, block)
    histogram_chart(cache.histogram(key, exp, block, stats), key="qf_histogram")
    panel = cache.teaching(key, exp, block, stats)
    st.markdown(panel.markdown)
    st.caption(panel.symbols)
    for note in panel.notes:
        st.info(note)
    static_table(panel.table, key="qf_worked")
