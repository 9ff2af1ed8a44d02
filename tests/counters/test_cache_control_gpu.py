"""cache_control on a GPU, without ncu: a buffer a quarter of L2's size read twice in a row.
Flushed ("all"), each read comes from DRAM; not flushed ("none"), the second read (and, after a
first pass, the first too) hits L2. The flushes' own ranges never show up as kernels.

Run: python -m pytest -q -m gpu tests/counters/test_cache_control_gpu.py
"""

import pytest

import gpuprofile as gp
from gpuprofile.counters.metric_sets import DRAM_READ

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def buffer():
    buf = gp.kernels.DeviceBuffer(gp.device_info().l2_cache_bytes // 4 // 16 * 16)
    yield buf
    buf.close()


def twice(buf):
    gp.kernels.read(buf)
    gp.kernels.read(buf)


def test_flushed_every_read_comes_from_dram(buffer):
    r = gp.metrics(twice, buffer, metrics=[DRAM_READ])
    assert [k.name.split("(")[0] for k in r.kernels] == ["gp_read_kernel"] * 2
    assert r.cache_control == "all" and r.clock_control == "none"
    for k in r.kernels:
        assert 0.9 * buffer.nbytes <= k[DRAM_READ] <= 1.2 * buffer.nbytes, k


def test_not_flushed_the_reads_hit_l2(buffer):
    r = gp.metrics(twice, buffer, metrics=[DRAM_READ], cache_control="none")
    assert len(r.kernels) == 2 and r.cache_control == "none"
    assert r.kernels[1][DRAM_READ] <= 0.1 * buffer.nbytes  # the first read left it in L2


def test_per_call_flushes_before_the_range_only(buffer):
    flushed = gp.metrics(twice, buffer, metrics=[DRAM_READ], per="call")
    assert 0.9 * buffer.nbytes <= flushed[DRAM_READ] <= 1.3 * buffer.nbytes  # the second hits
    warm = gp.metrics(twice, buffer, metrics=[DRAM_READ], per="call", cache_control="none")
    assert warm[DRAM_READ] <= 0.2 * buffer.nbytes


def test_regions_flush_as_metrics_does(buffer):
    twice(buffer)
    with gp.region("cc-flushed", metrics=[DRAM_READ]):
        twice(buffer)
    with gp.region("cc-warm", metrics={"metrics": [DRAM_READ], "cache_control": "none"}):
        twice(buffer)
    assert gp.region_metrics("cc-flushed")[DRAM_READ] >= 0.9 * buffer.nbytes
    assert gp.region_metrics("cc-warm")[DRAM_READ] <= 0.2 * buffer.nbytes
    with gp.region("cc-replay", metrics="sol"):  # kernel replay: the flushes' ranges dropped
        twice(buffer)
    r = gp.region_metrics("cc-replay")
    assert [k.name.split("(")[0] for k in r.kernels] == ["gp_read_kernel"] * 2
    assert any("first replay" in n for n in r.notes)


def test_the_range_capacity_counts_kernels_not_flushes(buffer):
    r = gp.metrics(twice, buffer, metrics=[DRAM_READ], warmup=False, max_kernels=2)
    assert len(r.kernels) == 2
    with pytest.raises(ValueError, match="more kernels than the 1 profiled"):
        gp.metrics(twice, buffer, metrics=[DRAM_READ], warmup=False, max_kernels=1)
    assert len(gp.metrics(twice, buffer, metrics=[DRAM_READ]).kernels) == 2
