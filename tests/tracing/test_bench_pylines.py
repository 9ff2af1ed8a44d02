"""benchmarks/bench_pylines.py without a GPU: its statistics and its argument errors."""

import subprocess
import sys

from scripts import BENCHMARKS, load_benchmark

SCRIPT = BENCHMARKS / "bench_pylines.py"


def _module():
    return load_benchmark("bench_pylines")


def test_median_and_its_interval_from_order_statistics():
    ci = _module()._median_ci
    assert ci(list(range(101))) == (50, 40, 60)  # (101 -/+ 1.96*sqrt(101)) / 2: 40.6, 60.4
    assert ci([3.0]) == (3.0, 3.0, 3.0)
    med, lo, hi = ci([5, 1, 4, 2, 3, 100, -50, 0])
    assert med == 2.5 and (lo, hi) == (0, 5)  # ranks 1 and 6 of 0..7


def test_every_mode_is_described_and_passes_valid_arguments():
    mod = _module()
    assert set(mod.MODES) | {"api_records", "line_no_regions"} == set(mod.MODE_TEXT)
    for domains, work, whole in mod.MODES.values():
        assert domains in (1, 2, 3) and work in (0, 1, 2) and isinstance(whole, bool)


def test_unknown_workload_is_an_argument_error():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--workloads", "c_loop,bogus"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown workload(s) ['bogus']" in proc.stderr
