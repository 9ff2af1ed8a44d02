"""Bad input and missing hardware, on a machine without a GPU: clear exceptions, raised before
anything runs."""

import pytest

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.counters import catalog as _catalog
from gpuprofile.counters import metrics as counters

no_device = pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device errors")


@pytest.fixture
def offline_gh100(monkeypatch):
    """Plans metrics for GH100 offline, as if an H100 were the current device."""
    monkeypatch.setattr(_catalog, "device_chip", lambda kind="range": ("GH100", None))


def never_called():
    raise AssertionError("fn must not run")


def test_bad_arguments():
    with pytest.raises(TypeError, match="fn must be callable"):
        gp.metrics(3)
    with pytest.raises(TypeError, match="setup must be callable"):
        gp.metrics(never_called, setup=3)
    with pytest.raises(ValueError, match="per must be 'kernel' or 'call'"):
        gp.metrics(never_called, per="range")
    with pytest.raises(ValueError, match="max_passes must be a positive int"):
        gp.metrics(never_called, max_passes=0)
    with pytest.raises(ValueError, match="max_kernels must be a positive int"):
        gp.metrics(never_called, max_kernels=True)
    with pytest.raises(TypeError, match="stalls\\(fn\\)"):
        gp.stalls(None)
    with pytest.raises(TypeError, match="sample\\(fn\\)"):
        gp.sample(None)
    with pytest.raises(ValueError, match="interval_us"):
        gp.sample(never_called, interval_us=0)
    with pytest.raises(TypeError, match="name must be a str"):
        gp.region_metrics(3)


def test_too_many_passes_is_refused_before_running(offline_gh100):
    with pytest.raises(ValueError, match=r"need 9 passes .*max_passes=2"):
        gp.metrics(never_called, metrics="sol", max_passes=2)


def test_unknown_metric_is_refused_before_running(offline_gh100):
    with pytest.raises(ValueError, match="did you mean dram__bytes_read.sum"):
        gp.metrics(never_called, metrics=["dram__byte_read.sum"])
    with pytest.raises(ValueError, match="unknown metric"):
        gp.metrics(never_called, metrics="soll")


def test_region_with_unknown_metric_fails_at_enter(offline_gh100):
    with pytest.raises(ValueError, match="unknown metric"), gp.region("bad", metrics="dram__bytes"):
        raise AssertionError("the body must not run")
    gp.reset()  # no region was left open


def test_plans_are_cached_and_report_setup_once(offline_gh100):
    first = counters._plan(["dram__bytes_read.sum"])
    again = counters._plan(["dram__bytes_read.sum"])
    assert first.names == again.names == ["gpu__time_duration.sum", "dram__bytes_read.sum"]
    assert again.setup_s == 0.0 and again.passes == 1


def test_region_metrics_of_an_unknown_region():
    with pytest.raises(KeyError, match="no region named 'never'"):
        gp.region_metrics("never")


def test_c_level_argument_checks():
    with pytest.raises(ValueError, match="user ranges cannot use kernel replay"):
        _C.RangeProfiler(b"x", ["gpu__time_duration.sum"], range="user", replay="kernel")
    with pytest.raises(ValueError, match="range must be"):
        _C.RangeProfiler(b"x", ["gpu__time_duration.sum"], range="kernel")
    with pytest.raises(ValueError, match="max_ranges"):
        _C.RangeProfiler(b"x", ["gpu__time_duration.sum"], max_ranges=0)
    with pytest.raises(ValueError, match="period is log2"):
        _C.PCSampler(period=4)
    with pytest.raises(ValueError, match="max_pcs"):
        _C.PCSampler(max_pcs=0)
    pm = _C.MetricsHost("GH100", "pm")
    with pytest.raises(ValueError, match="interval_ns"):
        _C.PmSampler(b"x", ["gpu__time_duration.sum"], pm, interval_ns=10)
    with pytest.raises(ValueError, match="wrong kind"):
        _C.PmSampler(b"x", ["gpu__time_duration.sum"], _C.MetricsHost("GH100"))
    with pytest.raises(ValueError, match="unknown workload"):
        _C.Workload("memcpy")


@no_device
def test_no_device_errors():
    with pytest.raises(gp.NoDeviceError):
        gp.metrics(never_called)
    with pytest.raises(gp.NoDeviceError), gp.region("r", metrics="sol"):
        raise AssertionError("the body must not run")
    gp.reset()
    with pytest.raises(gp.NoDeviceError):
        gp.stalls(never_called)
    with pytest.raises(gp.NoDeviceError):
        gp.sample(never_called)
    with pytest.raises(gp.NoDeviceError):
        gp.ceilings()
    with pytest.raises(gp.NoDeviceError):
        _C.Workload("copy")
    with pytest.raises(gp.NoDeviceError):
        gp.metric_passes("sol")


@no_device
def test_regions_without_metrics_still_work_after_a_failed_metrics_region():
    with pytest.raises(gp.NoDeviceError), gp.region("r", metrics="sol"):
        pass
    with gp.region("plain"):
        pass
    assert gp.stats("plain").count == 1


def test_lazy_exports_stay_functions_after_their_modules_load():
    import gpuprofile.counters.metrics
    import gpuprofile.counters.roofline  # noqa: F401

    for name in ("metrics", "stalls", "sample", "ceilings", "plot_roofline", "region_metrics",
                 "list_metrics", "metric_passes", "capture_cubins", "list_chips"):
        assert callable(getattr(gp, name)), name
    assert "metrics" in dir(gp)
    with pytest.raises(AttributeError):
        gp.no_such_thing  # noqa: B018
