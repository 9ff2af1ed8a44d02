"""Leak tests (marker `leak`): every public API that works without a GPU, called thousands of
times (10k for cheap calls; fewer for the few that take a millisecond, as noted), including
their error paths. See tests/leaks.py for what is measured; tests/test_leaks_gpu.py does the
same for the device APIs."""

import json

import numpy as np
import pytest
from leaks import check_no_growth, raising

import gpuprofile as gp
from gpuprofile import _C, nvtx
from gpuprofile.bench.result import BenchmarkResult, compare
from gpuprofile.pytest_plugin import baselines

pytestmark = pytest.mark.leak


# ---- regions --------------------------------------------------------------------------------

def test_region_enter_exit():
    name = "leak-region"

    def step():
        with gp.region(name):
            pass
        gp.reset()

    check_no_growth(step, inputs=[name])


def test_nested_regions_with_exceptions():
    names = ["outer", "middle", "inner"]
    count = [0]

    def step():
        count[0] += 1
        try:
            with gp.region(names[0]), gp.region(names[1]):
                with gp.region(names[2], nvtx=False):
                    if count[0] % 3 == 0:
                        raise ValueError("body")
        except ValueError:
            pass
        gp.reset()

    check_no_growth(step, inputs=names)


def test_regions_not_cached_streams_memory():
    """Regions that are built each time (a stream or memory=True bypass the name cache)."""
    class Stream:
        def __cuda_stream__(self):
            return (0, 0)

    stream, name = Stream(), "built"

    def step():
        with gp.region(name, stream=stream, memory=True):
            pass
        with gp.region(name, stream=0, nvtx=False):
            pass
        gp.reset()

    check_no_growth(step, inputs=[stream, name])


def test_decorator_creation_and_calls():
    def work(x, y=2):
        return x + y

    wrapped = gp.region("deco")(work)
    arg = object()

    def step():
        gp.region("deco2")(work)  # a new RegionFunction and functools.update_wrapper each time
        wrapped(1, y=3)
        raising(lambda: wrapped(arg), TypeError)()  # object() + 2 raises inside the region
        gp.reset()

    check_no_growth(step, inputs=[work, wrapped, arg])


def test_region_argument_errors():
    name, bad_stream = "x", "not a stream"
    r = gp.region("misuse")

    def step():
        for call in (lambda: gp.region(5), lambda: gp.region(name, stream=bad_stream),
                     lambda: gp.region(name, bogus=1), lambda: gp.region(name, 0, True, 4),
                     lambda: gp.region(name, metrics=5), lambda: r.__exit__(None, None, None),
                     lambda: r(42)):
            raising(call, TypeError, ValueError, gp.GpuProfileError)()
        with gp.region("a"):
            raising(gp.reset, gp.GpuProfileError)()  # reset while open
            raising(lambda: r.__exit__(None, None, None), gp.GpuProfileError)()  # not innermost
        gp.reset()

    check_no_growth(step, inputs=[name, bad_stream, r])


@pytest.fixture
def some_records():
    for k in range(50):
        with gp.region(f"r{k % 5}"), gp.region("child"):
            pass
    yield
    gp.reset()


def test_records(some_records):
    check_no_growth(gp.records)


def test_report_and_stats(some_records):
    """report() takes about 0.5 ms: 2000 calls."""
    check_no_growth(lambda: (str(gp.report()), gp.report()._repr_html_()), n=2000)
    check_no_growth(lambda: (gp.stats("r1").to_dict(), raising(lambda: gp.stats("nope"), KeyError)()),
                    n=4000)


def test_enable_disable_and_regions_while_disabled():
    def step():
        gp.disable()
        with gp.region("off"):
            pass
        gp.enable()
        gp.is_enabled()
        _C._testing.pool_stats()

    check_no_growth(step)


# ---- NVTX -----------------------------------------------------------------------------------

def test_nvtx():
    message, domain = "leak-nvtx", nvtx.Domain("leak-domain")
    rng = nvtx.range(message, color="green", domain=domain)

    def step():
        nvtx.push(message, color=0xFF00FF00, category=3)
        nvtx.pop()
        nvtx.mark(message, color="#112233", domain="leak-domain")
        nvtx.end(nvtx.start(message, domain=domain), domain=domain)
        with rng:
            pass
        raising(lambda: nvtx.push(5), TypeError)()
        raising(lambda: nvtx.push(message, color="mauve"), ValueError)()
        attributes = domain.get_event_attributes(message=message, payload=2)  # C holds message
        domain.push_range(attributes)
        domain.pop_range()
        domain.end_range(domain.start_range(attributes))
        domain.mark(attributes)
        domain.mark(message)  # the Python path
        raising(lambda: domain.end_range("x"), TypeError)()

    check_no_growth(step, inputs=[message, domain, rng])


# ---- benchmark results ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def result():
    r = gp.benchmark(sum, [1, 2, 3], clock="host", warmup=0, min_time=0.01, max_noise=0.5,
                     flops=100, bytes=8, name="r")
    # a small file: the calls, not the JSON size, are under test; its median stays its samples'
    r.samples = np.array([r.ci_low_ms] * 9 + [r.median_ms] + [r.ci_high_ms] * 9)
    return r


