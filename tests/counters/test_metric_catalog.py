"""Offline metric validation, suggestions, pass counts and listing through CUPTI's host API for
the GH100 chip (H100/H200): no GPU or driver needed, only the toolkit's CUPTI."""

import time

import pytest

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.counters import catalog as _catalog
from gpuprofile.counters.metric_sets import SETS, expand

CHIP = "GH100"


@pytest.fixture(scope="module")
def host():
    return _catalog.host(CHIP)


def test_properties_of_known_and_unknown_names(host):
    desc, hw, unit, mtype = host.properties("dram__bytes_read.sum")
    assert (hw, unit, mtype) == ("dram", "byte", "counter")
    assert "DRAM" in desc
    assert host.properties("sm__throughput.avg.pct_of_peak_sustained_elapsed")[2:] == ("percent", "throughput")
    assert host.properties("no__such_metric.sum") is None
    assert host.properties("sm__throughput.avg") is None  # a throughput needs a pct_of_peak form


def test_base_metrics_match_the_research_list(host):
    bases = host.base_metrics()
    assert len(bases) == 3650  # the GH100 range-profiler list in shared/research
    types = dict(bases)
    assert types["sm__throughput"] == "throughput"
    assert types["dram__bytes_read"] == "counter"
    assert len(_catalog.host(CHIP, "pm").base_metrics()) == 1279


def test_submetrics(host):
    subs = host.submetrics("sm__throughput", "throughput")
    assert ".avg.pct_of_peak_sustained_elapsed" in subs
    assert ".sum" in host.submetrics("dram__bytes_read", "counter")
    assert host.submetrics("no__such_metric", "counter") == []
    with pytest.raises(ValueError, match="counter, ratio or throughput"):
        host.submetrics("dram__bytes_read", "gauge")


def test_pass_counts_offline():
    # Research B: alone, sm__throughput needs 8 passes and gpu__compute_memory_throughput 5;
    # plain counters fit in one pass.
    assert gp.metric_passes("sm__throughput.avg.pct_of_peak_sustained_elapsed", chip=CHIP) == 8
    assert gp.metric_passes("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                            chip=CHIP) == 5
    assert gp.metric_passes(["dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
                             "sm__cycles_active.avg"], chip=CHIP) == 1
    assert gp.metric_passes("sol", chip=CHIP) == 9


def test_config_image_and_fresh_host_per_config():
    image, passes = _catalog.configure(["gpu__time_duration.sum", "dram__bytes_read.sum"], CHIP)
    assert isinstance(image, bytes) and len(image) > 0 and passes == 1
    h = _C.MetricsHost(CHIP)
    h.configure(["gpu__time_duration.sum"])
    with pytest.raises(ValueError, match="one metric list"):
        h.configure(["dram__bytes_read.sum"])
    h.close()
    h.close()  # idempotent
    assert "closed" in repr(h)
    with pytest.raises(ValueError, match="closed"):
        h.properties("dram__bytes_read.sum")


def test_bad_host_arguments():
    with pytest.raises(ValueError, match="does not know the chip 'XY999'"):
        _C.MetricsHost("XY999")
    with pytest.raises(ValueError, match="kind must be"):
        _C.MetricsHost(CHIP, "events")
    with pytest.raises(TypeError):
        _C.MetricsHost(CHIP, "range", "not bytes")
    with pytest.raises(TypeError, match="sequence of str"):
        _C.MetricsHost(CHIP).configure("dram__bytes_read.sum")
    with pytest.raises(ValueError, match="no metric names"):
        _C.MetricsHost(CHIP).configure([])


def test_typo_gives_close_matches():
    with pytest.raises(ValueError) as info:
        _catalog.validate(["sm__throughput.avg.pct_of_peak_sustained_elpased"], CHIP)
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in str(info.value)
    with pytest.raises(ValueError) as info:
        _catalog.validate(["dram__byte_read.sum"], CHIP)
    assert "did you mean dram__bytes_read.sum" in str(info.value)
    with pytest.raises(ValueError) as info:
        _catalog.validate(["smsp__warp_issue_stalled_long_scorebord_per_warp_active.pct"], CHIP)
    assert "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct" in str(info.value)


def test_every_bad_name_is_reported_at_once():
    with pytest.raises(ValueError, match="unknown metrics: 'a__b.sum'.*'c__d.sum'"):
        _catalog.validate(["a__b.sum", "dram__bytes_read.sum", "c__d.sum"], CHIP)


def test_bare_base_name_needs_a_rollup():
    # CUPTI accepts a bare counter name in properties but crashes building its config image.
    with pytest.raises(ValueError, match=r"needs a rollup.*dram__bytes_read\.sum"):
        _catalog.validate(["dram__bytes_read"], CHIP)


def test_suggestions_for_a_valid_base_with_a_bad_suffix():
    out = _catalog.suggestions("dram__bytes_read.summ", CHIP)
    assert out[0] == "dram__bytes_read.sum"


def test_validation_is_fast_after_init():
    _catalog.host(CHIP)  # one-time init (~60-100 ms)
    names = expand(list(SETS))
    start = time.perf_counter()
    _catalog.validate(names, CHIP)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.050, f"validating {len(names)} metrics took {elapsed * 1e3:.1f} ms"


def test_list_metrics_offline():
    found = gp.list_metrics("^dram__bytes_read$", chip=CHIP)
    assert [m.name for m in found] == ["dram__bytes_read"]
    assert found[0].unit == "byte" and found[0].type == "counter"
    full = {m.name for m in gp.list_metrics("^dram__bytes_read", chip=CHIP, submetrics=True)}
    assert "dram__bytes_read.sum" in full and "dram__bytes_read.sum.per_second" in full
    assert gp.list_metrics("pm_only_nonsense_xyz", chip=CHIP) == []
    assert "GH100" in gp.list_chips()
    assert found[0].to_dict()["name"] == "dram__bytes_read"


def test_list_metrics_needs_a_chip_without_a_device():
    if gp.device_count() > 0:
        pytest.skip("a device is present")
    with pytest.raises(gp.NoDeviceError, match="chip='GH100'"):
        gp.list_metrics("dram")
    with pytest.raises(TypeError, match="chip must be a str"):
        gp.list_metrics("dram", chip=100)
