"""pytest plugin (entry point `pytest11`): the `gpu_benchmark` fixture.

    def test_attn(gpu_benchmark):
        out = gpu_benchmark(attn, q, k, v)            # returns attn's result; timing is recorded
        gpu_benchmark.result.median_ms                 # the BenchmarkResult

    @pytest.mark.gpu_benchmark(group="attn", mode="hot", max_time=2)
    def test_attn_hot(gpu_benchmark): ...

    pytest --gpu-benchmark-save=base.json
    pytest --gpu-benchmark-compare=base.json --gpu-benchmark-fail-slower=5

A result is named after its test (a second call in the same test adds "#2"). Under pytest-xdist
each worker sends its results to the controller (xdist's workeroutput), which writes the file and
the summary. This module imports neither NumPy nor the benchmark code until a benchmark runs.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from .bench.options import NAMES

_OUTPUT_KEY = "gpuprofile_benchmarks"  # in xdist's workeroutput
_FILE_VERSION = 1
# Keywords of gpu_benchmark(...) that configure the benchmark (benchmark's options but its name,
# which the fixture gives); every other keyword goes to fn.
_OPTIONS = NAMES - {"name"}


def pytest_addoption(parser):
    group = parser.getgroup("gpuprofile", "GPU benchmarks (gpuprofile's gpu_benchmark fixture)")
    group.addoption("--gpu-benchmark-save", metavar="PATH",
                    help="write every gpu_benchmark result to PATH (JSON)")
    group.addoption("--gpu-benchmark-compare", metavar="PATH",
                    help="compare each result with the one of the same name in PATH (a saved file)")
    group.addoption("--gpu-benchmark-fail-slower", metavar="PCT", type=float, default=None,
                    help="with --gpu-benchmark-compare: fail a test whose median is slower than "
                         "the saved one by more than PCT %% with 95 %% confidence")
    group.addoption("--gpu-benchmark-rounds", metavar="N", type=int, default=1,
                    help="repeat each whole measurement N times: intervals then span the spread "
                         "between runs, not only the noise within one (use 5 for a CI gate)")
    group.addoption("--gpu-benchmark-disable", action="store_true",
                    help="run each benchmarked function once, untimed")


class _State:
    """Per-run state, kept in config.stash."""

    def __init__(self, config):
        # in a multi-rank job each rank saves its own file (base.rank1.json: docs/distributed.md)
        # and compares with its own when there is one
        save, compare = config.getoption("--gpu-benchmark-save"), config.getoption("--gpu-benchmark-compare")
        self.save, self.compare_path = save, compare
        if save or compare:
            from .distributed import rank_path

            self.save = rank_path(save) if save else None
            if compare and os.path.exists(rank_path(compare)):
                self.compare_path = rank_path(compare)
        self.fail_slower = config.getoption("--gpu-benchmark-fail-slower")
        self.rounds = config.getoption("--gpu-benchmark-rounds")
        self.disabled = config.getoption("--gpu-benchmark-disable")
        self.is_worker = hasattr(config, "workerinput")
        self.entries = []  # {"test", "group", "result", "baseline"}: JSON-ready
        self._baseline = None

    def baseline(self, name):
        if self.compare_path is None:
            return None
        if self._baseline is None:
            self._baseline = baselines(_read(self.compare_path))
        return self._baseline.get(name)


_STATE = pytest.StashKey[_State]()


def _read(path):
    from ._files import read_json

    try:
        data = read_json(path)
        baselines(data)
    except (OSError, ValueError) as e:
        raise pytest.UsageError(f"--gpu-benchmark-compare: cannot read {path}: {e}") from None
    return data


def baselines(data) -> dict:
    """{name: {median_ms, ci_low_ms, ci_high_ms, rounds}} of a saved benchmark file's contents
    (the interval as a gate compares it: bench.gate.interval); ValueError naming the result and
    field of a file that is not one, is damaged, or holds a result a gate cannot trust (a
    median or interval that is not a finite positive number, a median not its samples')."""
    from .bench import gate

    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ValueError("not a gpuprofile benchmark file (no 'results' list)")
    out = {}
    for k, e in enumerate(data["results"]):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise ValueError(f"results[{k}] is not a benchmark result with a name")
        gate.check(e, f"results[{k}] ({e['name']})")
        low, high = gate.interval(e)
        rounds = e.get("rounds")
        out[e["name"]] = {"median_ms": float(e["median_ms"]), "ci_low_ms": float(low),
                          "ci_high_ms": float(high),
                          "rounds": rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else 1}
    return out


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu_benchmark(group=None, **options): group for the summary, and default "
        "gpuprofile.benchmark options for the gpu_benchmark fixture in this test",
    )
    state = _State(config)
    if state.fail_slower is not None:
        if state.compare_path is None:
            raise pytest.UsageError("--gpu-benchmark-fail-slower needs --gpu-benchmark-compare=PATH")
        if not state.fail_slower >= 0:
            raise pytest.UsageError(f"--gpu-benchmark-fail-slower must be >= 0, got {state.fail_slower}")
    if isinstance(state.rounds, bool) or not isinstance(state.rounds, int) or state.rounds < 1:
        raise pytest.UsageError(f"--gpu-benchmark-rounds must be >= 1, got {state.rounds}")
    if state.compare_path is not None and not state.is_worker:
        _read(state.compare_path)  # a bad file is a usage error up front, not one per test
    if state.save and not state.is_worker:
        from ._files import check_writable

        try:  # now, not after the whole run
            check_writable(state.save)
        except OSError as e:
            raise pytest.UsageError(f"--gpu-benchmark-save: cannot write {state.save}: {e.strerror}") from None
    config.stash[_STATE] = state