def test_host_benchmark():
    """A host-clock benchmark takes about 0.3 ms: 1000 calls."""
    fn, args = sum, [1, 2, 3]
    check_no_growth(lambda: gp.benchmark(fn, args, clock="host", warmup=0, min_time=0, max_time=1,
                                         min_iters=10, max_iters=10), n=1000, inputs=[fn, args])


def test_benchmark_argument_errors():
    fn = len

    def step():
        for kw in ({"mode": "x"}, {"clock": 3}, {"min_time": -1}, {"max_iters": 0},
                   {"min_time": 2, "max_time": 1}, {"peak": "nope"}):
            raising(lambda kw=kw: gp.benchmark(fn, **kw), TypeError, ValueError)()
        raising(lambda: gp.benchmark(42), TypeError)()

    check_no_growth(step, inputs=[fn])


def test_result_json_round_trip_and_compare(result, tmp_path):
    d = result.to_dict()
    text = json.dumps(d)
    path = tmp_path / "r.json"

    def step():
        back = BenchmarkResult.from_dict(json.loads(text))
        repr(back)
        compare([result, back])
        compare({"a": result, "b": back}, baseline="b")
        raising(lambda: BenchmarkResult.from_dict([]), TypeError)()
        raising(lambda: BenchmarkResult.from_dict({**d, "iterations": "x"}), TypeError)()

    check_no_growth(step, n=4000, inputs=[result])
    check_no_growth(lambda: (result.save(path), BenchmarkResult.load(path)), n=1000)


def test_compare_file_parsing(result):
    doc = {"results": [{**result.to_dict(), "name": f"t{k}"} for k in range(3)]}
    bad = {"results": [{"name": "t"}]}
    check_no_growth(lambda: (baselines(doc), raising(lambda: baselines(bad), ValueError)()),
                    inputs=[doc, bad])


# ---- hardware counters, tracing: what works offline, and argument checks -------------------------

def test_list_metrics_offline():
    """About 1 ms per call once the chip's host object is cached: 2000 calls."""
    pattern = "dram"
    check_no_growth(lambda: (gp.list_metrics(pattern, chip="GH100"), gp.list_chips()), n=2000,
                    inputs=[pattern])


def test_metrics_and_profile_argument_errors():
    fn = len

    def step():
        raising(lambda: gp.metrics(42), TypeError)()
        raising(lambda: gp.metrics(fn, metrics=5), TypeError, gp.GpuProfileError)()
        raising(lambda: gp.metrics(fn, metrics="sol"), gp.GpuProfileError)()  # no device here
        raising(lambda: gp.profile(kernels="x"), TypeError)()
        raising(lambda: gp.profile().start(), gp.GpuProfileError)()

    if gp.device_count() > 0:
        pytest.skip("the no-device error paths")
    check_no_growth(step, inputs=[fn])


# ---- the checker itself ---------------------------------------------------------------------

def _mapped_pages(kept, size):
    """size bytes mapped outside malloc (only the resident set sees them), touched, kept."""
    import mmap

    m = mmap.mmap(-1, size)
    m.write(b"x" * size)
    kept.append(m)


def test_the_checker_catches_a_resident_set_leak():
    kept = []
    with pytest.raises(AssertionError, match="rss"):
        check_no_growth(lambda: _mapped_pages(kept, 64 << 10), n=200)
    for m in kept:
        m.close()


def test_the_checker_catches_a_heap_leak():
    kept = []
    with pytest.raises(AssertionError, match="heap"):
        check_no_growth(lambda: kept.append(bytearray(4 << 10)), n=200, warmup=0)


def test_the_checker_forgives_one_step_of_the_resident_set():
    """4 MiB touched once, in the second window (as a huge page folded in by the kernel would
    be): the third window grows nothing, so it passes."""
    kept, calls = [], [0]

    def fn():
        calls[0] += 1
        if calls[0] == 150:  # warm-up 0, windows of 100: the second window's middle
            _mapped_pages(kept, 4 << 20)

    first, second = check_no_growth(fn, n=200, warmup=0)
    assert second.rss >= 4 << 20 and calls[0] == 300
    for m in kept:
        m.close()


def test_the_checker_forgives_one_step_of_small_blocks():
    """300 small objects kept once, in the second window (an interpreter cache that grows once):
    the third window grows nothing, so it passes; kept on every call they fail it."""
    kept, calls = [], [0]

    def once():
        calls[0] += 1
        if calls[0] == 150:
            kept.extend(bytes([i % 256]) * 24 for i in range(300))

    first, second = check_no_growth(once, n=200, warmup=0)
    assert second.blocks >= 300
    with pytest.raises(AssertionError, match="blocks"):
        check_no_growth(lambda: kept.extend(bytes([7]) * 24 for _ in range(3)), n=200, warmup=0)
