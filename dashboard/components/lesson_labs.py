"""The live lab of each lesson kind, opened at the course's settings: its widgets (keys
``lesson_*``, set back to the lesson's settings whenever another lesson opens), the
course's numbers as cards (key ``lesson_course``), what the lab computes, and one link
into the full page (the explorer, the whole-model page) at the same state."""

from __future__ import annotations

import hashlib

import streamlit as st

from dashboard import cache
from dashboard.components.charts import metric_cards, static_table
from dashboard.components.granularity import divisors
from dashboard.components.persist import PERSIST
from dashboard.components.source import load_choice
from dashboard.components.ste import ste_section
from dashboard.services.activations.layer import EvalSplit
from dashboard.services.activations.sentences import RangeMode
from dashboard.services.display.counts import counted
from dashboard.services.display.decimals import fixed_decimals
from dashboard.services.display.metric_help import Metric, metric_help
from dashboard.services.display.text import literal
from dashboard.services.explorer.explore import Exploration
from dashboard.services.explorer.metric_cards import MetricCard, exploration_cards
from dashboard.services.explorer.teaching import teaching_panel
from dashboard.services.lessons.catalog import (
    Control,
    ForumLab,
    LayerLab,
    Lesson,
    ModelLab,
    PackingLab,
    SteLab,
    TensorLab,
)
from dashboard.services.lessons.course import (
    explore_given,
    format_cards,
    forum_cards,
    given_formulas,
    layer_cards,
    loading_cards,
    model_cards,
    packing_cards,
    ste_cards,
    tensor_cards,
    w8a16_cards,
)
from dashboard.services.lessons.forum import ABSMAX_INT8
from dashboard.services.lessons.packing import (
    MAX_DRAWN_CODES,
    PACKING_BITS,
    packing_figure,
    packing_picture,
    parse_codes,
)
from dashboard.services.lessons.settings import (
    LAB_BITS,
    MAX_LAB_GROUP,
    LabFormat,
    LabGranularity,
    LabSettings,
)
from dashboard.services.model.files import list_linear_weights
from dashboard.services.sources.choice import (
    ExampleSource,
    ModelSource,
    TypedSource,
)
from dashboard.services.sources.examples import Example, example_tensor
from dashboard.services.sources.prepared import PreparedSource
from dashboard.services.sources.typed import TypedValuesError, format_values
from dashboard.services.state.group_size import nearest_size
from dashboard.services.state.lesson import page_href
from dashboard.services.state.model import ActivationChoice, ModelScheme, model_scheme_to_query
from dashboard.services.state.research import ResearchFormat, ResearchScheme, scheme_to_query
from dashboard.services.state.scheme import config_from_query, config_to_query
from dashboard.services.state.source import MAX_LINK_VALUES, source_to_query
from quant_core import Mode, PerGroup, QkVariant, QuantConfig, SchemePreset
from quant_core.calibration import HELD_OUT_SENTENCES

__all__ = ["draw_lab", "reset_lab"]

_FOR = "_lesson_lab_for"
# The group size the learner (or the lesson) chose, kept apart from the slider's value,
# which may hold the nearest size a narrower tensor allows (the 3x3 course tensor takes
# only 1 and 3): the choice comes back on a tensor it fits.
_GROUP = "lesson_group"
_GROUP_CHOSEN = "_lesson_group_chosen"
_DEFAULT_GROUP = 64


