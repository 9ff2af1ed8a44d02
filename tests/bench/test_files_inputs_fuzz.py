"""Fuzzing the parsers issue 49 hardened (marker `fuzz`): compare-fail expressions with letters
that case-insensitive matching confuses with ASCII ones, pytest-benchmark documents with numbers
beyond a float and entries marked as ours, and saved runs whose fields (samples included) are
junk. Each reader raises only clear errors (ValueError, TypeError, pytest.UsageError), and what
it accepts is usable by the code that follows it (a gate, a comparison)."""

import json

import pytest
from fuzzing import clear_errors_only, json_values
from hypothesis import given
from hypothesis import strategies as st

import gpuprofile as gp
from gpuprofile.bench.files import ResultFileError, compare_files, load_results
from gpuprofile.bench.pytest_json import results_of
from gpuprofile.bench.thresholds import STATS, parse
from gpuprofile.pytest_plugin import _read, baselines

pytestmark = pytest.mark.fuzz

# letters that fold onto ASCII ones or look like them: long s, Kelvin sign, micro sign, Greek mu
# (both cases), dotless i, the Angstrom sign, fullwidth letters
LOOKALIKES = "\u017f\u212a\u00b5\u03bc\u039c\u0131\u0130\u212b\uff4d\uff53"
UNIT_TEXT = st.text(alphabet=st.sampled_from(list("numsMSU%" + LOOKALIKES)), max_size=4)


@given(stat=st.one_of(st.sampled_from(sorted(STATS)), st.text(alphabet="medianſKı", max_size=8)),
       number=st.sampled_from(["5", "0.5", "1e3", "1e999", ".5", "5."]), unit=UNIT_TEXT,
       space=st.sampled_from(["", " ", "\u00a0"]))
def test_expressions_with_lookalike_letters_parse_or_are_refused(stat, number, unit, space):
    text = f"{stat}:{number}{space}{unit}"
    with clear_errors_only():
        (t,) = parse([text])
        assert t.stat in STATS and t.value >= 0 and t.value == t.value
        assert unit.lower().replace("\u00b5", "u").replace("\u03bc", "u") in ("", "%", "ns", "us", "ms", "s")


_VALID: dict = {}


def valid() -> dict:
    if not _VALID:
        r = gp.benchmark(sum, [1, 2, 3], clock="host", warmup=0, min_time=0.01, max_noise=0.5, name="t::a")
        _VALID.update(r.to_dict())
        low, median, high = _VALID["ci_low_ms"], _VALID["median_ms"], _VALID["ci_high_ms"]
        _VALID["samples"] = [low, low, median, high, high]
    return json.loads(json.dumps(_VALID))


HUGE = st.sampled_from([10**400, -(10**400), 2**1024, 10**308 * 10, 1e308, 0, -1, 2**63])
VALUES = st.one_of(HUGE, json_values(max_leaves=3))


@st.composite
def benchmark_entry(draw):
    stats = {k: draw(st.one_of(st.floats(0, 1), VALUES)) for k in draw(st.lists(st.sampled_from(
        ["median", "mean", "min", "max", "stddev", "iqr", "rounds"]), max_size=4, unique=True))}
    if draw(st.booleans()):
        stats["data"] = draw(st.one_of(st.lists(st.one_of(st.floats(0, 1), HUGE), max_size=8), VALUES))
    entry = {"fullname": draw(st.sampled_from(["t::a", "t::b", 3, None])), "stats": stats}
    if draw(st.booleans()):  # marked as ours: extra_info.gpuprofile, whole or damaged
        own = valid()
        own.pop("samples")
        for key in draw(st.lists(st.sampled_from(sorted(own)), max_size=3, unique=True)):
            if draw(st.booleans()):
                del own[key]
            else:
                own[key] = draw(VALUES)
        entry["extra_info"] = {"gpuprofile": own}
    return entry


def compared_with_itself(tmp_path_factory, doc, name):
    """`doc` written as `name`, then what `gpuprofile compare FILE FILE` does with it."""
    path = tmp_path_factory.mktemp("doc") / name
    path.write_text(json.dumps(doc))
    with clear_errors_only(ResultFileError):
        loaded = load_results(path)
        compare_files([("a", loaded), ("b", loaded)])
    return path


@given(entries=st.lists(benchmark_entry(), max_size=3))
def test_pytest_benchmark_documents(tmp_path_factory, entries):
    doc = {"machine_info": {}, "commit_info": {}, "benchmarks": entries}
    with clear_errors_only():
        results_of(doc)
    path = compared_with_itself(tmp_path_factory, doc, "doc.json")
    with clear_errors_only(pytest.UsageError):
        _read(str(path))  # what --gpu-benchmark-compare=PATH reads


@st.composite
def saved_run(draw):
    results = []
    for _ in range(draw(st.integers(1, 3))):
        r = valid()
        for key in draw(st.lists(st.sampled_from(["samples", "median_ms", "ci_low_ms", "ci_high_ms",
                                                  "rounds", "resolution_ms", "name", "mean_ms"]),
                                 max_size=3, unique=True)):
            r[key] = draw(st.one_of(VALUES, st.lists(st.one_of(st.floats(), HUGE), max_size=4)))
        results.append(r)
    return {"gpuprofile_benchmark_file": 1, "results": results}


@given(doc=saved_run())
def test_saved_runs(tmp_path_factory, doc):
    with clear_errors_only():
        baselines(doc)
    compared_with_itself(tmp_path_factory, doc, "0001_x.json")
