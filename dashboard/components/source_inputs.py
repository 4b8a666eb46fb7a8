"""The tensor picker's inputs, one function per source kind: each draws its widgets (keys
``src_*``, kept across pages) and returns a ``SourceChoice``, or raises
``SourceUnavailable`` after putting its message on the page.

A new source kind is one more function here and a branch in ``source.source_picker``.
"""

from __future__ import annotations

import hashlib

import streamlit as st

from dashboard import cache
from dashboard.components import persist
from dashboard.components.model_source import folder_path_input, model_roots
from dashboard.components.persist import PERSIST
from dashboard.components.quantized_source import quantized_folder_choice, quantized_upload_choice
from dashboard.services.activations.sentences import CALIBRATION, RangeMode, SentenceSet
from dashboard.services.activations.source import capture_summary
from dashboard.services.display.counts import counted
from dashboard.services.display.text import literal
from dashboard.services.files.open import quantized_path
from dashboard.services.io import LoadError
from dashboard.services.model.checkpoint import Checkpoint
from dashboard.services.model.folder import snapshot_key
from dashboard.services.session_files import KeptUpload
from dashboard.services.sources.choice import (
    DEFAULT_ACTIVATION_LAYER,
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
from dashboard.services.sources.examples import Example
from dashboard.services.sources.synthetic import (
    MAX_SYNTHETIC_ELEMENTS,
    OUTLIER_FRACTION_RANGE,
    OUTLIER_MAGNITUDE_RANGE,
    SEED_RANGE,
    SIDE_RANGE,
    Distribution,
    SyntheticSpec,
)
from dashboard.services.sources.typed import MAX_TYPED_CHARS, MAX_TYPED_VALUES, TypedValuesError
from dashboard.services.state.algorithm import parse_sentences
from quant_core.files import QuantizedFile

UPLOAD = "_uploaded_file"

KIND_LABELS = {
    SourceKind.SYNTHETIC: "Synthetic",
    SourceKind.EXAMPLE: "Teaching examples",
    SourceKind.MODEL: "Bundled model (MiniLM)",
    SourceKind.UPLOAD: "Upload a file",
    SourceKind.ACTIVATIONS: "Activations (MiniLM inputs)",
    SourceKind.FOLDER: "Model folder on this machine",
}
_DIST_LABELS = {
    Distribution.NORMAL: "Normal N(0, 1)",
    Distribution.UNIFORM: "Uniform U(-1, 1)",
    Distribution.LAPLACE: "Laplace (unit variance)",
    Distribution.OUTLIERS: "Normal + outliers",
}

DEFAULTS: dict[str, object] = {
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
    "src_typed": "1.5, -0.2, 3.1\n0.7, 2.4, -1.8",
    "src_layer": DEFAULT_ACTIVATION_LAYER,
    "src_ranges": RangeMode.DYNAMIC,
    "src_own": False,
    "src_text": "\n".join(CALIBRATION.sentences),
    "src_folder_tensor": None,
}


def offered_kinds() -> list[SourceKind]:
    """Every source kind, the model folder only where the server names allowed roots."""
    enabled = model_roots().enabled
    return [k for k in SourceKind if k is not SourceKind.FOLDER or enabled]


def synthetic_choice() -> SourceChoice:
    dist = st.selectbox(
        "Distribution",
        list(Distribution),
        format_func=_DIST_LABELS.__getitem__,
        key="src_dist",
        persist_state=PERSIST,
    )
    c1, c2 = st.columns(2)
    rows = c1.number_input("Rows", *SIDE_RANGE, step=64, key="src_rows", persist_state=PERSIST)
    cols = c2.number_input("Cols", *SIDE_RANGE, step=64, key="src_cols", persist_state=PERSIST)
    seed = st.number_input("Seed", *SEED_RANGE, key="src_seed", persist_state=PERSIST)
    frac = DEFAULTS["src_ofrac"]
    magnitude = DEFAULTS["src_omag"]
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
        raise SourceUnavailable
    spec = SyntheticSpec(
        dist, int(rows), int(cols), int(seed), float(frac), float(magnitude), channel
    )
    return SyntheticSource(spec)


class SourceUnavailable(Exception):
    """The picked source cannot be shown; an error is already on the page."""


def example_choice() -> SourceChoice:
    example = st.selectbox(
        "Example",
        list(Example),
        format_func=lambda e: e.label,
        key="src_example",
        persist_state=PERSIST,
    )
    if example is Example.TYPED:
        return typed_choice()
    return ExampleSource(example)


def typed_choice() -> SourceChoice:
    """The box for the learner's own values (1-D or 2-D); a bad text shows its message."""
    text = st.text_area(
        "Values: one row per line, or [..] / [[..], [..]] as Python prints them",
        key="src_typed",
        height=110,
        max_chars=MAX_TYPED_CHARS,
        placeholder="0.9372, 2.3312, 3.2122  or  [[1, 2], [3, 4]]",
        persist_state=PERSIST,
        help=f"Up to {MAX_TYPED_VALUES:,} numbers, separated by commas, spaces or tabs; "
        "torch.tensor([...]) and np.array([...]) as printed are read too. nan and inf are "
        "allowed (the explorer leaves them out).",
    )
    digest = hashlib.sha256((text or "").encode("utf-8", "surrogatepass")).hexdigest()
    try:
        values = cache.typed_values(digest, text or "")
    except TypedValuesError as exc:
        st.error(f"Values: {literal(str(exc))}")
        raise SourceUnavailable from None
    for note in values.notes:
        st.caption(note)
    return TypedSource.of(values)


def model_choice() -> SourceChoice:
    infos = cache.model_tensor_infos()
    names = [i.name for i in infos]
    shapes = {i.name: i.shape for i in infos}
    name = persist.name_picker(
        "Weight tensor",
        names,
        "src_model",
        next((n for n in names if n.endswith("query.weight")), names[0]),
        lambda n: f"{n} · {list(shapes[n])}",
        stale=lambda n: f"Tensor {n!r} is not in the model.",
    )
    return ModelSource(name)


def upload_choice() -> tuple[SourceChoice, bytes]:
    upload = st.file_uploader(
        "File (.safetensors, .gguf, .pt/.pth, .npy, .csv)",
        type=["safetensors", "gguf", "pt", "pth", "npy", "csv"],
        key="src_upload",
        help="A quantized file (.gguf, a GPTQ/AWQ/compressed-tensors/bitsandbytes shard, "
        "the explorer's export) shows what it stores.",
    )
    kept = st.session_state.get(UPLOAD)
    if upload is not None and not (
        isinstance(kept, KeptUpload) and kept.file_id == upload.file_id and kept.data is not None
    ):
        # Kept for the session, so the file is still there after visiting another page;
        # its bytes go when the session ends (cache.session_files).
        kept = KeptUpload(upload.file_id, upload.name, upload.getvalue())
        st.session_state[UPLOAD] = kept
    data = cache.session_files().keep(kept).data if isinstance(kept, KeptUpload) else None
    if data is None:
        st.info("Upload a file to see its tensors.")
        raise SourceUnavailable
    file_id, filename = kept.file_id, kept.name
    if upload is None:
        st.caption(f"Using **{literal(filename)}**, uploaded earlier.")
        if st.button("Forget this file", key="src_upload_forget"):
            kept.release()
            del st.session_state[UPLOAD]
            st.rerun()
    try:
        if cache.upload_is_quantized(file_id, filename, data):
            return quantized_upload_choice(file_id, filename, data), data
        infos = cache.upload_infos(file_id, filename, data)
    except ValueError as exc:  # LoadError, QuantizedFileError
        st.error(literal(exc))
        raise SourceUnavailable from None
    name = None
    if len(infos) > 1:
        by_name = {i.name: i for i in infos}
        name = persist.name_picker(
            f"Tensor ({len(infos)} in file)",
            list(by_name),
            "src_upload_tensor",
            infos[0].name,
            lambda n: f"{n} · {by_name[n].dtype} · {list(by_name[n].shape)}",
        )
    elif infos:
        name = infos[0].name
    return UploadSource(file_id, filename, name), data


def activation_choice() -> SourceChoice:
    """Layer, sentences (the bundled calibration set or the user's own, one per line) and
    ranges (dynamic, or static: calibrated on those sentences, applied to held-out ones)."""
    sentences = CALIBRATION
    if st.checkbox("Use my own sentences", key="src_own", persist_state=PERSIST):
        text = st.text_area(
            "Sentences (one per line)", key="src_text", height=140, persist_state=PERSIST
        )
        try:
            sentences = SentenceSet(parse_sentences(text))
        except ValueError as exc:
            st.error(f"Sentences: {literal(exc)}")
            raise SourceUnavailable from None
        if not sentences.is_bundled:
            st.caption(
                "⚠️ Your own sentences are not kept in links: a shared link opens "
                "with the bundled ones."
            )
    capture = cache.linear_inputs(sentences.sentences)
    names = capture.layer_names
    layer = persist.name_picker(
        f"Layer ({len(names)} linear layers)",
        names,
        "src_layer",
        DEFAULT_ACTIVATION_LAYER,
        lambda n: f"{n} · input [tokens, {capture[n].shape[1]}]",
        stale=lambda n: f"Layer {n!r} is not in the model.",
    )
    ranges = st.radio(
        "Ranges",
        list(RangeMode),
        format_func=lambda r: r.label,
        key="src_ranges",
        persist_state=PERSIST,
        help="Static: ranges calibrated on the sentences above, applied to the bundled "
        "held-out sentences (their inputs are shown); values beyond them clip.",
    )
    choice = ActivationSource(layer, sentences, ranges)
    st.caption(capture_summary(capture, len(sentences.sentences)))
    if ranges is RangeMode.STATIC:
        shown = cache.linear_inputs(choice.shown.sentences)
        st.caption(f"Held-out: {capture_summary(shown, len(choice.shown.sentences))}")
    return choice


def folder_choice() -> tuple[SourceChoice, Checkpoint | QuantizedFile]:
    """A model folder under the allowed roots (found, or typed) and one of its tensors,
    listed from the shards' headers (returned too, so the folder is listed once a run);
    the tensor is read alone when shown. A quantized file or folder (a ``.gguf``, a
    GPTQ/AWQ/... folder) is listed by ``quant_core.files`` instead."""
    roots = model_roots()
    path = folder_path_input(roots, "src_folder")
    if not path:
        st.info(f"Give the path of a model folder inside {literal(roots.describe())}.")
        raise SourceUnavailable
    try:
        if quantized_path(path, roots):
            return quantized_folder_choice(path, roots)
    except ValueError as exc:  # PathRefused, QuantizedFileError
        st.error(f"Model folder refused: {literal(exc)}")
        raise SourceUnavailable from None
    try:
        checkpoint = cache.model_checkpoint(snapshot_key(path, roots), path, roots)
    except LoadError as exc:  # PathRefused, CheckpointError, io's refusals
        st.error(f"Model folder refused: {literal(exc)}")
        raise SourceUnavailable from None
    tensors = {t.name: t for t in checkpoint.tensors}
    if not tensors:
        st.error(f"{literal(checkpoint.folder.name)} lists no tensors.")
        raise SourceUnavailable
    first = checkpoint.linear_weights[:1] or checkpoint.tensors[:1]  # a weight, else any
    name = persist.name_picker(
        f"Tensor ({len(tensors):,} in {counted(len(checkpoint.shards), 'file')})",
        list(tensors),
        "src_folder_tensor",
        first[0].name,
        lambda n: f"{n} · {tensors[n].info.dtype} · {list(tensors[n].info.shape)}",
        stale=lambda n: f"Tensor {n!r} is not in this folder.",
        owner=path,
    )
    return FolderSource(path, name), checkpoint
