"""What the pages compute: pure functions and frozen dataclasses, never Streamlit.

One subpackage per concern:

- ``io``: reading tensors from files (one module per format behind one front).
- ``sources``: which tensor a page shows (synthetic, examples, model, upload) and making it
  ready for display (2-D view, NaN/Inf).
- ``state``: validated URL query parameters for schemes, sources and explorer views.
- ``explorer``: one tensor under one scheme: quantize and measure, heatmaps, histogram,
  teaching panel, downloads.
- ``compare``: many schemes (sweep, Pareto frontier) and two schemes (A/B).
- ``model``: a whole model file under one scheme, and its sentence embeddings.
- ``display``: what every figure shares (block reduction of large matrices).
"""
