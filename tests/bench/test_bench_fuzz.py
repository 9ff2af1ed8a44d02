"""Fuzzing benchmark()'s options and the C host loop (marker `fuzz`): junk option values, junk
setup() replies, functions that raise; only clear errors come out, and nothing hangs (time
options are drawn small or invalid)."""

import pytest
from fuzzing import clear_errors_only, ints, junk, scalars
from hypothesis import given
from hypothesis import strategies as st

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.bench.options import make_options

pytestmark = [pytest.mark.fuzz, pytest.mark.filterwarnings("ignore:gpuprofile.benchmark")]

SMALL = st.one_of(st.sampled_from([0, 0.001, 0.01]), scalars())
VALID = dict(warmup=0.0, min_time=0.0, max_time=0.01, max_noise=0.5, min_iters=1, max_iters=20,
             flush_l2=None, mode="cold", clock="host", stream=None, flops=None, bytes=None,
             name=None, peak=None)
CHOICES = {"warmup": SMALL, "min_time": SMALL, "max_time": SMALL,
           "max_noise": st.one_of(st.floats(), scalars()), "min_iters": st.one_of(st.integers(-2, 50), scalars()),
           "max_iters": st.one_of(st.integers(-2, 50), scalars()), "flush_l2": scalars(),
           "mode": st.one_of(st.sampled_from(["cold", "hot", "graph"]), scalars()),
           "clock": st.one_of(st.sampled_from(["auto", "cupti", "gpu", "host"]), scalars()),
           "stream": st.one_of(st.none(), scalars()), "flops": scalars(), "bytes": scalars(),
           "name": scalars(), "peak": st.one_of(st.sampled_from(["fp32", "fp16_tensor", "x"]), scalars())}


@st.composite
def options(draw):
    opts = dict(VALID)
    for key in draw(st.lists(st.sampled_from(sorted(CHOICES)), max_size=4, unique=True)):
        opts[key] = draw(CHOICES[key])
    return opts


@given(opts=options())
def test_option_validation(opts):
    with clear_errors_only():
        make_options(**opts)


@given(opts=options(), raises=st.booleans())
def test_host_benchmarks_with_junk_options(opts, raises):
    """Whole runs, where the options allow, of a function that may raise (host clock, or a clear
    NoDeviceError for the GPU clocks on this machine)."""
    if gp.device_count() > 0 and opts["stream"] is not None:
        return  # a junk int handle would be a real stream pointer on a device

    def fn():
        if raises:
            raise ValueError("fn failed")

    with clear_errors_only():
        o = make_options(**opts)
        if o.warmup <= 0.01 and (o.max_time <= 0.05 or o.max_iters <= 50):  # never a long run
            gp.benchmark(fn, **opts)


@given(args=st.lists(junk(), max_size=6), n=st.one_of(st.integers(-1, 5), ints()),
       setup_reply=st.one_of(st.none(), junk(), st.tuples(st.tuples(), st.none()),
                             st.tuples(st.tuples(st.integers()), st.dictionaries(st.text(max_size=3), junk()))))
def test_host_batch_entry_point(args, n, setup_reply):
    calls = []

    def fn(*a, **k):
        calls.append(a)

    with clear_errors_only(OverflowError):  # n beyond C int: PyArg's own error for a private API
        _C._bench_host_batch(fn, (), None, n if 0 < n <= 5 else n, 1, lambda: setup_reply)
    with clear_errors_only(OverflowError):
        _C._bench_host_batch(*args)