def reset_lab(lesson: Lesson) -> None:
    """When ``lesson`` is not the lesson the lab widgets were last set for, set them to its
    settings (before they are drawn)."""
    ss = st.session_state
    if ss.get(_FOR) == lesson.slug:
        return
    ss[_FOR] = lesson.slug
    lab = lesson.lab
    if isinstance(lab, TensorLab):
        s = LabSettings.of(lab.scheme)
        ss.update(
            lesson_format=s.format,
            lesson_bits=s.bits,
            lesson_mode=s.mode,
            lesson_gran=s.granularity,
        )
        if s.group_size:  # the course's own group size
            ss[_GROUP] = ss[_GROUP_CHOSEN] = s.group_size
        else:  # a lesson without groups keeps the learner's size for its slider
            ss.setdefault(_GROUP_CHOSEN, ss.get(_GROUP, _DEFAULT_GROUP))
            ss[_GROUP] = ss[_GROUP_CHOSEN]
        if lab.given is not None:
            ss.update(lesson_scale=float(lab.given[0]), lesson_zero=int(lab.given[1]))
    elif isinstance(lab, LayerLab | ModelLab):
        ss["lesson_preset"] = lab.preset
    elif isinstance(lab, PackingLab):
        ss.update(
            lesson_codes=", ".join(str(c) for c in lab.codes), lesson_pack_bits=lab.bits
        )
    elif isinstance(lab, ForumLab):
        ss["lesson_values"] = format_values(example_tensor(lab.source.example))
    elif isinstance(lab, SteLab):
        ss.update(lesson_ste_bits=lab.bits, lesson_qk=lab.variant)


def _open(label: str, href: str) -> None:
    st.markdown(f"[{label}]({href})")


def _explorer(label: str, query: dict[str, str], cfg: QuantConfig | None = None) -> None:
    """A link into the explorer at ``query``; with ``cfg``, only when the link carries it
    whole (a scale format such as MXFP4's E8M0 does not travel in links yet: then say so)."""
    if cfg is not None and config_from_query(config_to_query(cfg)) != cfg:
        st.caption(
            f"The explorer's links do not carry {cfg.name}'s scale format yet: open the "
            "explorer and pick the format there."
        )
        return
    _open(label, page_href("", query))


def draw_lab(lesson: Lesson) -> None:
    """The lab of ``lesson``, below its question."""
    lab = lesson.lab
    if isinstance(lab, TensorLab):
        _tensor_lab(lesson, lab)
    elif isinstance(lab, LayerLab):
        _layer_lab(lab)
    elif isinstance(lab, ModelLab):
        _model_lab(lab)
    elif isinstance(lab, PackingLab):
        _packing_lab()
    elif isinstance(lab, ForumLab):
        _forum_lab()
    elif isinstance(lab, SteLab):
        _ste_lab(lab)


def _course(cards: tuple[MetricCard, ...], of: str) -> None:
    if cards:
        st.subheader("The course's numbers")
        metric_cards((cards,), of, key="lesson_course")


# --- one tensor under one scheme ---------------------------------------------------------


def _settings(lab: TensorLab, cols: int) -> QuantConfig:
    """Draw the lab's scheme widgets; the scheme they make."""
    base = LabSettings.of(lab.scheme)
    controls = lab.controls
    fmt = base.format
    if Control.FORMAT in controls:
        fmt = st.selectbox(
            "Format",
            list(LabFormat),
            format_func=lambda f: f.label,
            key="lesson_format",
            persist_state=PERSIST,
        )
    linear = fmt is LabFormat.INT
    bits, mode = base.bits, base.mode
    if Control.BITS in controls and linear:
        bits = st.select_slider("Bits", list(LAB_BITS), key="lesson_bits", persist_state=PERSIST)
    if Control.MODE in controls and linear:
        mode = st.radio(
            "Mode",
            list(Mode),
            format_func=lambda m: m.value,
            key="lesson_mode", persist_state=PERSIST,
            horizontal=True,
        )
    gran, group = base.granularity, base.group_size
    if Control.GRANULARITY in controls and not fmt.named:
        gran = st.selectbox(
            "Scales",
            list(LabGranularity),
            format_func=lambda g: g.label,
            key="lesson_gran",
            persist_state=PERSIST,
        )
        if gran is LabGranularity.GROUP:
            group = _group_size(cols)
    settings = LabSettings(lab.scheme, fmt, bits if linear else 4, mode, gran, group)
    return settings.to_config(cols)


def _chose_group() -> None:
    st.session_state[_GROUP_CHOSEN] = st.session_state[_GROUP]


