"""Mixed precision: every 2-D weight under every candidate scheme (the sensitivity table),
one scheme per tensor for a size budget, judged by what the model then computes, and the
recipe to take away. A model folder's table runs in worker processes, or on Ray when the
server names a cluster; a small folder's (``runner.small_table``) in the server's process,
whose kernels are warm."""

from __future__ import annotations

import os

import streamlit as st

from dashboard.cache import mixed as mixed_cache
from dashboard.components import url
from dashboard.components.mixed_controls import N_WEIGHTS, mixed_controls, ray_address
from dashboard.components.mixed_judge import judge_output
from dashboard.components.model_source import ModelFolder, model_picker, model_roots
from dashboard.services.display.counts import counted
from dashboard.services.display.metric_help import Metric, metric_help, size_ratio
from dashboard.services.display.sizes import compact_bytes
from dashboard.services.display.text import literal
from dashboard.services.files.open import QuantizedModel
from dashboard.services.io import LoadError
from dashboard.services.mixed.figures import (
    HeatMetric,
    allocation_table,
    cell_notes,
    curve_figure,
    heatmap_figure,
    mix_figure,
    progress_table,
    skip_reasons,
)
from dashboard.services.mixed.runner import (
    WAITING_TEXT,
    WARMING_TEXT,
    Placement,
    TaskFailed,
    Where,
    fill_table,
    pool_ready,
    prewarm,
    small_table,
)
from dashboard.services.mixed.sources import (
    file_checkpoint,
    gguf_checkpoint,
    gguf_task,
    quantized_model_note,
)
from dashboard.services.mixed.state import parse_pins
from dashboard.services.mixed.tasks import table_weight_count, tasks_for
from quant_core.mixed import (
    AllocationRules,
    BudgetOutOfRange,
    Floor,
    allocate,
    allocation_curve,
    build_problem,
    configs_of,
    uniform_allocation,
    uniform_points,
)
from quant_core.mixed.causal import (
    DEFAULT_MAX_TOKENS,
    ModelUnavailable,
    check_folder,
)
from quant_core.mixed.exports import recipe_json, table_csv, tensor_type_lines

LOCAL_WORKERS = max(1, min(4, os.cpu_count() or 1))
# A causal LM is run in float32 on this server's CPU: at most this many bytes as stored.
LM_LIMIT_BYTES = 3_000_000_000

st.title("Mixed precision")
model = model_picker()
# The model's checkpoint (headers only) before the sidebar: the budget box's +/- step in MB
# or GB is a quarter bit per weight of the table's weights, and a link's first run stepped
# by 1 MB or 0.01 GB while the count was not known. A GGUF of float tensors
# (convert_hf_to_gguf's output) is measured as a checkpoint, its tensors read through the
# quantized-file reader that listed it.
folder = model.checkpoint if isinstance(model, ModelFolder) else None
gguf = gguf_checkpoint(model.file) if isinstance(model, QuantizedModel) else None
checkpoint, unreadable = folder or gguf, ""
if checkpoint is None and model is not None and not isinstance(model, QuantizedModel):
    try:
        checkpoint = file_checkpoint(model.path)
    except (OSError, LoadError) as exc:
        unreadable = f"{literal(model.label)}: {literal(exc)}"
# the table's weight elements (a task per is_table_weight tensor): the budget's step and
# unit change, where the table runs and the 16-bit size below
n_elements = 0
if checkpoint is not None:
    n_elements = st.session_state[N_WEIGHTS] = table_weight_count(checkpoint)
controls = mixed_controls()
url.show_warnings()
if model is None:
    st.stop()
if isinstance(model, QuantizedModel) and gguf is None:
    st.info(literal(quantized_model_note(model)))
    st.stop()
if not controls.candidates:
    st.warning("Pick at least one candidate scheme.")
    st.stop()
if checkpoint is None:
    st.error(unreadable)
    st.stop()
candidates, budget, names = controls.candidates, controls.budget, controls.names

# A small folder's table runs here too, where the kernels are warm: fresh worker processes
# would compile theirs first (a minute or more); Ray is not even looked for then.
if folder is None:
    placement = Placement(Where.IN_PROCESS)
else:
    placement = small_table(n_elements) or mixed_cache.placement(ray_address(), LOCAL_WORKERS)
