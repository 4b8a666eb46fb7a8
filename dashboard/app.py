"""Quantization Lab: ``streamlit run dashboard/app.py``."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard.components import source

PAGES = Path(__file__).parent / "views"

st.set_page_config(page_title="Quantization Lab", page_icon=":material/grid_on:", layout="wide")
page = st.navigation(
    [
        st.Page(PAGES / "explorer.py", title="Explorer", icon=":material/grid_on:", default=True),
        st.Page(
            PAGES / "sweep.py",
            title="Sweep & frontier",
            icon=":material/scatter_plot:",
            url_path="sweep",
        ),
        st.Page(PAGES / "ab.py", title="A/B", icon=":material/compare:", url_path="ab"),
        st.Page(
            PAGES / "model.py", title="Whole model", icon=":material/neurology:", url_path="model"
        ),
        st.Page(
            PAGES / "layer.py", title="Layer outputs", icon=":material/layers:", url_path="layer"
        ),
    ]
)
# The tensor picker is shared by every page; the whole-model page does not use it, so it
# stays folded there (but drawn, so nothing picked is lost).
source.draw_shared(collapsed=page.url_path == "model")
try:
    page.run()
finally:
    source.end_of_run()
