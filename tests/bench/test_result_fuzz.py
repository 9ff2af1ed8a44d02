"""Fuzzing saved benchmark files (marker `fuzz`): BenchmarkResult JSON and the pytest plugin's
compare files, truncated, retyped or with fields replaced by junk. Loading them and using what
loads (tables, compare(), the plugin's summary) raises only clear errors."""

import json

import pytest
from fuzzing import clear_errors_only, ints, json_values, junk, scalars
from hypothesis import given
from hypothesis import strategies as st

import gpuprofile as gp
from gpuprofile.bench.fixture import _fail_if_slower
from gpuprofile.bench.result import BenchmarkResult, compare
from gpuprofile.pytest_plugin import _read, baselines, summary_lines

pytestmark = pytest.mark.fuzz

_VALID = {}


def valid() -> dict:
    """A real result's dict (measured once per session on the host clock)."""
    if not _VALID:
        _VALID.update(gp.benchmark(sum, [1, 2, 3], clock="host", warmup=0, min_time=0.01,
                                   max_noise=0.5, flops=100, bytes=8, name="r").to_dict())
        # a short file keeps every example fast; its median stays its samples' (bench/gate.py)
        low, median, high = _VALID["ci_low_ms"], _VALID["median_ms"], _VALID["ci_high_ms"]
        _VALID["samples"] = [low, low, median, high, high]
    return json.loads(json.dumps(_VALID))


NUMBERS = st.one_of(st.floats(), ints(), st.sampled_from([0, 0.0, -1.0, 1e308, 2**1100]))


@st.composite
def damaged(draw, json_only=False):
    """A valid result dict with some fields replaced, retyped or removed."""
    junk_ = json_values if json_only else junk
    d = valid()
    for key in draw(st.lists(st.sampled_from(sorted(d)), max_size=5, unique=True)):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            del d[key]
        elif choice == 1:
            d[key] = draw(NUMBERS)
        elif choice == 2:
            d[key] = draw(junk_())
        else:
            d[key] = draw(st.lists(NUMBERS | (json_values() if json_only else scalars()), max_size=4))
    return d


def _use(r: BenchmarkResult):
    repr(r)
    r._repr_html_()
    back = BenchmarkResult.from_dict(json.loads(json.dumps(r.to_dict())))
    # the same result back; compared as JSON text, where NaN (a scalar's or a round median's) is
    # one token instead of a value unequal to itself
    assert json.dumps(back.to_dict(), sort_keys=True) == json.dumps(r.to_dict(), sort_keys=True)
    compare([r, BenchmarkResult.from_dict(valid())])
    compare({"a": BenchmarkResult.from_dict(valid()), "b": r}, baseline="b")


@given(d=damaged())
def test_damaged_result_dicts(d):
    with clear_errors_only():
        r = BenchmarkResult.from_dict(d)
    if "r" in locals():
        with clear_errors_only():
            _use(r)


@given(cut=st.integers(0, 4000), data=st.data())
def test_truncated_result_files(tmp_path_factory, cut, data):
    path = tmp_path_factory.mktemp("r") / "r.json"
    text = json.dumps(data.draw(damaged(json_only=True)), indent=1)
    path.write_text(text[: cut % (len(text) + 1)])
    with clear_errors_only():
        _use(BenchmarkResult.load(path))


@given(value=junk(8))
def test_junk_json_documents(value):
    with clear_errors_only():
        _use(BenchmarkResult.from_dict(value))


def _compare_file(draw):
    results = []
    for k in range(draw(st.integers(0, 3))):
        e = {"name": f"t{k}", "median_ms": 1.0, "ci_low_ms": 0.9, "ci_high_ms": 1.1}
        for key in draw(st.lists(st.sampled_from(sorted(e)), max_size=3)):
            e[key] = draw(st.one_of(NUMBERS, junk()))
        results.append(e if draw(st.integers(0, 9)) else draw(junk()))
    doc = {"gpuprofile_benchmark_file": 1, "results": results}
    return draw(st.one_of(st.just(doc), junk(), st.just({"results": draw(junk())})))


