"""The benchmark helper, the Python side of csrc/bench/: gpuprofile.benchmark (benchmark.py: a
measurement from start to result; options.py: its options, defined once; sources.py: where
samples come from; loop.py: warm-up, batches and the stopping rule), its results and comparisons
(result.py) and the CUPTI clock (cupti.py). See docs/benchmark.md."""
