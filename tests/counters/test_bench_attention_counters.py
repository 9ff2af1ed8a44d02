"""benchmarks/bench_attention_counters.py's pure parts (arguments, the jobs, merging the children's
results, the table) and its metric names, checked offline against GH100 (which loads CUPTI's
perfworks host library: hence here, with the counters tests that tools/sanitize.sh runs without
ASan); its GPU run is the lead's (issue 27)."""

import pytest
from scripts import load_benchmark

import gpuprofile as gp
from gpuprofile.counters import catalog

counters = load_benchmark("bench_attention_counters")


def test_shapes_parse():
    assert counters.parse_shape("32,32,512,64,causal") == (32, 32, 512, 64, True)
    assert counters.parse_shape(" 1, 2, 8192, 128 ") == (1, 2, 8192, 128, False)
    for bad in ("32,32,512", "32,32,512,64,yes", "0,1,512,64", "1,1,-5,64", "1,1,512,64,causal,x",
                "a,b,c,d"):
        with pytest.raises(ValueError, match="B,H,N,D or B,H,N,D,causal"):
            counters.parse_shape(bad)
    with pytest.raises(ValueError, match="head_dim 64 or 128, got 96"):
        counters.parse_shape("1,1,512,96")


def test_arguments():
    args = counters.parse_args([])
    assert args.shapes == list(counters.SHAPES)
    assert args.schedules == list(counters.SCHEDULES) and args.what == ["metrics", "stalls"]
    args = counters.parse_args(["--shape", "1,1,512,64", "--shape", "2,2,256,128,causal",
                                "--schedules", "persist", "--what", "stalls"])
    assert args.shapes == [(1, 1, 512, 64, False), (2, 2, 256, 128, True)]
    assert args.schedules == ["persist"] and args.what == ["stalls"]
    for bad in (["--shape", "1,1,512"], ["--schedules", "gp_v9"], ["--what", "ncu"],
                ["--schedules", ""], ["--timeout", "0"]):
        with pytest.raises(SystemExit):
            counters.parse_args(bad)
    # pcs (the most sampled SASS offsets) only when asked for
    assert counters.parse_args(["--what", "pcs,stalls"]).what == ["pcs", "stalls"]


def test_schedules_are_the_grid_s_variants():
    """The table of schedules (gp.kernels.WGMMA_SCHEDULES), through bench_attention_grid.py."""
    table = gp.kernels.WGMMA_SCHEDULES
    assert tuple(s.name for s in table) == counters.SCHEDULES
    assert {s.name: (64,) for s in table if 128 not in s.configs} == counters.HEAD_DIMS


def test_jobs_leave_out_what_a_schedule_does_not_take():
    shapes = [(1, 1, 512, 64, True), (1, 1, 512, 128, False)]
    todo = counters.jobs(shapes, ["persist", "persist_lookahead"], ["metrics", "stalls"])
    assert todo == [(shapes[0], "persist", "metrics"), (shapes[0], "persist", "stalls"),
                    (shapes[0], "persist_lookahead", "metrics"),
                    (shapes[0], "persist_lookahead", "stalls"),
                    (shapes[1], "persist", "metrics"), (shapes[1], "persist", "stalls")]


def test_merge_and_table():
    shape = (32, 32, 512, 64, True)
    metrics = dict(zip(counters.METRICS, (161_300.0, 40.0, 45.0, 50.0, 3.0e8, 1.0e8, 80.0, 1.98e9),
                       strict=True))
    stalls = {"kernel": "k", "samples": 1000,
              "shares": {"wait": 0.3, "barrier": 0.2, "selected": 0.15, "long_scoreboard": 0.1,
                         "math_pipe_throttle": 0.1, "dispatch_stall": 0.08, "no_instruction": 0.07}}
    done = [(shape, "persist_lookahead", "metrics", metrics),
            (shape, "persist_lookahead", "stalls", stalls),
            (shape, "persist", "metrics", {"error": ["CuptiError: counters held", "by another tool"]}),
            (shape, "persist", "stalls", stalls)]
    results = counters.merge(done)
    assert [(r["shape"], r["schedule"]) for r in results] == [
        ("32,32,512,64,causal", "persist_lookahead"), ("32,32,512,64,causal", "persist")]
    assert results[0]["metrics"] is metrics and results[0]["stalls"] is stalls
    assert results[1]["metrics_error"] == "CuptiError: counters held by another tool"
    columns, rows = counters.table(results)
    assert all(len(r) == len(columns) for r in rows)
    assert rows[0][:9] == ["32,32,512,64,causal", "persist_lookahead", 161.3, 40.0, 45.0, 50.0,
                           400.0, 80.0, 1980.0]
    # the six largest reasons, in order
    assert rows[0][9] == ("wait 30%, barrier 20%, selected 15%, long_scoreboard 10%, "
                          "math_pipe_throttle 10%, dispatch_stall 8%")
    assert rows[1][2:9] == [None] * 7 and rows[1][9].startswith("wait 30%")
    # neither measurement: the errors in the last column
    only_errors = counters.merge([(shape, "fixed", "metrics", {"error": ["timed out after 300 s"]}),
                                  (shape, "fixed", "stalls", {"error": ["GpuProfileError: x"]})])
    assert counters.table(only_errors)[1][0][9] == ("metrics: timed out after 300 s; "
                                                    "stalls: GpuProfileError: x")


def test_metric_names_are_gh100_s():
    assert list(catalog.validate(list(counters.METRICS), "GH100")) == list(counters.METRICS)


@pytest.mark.skipif(gp.device_count() > 0, reason="the refusal without a Hopper device")
def test_needs_hopper(capsys):
    assert counters.main(["--what", "metrics"]) == 2
    assert "needs a compute capability 9.0 device" in capsys.readouterr().err