def _group_size(cols: int) -> int:
    """The group size slider over the divisors of ``cols`` (up to ``MAX_LAB_GROUP``), at
    the chosen size or, when ``cols`` does not take it, the nearest size it takes, with a
    note saying so."""
    ss = st.session_state
    sizes = [d for d in divisors(cols) if d <= MAX_LAB_GROUP]
    chosen = int(ss.get(_GROUP_CHOSEN, ss.get(_GROUP, _DEFAULT_GROUP)))
    ss[_GROUP_CHOSEN] = chosen
    fitted = nearest_size(chosen, sizes)
    if ss.get(_GROUP) != fitted:
        ss[_GROUP] = fitted
    group = int(
        st.select_slider(
            f"Group size (divisors of {cols})",
            sizes,
            key=_GROUP,
            on_change=_chose_group,
            persist_state=PERSIST,
        )
    )
    if group != chosen:
        st.caption(
            f"Group size {chosen} does not divide this tensor's rows of {cols} values: the "
            f"lab uses {group}, the nearest size that does. Your {chosen} comes back on a "
            "tensor it fits."
        )
    return group


def _tensor_lab(lesson: Lesson, lab: TensorLab) -> None:
    source = load_choice(lab.source)
    matrix = source.matrix
    cols = matrix.shape[1]
    _course(_course_cards(lesson, lab, source), "the course's settings")
    st.subheader("The lab")
    if lab.given is not None:
        c1, c2 = st.columns(2)
        scale = c1.number_input(
            "Scale s",
            min_value=0.01,
            max_value=1000.0,
            step=0.1,
            format="%.4f",
            key="lesson_scale",
            persist_state=PERSIST,
        )
        zero = c2.slider("Zero point z", -128, 127, key="lesson_zero", persist_state=PERSIST)
        exp = explore_given(matrix, float(scale), int(zero))
        cfg = exp.config
    else:
        cfg = _settings(lab, cols)
        try:
            exp = cache.exploration(f"lesson|{source.key}|{cfg!r}", matrix, cfg)
        except ValueError as exc:
            st.error(f"{cfg.name} cannot quantize this tensor: {exc}")
            return
    st.caption(f"**{source.label}** · shape {list(source.original_shape)} · {exp.describe()}")
    metric_cards(exploration_cards(exp), exp.describe(), key="lesson_metrics")
    panel = teaching_panel(exp, 0)
    if lab.given is not None:
        blocks = "with the scale and zero point picked by hand"
        lines = given_formulas(float(scale), int(zero))
    else:
        lines = panel.formulas
        blocks = "one scale for the whole tensor" if exp.n_blocks == 1 else (
            f"the first of {exp.n_blocks:,} blocks, each with its own scale"
        )
    st.markdown(
        f"How each value became its code, {blocks}:\n\n"
        + "\n\n".join(f"$$\n{line}\n$$" for line in lines)
    )
    static_table(panel.table, key="lesson_worked")
    if lab.round_trip:
        _round_trip(f"lesson|{source.key}|{cfg!r}", exp)
    if Control.FORMAT in lab.controls:
        gran = cfg.granularity
        group = gran.group_size if isinstance(gran, PerGroup) else _BASE_GROUP
        table = cache.lesson_formats(source.key, matrix, group)
        # MXFP4 and NVFP4 keep their own blocks and scale formats whatever the group size
        st.caption(
            f"Every format on this weight: int4, NF4, FP4 and FP8 with one fp32 absmax scale "
            f"per group of {group}; MXFP4 and NVFP4 as they ship, with their own blocks and "
            "scales (an E8M0 scale per 32 values; an FP8 scale per 16 and an fp32 one per "
            "tensor):"
        )
        st.dataframe(table, hide_index=True, key="lesson_format_table")
    query = {**source_to_query(lab.source), **config_to_query(cfg)}
    if lab.given is not None:
        st.caption(
            "The explorer picks s and z from the data (the next lesson's formulas): it opens "
            "this tensor at 8-bit asymmetric, per tensor."
        )
    _explorer("Open this in the explorer →", query, cfg)


