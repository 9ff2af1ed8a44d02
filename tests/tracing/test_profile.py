"""profile() and memory.track() on any machine: the start/stop state machine, faults during stop
(Ctrl-C, CUDA errors), another profiler holding CUPTI, CUPTI missing. The C core is replaced by a
fake where a device would be needed; the GPU tests run the real thing."""

import dataclasses
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest
import synthetic as S

import gpuprofile as gp
from gpuprofile.tracing import activity as _activity
from gpuprofile.tracing.activity import KERNELS, MEMORY, REGIONS, Collector
from gpuprofile.tracing.profile import Profile


class FakeC:
    """Stands in for gpuprofile._C's activity entry points."""

    def __init__(self, fail_wait=None, dropped=0, memory=None):
        self.calls = []
        self.fail_wait = fail_wait
        self.dropped = dropped
        self.memory = memory
        self.now = S.T0

    def _activity_acquire(self, mask, held=None):
        self.calls.append(("acquire", mask))
        if held is not None:
            held.append(mask)

    def _activity_release(self, mask):
        self.calls.append(("release", mask))

    def _clock_offset(self):
        return (S.OFFSET, 10)

    def _cupti_timestamp(self):
        self.now += 10_000
        return self.now

    def _activity_flush(self, wait):
        self.calls.append(("flush", wait))
        if wait and self.fail_wait is not None:
            raise self.fail_wait

    def _activity_take(self):
        k, ext = S.kernels(2)
        k["start"] = self.now + 1000 + np.arange(2) * 2000
        k["end"] = k["start"] + 1000
        mem = self.memory if self.memory is not None else np.zeros(0, _activity.MEMORY_RAW)
        raw = {"kernels": k.tobytes(), "memcpy": b"", "memset": b"", "memory": mem.tobytes(),
               "extcorr": ext.tobytes(), "region_streams": b"", "names": ["k(int)", "b", "c"],
               "dropped": self.dropped}
        self.memory = None
        return raw

    def _attribution_state(self):
        return {"memory_region_entries": 0}


@pytest.fixture
def fake(monkeypatch):
    c = FakeC()
    monkeypatch.setattr(_activity, "_C", c)
    return c


def test_start_stop_collects_and_releases(fake):
    with gp.profile(memcpy=False, memset=False, memory=False) as p:
        fake.now += 500  # the kernels arrive after the start
    assert fake.calls == [("acquire", KERNELS | REGIONS), ("flush", True),
                          ("release", KERNELS | REGIONS)]
    assert p.kernels["name"].tolist() == ["k(int)", "b"]
    assert not p.partial and p.dropped == 0


def test_regions_false_records_no_api_activity(fake):
    with gp.profile(regions=False, memory=False):
        pass
    assert fake.calls[0] == ("acquire", KERNELS | 2 | 4)


def test_started_twice_nested_and_stopped_twice(fake):
    p = gp.profile()
    p.start()
    try:
        with pytest.raises(gp.GpuProfileError, match="already started"):
            p.start()
        with pytest.raises(gp.GpuProfileError, match="cannot nest"):
            gp.profile().start()
        from gpuprofile.tracing.profile import running

        assert running() is p
        with pytest.raises(gp.GpuProfileError, match="results exist once it stopped"):
            p.summary()
    finally:
        p.stop()
    with pytest.raises(gp.GpuProfileError, match="not running"):
        p.stop()
    with pytest.raises(gp.GpuProfileError, match="already started"):
        p.start()
    gp.profile().start().stop()  # the next profile is free to start


def test_memory_track_may_nest_in_a_profile(fake):
    with gp.profile(), gp.memory.track() as t:
        pass
    assert t.peak_bytes == 0 and t.allocations == 0
    assert ("acquire", MEMORY) in fake.calls


def test_ctrl_c_while_waiting_keeps_a_partial_result(fake):
    fake.fail_wait = KeyboardInterrupt()
    p = gp.profile().start()
    with pytest.raises(KeyboardInterrupt):
        p.stop()
    assert fake.calls[-3:] == [("flush", True), ("flush", False), ("release", p.mask)]
    assert p.partial and len(p.kernels) == 2
    assert "PARTIAL" in str(p.summary())
    fake.fail_wait = None
    gp.profile().start().stop()  # nothing is left half-started


