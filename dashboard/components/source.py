"""The tensor source picker (sidebar): synthetic, teaching examples, the bundled model,
or an uploaded file. Returns a ``PreparedSource`` or, on a load error, the previous one."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.components import persist, url
from dashboard.components.persist import PERSIST
from dashboard.services.io import LoadError
from dashboard.services.sources.choice import (
    ExampleSource,
    ModelSource,
    SourceChoice,
    SourceKind,
    SyntheticSource,
    UploadSource,
)
from dashboard.services.sources.examples import Example, example_tensor
from dashboard.services.sources.prepared import PreparedSource
from dashboard.services.sources.synthetic import (
    MAX_SYNTHETIC_ELEMENTS,
    OUTLIER_FRACTION_RANGE,
    OUTLIER_MAGNITUDE_RANGE,
    Distribution,
    SyntheticSpec,
)
from dashboard.services.state.source import source_from_query, source_to_query

_LAST_GOOD = "_last_good_source"
_UPLOAD = "_uploaded_file"
DEFAULT_CHOICE: SourceChoice = SyntheticSource(SyntheticSpec())

_KIND_LABELS = {
    SourceKind.SYNTHETIC: "Synthetic",
    SourceKind.EXAMPLE: "Teaching examples",
    SourceKind.MODEL: "Bundled model (all-MiniLM-L6-v2)",
    SourceKind.UPLOAD: "Upload a file",
}
_DIST_LABELS = {
    Distribution.NORMAL: "Normal N(0, 1)",
    Distribution.UNIFORM: "Uniform U(-1, 1)",
    Distribution.LAPLACE: "Laplace (unit variance)",
    Distribution.OUTLIERS: "Normal + outliers",
}

_DEFAULTS: dict[str, object] = {
    "src_kind": SourceKind.SYNTHETIC,
    "src_dist": Distribution.NORMAL,
    "src_rows": SyntheticSpec().rows,
    "src_cols": SyntheticSpec().cols,
    "src_seed": 0,
    "src_ofrac": SyntheticSpec().outlier_fraction,
    "src_omag": SyntheticSpec().outlier_magnitude,
    "src_ochan_on": False,
    "src_ochan": 0,
    "src_example": Example.COURSE_3X3,
}


def _seed_widgets_from_url() -> None:
    """On a session's first run, put the URL's source into the widgets' state."""
    try:
        choice = source_from_query(url.query_snapshot(), DEFAULT_CHOICE)
    except ValueError as exc:
        url.add_warning(f"Ignored the link's tensor source ({exc}); using the default.")
        choice = DEFAULT_CHOICE
    values: dict[str, object] = {}
    if isinstance(choice, SyntheticSource):
        spec = choice.spec
        values = {
            "src_kind": SourceKind.SYNTHETIC,
            "src_dist": spec.distribution,
            "src_rows": spec.rows,
            "src_cols": spec.cols,
            "src_seed": spec.seed,
            "src_ofrac": spec.outlier_fraction,
            "src_omag": spec.outlier_magnitude,
            "src_ochan_on": spec.outlier_channel is not None,
            "src_ochan": spec.outlier_channel or 0,
        }
    elif isinstance(choice, ExampleSource):
        values = {"src_kind": SourceKind.EXAMPLE, "src_example": choice.example}
    elif isinstance(choice, ModelSource):
        values = {"src_kind": SourceKind.MODEL, "src_model": choice.tensor}
    persist.set_values(values)


