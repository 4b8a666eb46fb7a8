"""Quantization Lab's Streamlit app. ``services`` never imports Streamlit; ``components`` and
``views`` (the pages) only wire widgets to ``quant_core`` and ``services`` calls."""
