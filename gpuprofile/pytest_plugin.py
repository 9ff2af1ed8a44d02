"""pytest plugin (entry point `pytest11`): the `gpu_benchmark` fixture, with pytest-benchmark's
storage, comparison and export habits.

    def test_attn(gpu_benchmark):
        out = gpu_benchmark(attn, q, k, v)            # returns attn's result; timing is recorded
        gpu_benchmark.result.median_ms                 # the BenchmarkResult

    @pytest.mark.gpu_benchmark(group="attn", mode="hot", max_time=2)
    def test_attn_hot(gpu_benchmark): ...

    pytest --gpu-benchmark-autosave                    # .gpu_benchmarks/<machine>/0001_<commit>_<date>.json
    pytest --gpu-benchmark-compare --gpu-benchmark-compare-fail=median:5%,min:10%
    pytest --gpu-benchmark-compare=3                   # run 0003 of this machine, or a PATH
    pytest --gpu-benchmark-only | --gpu-benchmark-skip # benchmark tests alone, or all but them
    pytest --gpu-benchmark-json=out.json               # pytest-benchmark's schema (dashboards)
    pytest --gpu-benchmark-histogram                   # an SVG box plot per group

A result is named after its test (a second call in the same test adds "#2"). Saved runs carry
the machine, GPU, driver, CUDA, commit and date (bench/storage.py); samples are saved only with
--gpu-benchmark-save-data. Under pytest-xdist each worker sends its results to the controller
(xdist's workeroutput), which writes the files and the summary. This module imports neither
NumPy nor the benchmark code until a benchmark runs or a file is written.
"""

from __future__ import annotations

import contextlib
import json
import os

import pytest

from .bench.fixture import GpuBenchmarkFixture
from .bench.suite_summary import COLUMNS, DEFAULT_COLUMNS, SORTS, parse_columns, summary_lines

_OUTPUT_KEY = "gpuprofile_benchmarks"  # in xdist's workeroutput
_FILE_VERSION = 1


def pytest_addoption(parser):
    group = parser.getgroup("gpuprofile", "GPU benchmarks (gpuprofile's gpu_benchmark fixture)")
    group.addoption("--gpu-benchmark-storage", metavar="DIR", default=".gpu_benchmarks",
                    help="folder of saved runs, one subfolder per machine (default: "
                         ".gpu_benchmarks; file://DIR is read as DIR)")
    group.addoption("--gpu-benchmark-save", metavar="NAME|PATH",
                    help="save this run: NAME as the storage's next run (NNNN_NAME.json), or a "
                         "PATH (ending in .json, or with a folder) as that file")
    group.addoption("--gpu-benchmark-autosave", action="store_true",
                    help="save this run as the storage's next run, named after the commit and date")
    group.addoption("--gpu-benchmark-save-data", action="store_true",
                    help="keep every sample in the saved run and the JSON export (large)")
    group.addoption("--gpu-benchmark-json", metavar="PATH",
                    help="also write the results in pytest-benchmark's JSON schema to PATH")
    group.addoption("--gpu-benchmark-compare", metavar="NUM|PATH", nargs="?", const="latest",
                    help="compare each result with the one of the same name in a saved run: the "
                         "newest of this machine (no value), run NUM, or the file PATH; give the "
                         "value with '=' (--gpu-benchmark-compare=3)")
    group.addoption("--gpu-benchmark-compare-fail", metavar="EXPR", action="append", default=[],
                    help="with --gpu-benchmark-compare: fail a test whose statistic grew beyond "
                         "EXPR, e.g. median:5%%,min:0.01ms (median: with 95 %% confidence; stats "
                         "median, min, max, mean, stddev, iqr, p10, p90, ops; units ns, us, ms, "
                         "s, ms if none); repeatable")
    group.addoption("--gpu-benchmark-fail-slower", metavar="PCT", type=float, default=None,
                    help="the same as --gpu-benchmark-compare-fail=median:PCT%%: fail a test "
                         "whose median is slower than the saved one by more than PCT %% with "
                         "95 %% confidence, both measured in 3+ rounds (else 'inconclusive')")
    group.addoption("--gpu-benchmark-compare-strict", action="store_true",
                    help="with --gpu-benchmark-compare: fail a test that has no saved result of "
                         "its name, or whose median verdict is 'inconclusive'")
    group.addoption("--gpu-benchmark-only", action="store_true",
                    help="run only the tests that use gpu_benchmark (skip the others)")
    group.addoption("--gpu-benchmark-skip", action="store_true",
                    help="skip the tests that use gpu_benchmark")
    group.addoption("--gpu-benchmark-histogram", metavar="PREFIX", nargs="?",
                    const="gpu_benchmark_histogram",
                    help="write a box plot of each group's samples to PREFIX[-GROUP].svg "
                         "(needs matplotlib; default prefix gpu_benchmark_histogram)")
    group.addoption("--gpu-benchmark-columns", metavar="LIST", default=",".join(DEFAULT_COLUMNS),
                    help="the summary's columns after the name, comma-separated: "
                         f"{', '.join(COLUMNS)} (default: %(default)s)")
    group.addoption("--gpu-benchmark-sort", metavar="COL", default="name", choices=SORTS,
                    help=f"order of the summary's rows: {', '.join(SORTS)} (a statistic: "
                         "smallest first; default: name)")
    group.addoption("--gpu-benchmark-rounds", metavar="N", type=int, default=1,
                    help="repeat each whole measurement N times: intervals then span the spread "
                         "between runs, not only the noise within one (use 5 for a CI gate)")
    group.addoption("--gpu-benchmark-disable", action="store_true",
                    help="run each benchmarked function once, untimed")


