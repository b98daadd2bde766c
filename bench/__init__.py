"""kbroker benchmarks: scripts that print figures and ratios (not tests). See bench/README.md."""
