"""Which tensor a page shows, and making it ready to show: synthetic draws, the teaching
examples, the choice value that names a source, and its 2-D view with NaN/Inf located."""
