"""Quantization Lab: ``python -m dashboard`` (``dashboard.launch``: ``streamlit run
dashboard/app.py`` with the process prepared first), or ``streamlit run dashboard/app.py``."""

from __future__ import annotations

import streamlit as st

from dashboard.components import source, url
from dashboard.served import (
    apply_served_huge_pages,
    apply_served_nodelay,
    apply_served_threads,
    freeze_after_warm_up,
)
from quant_core import warm_up_in_background

# Page paths relative to this entrypoint: Streamlit resolves them against the main
# script's folder, under `streamlit run` and under AppTest alike (AppTest does not run
# this file with its own __file__, so an absolute path built from it is not found).
PAGES = "views"

# An emoji favicon is drawn in the page; a Material icon one is fetched from
# fonts.gstatic.com on every page load, a request an offline machine cannot answer.
st.set_page_config(page_title="Quantization Lab", page_icon="🧮", layout="wide")
# Nagle's algorithm off on the server's sockets: each response's last segment waited 40 ms.
apply_served_nodelay()
# Before any page allocates its tensors: torch's large buffers on huge pages.
apply_served_huge_pages()
# Threads first: the warm-up compiles its kernels for the number set now.
apply_served_threads()
# Compile quant_core's kernels in a daemon thread, once per process (a rerun finds it
# started); until they are ready, pages run the eager kernels, with the same results.
warm_up = warm_up_in_background()
page = st.navigation(
    [
        st.Page(
            f"{PAGES}/lessons.py", title="Lessons", icon=":material/school:", url_path="lessons"
        ),
        st.Page(f"{PAGES}/explorer.py", title="Explorer", icon=":material/grid_on:", default=True),
        st.Page(
            f"{PAGES}/sweep.py",
            title="Sweep & frontier",
            icon=":material/scatter_plot:",
            url_path="sweep",
        ),
        st.Page(f"{PAGES}/ab.py", title="A/B", icon=":material/compare:", url_path="ab"),
        st.Page(
            f"{PAGES}/model.py", title="Whole model", icon=":material/neurology:", url_path="model"
        ),
        st.Page(
            f"{PAGES}/layer.py", title="Layer outputs", icon=":material/layers:", url_path="layer"
        ),
        st.Page(
            f"{PAGES}/mixed.py", title="Mixed precision", icon=":material/tune:", url_path="mixed"
        ),
    ]
)
# The tensor picker is shared by every page; the whole-model, layer, lessons and mixed
# precision pages do not use it, so it stays folded there (but drawn, so nothing picked is lost).
source.draw_shared(collapsed=page.url_path in ("model", "layer", "lessons", "mixed"))
try:
    page.run()
finally:
    source.end_of_run()
    url.end_of_run()
    freeze_after_warm_up(warm_up)
