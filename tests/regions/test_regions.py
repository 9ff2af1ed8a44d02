"""Regions on any machine: nesting, threads, exceptions, decorators, results, bad input.
Times here come from the host clock (the GPU tests check device times)."""

import os
import threading
import time

import numpy as np
import pytest

import gpuprofile as gp


def test_host_time_of_sleep_within_10_percent():
    for _ in range(3):
        with gp.region("sleep"):
            time.sleep(0.05)
    s = gp.stats("sleep")
    assert s.count == 3
    # never shorter than the sleep; the median within 10 % (one sleep on a loaded machine
    # overslept by 20 %: the scheduler's, not the region's)
    assert 50.0 <= s.host_mean_ms <= 75.0
    if gp.device_count() == 0:
        assert s.clock == "host"
        assert 50.0 <= s.median_ms <= 55.0
        assert np.all((s.samples_ms >= 50.0) & (s.samples_ms <= 100.0))


def test_nesting_parent_and_depth():
    with gp.region("outer"):
        with gp.region("inner"):
            with gp.region("leaf"):
                pass
        with gp.region("inner"):
            pass
    r = gp.records()
    assert list(r["name"]) == ["outer", "inner", "leaf", "inner"]
    assert list(r["depth"]) == [0, 1, 2, 1]
    assert list(r["parent"]) == [-1, 0, 1, 0]
    assert not r["open"].any() and not r["raised"].any()
    # a child lies inside its parent on the host clock
    assert r["host_start_ns"][1] >= r["host_start_ns"][0] and r["host_end_ns"][1] <= r["host_end_ns"][0]


def test_threads_have_their_own_stacks():
    n_threads, n_iter = 8, 1000
    barrier = threading.Barrier(n_threads)

    def work(k):
        barrier.wait()
        for _ in range(n_iter):
            with gp.region(f"t{k}"):
                with gp.region("child"):
                    pass

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r = gp.records()
    assert len(r) == 2 * n_threads * n_iter
    for k in range(n_threads):
        assert (r["name"] == f"t{k}").sum() == n_iter
    children = np.flatnonzero(r["name"] == "child")
    assert len(children) == n_threads * n_iter
    parents = r["parent"][children]
    # every child's parent is a thread region of the same thread, at depth 0
    assert np.all(r["depth"][parents] == 0)
    assert np.all(r["thread"][parents] == r["thread"][children])
    assert all(str(n).startswith("t") for n in r["name"][parents])
    assert len(set(r["thread"])) == n_threads


def test_exception_in_body_closes_and_marks_region():
    with pytest.raises(ZeroDivisionError):
        with gp.region("boom"):
            _ = 1 / 0
    with gp.region("after"):
        pass
    r = gp.records()
    assert list(r["name"]) == ["boom", "after"]
    assert list(r["raised"]) == [True, False]
    assert r["depth"][1] == 0  # the stack was unwound
    assert gp.stats("boom").raised == 1


def test_decorator_recursion_and_metadata():
    @gp.region("fib")
    def fib(n):
        """Fibonacci."""
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    assert fib(6) == 8
    assert fib.__name__ == "fib" and fib.__doc__ == "Fibonacci." and fib.__wrapped__ is not None
    r = gp.records()
    assert len(r) == 25  # calls made by fib(6)
    assert r["depth"].max() == 5
    assert r["parent"][0] == -1 and np.all(r["parent"][1:] >= 0)


def test_decorator_on_method_and_exception():
    class A:
        @gp.region("A.f")
        def f(self, x, *, y=1):
            if x < 0:
                raise ValueError("neg")
            return x + y

    a = A()
    assert a.f(1, y=2) == 3
    with pytest.raises(ValueError, match="neg"):
        a.f(-1)
    r = gp.records()
    assert list(r["raised"]) == [False, True]


def test_bare_decorator_takes_the_functions_qualified_name():
    @gp.region
    def step(x, y=1):
        """One step."""
        return x + y

    class Model:
        @gp.region
        def forward(self, x):
            return step(x, y=x)

    assert step(1) == 2 and Model().forward(3) == 6
    assert step.__name__ == "step" and step.__doc__ == "One step."
    assert step.region is gp.region(step.__qualname__)
    assert Model.forward.region.name.endswith("<locals>.Model.forward")
    recs = gp.records()
    names = list(recs["name"])
    assert names[0].endswith("<locals>.step") and names[1] == Model.forward.region.name
    assert names[2] == names[0] and recs["parent"][2] == 1


