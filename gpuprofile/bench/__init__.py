"""The benchmark helper, the Python side of csrc/bench/: gpuprofile.benchmark (benchmark.py: the
options, warm-up, batches and stopping rule), its results and comparisons (result.py), the CUPTI
clock (cupti.py) and gpuprofile.Stream (streams.py). See docs/benchmark.md."""
