"""The pytest plugin's storage, comparison and export on a GPU: runs are filed under the GPU's
name with its driver and CUDA versions, device-clock rows show their mode, the JSON export holds
the spin kernel's requested time, and a compare-fail expression catches a kernel made slower."""

import json

import numpy  # noqa: F401  (inline pytester runs drop modules they import; numpy cannot load twice)
import pytest

import gpuprofile as gp
from gpuprofile.bench.storage import machine_id, machine_info

pytestmark = pytest.mark.gpu
pytest_plugins = ["pytester"]

SUITE = """
import os
import pytest
import gpuprofile as gp
from gpuprofile.bench.storage import machine_id, machine_info

NS = int(os.environ.get("SPIN_NS", "200000"))

@pytest.mark.gpu_benchmark(mode="hot", max_time=1)
def test_spin(gpu_benchmark):
    gpu_benchmark(gp.kernels.spin, NS)
"""


@pytest.fixture
def suite(pytester, request):
    """The suite, with the plugin loaded where gpuprofile is importable but not installed (the
    GPU machine runs the checkout from PYTHONPATH: no pytest11 entry point there)."""
    if request.config.pluginmanager.get_plugin("gpuprofile") is None:
        pytester.makeconftest('pytest_plugins = ["gpuprofile.pytest_plugin"]')
    pytester.makepyfile(test_spin=SUITE)
    return pytester


def test_runs_carry_the_gpu_and_a_slower_kernel_fails_the_gate(suite, monkeypatch):
    pytester = suite
    out = pytester.path / "out.json"
    # 3 rounds a side: the gate needs an interval that covers the spread between runs (issue 44)
    first = pytester.runpytest("--gpu-benchmark-autosave", f"--gpu-benchmark-json={out}",
                               "--gpu-benchmark-rounds=3")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["test_spin.py::test_spin * hot *"])  # a device clock: its mode
    (folder,) = (pytester.path / ".gpu_benchmarks").iterdir()
    name = gp.device_info().name
    assert folder.name == machine_id(machine_info()) and "no_gpu" not in folder.name
    (run,) = folder.iterdir()
    data = json.loads(run.read_text())
    info = data["machine_info"]
    assert info["gpu"] == name and info["cuda_driver"] and info["cuda_runtime"].startswith("13.")
    assert info["nvidia_driver"]  # /proc/driver/nvidia/version on a machine with the driver
    median_s = json.loads(out.read_text())["benchmarks"][0]["stats"]["median"]
    assert 190e-6 <= median_s <= 230e-6  # the spin kernel's 200 µs
    monkeypatch.setenv("SPIN_NS", "300000")  # 1.5x slower
    slower = pytester.runpytest("--gpu-benchmark-compare", "--gpu-benchmark-compare-fail=median:10%",
                                "--gpu-benchmark-rounds=3")
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(["*median:10%*slower*"])
    monkeypatch.setenv("SPIN_NS", "200000")
    same = pytester.runpytest("--gpu-benchmark-compare=1", "--gpu-benchmark-compare-fail=median:10%",
                              "--gpu-benchmark-rounds=3")
    same.assert_outcomes(passed=1)
