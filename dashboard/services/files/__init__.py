"""Quantized files as a source: which paths and uploads are quantized files, the tensor a
page shows from one (``FileTensor``), the explorer's view of what it stores against the
original, and the whole-file report. Built on ``quant_core.files``; never imports
Streamlit."""
