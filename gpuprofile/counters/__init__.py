"""Hardware counters, the Python side of csrc/counters/: gpuprofile.metrics (metrics.py, CUPTI's
range profiler), gpuprofile.stalls (stalls.py, PC sampling), gpuprofile.sample (sample.py, PM
sampling), gpuprofile.ceilings (roofline.py), the metric catalog (catalog.py) and named metric
sets (metric_sets.py), and the results with their verdicts (result.py, verdicts.py).
See docs/counters.md."""

from .metrics import REGION_MAX_KERNELS  # noqa: F401  (documented as gpuprofile.counters.REGION_MAX_KERNELS)