def test_bare_decorator_needs_a_name_it_can_take():
    import functools

    with pytest.raises(TypeError, match=r"functools.partial has no __qualname__ or __name__"):
        gp.region(functools.partial(print, 1))
    with pytest.raises(TypeError, match="region name must be a str, got int"):
        gp.region(5)
    with pytest.raises(TypeError, match="region name must be a str, got function"):
        gp.region(lambda: 0, None)  # with a stream it is not the bare form


def test_region_object_is_reusable_and_reentrant():
    reg = gp.region("same")
    with reg:
        with reg:
            pass
    with reg as entered:
        assert entered is reg
    r = gp.records()
    assert list(r["depth"]) == [0, 1, 0]


def test_report_and_stats_contents():
    for _ in range(4):
        with gp.region("a"):
            time.sleep(0.002)
    with gp.region("b"):
        pass
    rep = gp.report()
    assert [row.name for row in rep.rows] == ["a", "b"]  # largest total first
    assert rep["a"].count == 4 and rep["b"].count == 1
    text = str(rep)
    for col in ("region", "count", "total ms", "median ms", "p90 ms", "host total ms"):
        assert col in text
    assert "<table>" in rep._repr_html_() and "a" in rep._repr_html_()
    s = gp.stats("a")
    assert s.min_ms <= s.median_ms <= s.p90_ms <= s.max_ms
    assert s.total_ms == pytest.approx(s.samples_ms.sum())
    assert s.to_dict()["count"] == 4
    assert gp.report().to_dict()["regions"][0]["name"] == "a"


def test_stats_errors():
    with gp.region("x"):
        pass
    with pytest.raises(KeyError, match="no region named 'y'.*recorded: x"):
        gp.stats("y")
    with pytest.raises(TypeError):
        gp.stats(1)


def test_empty_report():
    assert len(gp.report()) == 0
    assert "no regions" in str(gp.report())
    assert len(gp.records()) == 0


def test_open_region_appears_open():
    with gp.region("open"):
        r = gp.records()
        assert list(r["open"]) == [True] and np.isnan(r["host_ms"][0])
    assert not gp.records()["open"].any()


def test_reset_while_open_raises():
    with gp.region("x"):
        with pytest.raises(gp.GpuProfileError, match="while 1 region"):
            gp.reset()


