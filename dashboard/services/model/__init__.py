"""A whole model under one scheme: its weights file (``files``), the per-layer report
(``evaluate``), the sentence embeddings (``embeddings``) and their figures."""
