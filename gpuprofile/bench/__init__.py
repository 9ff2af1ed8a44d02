"""The benchmark helper, the Python side of csrc/bench/: gpuprofile.benchmark (benchmark.py: a
measurement from start to result; options.py: its options, defined once; sources.py: where
samples come from; loop.py: warm-up, batches and the stopping rule), its results and comparisons
(result.py), the gates' one decision rule (gate.py), A/B in one run (ab.py) and the CUPTI clock
(cupti.py); saved results and `gpuprofile compare` (files.py),
and the pytest plugin's storage of runs (storage.py), gates (thresholds.py), pytest-benchmark
JSON (pytest_json.py), summary table (suite_summary.py) and histograms (histogram.py). See
docs/benchmark.md."""