def test_disable_records_nothing_and_stays_balanced():
    gp.disable()
    assert not gp.is_enabled()
    with gp.region("off"):
        gp.enable()  # toggled inside: the exit must still match the enter
        with gp.region("on"):
            pass
    assert list(gp.records()["name"]) == ["on"]
    assert gp.records()["depth"][0] == 0


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"name": 3}, TypeError, "region name must be a str, got int"),
        ({"name": None}, TypeError, "region name must be a str"),
        ({"name": "x", "stream": "s0"}, TypeError, "stream must be None.*got str"),
        ({"name": "x", "stream": 1.0}, TypeError, "got float"),
        ({"name": "x", "stream": -1}, ValueError, "non-negative"),
        ({"name": "x", "bogus": 1}, TypeError, "unexpected keyword argument 'bogus'"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        gp.region(**kwargs)


def test_bad_positional_arguments():
    with pytest.raises(TypeError, match="missing required argument 'name'"):
        gp.region()
    with pytest.raises(TypeError, match="at most 3 positional"):
        gp.region("a", None, True, 4)
    with pytest.raises(TypeError, match="multiple values"):
        gp.region("a", name="b")


def test_stream_protocols_are_accepted():
    class CudaPython:
        def __cuda_stream__(self):
            return (0, 0)

    class TorchLike:
        cuda_stream = 0

    class Broken:
        def __cuda_stream__(self):
            return 7

    for s in (None, 0, CudaPython(), TorchLike()):
        with gp.region("s", stream=s):
            pass
    assert gp.region("s", stream=TorchLike()).stream.__class__ is TorchLike
    with pytest.raises(TypeError, match="must return \\(version, handle\\)"):
        gp.region("s", stream=Broken())


def test_out_of_order_exit_closes_that_region():
    """Regions closed out of order in one context (a generator that yields inside a region and
    finishes inside another) close the region named: nothing stays open, reset() works."""
    a, b = gp.region("a"), gp.region("b")
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    with gp.region("c"):  # nests under b, the innermost region still open
        pass
    b.__exit__(None, None, None)
    with pytest.raises(gp.GpuProfileError, match="'a' exited but is not open in this thread"):
        a.__exit__(None, None, None)
    r = gp.records()
    assert list(r["name"]) == ["a", "b", "c"]
    assert list(r["parent"]) == [-1, 0, 1] and list(r["depth"]) == [0, 1, 2]
    assert not r["open"].any() and not r["failed"].any()
    assert r["host_end_ns"][0] <= r["host_start_ns"][2]  # a closed before c began
    gp.reset()


def test_generator_finishing_inside_another_region():
    def gen():
        with gp.region("gen"):
            yield 1
            yield 2

    it = gen()
    next(it)
    with gp.region("consumer"):
        assert list(it) == [2]  # gen's region exits while consumer's is innermost
    r = gp.records()
    assert list(r["name"]) == ["gen", "consumer"] and list(r["parent"]) == [-1, 0]
    assert not r["open"].any()
    gp.reset()


def test_exit_from_another_thread_is_an_error():
    reg = gp.region("cross")
    reg.__enter__()
    errors = []

    def other():
        try:
            reg.__exit__(None, None, None)
        except gp.GpuProfileError as e:
            errors.append(str(e))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    reg.__exit__(None, None, None)
    assert errors and "not open in this thread" in errors[0]


def test_exit_error_does_not_replace_body_exception():
    reg = gp.region("r")
    # __exit__ with an exception in flight: misuse is swallowed, the body's exception wins
    assert reg.__exit__(ValueError, ValueError("x"), None) is False


def test_decorator_argument_checks():
    with pytest.raises(TypeError, match="decorates a callable"):
        gp.region("x")(5)
    with pytest.raises(TypeError):
        gp.region("x")(lambda: 0, extra=1)


@pytest.mark.skipif(gp.device_count() > 0, reason="host-mode child; the GPU case is in test_regions_gpu")
def test_fork_child_can_use_host_regions():
    with gp.region("parent"):
        pass
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            with gp.region("child"):
                pass
            code = 0 if "child" in set(gp.records()["name"]) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_default_stream_regions_are_shared_by_name():
    assert gp.region("shared") is gp.region("shared")
    assert gp.region("shared") is not gp.region("shared", nvtx=False)
    assert gp.region("shared", stream=0) is not gp.region("shared", stream=0)

    class Name(str):
        pass

    assert gp.region(Name("sub")) is not gp.region(Name("sub"))


def test_a_thread_that_ends_inside_a_region_leaves_a_failed_record():
    import threading
    import time

    def dies():
        gp.region("dies").__enter__()
        gp.region("dies_inner").__enter__()

    t = threading.Thread(target=dies)
    t.start()
    t.join()
    for _ in range(100):  # the thread's exit is noticed by records() once it is fully gone
        rec = gp.records()
        if not rec["open"].any():
            break
        time.sleep(0.01)
    assert rec["name"].tolist() == ["dies", "dies_inner"]
    assert not rec["open"].any() and rec["failed"].all()
    gp.reset()  # no region is left open
    assert len(gp.records()) == 0


def test_record_layout_comes_from_the_c_struct():
    """records() reads the packed records with the dtype C describes (_C._record_layout), not a
    hand-kept mirror: every record is one itemsize, every field inside it."""
    from gpuprofile import _C
    from gpuprofile.regions import _RAW_DTYPE

    for _ in range(3):
        with gp.region("layout"):
            pass
    names, packed = _C._records()
    assert len(packed) == 3 * _RAW_DTYPE.itemsize
    assert all(off + dt.itemsize <= _RAW_DTYPE.itemsize for dt, off in _RAW_DTYPE.fields.values())
    assert list(names) == ["layout"]
