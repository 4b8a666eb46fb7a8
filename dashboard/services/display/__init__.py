"""What figures share: block reduction of large matrices for heatmaps."""
