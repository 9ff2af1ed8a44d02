"""benchmarks/bench_training.py on a GPU: a short run of every single-GPU workload and tool
family gives every mode a finite overhead with an interval, kernel counts and its steps; the DDP
workload where 2 GPUs exist."""

import importlib.util
import json
import math
import subprocess
import sys

import pytest
from scripts import BENCHMARKS, load_benchmark

import gpuprofile as gp

pytestmark = pytest.mark.gpu

if gp.device_count() == 0:  # pragma: no cover
    pytest.skip("needs a CUDA device", allow_module_level=True)
if importlib.util.find_spec("torch") is None:  # pragma: no cover
    pytest.skip("needs torch", allow_module_level=True)

SCRIPT = BENCHMARKS / "bench_training.py"
family_modes = load_benchmark("bench_training").family_modes
SHORT = ["--rounds", "6", "--steps-per-block", "2", "--seconds-per-mode", "0.1"]


def _run(tmp_path, *argv, timeout=600):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), *SHORT, *argv, "--output", str(out)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


def _check_child(res, modes):
    assert "error" not in res, res
    assert list(res["modes"]) == modes
    assert res["modes"]["plain"]["steps"] == 6 * 2 and res["plain_step_ms"] > 0
    for mode in modes[1:]:
        m = res["modes"][mode]
        assert m["rounds"] == 6 and m["steps"] == 12, (mode, m)
        assert math.isfinite(m["overhead_pct"]) and m["overhead_pct"] > -50, (mode, m)
        lo, hi = m["ci95_pct"]
        assert lo <= m["overhead_pct"] <= hi, (mode, m)
        assert 0 < m["host_ms"] <= m["step_ms"], (mode, m)


@pytest.mark.parametrize("workload", ["mlp", "transformer"])
def test_single_gpu_workloads_every_family(tmp_path, workload):
    data, printed = _run(tmp_path, "--workloads", workload)
    children = data["workloads"][workload]
    gpu = children["gpuprofile"]
    _check_child(gpu, family_modes("gpuprofile", workload))
    assert gpu["kernels_per_step"] >= (60 if workload == "mlp" else 300)
    for mode in ("profile", "kernels_only", "line", "stack"):  # every kernel, whatever the mode
        assert gpu["modes"][mode]["kernels_per_step"] == pytest.approx(gpu["kernels_per_step"],
                                                                       rel=0.05)
    _check_child(children["torch"], family_modes("torch", workload))
    proton = children["proton"]
    if "skipped" not in proton:
        _check_child(proton, family_modes("proton", workload))
    assert printed.splitlines()[-1].startswith("target: <= 2 % of step time")


@pytest.mark.skipif(gp.device_count() < 2, reason="the DDP workload needs 2 GPUs")
def test_ddp_workload_on_two_ranks(tmp_path):
    data, _ = _run(tmp_path, "--workloads", "ddp", "--families", "gpuprofile,torch")
    for family in ("gpuprofile", "torch"):
        res = data["workloads"]["ddp"][family]
        assert "error" not in res, res
        assert [r["rank"] for r in res["ranks"]] == [0, 1]
        for r in res["ranks"]:
            _check_child(r, family_modes(family, "ddp"))
    # the ranks ran the same rounds in lockstep
    ranks = data["workloads"]["ddp"]["gpuprofile"]["ranks"]
    assert ranks[0]["modes"]["collectives"]["rounds"] == ranks[1]["modes"]["collectives"]["rounds"]