def test_error_during_stop_does_not_hide_the_body_exception(fake):
    fake.fail_wait = gp.CudaError("cudaDeviceSynchronize() on device 0 failed: illegal address")
    with pytest.raises(ValueError, match="body"), gp.profile() as p:
        raise ValueError("body")
    assert p.partial
    assert any("illegal address" in e for e in p.errors)


def test_track_keeps_the_body_exception(fake):
    fake.fail_wait = gp.CudaError("device lost")
    with pytest.raises(ValueError, match="body"), gp.memory.track() as t:
        raise ValueError("body")
    assert t.partial and any("device lost" in e for e in t.errors)


def test_dropped_records_warn(fake):
    fake.dropped = 5
    with pytest.warns(RuntimeWarning, match="dropped 5"), gp.profile() as p:
        pass
    assert p.dropped == 5


def test_memory_track_fills_results(fake):
    fake.memory = S.memory_events([(S.T0 + 15_000, "alloc", 256 << 20, 0x10),
                                   (S.T0 + 16_000, "free", 0, 0x10)])
    with gp.memory.track() as t:
        pass
    assert (t.peak_bytes, t.current_bytes, t.allocations, t.frees) == (256 << 20, 0, 1, 1)
    assert t.largest_allocation == 256 << 20 and len(t.timeline) == 2
    with pytest.raises(gp.GpuProfileError, match="already used"), t:
        pass


def test_torch_profiler_recording_is_reported(fake, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.autograd.profiler",
                        types.SimpleNamespace(_is_profiler_enabled=True))
    with pytest.raises(gp.CuptiError, match="torch.profiler is recording"):
        gp.profile().start()
    with pytest.raises(gp.CuptiError, match="torch.profiler"), gp.memory.track():
        pass
    assert fake.calls == []  # CUPTI untouched
    assert _activity.torch_profiler_active()


def test_collector_window_clips_to_its_time(fake):
    c = Collector(KERNELS, "test")
    c.start()
    w = c.stop()
    assert w.t0 < w.t1 and len(w.chunk.kernels) == 2 and c.window is w
    k = w.chunk.kernels.copy()
    k["start"] = [w.t0 - 5000, 0]  # ended before the window; no timestamps (kept)
    k["end"] = [w.t0 - 1, 0]
    clipped = _activity.clip(dataclasses.replace(w.chunk, kernels=k, names=[]), w.t0, w.t1)
    assert clipped.kernels["start"].tolist() == [0]


