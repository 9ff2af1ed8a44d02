"""benchmarks/bench_gate_flags.py: its verdicts and counts on fixed intervals, a short host-only
run end to end, and (marker `gpu`) a short run with the GPU workload."""

import json
import math
import subprocess
import sys

import pytest
from scripts import BENCHMARKS, load_benchmark

flags = load_benchmark("bench_gate_flags")


@pytest.mark.parametrize("a, b, pct, expected", [
    ((1.0, 1.1), (1.2, 1.3), 0, "slower"),  # ratio bounds 1.2/1.1 .. 1.3
    ((1.0, 1.1), (1.2, 1.3), 10, "same"),  # 1.09 is not beyond 1.10
    ((1.2, 1.3), (1.0, 1.1), 0, "faster"),
    ((1.0, 1.1), (1.05, 1.2), 0, "same"),
    ((math.nan, math.nan), (1.0, 1.1), 0, "same"),  # undefined: no flag
])
def test_flagged(a, b, pct, expected):
    assert flags.flagged(a, b, pct) == expected


def test_tally_counts_both_directions():
    pairs = [((1.0, 1.1), (1.2, 1.3)), ((1.2, 1.3), (1.0, 1.1)), ((1.0, 1.1), (1.0, 1.1)),
             ((1.0, 1.1), (1.0, 1.1))]
    got = flags.tally(pairs, lambda x: x, [0, 50])
    assert got == {"0": {"slower": 1, "faster": 1, "rate": 0.5},
                   "50": {"slower": 0, "faster": 0, "rate": 0.0}}


def run_script(tmp_path, *extra):
    out = tmp_path / "flags.json"
    res = subprocess.run([sys.executable, str(BENCHMARKS / "bench_gate_flags.py"), "--pairs", "2",
                          "--rounds", "2", "--max-time", "0.2", "--output", str(out), *extra],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res, json.loads(out.read_text())


def test_a_short_host_run_writes_its_json(tmp_path):
    res, data = run_script(tmp_path, "--host-only")
    assert set(data["workloads"]) == {"host call (adaptive)", "host call (pedantic, 1 call per sample)"}
    for w in data["workloads"].values():
        assert set(w["flags"]) == {"bare", "one run", "rounds=2"}
        assert set(w["flags"]["one run"]) == {"0", "5"} and w["clock"] == "host"
    assert data["pairs"] == 2 and data["rounds"] == 2 and "false flags" in res.stdout


@pytest.mark.gpu
def test_a_short_run_with_the_gpu_workload(tmp_path):
    _, data = run_script(tmp_path)
    gpu = data["workloads"]["gpu spin 5 us (cold)"]
    assert gpu["clock"] in ("cupti", "gpu") and 0.004 < gpu["median_ms"] < 0.008
    assert data["machine"]["device"]