class _State:
    """Per-run state, kept in config.stash. Options are read here and checked in
    pytest_configure (a usage error up front, not one per test)."""

    def __init__(self, config):
        opt = config.getoption
        self.storage_root = opt("--gpu-benchmark-storage")
        self.save_spec = opt("--gpu-benchmark-save")
        self.autosave = opt("--gpu-benchmark-autosave")
        self.save_data = opt("--gpu-benchmark-save-data")
        self.json_path = opt("--gpu-benchmark-json")
        self.compare_spec = opt("--gpu-benchmark-compare")
        self.fail_exprs = list(opt("--gpu-benchmark-compare-fail") or [])
        self.fail_slower = opt("--gpu-benchmark-fail-slower")
        self.strict = opt("--gpu-benchmark-compare-strict")
        self.only, self.skip = opt("--gpu-benchmark-only"), opt("--gpu-benchmark-skip")
        self.histogram = opt("--gpu-benchmark-histogram")
        self.columns_text = opt("--gpu-benchmark-columns")
        self.columns = DEFAULT_COLUMNS
        self.sort = opt("--gpu-benchmark-sort")
        self.rounds = opt("--gpu-benchmark-rounds")
        self.disabled = opt("--gpu-benchmark-disable")
        self.is_worker = hasattr(config, "workerinput")
        self.thresholds: list = []
        self.save = None  # the file this run is saved to
        self.reservation = None  # the storage's hold on this run's number (bench/storage.py)
        self.compare_path = None  # the saved run compared with
        self.notes: list = []  # lines for the summary (a compare with nothing to compare, ...)
        self.written: list = []  # what was written at the end, for the summary
        self.machine = self.commit = self.date = None
        self.entries = []  # {"name", "test", "group", "result", "baseline"}: JSON-ready
        self._baseline = None
        self.baseline_machine = None

    def baseline(self, name):
        if self.compare_path is None:
            return None
        if self._baseline is None:
            data = _read(self.compare_path)
            self._baseline = baselines(data)
            self.baseline_machine = data.get("machine_info") if isinstance(data, dict) else None
        return self._baseline.get(name)

    def metadata(self) -> dict:
        """machine_info, commit_info and datetime of this run (read once, on first need)."""
        if self.machine is None:
            from .bench.storage import commit_info, machine_info, now_iso

            self.machine, self.commit, self.date = machine_info(), commit_info(), now_iso()
        return {"machine_info": self.machine, "commit_info": self.commit, "datetime": self.date}

    def storage(self):
        from .bench.storage import Storage, machine_id

        self.metadata()
        return Storage(self.storage_root, machine_id(self.machine))


_STATE = pytest.StashKey[_State]()


def _read(path):
    """A saved run (gpuprofile's file, or pytest-benchmark's JSON turned into one); a usage
    error naming the file otherwise."""
    from ._files import read_json
    from .bench.pytest_json import is_pytest_benchmark, results_of

    try:
        data = read_json(path)
        if is_pytest_benchmark(data):
            data = {"machine_info": data.get("machine_info"), "results": results_of(data, str(path))}
        baselines(data)
    except (OSError, ValueError) as e:
        raise pytest.UsageError(f"--gpu-benchmark-compare: cannot read {path}: {e}") from None
    return data


