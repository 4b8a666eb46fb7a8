"""Streamlit caches over the services, keyed on small hashable inputs only.

Tensors are never hashed (``st.cache_*`` samples big arrays and returned stale results for
them; see shared notes): every cache takes a short string key built from frozen values
(``repr`` of a ``SourceChoice``/``QuantConfig``/``ViewOptions``) and receives the heavy
objects as ``_``-prefixed arguments, which Streamlit leaves out of the hash.
Every cache has bounded ``max_entries``. An exploration holds the dequantized matrix and the
codes (about 80 MB at 4096x4096, 1.3 GB at the 64-million-element limit, plus the error map
when a max-|value| overview asks for it), so at most four are kept.
"""

from __future__ import annotations

from .explorer import (
    algorithm_exploration,
    block_stats,
    download_files,
    exploration,
    histogram,
    original_overview,
    outlier_strip,
    overview,
    research_exploration,
    research_teaching,
    scale_map_figures,
    static_exploration,
    ste_panel,
    teaching,
)
from .files import (
    file_reports,
    file_tensor,
    quantized_exploration,
    quantized_folder,
    quantized_prepared,
    quantized_upload,
    upload_is_quantized,
)
from .layers import (
    ab_result,
    ab_schemes,
    compare_layer,
    layer_eval,
    layer_inputs,
    layer_plots,
    layer_sweep,
    smoothing_plots,
)
from .lessons import lesson_formats, lesson_forum, lesson_round_trip
from .model import (
    folder_reports,
    model_linears,
    model_outputs,
    model_report,
)
from .session import session_files
from .sources import (
    bundled_model,
    folder_tensor,
    linear_inputs,
    model_checkpoint,
    model_file,
    model_folders,
    model_tensor,
    model_tensor_infos,
    prepared,
    synthetic_tensor,
    typed_values,
    upload_infos,
    upload_tensor,
)

__all__ = [
    "ab_result",
    "ab_schemes",
    "algorithm_exploration",
    "block_stats",
    "bundled_model",
    "compare_layer",
    "download_files",
    "exploration",
    "file_reports",
    "file_tensor",
    "folder_reports",
    "folder_tensor",
    "histogram",
    "layer_eval",
    "layer_inputs",
    "layer_plots",
    "layer_sweep",
    "lesson_formats",
    "lesson_forum",
    "lesson_round_trip",
    "linear_inputs",
    "model_checkpoint",
    "model_file",
    "model_folders",
    "model_linears",
    "model_outputs",
    "model_report",
    "model_tensor",
    "model_tensor_infos",
    "original_overview",
    "outlier_strip",
    "overview",
    "prepared",
    "quantized_exploration",
    "quantized_folder",
    "quantized_prepared",
    "quantized_upload",
    "research_exploration",
    "research_teaching",
    "scale_map_figures",
    "session_files",
    "smoothing_plots",
    "static_exploration",
    "ste_panel",
    "synthetic_tensor",
    "teaching",
    "typed_values",
    "upload_infos",
    "upload_is_quantized",
    "upload_tensor",
]