@given(data=st.data())
def test_compare_files(data):
    """What --gpu-benchmark-compare reads: baselines() either refuses the file with ValueError
    or returns numbers that the summary and the slower-check use without error."""
    doc = _compare_file(data.draw)
    try:
        base = baselines(doc)
    except ValueError:
        return
    result = BenchmarkResult.from_dict(valid())
    for name, b in base.items():
        entry = {"name": name, "group": None, "result": result.to_dict(), "baseline": b}
        summary_lines([entry])
        result.name = name
        with clear_errors_only(pytest.fail.Exception):
            _fail_if_slower(result, b, 5.0)


@given(cut=st.integers(0, 2000), data=st.data())
def test_truncated_compare_files(tmp_path_factory, cut, data):
    """--gpu-benchmark-compare on a cut or damaged file: a usage error, nothing else."""
    path = tmp_path_factory.mktemp("c") / "base.json"
    doc = data.draw(st.one_of(st.just({"results": [{**valid(), "name": "t"}]}), json_values()))
    text = json.dumps(doc)
    path.write_text(text[: cut % (len(text) + 1)])
    with clear_errors_only(pytest.UsageError):
        baselines(_read(str(path)))


# ---- findings of the fuzzing above, kept as regression tests -------------------------------------

def test_result_that_is_not_a_dict_is_a_type_error():
    with pytest.raises(TypeError, match="must be a dict, got list"):  # was AttributeError
        BenchmarkResult.from_dict([])


def test_missing_and_mistyped_fields_are_named():
    d = valid()
    del d["median_ms"]
    with pytest.raises(ValueError, match="'median_ms' is missing"):
        BenchmarkResult.from_dict(d)
    with pytest.raises(TypeError, match="'iterations' must be int, got str"):
        BenchmarkResult.from_dict({**valid(), "iterations": "7"})
    with pytest.raises(TypeError, match="'samples' must be float"):
        BenchmarkResult.from_dict({**valid(), "samples": [1.0, [2.0]]})


def test_int_too_large_for_a_float_field():
    """An int JSON number beyond float range loaded, then repr() raised OverflowError."""
    with pytest.raises(ValueError, match="'median_ms' is too large"):
        BenchmarkResult.from_dict({**valid(), "median_ms": 2**1100})


@pytest.mark.parametrize("entry, message", [
    ({"name": "t"}, "'median_ms' is missing"),  # was KeyError in the middle of the run
    ({"median_ms": 1.0, "ci_low_ms": 1.0, "ci_high_ms": 1.0}, "not a benchmark result with a name"),
    ({"name": "t", "median_ms": "1", "ci_low_ms": 1.0, "ci_high_ms": 1.0}, "must be a number"),
])
def test_bad_compare_file_entries_are_refused_up_front(entry, message):
    with pytest.raises(ValueError, match=message):
        baselines({"results": [entry]})


def test_zero_baseline_median_does_not_divide_by_zero():
    r = BenchmarkResult.from_dict(valid())
    b = {"median_ms": 0.0, "ci_low_ms": 0.5, "ci_high_ms": 2.0}
    lines = summary_lines([{"name": "r", "group": None, "result": r.to_dict(), "baseline": b}])
    assert any("-x" in line for line in lines)  # the ratio is unknown, not a ZeroDivisionError
    # the gate fails closed: a saved median of 0 is refused, never compared
    with pytest.raises(pytest.fail.Exception, match="saved result is not usable: 'median_ms' is 0"):
        _fail_if_slower(r, {**b, "ci_low_ms": 1e-12, "ci_high_ms": 1e-12}, 5.0)
    with pytest.raises(ValueError, match=r"results\[0\] \(r\): 'median_ms' is 0 \(must be > 0\)"):
        baselines({"results": [{"name": "r", **b}]})
