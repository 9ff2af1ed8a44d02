"""Regions in asyncio tasks (issue 23): each task has its own stack of regions (a context
variable), so tasks that interleave on one thread nest their own regions, may finish in any
order, and leave nothing open: reset() works afterwards. Also callbacks, cancellation, a task
started inside a region, and event loops in several threads at once."""

import asyncio
import threading

import numpy as np
import pytest

import gpuprofile as gp


def _by_name(recs):
    return {name: k for k, name in enumerate(recs["name"])}


def _assert_all_closed():
    recs = gp.records()
    assert not recs["open"].any()
    gp.reset()  # raised for ever before issue 23's fix


def test_two_tasks_finishing_in_the_opposite_order():
    async def first(started, go):
        with gp.region("first"):
            started.set()
            await go.wait()  # second enters, and exits, while first is open

    async def second(started, go):
        await started.wait()
        with gp.region("second"):
            with gp.region("second.inner"):
                go.set()
                await asyncio.sleep(0.01)  # first finishes meanwhile

    async def main():
        started, go = asyncio.Event(), asyncio.Event()
        await asyncio.gather(first(started, go), second(started, go))

    asyncio.run(main())
    recs = gp.records()
    k = _by_name(recs)
    assert list(recs["name"]) == ["first", "second", "second.inner"]
    assert recs["parent"][k["second"]] == -1 and recs["depth"][k["second"]] == 0
    assert recs["parent"][k["second.inner"]] == k["second"] and recs["depth"][k["second.inner"]] == 1
    # first closed before second: the opposite order of entering
    assert recs["host_end_ns"][k["first"]] < recs["host_end_ns"][k["second"]]
    assert not recs["raised"].any() and not recs["failed"].any()
    _assert_all_closed()
    with gp.region("after"):  # nothing stale left to nest under
        pass
    assert gp.records()["parent"][0] == -1


def test_gather_of_many_interleaving_tasks_nests_each_task_exactly():
    n_tasks, rounds = 50, 20

    async def task(k):
        for j in range(rounds):
            with gp.region(f"t{k}"):
                await asyncio.sleep(0)
                with gp.region(f"t{k}.mid"):
                    await asyncio.sleep(0)
                    with gp.region(f"t{k}.leaf"):
                        await asyncio.sleep(0 if (j + k) % 3 else 0.001)

    async def main():
        await asyncio.gather(*(task(k) for k in range(n_tasks)))

    asyncio.run(main())
    recs = gp.records()
    names = recs["name"]
    assert len(recs) == n_tasks * rounds * 3
    for i, name in enumerate(names):
        parent = recs["parent"][i]
        if name.endswith(".leaf"):
            assert names[parent] == name[: -len(".leaf")] + ".mid" and recs["depth"][i] == 2
        elif name.endswith(".mid"):
            assert names[parent] == name[: -len(".mid")] and recs["depth"][i] == 1
        else:
            assert parent == -1 and recs["depth"][i] == 0
        if parent >= 0:  # the parent instance is the one that was open around it
            assert recs["host_start_ns"][parent] <= recs["host_start_ns"][i]
            assert recs["host_end_ns"][i] <= recs["host_end_ns"][parent]
    _assert_all_closed()


def test_cancelled_task_closes_its_regions_as_raised():
    async def victim(entered):
        with gp.region("outer"):
            with gp.region("inner"):
                entered.set()
                await asyncio.sleep(60)

    async def main():
        entered = asyncio.Event()
        t = asyncio.create_task(victim(entered))
        with gp.region("main"):
            await entered.wait()
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t

    asyncio.run(main())
    recs = gp.records()
    k = _by_name(recs)
    assert recs["raised"][k["outer"]] and recs["raised"][k["inner"]] and not recs["raised"][k["main"]]
    assert recs["parent"][k["inner"]] == k["outer"]
    _assert_all_closed()


