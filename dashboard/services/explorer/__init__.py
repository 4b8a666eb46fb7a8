"""The explorer page: one tensor under one scheme (``explore``), its heatmaps, histogram,
teaching panel and downloads."""