def _synthetic_choice() -> SourceChoice:
    dist = st.selectbox(
        "Distribution",
        list(Distribution),
        format_func=_DIST_LABELS.__getitem__,
        key="src_dist",
        persist_state=PERSIST,
    )
    c1, c2 = st.columns(2)
    rows = c1.number_input(
        "Rows", min_value=1, max_value=16384, step=64, key="src_rows", persist_state=PERSIST
    )
    cols = c2.number_input(
        "Cols", min_value=1, max_value=16384, step=64, key="src_cols", persist_state=PERSIST
    )
    seed = st.number_input(
        "Seed", min_value=0, max_value=2**31 - 1, key="src_seed", persist_state=PERSIST
    )
    frac = _DEFAULTS["src_ofrac"]
    magnitude = _DEFAULTS["src_omag"]
    channel = None
    if dist is Distribution.OUTLIERS:
        frac = st.slider(
            "Outlier fraction",
            min_value=OUTLIER_FRACTION_RANGE[0],
            max_value=OUTLIER_FRACTION_RANGE[1],
            step=0.0005,
            format="%.4f",
            key="src_ofrac",
            persist_state=PERSIST,
        )
    if dist is Distribution.OUTLIERS or st.session_state.get("src_ochan_on"):
        magnitude = st.number_input(
            "Outlier magnitude",
            min_value=OUTLIER_MAGNITUDE_RANGE[0],
            max_value=OUTLIER_MAGNITUDE_RANGE[1],
            key="src_omag",
            persist_state=PERSIST,
        )
    if st.checkbox("One outlier channel (column)", key="src_ochan_on", persist_state=PERSIST):
        st.session_state["src_ochan"] = min(int(st.session_state["src_ochan"]), int(cols) - 1)
        channel = int(
            st.number_input(
                "Outlier column",
                min_value=0,
                max_value=max(0, int(cols) - 1),
                key="src_ochan",
                persist_state=PERSIST,
            )
        )
    if rows * cols > MAX_SYNTHETIC_ELEMENTS:
        st.error(f"{rows} x {cols} exceeds the limit of {MAX_SYNTHETIC_ELEMENTS:,} elements.")
        raise _SourceError
    spec = SyntheticSpec(
        dist, int(rows), int(cols), int(seed), float(frac), float(magnitude), channel
    )
    return SyntheticSource(spec)


class _SourceError(Exception):
    """The picked source cannot be shown; an error is already on the page."""


def _model_choice() -> SourceChoice:
    infos = cache.model_tensor_infos()
    names = [i.name for i in infos]
    shapes = {i.name: i.shape for i in infos}
    persist.defaults({"src_model": None})
    if st.session_state.get("src_model") not in shapes:
        # A tampered or stale name: fall back to the first weight, and say so.
        if st.session_state.get("src_model") is not None:
            url.add_warning(f"Tensor {st.session_state['src_model']!r} is not in the model.")
        st.session_state["src_model"] = next(
            (n for n in names if n.endswith("query.weight")), names[0]
        )
    name = st.selectbox(
        "Weight tensor",
        names,
        format_func=lambda n: f"{n}  {list(shapes[n])}",
        key="src_model",
        persist_state=PERSIST,
    )
    return ModelSource(name)


def _upload_choice() -> tuple[SourceChoice, bytes]:
    upload = st.file_uploader(
        "File (.safetensors, .pt/.pth, .npy, .csv)",
        type=["safetensors", "pt", "pth", "npy", "csv"],
        key="src_upload",
    )
    if upload is not None:
        # Kept for the session, so the file is still there after visiting another page.
        st.session_state[_UPLOAD] = (upload.file_id, upload.name, upload.getvalue())
    kept = st.session_state.get(_UPLOAD)
    if kept is None:
        st.info("Upload a file to see its tensors.")
        raise _SourceError
    file_id, filename, data = kept
    if upload is None:
        st.caption(f"Using **{filename}**, uploaded earlier.")
        if st.button("Forget this file", key="src_upload_forget"):
            del st.session_state[_UPLOAD]
            st.rerun()
    try:
        infos = cache.upload_infos(file_id, filename, data)
    except LoadError as exc:
        st.error(str(exc))
        raise _SourceError from None
    name = None
    if len(infos) > 1:
        labels = {i.name: f"{i.name}  {list(i.shape)} {i.dtype}" for i in infos}
        persist.defaults({"src_upload_tensor": next(iter(labels))})
        if st.session_state["src_upload_tensor"] not in labels:
            st.session_state["src_upload_tensor"] = next(iter(labels))
        name = st.selectbox(
            f"Tensor ({len(infos)} in file)",
            list(labels),
            format_func=labels.__getitem__,
            key="src_upload_tensor",
            persist_state=PERSIST,
        )
    elif infos:
        name = infos[0].name
    return UploadSource(file_id, filename, name), data