def test_task_created_inside_a_region_nests_under_it():
    async def child():
        with gp.region("child"):
            await asyncio.sleep(0)

    async def main():
        with gp.region("step"):
            await asyncio.gather(child(), child())
        with gp.region("later"):
            pass

    asyncio.run(main())
    recs = gp.records()
    assert list(recs["name"]) == ["step", "child", "child", "later"]
    assert list(recs["parent"]) == [-1, 0, 0, -1]
    assert list(recs["depth"]) == [0, 1, 1, 0]
    _assert_all_closed()


def test_a_task_outliving_its_parent_region():
    """The region the task was started in closes before the task enters its own: that one is
    top-level (a parent is a region open around the child), and nothing stays open."""

    async def child(go):
        await go.wait()
        with gp.region("child"):
            pass

    async def main():
        go = asyncio.Event()
        with gp.region("parent"):
            t = asyncio.create_task(child(go))
            await asyncio.sleep(0)
        go.set()
        await t

    asyncio.run(main())
    recs = gp.records()
    assert list(recs["name"]) == ["parent", "child"] and list(recs["parent"]) == [-1, -1]
    assert recs["host_end_ns"][0] < recs["host_start_ns"][1]
    _assert_all_closed()


def test_region_entered_in_one_callback_and_exited_in_another():
    """Each loop callback runs in its own copy of the context: the exit finds the region this
    thread opened in the other one."""
    reg = gp.region("callbacks")

    async def main():
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        loop.call_soon(reg.__enter__)
        loop.call_soon(lambda: reg.__exit__(None, None, None))
        loop.call_soon(done.set_result, None)
        await done

    asyncio.run(main())
    recs = gp.records()
    assert list(recs["name"]) == ["callbacks"] and not recs["open"].any()
    _assert_all_closed()


def test_exit_twice_is_an_error_in_a_task_too():
    async def main():
        reg = gp.region("twice")
        with reg:
            pass
        with pytest.raises(gp.GpuProfileError, match="not open in this thread"):
            reg.__exit__(None, None, None)

    asyncio.run(main())
    _assert_all_closed()


def test_event_loops_in_several_threads():
    n_threads, n_tasks = 4, 20
    errors = []

    async def task(t, k):
        for _ in range(10):
            with gp.region(f"th{t}"):
                with gp.region(f"th{t}.task{k}"):
                    await asyncio.sleep(0)

    def worker(t):
        try:
            async def main():
                await asyncio.gather(*(task(t, k) for k in range(n_tasks)))

            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    recs = gp.records()
    names = recs["name"]
    assert len(recs) == n_threads * n_tasks * 10 * 2
    inner = np.array([".task" in n for n in names])
    parents = recs["parent"][inner]
    assert all(names[p] == n.split(".")[0] for p, n in zip(parents, names[inner], strict=True))
    assert all(recs["thread"][p] == recs["thread"][i]
               for p, i in zip(parents, np.flatnonzero(inner), strict=True))
    _assert_all_closed()


def test_to_thread_inherits_the_callers_region():
    """asyncio.to_thread runs the function in a copy of the caller's context: its regions nest
    under the caller's open region, and the worker thread cannot close the caller's region."""

    def work(outer):
        with gp.region("in thread"):
            pass
        with pytest.raises(gp.GpuProfileError, match="not open in this thread"):
            outer.__exit__(None, None, None)

    async def main():
        outer = gp.region("caller")
        with outer:
            await asyncio.to_thread(work, outer)

    asyncio.run(main())
    recs = gp.records()
    assert list(recs["name"]) == ["caller", "in thread"] and list(recs["parent"]) == [-1, 0]
    assert recs["thread"][0] != recs["thread"][1]
    _assert_all_closed()


