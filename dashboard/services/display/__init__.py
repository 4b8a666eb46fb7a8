"""What figures share: block reduction of large matrices (``reduce``) and colour-mapped
PNG images of them (``image``), for maps too large to send as heatmaps."""
