"""Computation behind the pages: pure functions and frozen dataclasses, no Streamlit."""
