"""The tensor source picker (sidebar): synthetic, teaching examples, the bundled model,
activations, an uploaded file or (where the server allows it) a model folder. Returns a
``PreparedSource`` or, on a load error, the previous one."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.components import persist, url
from dashboard.components.model_source import OTHER_PATH, folder_label, model_roots
from dashboard.components.persist import PERSIST
from dashboard.components.quantized_source import file_source
from dashboard.components.source_inputs import (
    DEFAULTS,
    KIND_LABELS,
    SourceUnavailable,
    activation_choice,
    example_choice,
    folder_choice,
    model_choice,
    offered_kinds,
    synthetic_choice,
    upload_choice,
)
from dashboard.services.activations.source import activation_label, activation_notes
from dashboard.services.display.labels import stored_type_label
from dashboard.services.display.text import literal
from dashboard.services.io import LoadError
from dashboard.services.model.checkpoint import Checkpoint
from dashboard.services.sources.choice import (
    ActivationSource,
    ExampleSource,
    FolderSource,
    ModelSource,
    SourceChoice,
    SourceKind,
    SyntheticSource,
    TypedSource,
    UploadSource,
)
from dashboard.services.sources.examples import Example, example_tensor
from dashboard.services.sources.prepared import PreparedSource
from dashboard.services.sources.synthetic import SyntheticSpec
from dashboard.services.state.source import (
    has_own_sentences,
    source_from_query,
    source_to_query,
)
from quant_core.files import QuantizedFile

_LAST_GOOD = "_last_good_source"
DEFAULT_CHOICE: SourceChoice = SyntheticSource(SyntheticSpec())


def _seed_widgets_from_url() -> None:
    """On a session's first run, put the URL's source into the widgets' state. A link to
    a model folder (or the bundled model) that names no tensor opens at the picker's
    first tensor."""
    params = url.query_snapshot()
    try:
        choice = source_from_query(params, DEFAULT_CHOICE)
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
    elif isinstance(choice, TypedSource):
        values = {
            "src_kind": SourceKind.EXAMPLE,
            "src_example": Example.TYPED,
            "src_typed": choice.text,
        }
    elif isinstance(choice, ModelSource):
        values = {"src_kind": SourceKind.MODEL}
        if choice.tensor is not None:
            values["src_model"] = choice.tensor
    elif isinstance(choice, FolderSource):
        if not model_roots().enabled:
            url.add_warning(
                "The link names a model folder, but this server does not allow reading "
                "model folders; using the default tensor."
            )
            values = {"src_kind": SourceKind.SYNTHETIC}
        else:
            values = {
                "src_kind": SourceKind.FOLDER,
                "src_folder": OTHER_PATH,
                "src_folder_path": choice.folder,
            }
            if choice.tensor is not None:
                values["src_folder_tensor"] = choice.tensor
    elif isinstance(choice, ActivationSource):
        values = {
            "src_kind": SourceKind.ACTIVATIONS,
            "src_layer": choice.layer,
            "src_ranges": choice.ranges,
            "src_own": False,
        }
        if has_own_sentences(params):
            url.add_warning(
                "The link was made with its author's own sentences, which links do not "
                "carry: showing the bundled calibration sentences instead."
            )
    persist.set_values(values)


def _load(
    choice: SourceChoice,
    data: bytes | None,
    checkpoint: Checkpoint | QuantizedFile | None = None,
) -> PreparedSource:
    """The tensor ``choice`` names, prepared; ``data``: an upload's bytes; ``checkpoint``:
    a model folder's headers (or a quantized file's), as ``folder_choice`` read them in
    this run."""
    if isinstance(choice, SyntheticSource):
        tensor = cache.synthetic_tensor(repr(choice.spec), choice.spec)
        return cache.prepared(
            repr(choice), choice, tensor, f"synthetic {choice.spec.distribution.value}", ()
        )
    if isinstance(choice, ExampleSource):
        return cache.prepared(
            repr(choice), choice, example_tensor(choice.example), choice.example.label, ()
        )
    if isinstance(choice, TypedSource):
        values = cache.typed_values(choice.key, choice.text)
        shape = "x".join(str(d) for d in values.tensor.shape)
        return cache.prepared(
            repr(choice), choice, values.tensor, f"your typed values ({shape})", values.notes
        )
    if isinstance(choice, ModelSource):
        loaded = cache.model_tensor(choice.tensor)
        label = f"all-MiniLM-L6-v2 · {choice.tensor}"
        return cache.prepared(repr(choice), choice, loaded.tensor, label, loaded.notes)
    if isinstance(choice, FolderSource) and isinstance(checkpoint, QuantizedFile):
        return file_source(choice, checkpoint, checkpoint.name)
    if isinstance(choice, FolderSource):
        if checkpoint is None:
            raise TypeError("a model folder's tensor needs the folder's checkpoint")
        loaded = cache.folder_tensor(checkpoint.key, checkpoint, choice.tensor)
        label = f"{folder_label(checkpoint.folder)} · {choice.tensor}"
        prepared_key = f"{checkpoint.key}|{choice.tensor}"
        return cache.prepared(prepared_key, choice, loaded.tensor, label, loaded.notes)
    if isinstance(choice, ActivationSource):
        capture = cache.linear_inputs(choice.shown.sentences)
        return cache.prepared(
            repr(choice),
            choice,
            capture[choice.layer],
            activation_label(choice),
            activation_notes(choice),
        )
    if not isinstance(choice, UploadSource) or data is None:
        raise TypeError(f"unexpected source {choice!r}")
    if cache.upload_is_quantized(choice.file_id, choice.filename, data):
        qfile = cache.quantized_upload(choice.file_id, choice.filename, data)
        return file_source(choice, qfile, choice.filename)
    loaded = cache.upload_tensor(choice.file_id, choice.filename, choice.tensor, data)
    label = choice.filename + (f" · {loaded.name}" if loaded.name else "")
    return cache.prepared(repr(choice), choice, loaded.tensor, label, loaded.notes)


def load_choice(choice: SourceChoice) -> PreparedSource:
    """The tensor ``choice`` names, prepared (cached), for a page that picks its own tensor
    (a lesson's lab): a teaching example, typed values, a bundled weight, a synthetic or
    an activation tensor. Not an upload nor a model folder: ``TypeError``."""
    if isinstance(choice, UploadSource | FolderSource):
        raise TypeError(f"{type(choice).__name__} needs the picker's upload or folder")
    return _load(choice, None)


def source_picker(collapsed: bool = False) -> PreparedSource | None:
    """Draw the source widgets in the sidebar; return the tensor to show.

    On a bad upload or input, an error is shown and the previous good source is returned
    (so the rest of the page keeps working); ``None`` only when there never was one.
    ``collapsed`` tucks the widgets into a closed expander (pages that do not use them).
    """
    if url.first_run("source"):
        _seed_widgets_from_url()
    persist.defaults(DEFAULTS)
    box = st.sidebar.expander("Tensor", expanded=False) if collapsed else st.sidebar
    with box:
        if not collapsed:
            st.header("Tensor")
        kinds = offered_kinds()
        if st.session_state.get("src_kind") not in kinds:
            st.session_state["src_kind"] = DEFAULTS["src_kind"]
        kind = st.selectbox(
            "Source",
            kinds,
            format_func=KIND_LABELS.__getitem__,
            key="src_kind",
            help=(
                "MiniLM is all-MiniLM-L6-v2, the sentence model that ships with the app. "
                "Its activations are the inputs of its linear layers, captured on sentences."
            ),
            persist_state=PERSIST,
        )
        try:
            data = checkpoint = None
            if kind is SourceKind.SYNTHETIC:
                choice = synthetic_choice()
            elif kind is SourceKind.EXAMPLE:
                choice = example_choice()
            elif kind is SourceKind.MODEL:
                choice = model_choice()
            elif kind is SourceKind.ACTIVATIONS:
                choice = activation_choice()
            elif kind is SourceKind.FOLDER:
                choice, checkpoint = folder_choice()
            else:
                choice, data = upload_choice()
            source = _load(choice, data, checkpoint)
        except SourceUnavailable:
            source = None
        except (LoadError, ValueError) as exc:
            st.error(literal(exc))
            source = None
    if source is None:
        previous = st.session_state.get(_LAST_GOOD)
        if previous is not None:
            st.info(f"Still showing the previous tensor: {literal(previous.label)}.")
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


def source_caption(chosen: PreparedSource) -> None:
    """The line under a page's title: the tensor's name (shown literally), shape and dtype
    (for a quantized file's tensor, the type it is stored as: its values are that type's
    dequantized ones, not an original's)."""
    shape = list(chosen.original_shape)
    dtype = literal(chosen.dtype_label)
    ft = chosen.file_tensor
    if ft is not None and ft.entry.quantized:
        stored = literal(stored_type_label(ft.entry.type_name))
        dtype = f"stored as **{stored}**, dequantized to {dtype}"
    elif ft is not None and ft.entry.type_name != "F32":
        # a file's F16/BF16 tensor is read as float32: name what the file holds too
        dtype = f"stored as **{literal(ft.entry.type_name)}**, read as {dtype}"
    st.caption(f"**{literal(chosen.label)}** · shape {shape} · {dtype}")


def finite_source_or_stop(purpose: str) -> PreparedSource:
    """The page's tensor, its caption and the URL's source keys; stops the page (with a
    message) when there is none or it holds NaN/Inf, which ``purpose`` cannot handle."""
    chosen = current_source()
    url.show_warnings()
    if chosen is None:
        st.stop()
    url.write(source_to_query(chosen.choice))
    source_caption(chosen)
    if chosen.nonfinite is not None:
        st.error(
            f"{chosen.nonfinite.describe()}: {purpose} needs finite values; the Explorer can "
            "quantize the finite ones, or pick another tensor."
        )
        st.stop()
    return chosen
