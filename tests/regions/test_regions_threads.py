"""Regions from 8 threads at once (10k nested groups each, random exceptions) while another
thread reads report()/records() and tries reset(): counts, parents, depths and raised flags come
out exact, and nothing crashes. With a device the same runs on CUDA events (and, in the `gpu`
test, on one stream per thread)."""

import random
import sys
import threading
import time

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _C

THREADS, GROUPS = 8, 10_000
NAMES = ["outer", "mid", "leaf"]


def _worker(k, barrier, release, finished, logs, errors, stream=None, hold_outer=True):
    """GROUPS nested groups of depth 1-3; each level raises with some probability. Logs
    (name, depth, raised) per region in entry order. With hold_outer, everything runs inside
    an outer region that stays open until `release`: reset() is refused all along."""
    rng = random.Random(k)
    log = logs[k] = []
    try:
        outer = gp.region(f"thread{k}", stream=stream)
        if hold_outer:
            outer.__enter__()
        barrier.wait()
        base = 1 if hold_outer else 0
        for g in range(GROUPS):
            _group(rng, log, base, 0, rng.randint(1, 3), stream)
            if g % 64 == 0:
                time.sleep(0)  # let the reader in between groups too
        finished.append(k)
        release.wait()
        if hold_outer:
            outer.__exit__(None, None, None)
            log.insert(0, (f"thread{k}", 0, False))
        logs[k] = (threading.get_native_id(), log)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


class Boom(Exception):
    pass


def _group(rng, log, base, level, depth, stream):
    entry = len(log)
    log.append((NAMES[level], base + level, False))
    try:
        with gp.region(NAMES[level], stream=stream):
            if level + 1 < depth:
                _group(rng, log, base, level + 1, depth, stream)
            if rng.random() < 0.1:
                raise Boom
    except Boom:
        log[entry] = (NAMES[level], base + level, True)
        if rng.random() < 0.5 and level > 0:
            raise


def _monitor(stop, counts, errors, barrier):
    try:
        barrier.wait()
        while not stop.is_set():
            if counts["reads"] % 20 == 19:
                gp.report()
                gp.records()
            names, packed = _C._records()  # the C store's snapshot: the part that races
            counts["reads"] += 1
            counts["max_records"] = max(counts["max_records"], len(packed) // 56)
            try:
                gp.reset()
                counts["resets"] += 1
            except gp.GpuProfileError:  # regions are open: expected
                counts["refused"] += 1
    except BaseException as exc:  # noqa: BLE001
        errors.append(exc)


@pytest.fixture(autouse=True)
def _switch_often():
    """Threads switch every 10 µs instead of 5 ms: many more interleavings per run."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def _run(streams=None, hold_outer=True):
    logs, errors, finished = {}, [], []
    barrier, release = threading.Barrier(THREADS + 1), threading.Event()
    workers = [threading.Thread(target=_worker, args=(k, barrier, release, finished, logs, errors,
                                                       streams[k] if streams else None, hold_outer))
               for k in range(THREADS)]
    stop, counts = threading.Event(), {"reads": 0, "resets": 0, "refused": 0, "max_records": 0}
    monitor = threading.Thread(target=_monitor, args=(stop, counts, errors, barrier))
    for t in [*workers, monitor]:
        t.start()
    while len(finished) + len(errors) < THREADS:
        release.wait(0.01)
    stop.set()
    monitor.join()
    release.set()
    for t in workers:
        t.join()
    assert not errors, errors
    return logs, counts


def _check_exact(logs):
    recs = gp.records()
    assert not recs["open"].any()
    assert len(recs) == sum(len(log) for _, log in logs.values())
    for tid, log in logs.values():
        mine = np.flatnonzero(recs["thread"] == tid)
        got = list(zip(recs["name"][mine], recs["depth"][mine].tolist(), recs["raised"][mine].tolist(),
                       strict=True))
        # entry order within a thread; the outer region first
        assert got == [(n, d, r) for n, d, r in log]
        parents = recs["parent"][mine]
        assert parents[0] == -1
        assert set(parents[1:].tolist()) <= set(mine.tolist())  # parents in the same thread
        assert (recs["depth"][parents[1:]] + 1 == recs["depth"][mine[1:]]).all()
    assert not recs["failed"].any()


def test_threads_with_nested_regions_and_a_reader():
    logs, counts = _run()
    assert counts["resets"] == 0 and counts["reads"] > 0  # every reset met an open region
    _check_exact(logs)


def test_threads_with_successful_resets():
    """No region held open: resets succeed between groups. What survives must be whole."""
    _run(hold_outer=False)
    recs = gp.records()
    assert not recs["open"].any()
    parents = recs["parent"]
    inner = parents >= 0
    assert (parents[inner] < np.flatnonzero(inner)).all()
    assert (recs["thread"][parents[inner]] == recs["thread"][inner]).all()
    assert (recs["depth"][parents[inner]] + 1 == recs["depth"][inner]).all()
    assert (recs["depth"][~inner] == 0).all()


@pytest.mark.gpu
def test_threads_on_their_own_streams():
    streams = [_C._stream_create() for _ in range(THREADS)]
    try:
        logs, _ = _run(streams=streams)
        _check_exact(logs)
        recs = gp.records()
        assert (recs["clock"] == "gpu").all() and np.isfinite(recs["gpu_ms"]).all()
    finally:
        for s in streams:
            _C._stream_destroy(s)


def test_threads_that_end_inside_regions_while_others_read():
    """Threads ending with regions open hand them to the store as orphans (no GIL): readers
    close them as failed, and reset() works once all are gone."""
    stop, counts, errors = threading.Event(), {"reads": 0, "resets": 0, "refused": 0, "max_records": 0}, []
    monitor = threading.Thread(target=_monitor, args=(stop, counts, errors, threading.Barrier(1)))
    monitor.start()

    def leave_open(k):
        for j in range(k % 3 + 1):
            gp.region(f"orphan{j}").__enter__()

    for _ in range(50):
        threads = [threading.Thread(target=leave_open, args=(k,)) for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    stop.set()
    monitor.join()
    assert not errors, errors
    # A thread hands its regions over when its OS thread exits, which may be just after join()
    # returned (join waits for the Python thread state only): wait for the last ones.
    deadline = time.monotonic() + 10
    while gp.records()["open"].any() and time.monotonic() < deadline:
        time.sleep(0.001)
    recs = gp.records()
    assert not recs["open"].any() and recs["failed"].all()
    gp.reset()
