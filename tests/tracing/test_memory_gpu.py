"""Device-memory tracking on a GPU: raw cudaMalloc / cudaMallocAsync, memory=True regions, and
PyTorch's allocator, against the sizes allocated."""

import numpy as np
import pytest

import gpuprofile as gp

pytestmark = pytest.mark.gpu

C = gp._C
MiB = 1 << 20


def test_info_reports_free_and_total():
    free, total = gp.memory.info()
    assert 0 < free <= total == gp.device_info(0).total_memory_bytes


def test_256_mib_malloc_peak_and_free():
    with gp.memory.track() as t:
        ptr = C._device_malloc(256 * MiB)
        C._device_free(ptr)
    assert t.peak_bytes >= 256 * MiB
    assert t.current_bytes <= t.peak_bytes - 256 * MiB  # the free brought it back
    assert t.allocations >= 1 and t.largest_allocation >= 256 * MiB
    tl = t.timeline
    big = tl[tl["bytes"] >= 256 * MiB]
    assert big["op"].tolist()[:2] == ["alloc", "free"]
    assert big["delta"][0] == -big["delta"][1]
    assert t.dropped == 0 and not t.partial


def test_async_allocations_are_seen():
    with gp.memory.track() as t:
        ptr = C._device_malloc(64 * MiB, None)  # cudaMallocAsync on the default stream
        C._device_free(ptr, None)
        C._synchronize()
    tl = t.timeline
    allocs = tl[(tl["op"] == "alloc") & (tl["bytes"] >= 64 * MiB)]
    assert len(allocs) >= 1 and allocs["is_async"].any()


def test_region_peak_without_a_profile():
    gp.memory.region_peaks()  # collects what earlier tests left behind
    with gp.region("big", memory=True):
        ptr = C._device_malloc(256 * MiB)
        C._device_free(ptr)
    with gp.region("small", memory=True):
        ptr = C._device_malloc(1 * MiB)
        C._device_free(ptr)
    rows = {r["region"]: r for r in gp.memory.region_peaks()}
    assert rows["big"]["peak_above_entry_bytes"] >= 256 * MiB
    assert rows["big"]["allocations"] >= 1 and rows["big"]["allocated_bytes"] >= 256 * MiB
    assert MiB <= rows["small"]["peak_above_entry_bytes"] < 256 * MiB
    assert C._activity_state()["refs"]["memory"] == 0  # released when the regions closed


def test_region_peak_in_a_profile_summary():
    with gp.profile() as p, gp.region("alloc", memory=True):
        ptr = C._device_malloc(128 * MiB)
        gp.kernels.spin(1000)
        C._device_free(ptr)
    rows = {r["region"]: r for r in p.summary().memory_by_region}
    assert rows["alloc"]["peak_above_entry_bytes"] >= 128 * MiB
    mem = p.memory
    assert (mem[mem["bytes"] >= 128 * MiB]["region"] == "alloc").all()


def test_torch_allocations_are_seen():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    torch.cuda.init()
    torch.cuda.empty_cache()
    with gp.memory.track() as t:
        x = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")
        del x
        torch.cuda.empty_cache()  # hands the block back with cudaFree
    tl = t.timeline
    assert np.any((tl["op"] == "alloc") & (tl["bytes"] >= 512 * MiB))
    assert t.peak_bytes >= 512 * MiB
    assert t.torch is not None and t.torch["peak_allocated_bytes"] >= 512 * MiB
