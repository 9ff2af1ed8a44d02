"""The benchmark helper, the Python side of csrc/bench/: gpuprofile.benchmark (benchmark.py: the
options, warm-up, batches and stopping rule), its results and comparisons (result.py), the CUPTI
clock (cupti.py) and gpuprofile.Stream (streams.py); saved results and `gpuprofile compare`
(files.py), and the pytest plugin's storage of runs (storage.py), gates (thresholds.py),
pytest-benchmark JSON (pytest_json.py), summary table (suite_summary.py) and histograms
(histogram.py). See docs/benchmark.md."""