_BASE_GROUP = 64


def _course_cards(
    lesson: Lesson, lab: TensorLab, source: PreparedSource
) -> tuple[MetricCard, ...]:
    """The course's numbers of a tensor lesson, at the lesson's own scheme (not the
    widgets')."""
    matrix = source.matrix
    if lesson.slug == "custom-quantizer":
        # from the file's header: no need to load the model to count its linear layers
        return w8a16_cards(matrix, len(list_linear_weights(cache.model_file())))
    if lab.round_trip:
        key = f"lesson|{source.key}|{lab.scheme!r}"
        exp = cache.exploration(key, matrix, lab.scheme)
        return loading_cards(cache.lesson_round_trip(key, exp), exp)
    if Control.FORMAT in lab.controls:
        gran = lab.scheme.granularity
        group = gran.group_size if isinstance(gran, PerGroup) else _BASE_GROUP
        return format_cards(
            cache.lesson_formats(source.key, matrix, group)
        )
    return tensor_cards(lesson.slug)


def _round_trip(key: str, exp: Exploration) -> None:
    rt = cache.lesson_round_trip(key, exp)
    st.subheader("Saved and loaded back")
    metric_cards((loading_cards(rt, exp),), exp.describe(), key="lesson_round_trip")
    st.dataframe(
        [
            {"tensor": t.name, "dtype": t.dtype, "shape": str(list(t.shape)), "bytes": t.nbytes}
            for t in rt.tensors
        ],
        hide_index=True,
        key="lesson_file_tensors",
    )


# --- a layer, a model ------------------------------------------------------------------


def _preset(lab: LayerLab | ModelLab) -> SchemePreset:
    return st.radio(
        "Scheme",
        list(lab.offered),
        format_func=lambda p: p.label,
        key="lesson_preset", persist_state=PERSIST,
        horizontal=True,
    )


def _layer_lab(lab: LayerLab) -> None:
    inputs = cache.layer_inputs(lab.layer, EvalSplit.CALIBRATION)
    evals = {
        p: cache.layer_eval(
            f"{lab.layer}|{EvalSplit.CALIBRATION.value}|dynamic|{p.scheme!r}",
            inputs,
            p.scheme,
            RangeMode.DYNAMIC,
            None,
        )
        for p in (SchemePreset.W8A16, SchemePreset.W8A8)
    }
    _course(layer_cards(evals), "W8A16 and W8A8")
    st.subheader("The lab")
    preset = _preset(lab)
    ev = cache.layer_eval(
        f"{lab.layer}|{EvalSplit.CALIBRATION.value}|dynamic|{preset.scheme!r}",
        inputs,
        preset.scheme,
        RangeMode.DYNAMIC,
        None,
    )
    out_f, in_f = inputs.weight.shape
    st.caption(
        f"**{lab.layer}** · W [{out_f}, {in_f}] · X [{inputs.x_eval.shape[0]} tokens, {in_f}] "
        f"· {preset.scheme.describe()}"
    )
    cards = (
        MetricCard(
            "Output MSE",
            f"{ev.metrics.mse:.3g}",
            metric_help(Metric.OUTPUT_MSE, repr(ev.metrics.mse)),
        ),
        MetricCard(
            "Output SQNR",
            f"{ev.metrics.sqnr_db:.1f} dB",
            metric_help(Metric.OUTPUT_SQNR, f"{ev.metrics.sqnr_db!r} dB"),
        ),
        MetricCard(
            "From the weights",
            "—" if ev.weight_only is None else f"{ev.weight_only.mse:.3g}",
            "output MSE of X Ŵᵀ + b: the weights' share",
        ),
        MetricCard(
            "From the inputs",
            "0 (float)" if ev.activation_only is None else f"{ev.activation_only.mse:.3g}",
            "output MSE of X̂ Wᵀ + b: the inputs' share",
        ),
    )
    metric_cards((cards,), preset.label, key="lesson_metrics")
    weight = preset.scheme.weight
    if weight is not None:
        _explorer(
            "Its weight in the explorer →",
            {**source_to_query(ModelSource(f"{lab.layer}.weight")), **config_to_query(weight)},
        )
    _open("This layer on the Layer outputs page →", page_href("layer", {}))


