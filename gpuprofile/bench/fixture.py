"""The `gpu_benchmark` fixture's object (the plugin, gpuprofile/pytest_plugin.py, makes one per
test and owns the session's state: options, baselines, the entries written at the end) and the
compare-fail check of each result against its saved baseline: pytest-benchmark's fixture/plugin
split. Imports neither NumPy nor the benchmark code until a benchmark runs."""

from __future__ import annotations

import math

import pytest

from .options import DEFAULTS, NAMES

# Keywords of gpu_benchmark(...) that configure the benchmark; every other keyword goes to fn.
_OPTIONS = NAMES - {"name"}


class GpuBenchmarkFixture:
    """The `gpu_benchmark` fixture: call it with a function to benchmark it.

    Attributes: `group` (for the summary; default from the marker), `name` (default: the test id),
    `result` (the last BenchmarkResult) and `results` (all of this test's).
    """

    def __init__(self, node, state):
        marker = node.get_closest_marker("gpu_benchmark")
        defaults = dict(marker.kwargs) if marker else {}
        # pytest-benchmark's @pytest.mark.benchmark(group=...) groups too; its other keywords
        # are its own timer's settings, not gpuprofile's options
        theirs = node.get_closest_marker("benchmark")
        self.group = defaults.pop("group", theirs.kwargs.get("group") if theirs else None)
        self.extra_info: dict = {}  # pytest-benchmark's: saved with each result of this test
        self.name = node.nodeid
        self.result = None
        self.results = []
        self._defaults = defaults
        self._state = state
        self._node = node

    def __call__(self, fn, *args, **kwargs):
        """Benchmark fn(*args, **kwargs) with gpuprofile.benchmark and return fn's own result.
        Keywords that are benchmark options (mode, max_time, ...) configure the benchmark."""
        options = {"rounds": self._state.rounds, **self._defaults,
                   **{k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS}}
        value = fn(*args, **kwargs)
        if self._state.disabled:
            return value
        from .benchmark import benchmark

        self._record(benchmark(fn, *args, name=self._next_name(), **options, **kwargs))
        return value

    def pedantic(self, target, args=(), kwargs=None, setup=None, teardown=None, rounds=1,
                 warmup_rounds=0, iterations=1, **options):
        """pytest-benchmark's pedantic mode, with its arguments and defaults: `rounds` timed
        samples of `iterations` calls each after `warmup_rounds` untimed rounds, no stopping rule
        (--gpu-benchmark-rounds, or the marker's rounds=, repeats the whole measurement).
        setup() runs untimed before every round and may return (args, kwargs) for it (then
        args= and kwargs= must be left out, and iterations must be 1); teardown(*args, **kwargs)
        runs untimed after every round. Other keywords are benchmark options. Returns target's
        result from a first, untimed call (a GPU's first call loads code: it is never timed).
        On the CUPTI clock 12 more untimed calls, before the warm-up, learn which kernels and
        streams fn uses (clock="gpu" makes none)."""
        from .benchmark import make_options, run
        from .pedantic import check, hooks

        check(target, setup, teardown, rounds, warmup_rounds, iterations, set(options) - _OPTIONS)
        setup = hooks(setup, teardown, tuple(args), dict(kwargs or {}))
        call_args, call_kwargs = setup() if setup is not None else (tuple(args), dict(kwargs or {}))
        value = target(*call_args, **call_kwargs)
        if setup is not None:
            setup.finish()  # this call's teardown
        if self._state.disabled:
            return value
        merged = {**DEFAULTS, "rounds": self._state.rounds, **self._defaults, **options}
        calls = rounds * iterations
        merged.update(min_iters=calls, max_iters=calls, min_time=0.0, max_time=math.inf,
                      warmup=0.0, name=self._next_name())
        opts = make_options(**merged, fixed=True, warmup_iters=warmup_rounds * iterations)
        if iterations > 1:  # host clock: one sample per round of `iterations` calls
            import dataclasses

            opts = dataclasses.replace(opts, inner=iterations)
        try:
            self._record(run(target, tuple(args), dict(kwargs or {}), opts, setup=setup))
        finally:
            if setup is not None:
                setup.finish()  # the last round's teardown
        return value

    def compare(self, candidate, reference, *args, threshold=None, **kwargs):
        """A/B in one run: candidate(*args, **kwargs) against reference(...) in interleaved
        rounds with the order rotated (gpuprofile.benchmark of both: bench/ab.py); fails the
        test when the candidate is slower beyond `threshold` percent (default 5 host, 2 GPU) by the gates'
        rule, passes 'same', 'faster' and 'inconclusive' (the line says which). Both sides'
        results are recorded (NAME[reference], NAME[candidate]). Returns the ABResult."""
        if self._state.disabled:
            reference(*args, **kwargs)
            candidate(*args, **kwargs)
            return None
        from .benchmark import run_ab

        options = {**self._defaults, **{k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS}}
        options["name"] = self._next_name()
        ab = run_ab({"reference": reference, "candidate": candidate}, args, kwargs, options, threshold)
        for result in ab.results.values():
            self._record(result)
        if ab.fails:
            pytest.fail(f"gpu_benchmark {options['name']}: " + "; ".join(ab.lines()), pytrace=False)
        return ab

    def _next_name(self) -> str:
        return self.name if not self.results else f"{self.name}#{len(self.results) + 1}"

    def _record(self, result):
        self.result = result
        self.results.append(result)
        entry = {"name": result.name, "test": self._node.nodeid, "group": self.group,
                 "result": result.to_dict(), "extra_info": self.extra_info}  # read at the end
        base = self._state.baseline(result.name)
        if base is not None:
            entry["baseline"] = dict(base)
        self._state.entries.append(entry)
        if base is None and self._state.strict:
            pytest.fail(f"gpu_benchmark {result.name}: not compared: no saved result of this name in "
                        f"{self._state.compare_path} (renamed?; --gpu-benchmark-compare-strict)",
                        pytrace=False)
        if base is not None and self._state.thresholds:
            _check_thresholds(result, entry["baseline"], self._state.thresholds, self._state)