def test_cupti_missing_is_reported_everywhere():
    env = dict(os.environ, GPUPROFILE_CUPTI_PATH="/nonexistent/libcupti.so")
    code = ("import gpuprofile as gp\n"
            "for call in (lambda: gp.profile().start(), lambda: gp.memory.track().__enter__()):\n"
            "    try:\n        call()\n    except gp.CuptiError as e:\n        print('CuptiError', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.count("CuptiError CUPTI (libcupti.so.13) not found") == 2
    assert "/nonexistent/libcupti.so" in out.stdout


def test_activity_entry_points_validate_and_idle():
    C = gp._C
    with pytest.raises(ValueError, match="mask"):
        C._activity_acquire(128)
    with pytest.raises(ValueError, match="mask"):
        C._activity_acquire(64)  # past API (32), the last kind
    with pytest.raises(TypeError):
        C._activity_acquire("kernels")
    C._activity_release(0)
    raw = C._activity_take()  # empty here unless earlier GPU tests left late records
    assert len(raw["kernels"]) % 88 == 0 and isinstance(raw["names"], list)
    state = C._activity_state()
    assert state["refs"] == {"kernel": 0, "memcpy": 0, "memset": 0, "memory": 0, "regions": 0,
                             "api": 0}
    assert C._attribution_state()["tracing"] is False


def test_kernel_names_are_demangled_by_the_cxx_runtime():
    got = gp._C._intern_kernel_names(["_Z6k_copyPK6float4PS_m", "plain_c_kernel",
                           "_ZN4cute6kernelIiEEvT_", "_Z6k_copyPK6float4PS_m"])
    assert got[0][1] == "k_copy(float4 const*, float4*, unsigned long)"
    assert got[1][1] == "plain_c_kernel"
    assert got[2][1] == "void cute::kernel<int>(int)"
    assert got[3][0] == got[0][0]  # interned once


@pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")
def test_profile_without_a_gpu_raises_no_device():
    with pytest.raises(gp.NoDeviceError):
        gp.profile().start()


def _stub_cupti(tmp_path, version, skip=(), crash=False):
    """A fake libcupti.so exporting every function gpuprofile binds (except `skip`); with
    `crash`, cuptiGetVersion dies of SIGSEGV, as CUPTI 13.2's does without a driver."""
    import re
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    header = os.path.join(os.path.dirname(__file__), "..", "..", "csrc", "core", "cupti_loader.h")
    with open(header) as f:
        names = re.findall(r"X\((cupti\w+)\)", f.read())
    body = "raise(SIGSEGV); return 1;" if crash else f"*v = {version}; return 0;"
    lines = ["#include <signal.h>", "#include <stdint.h>",
             f"int cuptiGetVersion(uint32_t *v) {{ {body} }}"]
    lines += [f"int {n}(void) {{ return 0; }}" for n in names
              if n != "cuptiGetVersion" and n not in skip]
    src = tmp_path / "stub.c"
    src.write_text("\n".join(lines) + "\n")
    lib = tmp_path / "libcupti.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)


def _start_with(lib):
    env = dict(os.environ, GPUPROFILE_CUPTI_PATH=lib)
    code = ("import gpuprofile as gp\ntry:\n    gp.profile().start()\n"
            "except gp.CuptiError as e:\n    print('CuptiError', e)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=True).stdout


def test_cupti_of_the_wrong_version_is_reported(tmp_path):
    out = _start_with(_stub_cupti(tmp_path, 120000))
    assert "CuptiError CUPTI API version 120000 is not CUDA 13's" in out


def test_cupti_missing_a_function_is_reported(tmp_path):
    out = _start_with(_stub_cupti(tmp_path, 130001, skip=("cuptiActivityFlushAll",)))
    assert "CuptiError the CUPTI library lacks cuptiActivityFlushAll" in out


def _cupti_info_with_sites(*sites):
    """_cupti_info() in a new interpreter whose sys.path has `sites` (site-packages folders)."""
    env = {k: v for k, v in os.environ.items() if k != "GPUPROFILE_CUPTI_PATH"}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, sites), env.get("PYTHONPATH", "")])
    code = "import gpuprofile as gp, json; print(json.dumps(gp._C._cupti_info()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout
    return json.loads(out)


def _wheel_cupti(site, version):
    """`site` laid out as the nvidia-cuda-cupti 13 wheel installs: nvidia/cu13/lib/libcupti.so.13."""
    lib = site / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    os.rename(_stub_cupti(lib, version), lib / "libcupti.so.13")
    return str(lib / "libcupti.so.13")


def test_cupti_of_the_wheel_comes_first(tmp_path):
    """The gpuprofile[cupti] extra's CUPTI is found before a toolkit's (this machine's, if any)."""
    wheel = _wheel_cupti(tmp_path / "site", 130001)
    info = _cupti_info_with_sites(tmp_path / "site")
    assert info == {"found": True, "path": wheel, "version": 130001, "how": "loaded"}