def _model_lab(lab: ModelLab) -> None:
    def scheme_of(preset: SchemePreset) -> ModelScheme:
        weight = preset.scheme.weight or QuantConfig()
        return ModelScheme.of(ActivationChoice(preset.value), weight=weight)

    course = scheme_of(lab.preset)
    outputs = cache.model_outputs(course.key(), course, HELD_OUT_SENTENCES)
    _course(model_cards(outputs, lab.preset.label), lab.preset.label)
    st.subheader("The lab")
    preset = _preset(lab)
    scheme = scheme_of(preset)
    shown = cache.model_outputs(scheme.key(), scheme, HELD_OUT_SENTENCES)
    metric_cards((model_cards(shown, preset.label),), preset.label, key="lesson_metrics")
    st.caption(
        f"{len(shown.layers)} linear layers quantized ({scheme.describe()}), "
        f"{len(shown.skipped)} kept in float; the worst sentence's cosine: "
        f"{shown.min_cosine:.5f}."
    )
    href = page_href("model", model_scheme_to_query(scheme))
    _open("Every layer on the Whole model page →", href)


# --- packing ------------------------------------------------------------------------------


def _packing_lab() -> None:
    _course(packing_cards(), "2-bit packing")
    st.subheader("The lab")
    c1, c2 = st.columns([3, 1])
    bits = c2.selectbox(
        "Bits per code", list(PACKING_BITS), key="lesson_pack_bits", persist_state=PERSIST
    )
    text = c1.text_input("Codes (unsigned integers)", key="lesson_codes", persist_state=PERSIST)
    try:
        codes = parse_codes(text, bits)
    except ValueError as exc:
        st.error(f"Codes: {literal(str(exc))}")
        return
    pic = packing_picture(codes, bits)
    cards = (
        MetricCard("Codes", f"{pic.n_codes:,}", f"at {bits} bits each"),
        MetricCard("Packed", f"{pic.packed_bytes:,} B", "ceil(codes × bits / 8)"),
        MetricCard("One per byte", f"{pic.one_per_byte_bytes:,} B", "as a torch.uint8 tensor"),
        MetricCard("As float32", f"{pic.fp32_bytes:,} B", "4 bytes per value"),
    )
    metric_cards((cards,), f"{bits}-bit packing", key="lesson_metrics")
    if pic.n_codes > MAX_DRAWN_CODES:
        st.caption(f"The picture shows the first {MAX_DRAWN_CODES} codes of {pic.n_codes:,}.")
    st.plotly_chart(
        packing_figure(pic), key="lesson_packing", config={"displaylogo": False, "staticPlot": True}
    )
    first = min(pic.packed_bytes, 4)
    st.caption(
        " · ".join(pic.describe_byte(j) for j in range(first))
        + (" · …" if pic.packed_bytes > first else "")
        + f". {counted(pic.padding_bits, 'padding bit')} at the end."
    )
    _explorer(
        f"A tensor's {bits}-bit codes in the explorer (its downloads pack them) →",
        {
            **source_to_query(ExampleSource(Example.COURSE_3X3)),
            **config_to_query(QuantConfig(bits, Mode.ASYMMETRIC)),
        },
    )


# --- the forum ----------------------------------------------------------------------------