def _check_thresholds(result, base, thresholds, state=None):
    """Fails the test when `result` breaks a --gpu-benchmark-compare-fail threshold against the
    saved `base`, and when either cannot be trusted (the gate fails closed, never passes). The
    median is judged by the gates' rule (bench/gate.py decide(): the threshold, both intervals,
    rounds); other statistics plainly, as pytest-benchmark does (bench/thresholds.py)."""
    from .._stats import ratio_interval
    from . import gate
    from .thresholds import failure

    for what, r in (("this run's result", result), ("the saved result", base)):
        why = gate.problem(r)
        if why is not None:
            pytest.fail(f"gpu_benchmark {result.name}: cannot compare, {what} is not usable: {why}",
                        pytrace=False)
    now = result.to_dict(samples=False)
    mine, saved = gate.interval(result), (base["ci_low_ms"], base["ci_high_ms"])
    ratio = ratio_interval(*mine, *saved)
    failures, unsure = [], []
    for t in thresholds:
        if t.stat == "median":
            pct = t.value if t.percent else t.value / base["median_ms"] * 100
            d = gate.stored(result.median_ms / base["median_ms"], *ratio, result.rounds,
                            base.get("rounds", 1), pct)
            (failures if d.fails else unsure if d.verdict == "inconclusive" else []).append(
                f"{t.text}: {d.line(clock=result.clock)}")
            continue
        why = failure(t, now, base, None)
        if why is not None:
            failures.append(why)
    if unsure and state is not None and not failures:
        if state.strict:
            failures += unsure
        else:
            state.notes += [f"inconclusive (passes): {result.name}: {u}" for u in unsure]
    if failures:
        pytest.fail(f"gpu_benchmark {result.name}: " + "; ".join(failures), pytrace=False)


def _fail_if_slower(result, base, pct):
    """--gpu-benchmark-fail-slower=PCT: the median threshold median:PCT%."""
    from .thresholds import parse

    _check_thresholds(result, base, parse([f"median:{pct!r}%"]))