if placement.where is Where.LOCAL:
    # now, before the calibration below: the workers compile while the model runs (a
    # folder's table weighs every weight by importance when the toggle is on)
    prewarm(placement.workers, candidates, unweighted=not controls.weigh)

# Whether the model's output can be computed here: the bundled model always; a folder's
# causal LM when it has a config.json and fits this server's memory in float32.
lm_problem = None
if folder is not None and folder.stored_bytes > LM_LIMIT_BYTES:
    lm_problem = (
        f"{folder.stored_bytes / 1e9:.1f} GB is more than the {LM_LIMIT_BYTES / 1e9:.0f} GB "
        "this server runs a model of in float32"
    )
elif folder is not None:
    try:
        check_folder(folder.folder)
    except ModelUnavailable as exc:
        lm_problem = str(exc)
# Input importance and held-out inputs: the bundled model's from its sentences; a causal LM
# folder's from the calibration text run through the float model.
importance = held_out = None
if model.bundled:
    held_out = mixed_cache.bundled_held_out()
    if controls.weigh:
        importance = mixed_cache.bundled_importance()
elif folder is not None and controls.weigh and lm_problem is None:
    try:
        importance = mixed_cache.causal_importance(folder.key, folder.folder, DEFAULT_MAX_TOKENS)
    except ModelUnavailable as exc:
        lm_problem = str(exc)
if controls.weigh and importance is None:
    st.caption(
        "No inputs for this model: errors are plain sums of squared weight errors"
        + (f" ({literal(lm_problem)})." if lm_problem else ".")
    )

roots = model_roots() if folder is not None else None
tasks = tasks_for(checkpoint, candidates, roots, importance, held_out)
if not tasks:
    st.warning(f"{literal(model.label)} holds no 2-D weights to quantize.")
    st.stop()
if placement.message:
    st.warning(literal(placement.message))
st.caption(
    f"**{literal(model.label)}** · {counted(len(tasks), 'weight')} × "
    f"{counted(len(candidates), 'scheme')} · the "
    f"table runs on {literal(placement.describe())}"
)
if placement.where is Where.LOCAL and not pool_ready(placement.workers):
    st.caption(WARMING_TEXT)

bar = st.progress(0.0)
live = st.empty()


def show(results, total):
    bar.progress(
        len(results) / max(total, 1),
        text=f"{len(results):,} of {counted(total, 'weight')} measured",  # "of 1 weight"
    )
    live.dataframe(progress_table(results.values()), hide_index=True)  # redrawn: no key


table_key = f"{model.key}|{','.join(names)}|{'imp' if importance else 'plain'}"
try:
    results = fill_table(
        mixed_cache.tables(),
        table_key,
        tasks,
        placement,
        on_progress=show,
        on_wait=lambda: bar.progress(0.0, text=WAITING_TEXT),
        **({"task_fn": gguf_task(model.file)} if isinstance(model, QuantizedModel) else {}),
    )
except (TaskFailed, LoadError) as exc:
    st.error(f"The table stopped: {literal(exc)}")
    st.stop()
bar.empty()
live.empty()
rows = tuple(r for t in tasks for r in results[t.tensor].rows)
for note in cell_notes(rows):
    st.caption(literal(note))

# A bad pin drops the pins, not the floor too: "Rules: pin line 1: ..." allocated with no
# floor either, and nothing said so.
floor = Floor(controls.floor) if controls.floor else None
kept_rule = "; the allocation below has no pins" + (
    f" (the floor {controls.floor} still holds)" if floor is not None else ""
)
try:
    problem = build_problem(rows, AllocationRules(floor, parse_pins(controls.pins_text, names)))
except ValueError as exc:
    st.error(f"Rules: {literal(exc)}{literal(kept_rule)}.")
    problem = build_problem(rows, AllocationRules(floor))
for note in problem.notes:
    st.caption(literal(note) + ".")

alloc = None
try:
    alloc = allocate(problem, budget)
except BudgetOutOfRange as exc:
    st.error(str(exc))
chosen = alloc.recipe() if alloc is not None else None
heat = HeatMetric.WEIGHTED_SQNR
if any(r.output_mse is not None for r in rows):
    heat = st.radio(
        "Heatmap", list(HeatMetric), format_func=lambda m: m.value, key="mx_heat", horizontal=True
    )