def _forum_lab() -> None:
    text = st.text_area(
        "a (the thread's values; paste your own, 1-D or 2-D)",
        key="lesson_values", persist_state=PERSIST,
        height=90,
    )
    digest = hashlib.sha256((text or "").encode("utf-8", "surrogatepass")).hexdigest()
    try:
        values = cache.typed_values(digest, text or "")
    except TypedValuesError as exc:
        st.error(f"a: {literal(str(exc))}")
        return
    # how the text was read (a value past float32's range became inf, one value per line
    # made a vector), as the explorer says it: the refusal below is about those values
    for note in values.notes:
        st.caption(literal(note))
    try:
        ans = cache.lesson_forum(values.key, values.tensor)
    except ValueError as exc:
        st.error(f"a: {literal(str(exc))}")
        return
    _course(forum_cards(ans), "8-bit absmax")
    codes = ", ".join(str(int(c)) for c in ans.absmax.codes[:5])
    more = ", …" if ans.a.numel() > 5 else ""
    if float(ans.a.abs().max()) == 0.0:
        scale = f"max|a| = 0, so the lab stands in s = {ans.scale:g}"
    elif ans.scale_underflowed:
        scale = (
            f"max|a| / 127 = {ans.rule_scale:.4g} underflows float32, so the lab stands in "
            f"s = {ans.scale:.4g}"
        )
    else:
        scale = f"s = max|a| / 127 = {fixed_decimals(ans.scale, 6)}"
    st.markdown(
        f"**b is 8-bit symmetric absmax:** {scale}, codes "
        f"round(a / s) = {codes}{more}, b = s · code. **256 min-max levels** would give "
        f"{', '.join(fixed_decimals(float(v), 4) for v in ans.minmax.dequantized[:2])}, … "
        "instead."
    )
    if ans.below_min:
        i = ans.below_min[0]
        st.info(
            f"b[{i}] = {fixed_decimals(float(ans.b[i]), 4)} lies below min(a) = "
            f"{fixed_decimals(float(ans.a.min()), 4)}: no "
            "min-max level can be there, so b cannot come from a min-max grid."
        )
    st.caption("Side by side, value by value: absmax (b) and 256 min-max levels.")
    st.dataframe(ans.table(), hide_index=True, key="lesson_forum_table")
    st.caption("The 256 min-max levels, by code (scroll):")
    st.dataframe(
        ans.levels_table(), hide_index=True, height=250, width=280, key="lesson_levels"
    )
    st.caption("Where the size goes: b is a float32 copy; what is stored instead is smaller.")
    st.dataframe(
        [
            {"stored": s.name, "bits": s.total, "bytes": s.bytes}
            for s in ans.storage()
        ],
        hide_index=True,
        key="lesson_storage",
    )
    choice = TypedSource.of(values)
    if len(choice.text) > MAX_LINK_VALUES:
        st.caption("These values are too many for a link: the explorer opens without them.")
        return
    base = source_to_query(choice)
    _explorer("b in the explorer (int8 absmax) →", {**base, **config_to_query(ABSMAX_INT8)})
    minmax = ResearchScheme(ResearchFormat.MINMAX_LEVELS, 8)
    _explorer("The 256 min-max levels in the explorer →", {**base, **scheme_to_query(minmax)})


# --- the backward pass --------------------------------------------------------------------


def _ste_lab(lab: SteLab) -> None:
    source = load_choice(lab.source)
    c1, c2 = st.columns(2)
    bits = c1.select_slider(
        "Bits k", list(range(2, 9)), key="lesson_ste_bits", persist_state=PERSIST
    )
    variant = c2.selectbox(
        "q_k variant",
        list(QkVariant),
        format_func=lambda v: v.value,
        key="lesson_qk",
        persist_state=PERSIST,
    )
    st.caption(f"q_k {variant.value}: {variant.formula}")
    panel = cache.ste_panel(source.key, source.matrix, bits, variant, False)
    _course(ste_cards(panel), f"k = {bits}")
    st.subheader("The lab")
    st.caption(f"**{source.label}** · shape {list(source.original_shape)}")
    ste_section(source.key, source.matrix, bits, variant, False, "lesson_ste")
    dorefa = ResearchScheme(ResearchFormat.DOREFA, bits, variant, rescale=False)
    _explorer(
        "DoReFa on this tensor in the explorer →",
        {**source_to_query(lab.source), **scheme_to_query(dorefa)},
    )