class GpuBenchmarkFixture:
    """The `gpu_benchmark` fixture: call it with a function to benchmark it.

    Attributes: `group` (for the summary; default from the marker), `name` (default: the test id),
    `result` (the last BenchmarkResult) and `results` (all of this test's).
    """

    def __init__(self, node, state: _State):
        marker = node.get_closest_marker("gpu_benchmark")
        defaults = dict(marker.kwargs) if marker else {}
        self.group = defaults.pop("group", None)
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
        from .bench.benchmark import benchmark

        self._record(benchmark(fn, *args, name=self._next_name(), **options, **kwargs))
        return value

    def pedantic(self, fn, args=(), kwargs=None, *, setup=None, rounds=100, warmup_rounds=1, **options):
        """Exactly `rounds` timed iterations after `warmup_rounds` untimed ones, no stopping rule
        (pytest-benchmark's names: these rounds are iterations; --gpu-benchmark-rounds, or the
        marker's rounds=, repeats the whole measurement). setup() runs untimed before every
        iteration; it may return (args, kwargs) for that call. Other keywords are benchmark
        options, but not rounds=. Returns fn's result from an extra first call."""
        from .bench.benchmark import make_options, run

        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
        unknown = set(options) - _OPTIONS
        if unknown:
            raise TypeError(f"pedantic() got unknown options {sorted(unknown)}; fn's arguments go "
                            "in args= and kwargs=")
        kwargs = dict(kwargs or {})
        call_args, call_kwargs = args, kwargs
        if setup is not None:
            made = setup()
            if made is not None:
                call_args, call_kwargs = made
        value = fn(*call_args, **(call_kwargs or {}))
        if self._state.disabled:
            return value
        merged = {"rounds": self._state.rounds, **self._defaults, **options}
        merged.update(min_iters=rounds, max_iters=rounds, min_time=0.0, max_time=math.inf,
                      warmup=0.0, name=self._next_name(), fixed=True, warmup_iters=warmup_rounds)
        self._record(run(fn, tuple(args), kwargs, make_options(**merged), setup=setup))
        return value

    def _next_name(self) -> str:
        return self.name if not self.results else f"{self.name}#{len(self.results) + 1}"

    def _record(self, result):
        self.result = result
        self.results.append(result)
        entry = {"name": result.name, "test": self._node.nodeid, "group": self.group,
                 "result": result.to_dict()}
        base = self._state.baseline(result.name)
        if base is not None:
            entry["baseline"] = dict(base)
        self._state.entries.append(entry)
        if base is not None and self._state.fail_slower is not None:
            _fail_if_slower(result, entry["baseline"], self._state.fail_slower)