_STAT_FIELDS = ("mean_ms", "stdev_ms", "min_ms", "max_ms", "p10_ms", "p90_ms", "iqr_ms")


def _float(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def baselines(data) -> dict:
    """{name: {median_ms, ci_low_ms, ci_high_ms, rounds, and mean_ms, stdev_ms, min_ms, max_ms,
    p10_ms, p90_ms, iqr_ms where saved}} of a saved benchmark file's contents (the interval as a
    gate compares it: bench.gate.interval); ValueError naming the result and field of a file
    that is not one, is damaged, or holds a result a gate cannot trust (a median or interval
    that is not a finite positive number, a median not its samples')."""
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
        stats = {f: _float(e.get(f)) for f in _STAT_FIELDS}
        out[e["name"]] = {"median_ms": float(e["median_ms"]), "ci_low_ms": float(low),
                          "ci_high_ms": float(high),
                          "rounds": rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else 1,
                          **stats}
    return out


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu_benchmark(group=None, **options): group for the summary, and default "
        "gpuprofile.benchmark options for the gpu_benchmark fixture in this test",
    )
    config.addinivalue_line(  # pytest-benchmark's, for its suites run without it installed
        "markers", "benchmark(group=None, ...): pytest-benchmark's marker; gpu_benchmark reads its group")
    state = _State(config)
    _check_options(state)
    _warn_bare_units(config, state)
    _resolve_compare(state)
    if not state.is_worker:
        _resolve_outputs(state)
    config.stash[_STATE] = state


def _check_options(state: _State) -> None:
    from .bench.thresholds import parse

    if isinstance(state.rounds, bool) or not isinstance(state.rounds, int) or state.rounds < 1:
        raise pytest.UsageError(f"--gpu-benchmark-rounds must be >= 1, got {state.rounds}")
    if state.only and state.skip:
        raise pytest.UsageError("--gpu-benchmark-only and --gpu-benchmark-skip exclude each other")
    if state.only and state.disabled:
        raise pytest.UsageError("--gpu-benchmark-only and --gpu-benchmark-disable exclude each other "
                                "(only benchmarks would run, untimed)")
    try:
        state.columns = parse_columns(state.columns_text)
    except ValueError as e:
        raise pytest.UsageError(f"--gpu-benchmark-columns: {e}") from None
    exprs = list(state.fail_exprs)
    if state.fail_slower is not None:
        if not state.fail_slower >= 0:
            raise pytest.UsageError(f"--gpu-benchmark-fail-slower must be >= 0, got {state.fail_slower}")
        exprs.append(f"median:{state.fail_slower!r}%")
    try:
        state.thresholds = parse(exprs)
    except ValueError as e:
        raise pytest.UsageError(f"--gpu-benchmark-compare-fail: {e}") from None
    if exprs and not state.thresholds:  # a gate that gates nothing must not pass silently
        raise pytest.UsageError(f"--gpu-benchmark-compare-fail={','.join(exprs)!r} gives no threshold")
    if state.strict and state.compare_spec is None:
        raise pytest.UsageError("--gpu-benchmark-compare-strict needs --gpu-benchmark-compare[=NUM|PATH]")
    if state.thresholds and state.compare_spec is None:
        option = "--gpu-benchmark-compare-fail" if state.fail_exprs else "--gpu-benchmark-fail-slower"
        raise pytest.UsageError(f"{option} needs --gpu-benchmark-compare[=NUM|PATH]")


def _warn_bare_units(config, state: _State) -> None:
    """A threshold without a unit is ms here, seconds in pytest-benchmark (whose
    --benchmark-compare-fail=mean:0.001 is 1 ms): gpuprofile keeps ms, its unit everywhere,
    and says so, since the same text means 1000 times less here."""
    for t in state.thresholds:
        if not t.percent and t.stat != "ops" and t.text[-1:].isdigit():
            number = t.text.partition(":")[2].strip()
            config.issue_config_time_warning(pytest.PytestConfigWarning(
                f"--gpu-benchmark-compare-fail={t.text}: a number without a unit is ms here "
                f"({number} ms), but seconds in pytest-benchmark; write {number}ms or {number}s "
                "to say which"), stacklevel=2)