def test_a_cupti_that_crashes_without_a_driver_is_not_called(tmp_path):
    """CUPTI 13.2 (torch's wheel dependency) recurses until the stack overflows in any call when
    libcuda.so.1 is missing. Without a driver, its first call is tried in a forked child: the
    process lives, and the error names the missing driver and the library."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("a driver library loads here: the real call would be made")
    except OSError:
        pass
    lib = _stub_cupti(tmp_path, 130002, crash=True)
    env = dict(os.environ, GPUPROFILE_CUPTI_PATH=lib)
    code = ("import gpuprofile as gp, json\nprint(json.dumps(gp._C._cupti_info()))\ntry:\n"
            "    gp.profile().start()\nexcept gp.NoDeviceError as e:\n    print('NoDeviceError', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    info, started = run.stdout.splitlines()
    info = json.loads(info)
    assert not info["found"] and "no NVIDIA driver found" in info["error"] and lib in info["error"]
    assert started.startswith("NoDeviceError no usable CUDA device: no NVIDIA driver found")


def test_cupti_of_another_cuda_is_passed_over_while_searching(tmp_path):
    _wheel_cupti(tmp_path / "old", 120000)  # CUDA 12's, in the first place looked
    wheel = _wheel_cupti(tmp_path / "new", 130002)
    info = _cupti_info_with_sites(tmp_path / "old", tmp_path / "new")
    assert info["found"] and info["path"] == wheel and info["version"] == 130002
    # alone, it is never taken: a toolkit's CUPTI is, or the error says why it was passed over
    info = _cupti_info_with_sites(tmp_path / "old")
    if info["found"]:
        assert "/old/" not in info["path"] and info["version"] // 10000 == 13
    else:
        assert ("old/nvidia/cu13/lib/libcupti.so.13: passed over: CUPTI API version 120000, not "
                "CUDA 13's") in info["error"]


def test_record_dtypes_come_from_the_c_structs():
    """The activity records' dtypes are the C structs' layouts (the RECORD_KINDS table): sizes as
    the C side fixes them, every field inside the record, names Python code relies on."""
    sizes = {"kernels": 88, "memcpy": 48, "memset": 48, "memory": 48, "extcorr": 16,
             "region_streams": 24}
    assert [row["name"] for row in gp._C.RECORD_KINDS] == list(sizes)
    for row in gp._C.RECORD_KINDS:
        dt = np.dtype(row["layout"])
        assert dt.itemsize == sizes[row["name"]], row["name"]
        assert all(off + f.itemsize <= dt.itemsize for f, off in dt.fields.values()), row["name"]
        assert _activity.RAW[row["name"]] == dt
    k = _activity.KERNEL_RAW
    assert k.fields["grid_y"][1] == k.fields["grid_x"][1] + 4 and k["block_z"] == np.dtype("<i4")
    assert _activity.REGION_STREAM_RAW.names == ("record", "device", "stream", "before", "edge",
                                                 "bound")


def test_the_record_kinds_table_drives_chunks_windows_and_the_mask():
    """One row per record kind (Kineto's ActivityType as a table): the bits the C enables by,
    the clip columns, and a Chunk with a field per kind, all read from _C.RECORD_KINDS."""
    rows = {row["name"]: row for row in gp._C.RECORD_KINDS}
    bits = gp._C.ACTIVITY_BITS
    assert bits == {"kernels": 1, "memcpy": 2, "memset": 4, "memory": 8, "regions": 16, "api": 32}
    assert [(n, rows[n]["bit"]) for n in ("kernels", "memcpy", "memset", "memory")] == \
        [(n, bits[n]) for n in ("kernels", "memcpy", "memset", "memory")]
    assert rows["extcorr"]["bit"] == rows["region_streams"]["bit"] == bits["regions"]
    assert rows["memory"]["start"] == rows["memory"]["end"] == "timestamp"
    assert rows["extcorr"]["start"] is None and rows["region_streams"]["end"] is None
    chunk = _activity.Chunk.from_raw({**{n: b"" for n in rows}, "names": ["k"], "dropped": 3})
    assert list(chunk.arrays()) == list(rows) and chunk.dropped == 3 and chunk.names == ["k"]
    with pytest.raises(TypeError):
        _activity.Chunk(syncs=np.zeros(0))
    k = np.zeros(3, _activity.KERNEL_RAW)
    k["start"], k["end"] = [5, 0, 50], [8, 0, 60]  # before, untimed (kept), inside
    e = np.zeros(2, _activity.EXTCORR_RAW)  # never clipped
    clipped = _activity.clip(_activity.Chunk(kernels=k, extcorr=e), 10, 100)
    assert clipped.kernels["start"].tolist() == [0, 50] and len(clipped.extcorr) == 2
    assert Profile(memcpy=False, memset=False).mask == bits["kernels"] | bits["memory"] | bits["regions"]
    assert Profile(kernels=False, memcpy=False, memset=False).mask == bits["memory"]