# gpuprofile.benchmark's defaults, for pedantic() which builds its options itself.
def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def _fail_if_slower(result, base, pct):
    """Fails the test when `result` is slower than the saved `base` by more than pct % with 95 %
    confidence, and when either cannot be trusted (the gate fails closed, never passes)."""
    from ._stats import ratio_interval
    from .bench import gate

    for what, r in (("this run's result", result), ("the saved result", base)):
        why = gate.problem(r)
        if why is not None:
            pytest.fail(f"gpu_benchmark {result.name}: cannot compare, {what} is not usable: {why}",
                        pytrace=False)
    low, _ = ratio_interval(*gate.interval(result), base["ci_low_ms"], base["ci_high_ms"])
    if not low <= 1 + pct / 100:  # NaN fails too
        ratio = _ratio(result.median_ms, base["median_ms"])
        scope = "within one run" if min(result.rounds, base.get("rounds", 1)) <= 1 else "over rounds"
        pytest.fail(
            f"gpu_benchmark {result.name}: median {result.median_ms:.6g} ms vs saved "
            f"{base['median_ms']:.6g} ms ({ratio:.3f}x); slower by more than {pct:g} % with 95 % "
            f"confidence (at least {low:.3f}x from the two confidence intervals, {scope})",
            pytrace=False,
        )


@pytest.fixture
def gpu_benchmark(request):
    """Benchmark a function with gpuprofile.benchmark: gpu_benchmark(fn, *args, **kwargs)."""
    return GpuBenchmarkFixture(request.node, request.config.stash[_STATE])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: collect a finished worker's results."""
    payload = getattr(node, "workeroutput", {}).get(_OUTPUT_KEY)
    if payload:
        node.config.stash[_STATE].entries.extend(json.loads(payload))


def pytest_sessionfinish(session):
    state = session.config.stash.get(_STATE, None)
    if state is None:
        return
    if state.is_worker:
        session.config.workeroutput[_OUTPUT_KEY] = json.dumps(state.entries)
        return
    state.entries.sort(key=lambda e: e["name"])
    if state.save:
        from ._files import write_json
        from .distributed import rank_fields

        results = [{**e["result"], "name": e["name"], "test": e["test"], "group": e["group"]}
                   for e in state.entries]
        write_json(state.save, {"gpuprofile_benchmark_file": _FILE_VERSION, **rank_fields(),
                                "results": results})


def pytest_terminal_summary(terminalreporter, config):
    state = config.stash.get(_STATE, None)
    if state is None or state.is_worker or not (state.entries or state.disabled):
        return
    tr = terminalreporter
    tr.write_sep("-", "gpu benchmarks")
    if state.disabled:
        tr.write_line("disabled (--gpu-benchmark-disable): each function ran once, untimed")
        return
    for line in summary_lines(state.entries):
        tr.write_line(line)
    if state.save:
        tr.write_line(f"saved {len(state.entries)} result(s) to {state.save}")


def summary_lines(entries) -> list[str]:
    """The summary table, one block per group. Pure: entries as recorded by the fixture."""
    from ._format import fmt, text_table
    from ._stats import ratio_interval
    from .bench import gate
    from .bench.result import fmt_time, verdict

    lines = []
    notes = []  # why CUPTI timing was not used, once per distinct reason
    groups = sorted({e["group"] or "" for e in entries})
    with_baseline = any("baseline" in e for e in entries)
    for group in groups:
        headers = ["name", "median", "noise", "iterations", "mode", "clock"]
        if with_baseline:
            headers += ["saved", "ratio", "verdict"]
        rows = []
        for e in (e for e in entries if (e["group"] or "") == group):
            r = e["result"]
            clock = r["clock"]
            if r.get("clock_note"):  # fell back from CUPTI: events read ~3 µs high; say so
                if r["clock_note"] not in notes:
                    notes.append(r["clock_note"])
                clock = f"{clock} [{notes.index(r['clock_note']) + 1}]"
            row = [e["name"], fmt_time(r["median_ms"]), f"±{fmt(r['rel_noise'] * 100, 3)} %",
                   r["iterations"], r["mode"], clock]
            if with_baseline:
                b = e.get("baseline")
                if b is None:
                    row += ["-", "-", "new"]
                else:
                    low, high = ratio_interval(*gate.interval(r), b["ci_low_ms"], b["ci_high_ms"])
                    row += [fmt_time(b["median_ms"]), f"{fmt(_ratio(r['median_ms'], b['median_ms']))}x",
                            verdict(low, high)]
            rows.append(row)
        lines += text_table(headers, rows, title=f"group: {group}" if group else None).splitlines()
        lines.append("")
    lines += [f"[{k + 1}] {note}" for k, note in enumerate(notes)]
    if min(e["result"].get("rounds", 1) for e in entries) <= 1:
        lines.append(f"note: {gate.WITHIN_ONE_RUN}")
    return lines
