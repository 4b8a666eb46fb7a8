"""Streamlit components: each draws its widgets, owns its keys and returns a typed value."""
