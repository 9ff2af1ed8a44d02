"""CUPTI tracing on a GPU, against ground truth: kernels whose launch configuration, registers and
shared memory are known; the region open at each launch; timestamps against host clocks; copies
and sets; occupancy against CUDA's calculator; 100k kernels without a dropped record; faults."""

import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile.tracing.occupancy import limits_for, occupancy

pytestmark = pytest.mark.gpu

C = gp._C
PROBE = "gp_probe_kernel(float*, int)"
SPIN = "gp_spin_kernel(unsigned long)"
EMPTY = "gp_empty_kernel()"


def _by_name(p, name):
    k = p.kernels
    k = k[k["name"] == name]
    return k[np.argsort(k["start_ns"], kind="stable")]


def _subprocess(code, timeout=120):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


def test_probe_kernel_records_match_the_launch_and_region():
    attrs = C._testing.probe_attributes()
    assert attrs["static_smem"] == attrs["declared_static_smem"] == 4096
    with gp.profile(memcpy=False, memset=False, memory=False) as p:
        with gp.region("outer"):
            with gp.region("probe"):
                C._testing.probe_launch((3, 2, 1), (64, 2, 1), dynamic_smem=1024)
            C._testing.probe_launch(5, 128)
        C._testing.probe_launch(1, 32)
    k = _by_name(p, PROBE)
    assert len(k) == 3, p.kernels["name"]
    assert [tuple(r) for r in k[["grid_x", "grid_y", "grid_z"]].tolist()] == [(3, 2, 1), (5, 1, 1),
                                                                             (1, 1, 1)]
    assert [tuple(r) for r in k[["block_x", "block_y", "block_z"]].tolist()] == [
        (64, 2, 1), (128, 1, 1), (32, 1, 1)]
    assert k["dynamic_smem"].tolist() == [1024, 0, 0]
    assert (k["static_smem"] == 4096).all()
    # CUPTI reports the registers allocated per thread: the compiler's count rounded up to the
    # allocation unit (8 per thread: 256 per warp)
    allocated = -(-attrs["registers_per_thread"] // 8) * 8
    assert set(k["registers_per_thread"].tolist()) <= {attrs["registers_per_thread"], allocated}
    # CUPTI reports the local memory reserved per thread, which may include the stack
    assert (k["local_mem_per_thread"] >= attrs["local_mem_per_thread"]).all()
    assert k["region"].tolist() == ["probe", "outer", ""]
    recs = gp.records()
    assert recs["name"][k["region_record"][0]] == "probe"
    assert (k["duration_ns"] > 0).all() and (k["correlation_id"] > 0).all()
    for row, (block, dyn) in zip(k, [(128, 1024), (128, 0), (32, 0)], strict=True):
        assert row["active_blocks_per_sm"] == C._testing.probe_occupancy(block, dyn)


@pytest.mark.parametrize("block", [32, 64, 96, 128, 256, 512, 1024])
@pytest.mark.parametrize("dyn", [0, 8192, 40960])
def test_occupancy_matches_cuda_calculator(block, dyn):
    props = C._device_properties(0)
    limits = limits_for((props["major"], props["minor"]), props)
    regs = C._testing.probe_attributes()["registers_per_thread"]
    _, blocks, _ = occupancy(limits, block, regs, 4096 + dyn)
    assert blocks == C._testing.probe_occupancy(block, dyn)


def test_profile_started_inside_a_region_and_parent_after_child_exit():
    with gp.region("a"), gp.profile(memory=False) as p:
        gp.kernels.spin(0)
        with gp.region("b"):
            gp.kernels.spin(0)
        gp.kernels.spin(0)
    assert _by_name(p, SPIN)["region"].tolist() == ["a", "b", "a"]


def test_kernels_from_threads_go_to_their_own_regions():
    ready = threading.Barrier(2)

    def worker():
        with gp.region("worker"):
            ready.wait()
            for _ in range(5):
                gp.kernels.spin(0)

    with gp.profile(memory=False) as p, gp.region("main"):
        t = threading.Thread(target=worker)
        t.start()
        ready.wait()
        for _ in range(5):
            gp.kernels.spin(0)
        t.join()
    regions = _by_name(p, SPIN)["region"].tolist()
    assert sorted(regions) == ["main"] * 5 + ["worker"] * 5


def test_timestamps_against_the_host_clock():
    with gp.profile(memory=False) as p, gp.region("sync"):
        gp.kernels.spin(2_000_000)
        C._synchronize()
    k = _by_name(p, SPIN)[0]
    assert 2_000_000 <= k["duration_ns"] <= 2_300_000
    r = gp.records()
    r = r[r["name"] == "sync"][0]
    slack = p.to_dict()["clock_offset_uncertainty_ns"] + 20_000
    host_start = r["host_start_ns"] + p.clock_offset_ns
    host_end = r["host_end_ns"] + p.clock_offset_ns
    # launched after the region opened, finished before it closed (synchronized inside)
    assert host_start - slack <= k["start_ns"] and k["end_ns"] <= host_end + slack
    assert p.start_ns <= k["start_ns"] and k["end_ns"] <= p.stop_ns


def test_copies_and_sets_are_recorded_with_their_region():
    n = 1 << 20
    ptr = C._device_malloc(n)
    try:
        with gp.profile(kernels=False, memory=False) as p:
            with gp.region("copy"):
                C._testing.device_copy_from_host(ptr, bytes(n))
                C._device_memset(ptr, 7, n)
            C._synchronize()
    finally:
        C._device_free(ptr)
    c = p.memcpy
    assert int(c["bytes"].sum()) == n and set(c["kind"]) == {"HtoD"}
    assert set(c["region"]) == {"copy"} and (c["duration_ns"] > 0).all()
    s = p.memset
    assert len(s) == 1 and s["bytes"][0] == n and s["value"][0] == 7 and s["region"][0] == "copy"
    assert len(p.kernels) == 0


def test_100k_kernels_none_dropped():
    n = 100_000
    with gp.profile(memcpy=False, memset=False, memory=False) as p, gp.region("loop"):
        C._testing.launch_empty(n)
    k = p.kernels
    empty = k[k["name"] == EMPTY]
    assert len(empty) == n and p.dropped == 0
    assert set(empty["region"]) == {"loop"}
    assert np.unique(empty["correlation_id"]).size == n


def test_nested_profile_refused_and_track_inside_sees_the_allocation():
    with gp.profile() as p:
        with pytest.raises(gp.GpuProfileError, match="cannot nest"):
            gp.profile().start()
        with gp.memory.track() as t:
            ptr = C._device_malloc(64 << 20)
            C._device_free(ptr)
    assert t.peak_bytes >= 64 << 20
    allocs = p.memory[(p.memory["op"] == "alloc") & (p.memory["bytes"] >= 64 << 20)]
    assert len(allocs) >= 1


def test_trace_of_a_real_profile(tmp_path):
    with gp.profile() as p, gp.region("step"):
        C._testing.probe_launch(2, 64)
        gp.kernels.spin(100_000)
    path = p.export_chrome_trace(str(tmp_path / "t.json.gz"))
    import gzip

    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    probe = [e for e in events if e["ph"] == "X" and e["name"] == PROBE]
    assert len(probe) == 1 and probe[0]["args"]["grid"] == [2, 1, 1]
    assert probe[0]["args"]["region"] == "step"
    assert any(e["ph"] == "X" and e.get("cat") == "region" and e["name"] == "step" for e in events)
    assert any(e["ph"] == "b" and e["name"] == "step" for e in events)


def test_summary_groups_a_real_profile():
    with gp.profile(memory=False) as p:
        with gp.region("spins"):
            for _ in range(3):
                gp.kernels.spin(50_000)
        C._testing.probe_launch(1, 64)
    s = p.summary()
    rows = {r.key: r for r in s.by_kernel}
    assert rows[SPIN].calls == 3 and rows[SPIN].min_us >= 50
    assert rows[PROBE].calls == 1
    regions = {r.key: r for r in s.by_region}
    assert regions["spins"].calls == 3 and regions["spins"].instances == 1


def test_cli_run_writes_a_trace(tmp_path):
    script = tmp_path / "work.py"
    script.write_text("import gpuprofile as gp\nwith gp.region('w'):\n    gp.kernels.spin(10_000)\n")
    trace = tmp_path / "t.json"
    # options before the script, as cProfile, nsys and ncu take them (issue 50)
    out = subprocess.run([sys.executable, "-m", "gpuprofile", "run", "--trace", str(trace), str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "gp_spin_kernel" in out.stderr  # the summary (names shortened)
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e["ph"] == "X" and e["name"] == SPIN for e in events)


# ---- faults -------------------------------------------------------------------------------


def test_another_cupti_subscriber_is_reported():
    code = """
        import ctypes, gpuprofile as gp
        lib = ctypes.CDLL(gp._C._cupti_info()["path"])
        CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)
        cb = CB(lambda *a: None)
        handle = ctypes.c_void_p()
        assert lib.cuptiSubscribe(ctypes.byref(handle), cb, None) == 0
        try:
            gp.profile().start()
            print("NO ERROR")
        except gp.CuptiError as e:
            print("CuptiError:", e)
        with gp.region("still works"):
            gp.kernels.spin(1000)
        print("regions ok", gp.stats("still works").count)
    """
    rc, out = _subprocess(code)
    assert rc == 0, out
    assert "CuptiError: CUPTI is already in use in this process" in out
    assert "regions ok 1" in out


def test_torch_profiler_is_reported():
    pytest.importorskip("torch")
    code = """
        import torch, gpuprofile as gp
        x = torch.ones(16, device="cuda")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            x.add_(1)
            try:
                gp.profile().start()
                print("NO ERROR")
            except gp.CuptiError as e:
                print("CuptiError:", e)
    """
    rc, out = _subprocess(code)
    assert rc == 0, out
    assert "CuptiError:" in out and "torch.profiler" in out


def test_ctrl_c_while_stop_waits_leaves_a_partial_result():
    code = """
        import os, signal, threading, time, gpuprofile as gp
        p = gp.profile().start()
        gp.kernels.spin(3_000_000_000)
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            p.stop()
            print("NOT INTERRUPTED")
        except KeyboardInterrupt:
            print("INTERRUPTED after %.2f s, partial=%s" % (time.monotonic() - t0, p.partial))
        q = gp.profile().start()
        q.stop()
        print("RESTARTED", sum(q.kernels["name"] == "gp_spin_kernel(unsigned long)"))
    """
    rc, out = _subprocess(code)
    assert rc == 0, out
    assert "INTERRUPTED after" in out and "partial=True" in out, out
    seconds = float(out.split("INTERRUPTED after ")[1].split()[0])
    assert seconds < 2.0  # not the 3 s the kernel runs
    assert "RESTARTED" in out


def test_device_reset_mid_profile_is_an_error_or_a_partial_result():
    code = """
        import gpuprofile as gp
        p = gp.profile().start()
        gp._C._testing.launch_empty(10)
        gp._C._testing.device_reset()
        try:
            p.stop()
            print("STOPPED", len(p.kernels), p.partial)
        except gp.GpuProfileError as e:
            print("ERROR", type(e).__name__, e)
    """
    rc, out = _subprocess(code)
    assert rc == 0, out
    assert "STOPPED" in out or "ERROR" in out, out
