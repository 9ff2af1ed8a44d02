"""Fuzzing what the plugin's new options and readers take from outside (marker `fuzz`):
--gpu-benchmark-compare-fail expressions, the results they judge, and pytest-benchmark JSON
documents read by `gpuprofile compare`: only clear errors (ValueError, TypeError), never
another exception, and a threshold never passes a value it could not compare."""

import json

import pytest
from fuzzing import clear_errors_only, json_values
from hypothesis import given
from hypothesis import strategies as st

from gpuprofile.bench.files import ResultFileError, load_results
from gpuprofile.bench.pytest_json import results_of
from gpuprofile.bench.thresholds import STATS, failure, parse

pytestmark = pytest.mark.fuzz

EXPR_TEXT = st.one_of(
    st.text(max_size=24),
    st.builds(lambda s, n, u: f"{s}:{n}{u}", st.sampled_from([*STATS, "x", ""]),
              st.one_of(st.floats(allow_nan=True), st.integers(-10, 10**6)).map(str),
              st.sampled_from(["", "%", "ms", "us", "µs", "ns", "s", "%%", "m"])),
)


@given(exprs=st.lists(EXPR_TEXT, max_size=4))
def test_parse_raises_only_value_errors(exprs):
    with clear_errors_only():
        for t in parse(exprs):
            assert t.stat in STATS and t.value >= 0 and t.value == t.value


@given(stat=st.sampled_from(sorted(STATS)), percent=st.booleans(),
       now=json_values(max_leaves=2), then=json_values(max_leaves=2),
       interval=st.one_of(st.none(), st.tuples(st.floats(), st.floats())))
def test_failure_never_raises_and_fails_closed(stat, percent, now, then, interval):
    (t,) = parse([f"{stat}:5{'%' if percent else ''}"])
    key = STATS[stat]
    if stat == "median" and not percent and interval is not None:
        interval = (interval, interval)
    why = failure(t, {key: now}, {key: then}, interval)
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (now, then))
    if not numbers:
        assert why is not None and "cannot compare" in why


@given(doc=st.one_of(
    json_values(),
    st.builds(lambda b: {"machine_info": {}, "benchmarks": b},
              st.lists(st.one_of(json_values(), st.builds(
                  lambda name, stats: {"fullname": name, "stats": stats},
                  st.text(max_size=5), st.dictionaries(st.sampled_from(
                      ["median", "mean", "min", "max", "data", "rounds", "iqr"]),
                      json_values(max_leaves=4), max_size=5))), max_size=3)),
))
def test_pytest_benchmark_documents_load_or_are_refused(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("pb") / "doc.json"
    path.write_text(json.dumps(doc))
    with clear_errors_only(ResultFileError):
        load_results(path)
    if isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list):
        with clear_errors_only():
            results_of(doc)