def test_decorator_on_async_def_spans_each_awaited_call():
    import inspect

    @gp.region("fetch")
    async def fetch(k, delay):
        await asyncio.sleep(delay)
        with gp.region("inner"):
            return k * 2

    class Client:
        @gp.region("method")
        async def get(self):
            return await fetch(5, 0)

    assert inspect.iscoroutinefunction(fetch) and fetch.__name__ == "fetch"
    assert fetch.region is gp.region("fetch")

    async def main():
        got = await asyncio.gather(fetch(1, 0.02), fetch(2, 0))
        return got, await Client().get()

    assert asyncio.run(main()) == ([2, 4], 10)
    recs = gp.records()
    k = [i for i, n in enumerate(recs["name"]) if n == "fetch"]
    assert len(k) == 3 and list(recs["name"]).count("inner") == 3
    assert max(recs["host_ms"][k[:2]]) >= 20  # the sleep is inside the region
    for i, name in enumerate(recs["name"]):
        if name == "inner":
            assert recs["name"][recs["parent"][i]] == "fetch"
    m = list(recs["name"]).index("method")
    assert recs["parent"][m + 1] == m  # the method's fetch nests under it
    _assert_all_closed()


def test_decorated_async_def_that_raises_or_is_cancelled():
    @gp.region("boom")
    async def boom():
        await asyncio.sleep(0)
        raise KeyError("x")

    @gp.region("slow")
    async def slow():
        await asyncio.sleep(60)

    async def main():
        with pytest.raises(KeyError):
            await boom()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(slow(), 0.01)

    asyncio.run(main())
    recs = gp.records()
    assert list(recs["name"]) == ["boom", "slow"] and recs["raised"].all()
    _assert_all_closed()


def test_a_deep_stack_dropped_with_its_context():
    """200 000 nested regions in a context that is then dropped: the chain of frames is freed
    without a recursion as deep as the chain."""
    import contextvars

    regions = [gp.region(f"d{k % 7}", nvtx=False) for k in range(200_000)]

    def deep():
        for r in regions:
            r.__enter__()
        for r in reversed(regions):
            r.__exit__(None, None, None)

    contextvars.copy_context().run(deep)
    recs = gp.records()
    assert len(recs) == 200_000 and recs["depth"][-1] == 199_999
    _assert_all_closed()


@pytest.mark.gpu
def test_interleaving_tasks_on_the_gpu_time_every_region():
    async def task(k):
        for _ in range(5):
            with gp.region(f"gpu{k}"):
                await asyncio.sleep(0)

    async def main():
        await asyncio.gather(*(task(k) for k in range(8)))

    asyncio.run(main())
    recs = gp.records()
    assert len(recs) == 40 and (recs["clock"] == "gpu").all()
    assert np.isfinite(recs["gpu_ms"]).all() and not recs["failed"].any()
    _assert_all_closed()


@pytest.mark.gpu
def test_tracing_keeps_no_closed_region_pushed_after_out_of_order_exits():
    """While tracing, each region's id is pushed for kernel attribution (a per-thread stack in
    CUPTI): tasks that close regions out of order take their own id out, so a kernel launched
    afterwards is not attributed to a closed region."""

    async def first(started, go):
        with gp.region("first"):
            started.set()
            await go.wait()

    async def second(started, go):
        await started.wait()
        with gp.region("second"):
            go.set()
            await asyncio.sleep(0.01)

    async def main():
        started, go = asyncio.Event(), asyncio.Event()
        await asyncio.gather(first(started, go), second(started, go))

    with gp.profile(memory=False) as p:
        asyncio.run(main())
        assert gp._C._attribution_state()["pushed_on_this_thread"] == 0
        gp.kernels.spin(0)
    spins = p.kernels[p.kernels["name"] == "gp_spin_kernel(unsigned long)"]
    assert len(spins) == 1 and spins["region"][0] not in ("first", "second")
    _assert_all_closed()


def test_bare_decorator_on_async_def_times_the_awaited_call():
    import inspect

    @gp.region
    async def nap():
        await asyncio.sleep(0.02)
        return 7

    assert inspect.iscoroutinefunction(nap) and nap.region is gp.region(nap.__qualname__)
    assert asyncio.run(nap()) == 7
    recs = gp.records()
    assert list(recs["name"]) == [nap.__qualname__] and recs["host_ms"][0] >= 20