def _resolve_compare(state: _State) -> None:
    """The saved run to compare with: the newest of this machine, run NUM, or a path; in a
    multi-rank job each rank's own file where there is one (docs/distributed.md)."""
    spec = state.compare_spec
    if spec is None:
        return
    from .distributed import rank_path

    path = spec
    if spec == "latest" or spec.isdigit():
        try:
            path = state.storage().find(spec)
        except FileNotFoundError as e:
            if spec != "latest":
                raise pytest.UsageError(f"--gpu-benchmark-compare={spec}: {e}") from None
            state.notes.append(f"nothing compared: {e}")  # a first run: nothing saved yet
            return
    if os.path.exists(rank_path(path)):
        path = rank_path(path)
    state.compare_path = path
    if not state.is_worker:
        data = _read(path)  # a bad file is a usage error up front, not one per test
        state.baseline_machine = data.get("machine_info")  # under xdist only workers read it later
        if not data.get("results"):
            if state.strict:
                raise pytest.UsageError(f"--gpu-benchmark-compare-strict: {path} holds no results")
            state.notes.append(f"nothing compared: {path} holds no results")


def _is_path(spec: str) -> bool:
    return spec.endswith(".json") or os.sep in spec or bool(os.altsep and os.altsep in spec)


def _resolve_outputs(state: _State) -> None:
    """Where this run is saved and exported, each checked writable now, not after the run."""
    from ._files import check_writable
    from .distributed import rank_info, rank_path

    if state.save_spec is not None and _is_path(state.save_spec):
        state.save = rank_path(state.save_spec)
    elif state.save_spec is not None or state.autosave:
        storage = state.storage()
        info = rank_info()
        try:
            path, state.reservation = storage.reserve(
                state.save_spec, state.commit, state.date,
                f".rank{info.rank}" if info.world_size > 1 else "")
        except OSError as e:
            raise pytest.UsageError(f"--gpu-benchmark-storage: cannot create {storage.folder}: "
                                    f"{e.strerror}") from None
        state.save = rank_path(path, info)
    if state.json_path:
        state.json_path = rank_path(state.json_path)
    outputs = [("--gpu-benchmark-save", state.save), ("--gpu-benchmark-json", state.json_path)]
    try:
        if state.histogram is not None:
            outputs.append(("--gpu-benchmark-histogram", _histogram_probe(state)))
        for option, path in outputs:
            if path:
                try:
                    check_writable(path)
                except OSError as e:
                    raise pytest.UsageError(f"{option}: cannot write {path}: {e.strerror}") from None
    except pytest.UsageError:
        _release(state)
        raise


def _histogram_probe(state: _State) -> str:
    """The file --gpu-benchmark-histogram's folder must take (made now), checked before the
    tests run rather than after."""
    from .bench.histogram import probe_path
    from .distributed import rank_path

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise pytest.UsageError("--gpu-benchmark-histogram needs matplotlib "
                                "(pip install matplotlib)") from None
    prefix = rank_path(state.histogram)
    try:
        return probe_path(prefix)
    except OSError as e:
        raise pytest.UsageError(f"--gpu-benchmark-histogram: cannot write {prefix}*.svg: "
                                f"{e.strerror}") from None


def _release(state: _State) -> None:
    """Give back the storage's hold on this run's number (saved, or nothing to save)."""
    reservation, state.reservation = state.reservation, None
    if reservation is not None:
        with contextlib.suppress(OSError):
            os.remove(reservation)


def pytest_collection_modifyitems(config, items):
    """--gpu-benchmark-only / --gpu-benchmark-skip: skip the tests that do not use (that use)
    the gpu_benchmark fixture."""
    state = config.stash.get(_STATE, None)
    if state is None or not (state.only or state.skip):
        return
    for item in items:
        uses = "gpu_benchmark" in getattr(item, "fixturenames", ())
        if state.only and not uses:
            item.add_marker(pytest.mark.skip(reason="not a gpu_benchmark test (--gpu-benchmark-only)"))
        elif state.skip and uses:
            item.add_marker(pytest.mark.skip(reason="a gpu_benchmark test (--gpu-benchmark-skip)"))


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
    for e in state.entries:  # filled by the tests until now; what JSON cannot hold, as repr()
        e["extra_info"] = json.loads(json.dumps(e.get("extra_info") or {}, default=repr))
    if state.is_worker:
        session.config.workeroutput[_OUTPUT_KEY] = json.dumps(state.entries)
        return
    try:
        _write_outputs(state)
    finally:
        _release(state)