def _load(choice: SourceChoice, data: bytes | None) -> PreparedSource:
    if isinstance(choice, SyntheticSource):
        tensor = cache.synthetic_tensor(repr(choice.spec), choice.spec)
        return cache.prepared(
            repr(choice), choice, tensor, f"synthetic {choice.spec.distribution.value}", ()
        )
    if isinstance(choice, ExampleSource):
        return cache.prepared(
            repr(choice), choice, example_tensor(choice.example), choice.example.label, ()
        )
    if isinstance(choice, ModelSource):
        loaded = cache.model_tensor(choice.tensor)
        label = f"all-MiniLM-L6-v2 · {choice.tensor}"
        return cache.prepared(repr(choice), choice, loaded.tensor, label, loaded.notes)
    if not isinstance(choice, UploadSource) or data is None:
        raise TypeError(f"unexpected source {choice!r}")
    loaded = cache.upload_tensor(choice.file_id, choice.filename, choice.tensor, data)
    label = choice.filename + (f" · {loaded.name}" if loaded.name else "")
    return cache.prepared(repr(choice), choice, loaded.tensor, label, loaded.notes)


def source_picker(collapsed: bool = False) -> PreparedSource | None:
    """Draw the source widgets in the sidebar; return the tensor to show.

    On a bad upload or input, an error is shown and the previous good source is returned
    (so the rest of the page keeps working); ``None`` only when there never was one.
    ``collapsed`` tucks the widgets into a closed expander (pages that do not use them).
    """
    if url.first_run("source"):
        _seed_widgets_from_url()
    persist.defaults(_DEFAULTS)
    box = st.sidebar.expander("Tensor", expanded=False) if collapsed else st.sidebar
    with box:
        if not collapsed:
            st.header("Tensor")
        kind = st.selectbox(
            "Source",
            list(SourceKind),
            format_func=_KIND_LABELS.__getitem__,
            key="src_kind",
            persist_state=PERSIST,
        )
        try:
            data = None
            if kind is SourceKind.SYNTHETIC:
                choice = _synthetic_choice()
            elif kind is SourceKind.EXAMPLE:
                example = st.selectbox(
                    "Example",
                    list(Example),
                    format_func=lambda e: e.label,
                    key="src_example",
                    persist_state=PERSIST,
                )
                choice = ExampleSource(example)
            elif kind is SourceKind.MODEL:
                choice = _model_choice()
            else:
                choice, data = _upload_choice()
            source = _load(choice, data)
        except _SourceError:
            source = None
        except (LoadError, ValueError) as exc:
            st.error(str(exc))
            source = None
    if source is None:
        previous = st.session_state.get(_LAST_GOOD)
        if previous is not None:
            st.info(f"Still showing the previous tensor: {previous.label}.")
        return previous
    st.session_state[_LAST_GOOD] = source
    return source


_DRAWN = "_source_drawn_this_run"


def draw_shared(collapsed: bool = False) -> None:
    """Entrypoint: draw the picker once for whichever page runs next.

    Widgets drawn by the entrypoint are the same widgets on every page, so the tensor
    (seeded from a link or picked by hand) survives page switches; a page's own widgets
    lose programmatically set values when the user leaves and returns (Streamlit 1.67).
    Pair with ``end_of_run`` in a ``finally``.
    """
    st.session_state[_DRAWN] = (source_picker(collapsed),)


def end_of_run() -> None:
    st.session_state.pop(_DRAWN, None)


def current_source() -> PreparedSource | None:
    """The tensor for this page: the entrypoint's pick in this run, or (when a page script
    runs on its own, as in tests) the picker drawn here."""
    drawn = st.session_state.get(_DRAWN)
    if drawn is not None:
        return drawn[0]
    return source_picker()


def finite_source_or_stop(purpose: str) -> PreparedSource:
    """The page's tensor, its caption and the URL's source keys; stops the page (with a
    message) when there is none or it holds NaN/Inf, which ``purpose`` cannot handle."""
    chosen = current_source()
    url.show_warnings()
    if chosen is None:
        st.stop()
    url.write(source_to_query(chosen.choice))
    st.caption(f"**{chosen.label}** · shape {list(chosen.original_shape)} · {chosen.dtype_label}")
    if chosen.nonfinite is not None:
        st.error(
            f"{chosen.nonfinite.describe()}: {purpose} needs finite values; the Explorer can "
            "quantize the finite ones, or pick another tensor."
        )
        st.stop()
    return chosen
