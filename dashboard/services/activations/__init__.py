"""Activations and layer outputs for the dashboard: sentence sets, static-range explorations,
the outlier strip, a layer's output under weight and activation schemes, SmoothQuant."""