st.plotly_chart(heatmap_figure(rows, chosen, heat), key="mx_heatmap")
if alloc is None:
    st.download_button(
        "Table (CSV)",
        table_csv(rows),
        "sensitivity.csv",
        "text/csv",
        key="mx_csv_only",
        on_click="ignore",
    )
    st.stop()

fp_bytes = n_elements * 2
c1, c2, c3, c4 = st.columns(4)
c1.metric(
    "Bits per weight", f"{alloc.bits_per_weight:.3f}", help=metric_help(Metric.BITS_PER_ELEMENT)
)
c2.metric("Size", compact_bytes(alloc.total_bytes), help=metric_help(Metric.BYTES))
c3.metric(
    *size_ratio("16-bit", fp_bytes / max(alloc.total_bytes, 1)),
    help=metric_help(Metric.SIZE_RATIO),
)
# the label short enough for a quarter of the page at a 1100 px window ("Total error (Σ
# noise/sig…" was cut off there); what it sums is in the help
c4.metric(
    "Total error",
    f"{alloc.total_error:.4g}",
    help="Σ noise/signal: each tensor's squared error over its squared values (weighed by "
    "input importance when that is on), summed over the tensors. The allocation makes it "
    "as small as the budget allows.",
)
st.caption(
    f"Budget {budget.describe()} = {compact_bytes(alloc.budget_bits // 8)} for these weights; "
    f"λ = {alloc.lagrange:.3g} error per bit, {counted(alloc.fixup_moves, 'fix-up move')}"
    + (f"; the uniform {alloc.uniform} did better and was taken" if alloc.uniform else "")
    + "."
)
# The curve is drawn at its own width on a row of its own: its labels are laid out for a
# plot of PlotBox's 340 px, and half the page at a 1100 px window left some 200 px (Q6_K's
# label, the subtitle and the axis title were cut off at the right edge).
st.plotly_chart(mix_figure(alloc), key="mx_mix")
uniform = uniform_points(problem)
st.plotly_chart(
    curve_figure(allocation_curve(problem), uniform, alloc), key="mx_curve", width="content"
)

# The judgement runs the model (seconds); the allocation's table and downloads come first in
# time, so a click on "Recipe (JSON)" while the model still runs gets this budget's recipe,
# not the previous one's. On the page they stay below the judgement. A download does not
# rerun the page (on_click="ignore").
judged, taken = st.container(), st.container()
with taken:
    st.subheader("Allocation")
    st.dataframe(allocation_table(rows, alloc), hide_index=True, key="mx_alloc")
    st.subheader("Take it away")
    types = tensor_type_lines(alloc, rows, {t.tensor: t.dtype for t in tasks})
    d1, d2, d3 = st.columns(3)
    d1.download_button(
        "llama.cpp --tensor-type file",
        types.file_text(),
        "tensor-types.txt",
        key="mx_dl_types",
        on_click="ignore",
        # with no line the file would be empty: a download that says nothing
        disabled=not types.lines,
    )
    d2.download_button(
        "Recipe (JSON)",
        recipe_json(alloc, candidates, budget, model.label, rows),
        f"recipe-{budget.describe().replace(' ', '')}.json",
        "application/json",
        key="mx_dl_json",
        on_click="ignore",
    )
    d3.download_button(
        "Table (CSV)",
        table_csv(rows, alloc.recipe()),
        "sensitivity.csv",
        "text/csv",
        key="mx_dl_csv",
        on_click="ignore",
    )
    if types.lines:
        st.code(types.command_args(), language="bash")
    if types.skipped:
        st.caption(
            f"{len(types.skipped):,} of {counted(len(alloc.recipe()), 'tensor')} "
            f"{'has' if len(types.skipped) == 1 else 'have'} no --tensor-type "
            f"line ({skip_reasons(types.skipped)}): the JSON recipe has them all."
        )
with judged:
    st.subheader("Judged by the model's output")
    # against the uniform scheme of the nearest size
    nearest = min(uniform, key=lambda p: abs(p.bits - alloc.total_bits))
    base = uniform_allocation(problem, nearest.label)
    shapes = {t.tensor: t.shape for t in tasks}
    judge_output(
        model.bundled,
        folder,
        lm_problem,
        {
            f"mixed ({alloc.bits_per_weight:.3f} bits/w)": configs_of(alloc, candidates, shapes),
            f"uniform {nearest.label} ({base.bits_per_weight:.3f} bits/w)": configs_of(
                base, candidates, shapes
            ),
        },
    )
