"""benchmarks/bench_gate_flags.py: its tallies on fixed verdicts, a short host-only run end to
end, and (marker `gpu`) a short run of the GPU mode."""

import json
import subprocess
import sys

import pytest
from scripts import BENCHMARKS, load_benchmark

flags = load_benchmark("bench_gate_flags")


def test_tally_counts_false_alarms_and_detections():
    got = flags.tally(["slower", "faster", "same", "inconclusive"])
    assert got == {"pairs": 4, "slower": 1, "faster": 1, "same": 1, "inconclusive": 1, "unknown": 0,
                   "flagged": 0.5, "detected": 0.25}


def test_smallest_caught_is_the_smallest_change_at_95_percent():
    ladder = {"5": {"detected": 0.4}, "10": {"detected": 0.96}, "20": {"detected": 1.0}}
    assert flags.smallest_caught(ladder) == 10.0
    assert flags.smallest_caught({"5": {"detected": 0.9}}) is None


def test_host_pair_plants_exactly_that_much_work():
    a, b = flags.host_pair(10.0)
    assert a() is None and b() is None  # busy-waits; their lengths are 20 us and 22 us


def run_script(tmp_path, *extra):
    out = tmp_path / "flags.json"
    res = subprocess.run([sys.executable, str(BENCHMARKS / "bench_gate_flags.py"), "--pairs", "2",
                          "--detect-pairs", "2", "--ab-rounds", "6", "--output", str(out), *extra],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res, json.loads(out.read_text())


def test_a_short_host_run_writes_its_json(tmp_path):
    res, data = run_script(tmp_path, "--changes", "30")
    w, python_call = data["workloads"].values()
    assert set(python_call) == {"stored, one run, unchanged", "stored, rounds=3, unchanged", "A/B, unchanged"}
    assert set(w) == {"stored, one run, unchanged", "stored, rounds=3, unchanged", "A/B, unchanged",
                      "A/B, planted 10 %", "stored, rounds=3, planted 30 %",
                      "stored smallest change caught in 95 %"}
    assert w["A/B, unchanged"]["pairs"] == 2 and data["threshold_pct"] == 5.0
    assert "gate error rates at default settings" in res.stdout


@pytest.mark.gpu
def test_a_short_run_of_the_gpu_mode(tmp_path):
    _, data = run_script(tmp_path, "--gpu", "--changes", "10")
    assert set(data["workloads"]) == {"GPU spin short (5 us), auto clock", "GPU spin long (500 us), auto clock"}
    assert data["machine"]["device"]
