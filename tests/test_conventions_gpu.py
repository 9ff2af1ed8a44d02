"""The conventions of docs/conventions.md on a GPU, against the spin kernel's requested duration:
bare @gp.region, gp.do_bench, %gpu_timeit -n and to_pandas() of a profile."""

import pytest

import gpuprofile as gp

pytestmark = pytest.mark.gpu


def test_bare_region_decorator_times_the_gpu_work():
    @gp.region
    def spin_2ms():
        gp.kernels.spin(2_000_000)

    spin_2ms()  # warm: module load, first launch
    gp.reset()
    for _ in range(5):
        spin_2ms()
    s = gp.stats(spin_2ms.__qualname__)
    assert s.clock == "gpu" and s.count == 5 and 1.9 <= s.median_ms <= 2.3


def test_do_bench_returns_milliseconds_of_the_kernel():
    fn = lambda: gp.kernels.spin(1_000_000)  # noqa: E731
    mean = gp.do_bench(fn, warmup=10, rep=50)
    assert 0.95 <= mean <= 1.3
    low, mid, high = gp.do_bench(fn, warmup=0, rep=50, quantiles=[0.2, 0.5, 0.8])
    assert 0.95 <= low <= mid <= high <= 1.3
    times = gp.do_bench(fn, rep=50, return_mode="all")
    assert 30 <= len(times) <= 60 and all(0.95 <= t <= 1.5 for t in times)


def test_gpu_timeit_n_counts_gpu_calls():
    IPython = pytest.importorskip("IPython")  # noqa: F841
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "gpuprofile")
    sh.run_cell("import gpuprofile as gp")
    with capture_output() as cap:
        r = sh.run_line_magic("gpu_timeit", "-o -n 50 -r 2 gp.kernels.spin(200000)")
    assert r.clock in ("cupti", "gpu") and r.iterations == 100 and r.rounds == 2
    assert 0.19 <= r.median_ms <= 0.25
    assert "µs per call (median ± 95 % CI, " in cap.stdout and "100 calls, 2 rounds)" in cap.stdout


def test_profile_tables_to_pandas():
    pytest.importorskip("pandas")
    with gp.profile() as p:
        with gp.region("spin"):
            gp.kernels.spin(100_000)
    kernels = p.to_pandas()
    assert len(kernels) == 1 and "spin" in kernels.loc[0, "name"] and kernels.loc[0, "region"] == "spin"
    assert kernels.loc[0, "duration_ns"] >= 100_000
    by_region = p.summary().to_pandas(by="region")
    # columns named as the printed headers (issue 50): region, kernels (calls of kernels), ...
    assert list(by_region["region"]) == ["spin"] and by_region.loc[0, "kernels"] == 1