def pytest_unconfigure(config):
    state = config.stash.get(_STATE, None)
    if state is not None:
        _release(state)  # a run stopped before its end saves nothing


def _write_outputs(state: _State) -> None:
    state.entries.sort(key=lambda e: e["name"])
    if not state.entries:
        return
    from ._files import write_json
    from ._version import __version__

    if state.save:
        from .distributed import rank_fields

        results = [{**_without_samples(e["result"], state.save_data), "name": e["name"],
                    "test": e["test"], "group": e["group"], "extra_info": e["extra_info"]}
                   for e in state.entries]
        write_json(state.save, {"gpuprofile_benchmark_file": _FILE_VERSION, **state.metadata(),
                                "version": __version__, **rank_fields(), "results": results,
                                "benchmarks": _their_view(state.entries)})
        state.written.append(f"saved {len(state.entries)} result(s) to {state.save}")
    if state.json_path:
        from .bench.pytest_json import export

        meta = state.metadata()
        write_json(state.json_path, export(state.entries, meta["machine_info"], meta["commit_info"],
                                           meta["datetime"], __version__, state.save_data))
        state.written.append(f"wrote pytest-benchmark JSON to {state.json_path}")
    if state.histogram is not None:
        from .bench.histogram import write_histograms
        from .distributed import rank_path

        for path in write_histograms(state.entries, rank_path(state.histogram)):
            state.written.append(f"wrote histogram {path}")


def _their_view(entries) -> list:
    """A saved run's "benchmarks": pytest-benchmark's entries (stats in seconds), so that its
    own `pytest-benchmark --storage .gpu_benchmarks compare` reads gpuprofile's storage; the
    results themselves, which gpuprofile reads, stay in "results" (not repeated here)."""
    from .bench.pytest_json import benchmark_entry

    out = []
    for e in entries:
        b = benchmark_entry(e["name"], e["test"], e["group"], e["result"], False, e["extra_info"])
        b["extra_info"].pop("gpuprofile", None)
        out.append(b)
    return out


def _without_samples(result: dict, keep: bool) -> dict:
    return result if keep else {k: v for k, v in result.items() if k != "samples"}


def _machine_note(state: _State) -> str | None:
    """A line when the saved run compared with was measured on another GPU, driver or CUDA."""
    saved = state.baseline_machine
    if not isinstance(saved, dict):
        return None
    now = state.metadata()["machine_info"]
    keys = ("gpu", "nvidia_driver", "cuda_driver", "cuda_runtime")
    if all(saved.get(k) == now.get(k) for k in keys):
        return None
    def say(m):
        return ", ".join(f"{k} {m.get(k)}" for k in keys)
    return f"note: the saved run was measured with {say(saved)}; this run with {say(now)}"


def pytest_terminal_summary(terminalreporter, config):
    state = config.stash.get(_STATE, None)
    if state is None or state.is_worker or not (state.entries or state.disabled or state.notes):
        return
    tr = terminalreporter
    tr.write_sep("-", "gpu benchmarks")
    if state.disabled:
        tr.write_line("disabled (--gpu-benchmark-disable): each function ran once, untimed")
        return
    if state.entries:
        median_pct = [t.value for t in state.thresholds if t.stat == "median" and t.percent]
        for line in summary_lines(state.entries, state.columns, state.sort, min(median_pct, default=None)):
            tr.write_line(line)
    unmatched = [e["name"] for e in state.entries if "baseline" not in e]
    if state.compare_path is not None and unmatched:  # a renamed test is not compared: say so
        what = "nothing compared" if len(unmatched) == len(state.entries) else "not compared"
        tr.write_line(f"{what}: {len(unmatched)} result(s) have no saved result of their name in "
                      f"{state.compare_path}: {', '.join(unmatched)}")
    if state.compare_path is not None and any("baseline" in e for e in state.entries):
        tr.write_line(f"compared with {state.compare_path}")
        note = _machine_note(state)
        if note:
            tr.write_line(note)
    for line in state.notes + state.written:
        tr.write_line(line)
