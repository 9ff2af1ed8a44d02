"""`gpuprofile metrics` and `gpuprofile stalls` on any machine: arguments, usage errors (exit 2),
the no-device error (exit 1), the script runner they share, and --kernel's selection on
fabricated results."""

import dataclasses
import json
import subprocess
import sys

import pytest

import gpuprofile as gp
from gpuprofile.cli import build_parser, main
from gpuprofile.counters import catalog as _catalog
from gpuprofile.counters.cli import ScriptFailed, _report, metric_spec, script_callable
from gpuprofile.counters.metric_sets import DURATION, SETS, SM_SOL
from gpuprofile.counters.result import CACHE_CONTROL, build
from gpuprofile.counters.stalls import KernelStalls, StallReport

SOL = list(SETS["sol"].metrics)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "work.py"
    path.write_text("import sys\nprint('ran with', sys.argv[1:])\n")
    return str(path)


def test_options_before_the_script_and_its_arguments_after(script):
    args = build_parser().parse_args(["metrics", "--set", "roofline", "--kernel", "flash", script,
                                      "--epochs", "3", "--json", "x"])
    assert (args.set, args.kernel, args.script) == ("roofline", "flash", script)
    assert args.args == ["--epochs", "3", "--json", "x"] and args.json is None
    assert metric_spec(args) == "roofline"
    args = build_parser().parse_args(["metrics", "--metrics", f"sol, {DURATION}", script])
    assert metric_spec(args) == ["sol", DURATION]
    args = build_parser().parse_args(["stalls", "--period", "8", script])
    assert args.period == 8 and args.args == [] and args.kernel is None
    assert metric_spec(build_parser().parse_args(["metrics", script])) == "sol"
    assert build_parser().parse_args(["metrics", script]).cache_control == "all"  # as ncu
    args = build_parser().parse_args(["metrics", "--cache-control", "none", script])
    assert args.cache_control == "none"


def test_cache_control_choices_are_the_api_table():
    with pytest.raises(SystemExit) as info:
        main(["metrics", "--cache-control", "l2", "x.py"])
    assert info.value.code == 2
    action = next(a for a in build_parser()._subparsers._group_actions[0].choices["metrics"]._actions
                  if a.dest == "cache_control")
    assert action.choices == sorted(CACHE_CONTROL) == ["all", "none"]


@pytest.mark.parametrize("argv, message", [
    (["metrics", "absent.py"], "no such script: absent.py"),
    (["metrics", "--kernel", "regex:(", "{s}"], "is not a regular expression"),
    (["stalls", "--kernel", "regex:", "{s}"], "the kernel pattern is empty"),
    (["metrics", "--per", "call", "--kernel", "x", "{s}"], "--kernel needs --per kernel"),
    (["metrics", "--metrics", " , ", "{s}"], "--metrics is empty"),
    (["metrics", "--max-passes", "0", "{s}"], "--max-passes must be >= 1"),
    (["metrics", "--max-kernels", "-1", "{s}"], "--max-kernels must be >= 1"),
    (["stalls", "--period", "2", "{s}"], "--period must be within 5..31"),
    (["stalls", "absent.py"], "no such script"),
])
def test_usage_errors_exit_2_before_running_anything(capsys, script, argv, message):
    assert main([a.format(s=script) for a in argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "ran with" not in captured.out + captured.err


@pytest.mark.parametrize("argv", [["metrics", "--set", "all", "x.py"], ["metrics", "--set", "sol", "--metrics", "a", "x.py"],
                                  ["metrics"], ["stalls"]])
def test_argparse_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2


@pytest.mark.parametrize("command", ["metrics", "stalls"])
def test_help_has_an_example(command):
    out = subprocess.run([sys.executable, "-m", "gpuprofile", command, "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "examples:" in out.stdout and f"gpuprofile {command} " in out.stdout


@pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")
@pytest.mark.parametrize("command", ["metrics", "stalls"])
def test_without_a_device_the_error_says_so(capsys, script, command):
    assert main([command, script]) == 2
    err = capsys.readouterr().err
    assert f"gpuprofile {command}: error: needs a CUDA device" in err


def test_the_script_runs_with_its_arguments_and_its_output_on_stderr(capsys, script, tmp_path):
    run = script_callable(script, ["a", "b"], "gpuprofile metrics")
    assert run.__name__ == "work.py"
    run()
    captured = capsys.readouterr()
    assert captured.out == "" and "ran with ['a', 'b']" in captured.err
    failing = tmp_path / "fail.py"
    failing.write_text("raise SystemExit(3)\n")
    with pytest.raises(ScriptFailed, match="status 3") as info:
        script_callable(str(failing), [], "gpuprofile metrics")()
    assert info.value.code == 3


# ---- --kernel on fabricated results -----------------------------------------------------------------


def three_kernels():
    infos = _catalog.validate(SOL, "GH100")
    ranges = [("0", (100.0, 10.0, 80.0, 70.0, 1.9e9)), ("1", (300.0, 90.0, 5.0, 1.0, 1.9e9)),
              ("2", (100.0, 50.0, 50.0, 40.0, 1.9e9))]
    names = ["void flash_fwd<64>(Params)", "void gemm_tn(float*)", "void flash_fwd<128>(Params)"]
    return build("work.py", "kernel", SOL, infos, ranges, names, passes=5, replay="user",
                 range_mode="auto", calls=6, cost_s=1.0, setup_s=0.1, chip="GH100", sets=["sol"],
                 notes=[], counter_data_bytes=1)


def test_metrics_select_keeps_matching_kernels_and_recombines_the_total():
    full = three_kernels()
    flash = full.select("flash_fwd")
    assert [k.name for k in flash.kernels] == ["void flash_fwd<64>(Params)", "void flash_fwd<128>(Params)"]
    assert flash[DURATION] == 200.0 and full[DURATION] == 500.0
    assert flash[SM_SOL] == pytest.approx((10.0 * 100 + 50.0 * 100) / 200)
    assert flash.notes[-1] == "kernels matching 'flash_fwd': 2 of 3" and full.notes == []
    assert "kernels matching 'flash_fwd': 2 of 3" in str(flash)
    assert json.loads(json.dumps(flash.to_dict()))["kernels"][1]["index"] == 2
    none = full.select("^nothing$")
    assert none.kernels == [] and none[DURATION] != none[DURATION]  # NaN


def test_metrics_select_needs_per_kernel_ranges():
    infos = _catalog.validate(SOL, "GH100")
    call = build("work.py", "call", SOL, infos, [("work.py", (1.0, 2.0, 3.0, 4.0, 5.0))], None,
                 passes=5, replay="user", range_mode="user", calls=6, cost_s=1.0, setup_s=0.1,
                 chip="GH100", sets=["sol"], notes=[], counter_data_bytes=1)
    with pytest.raises(ValueError, match="per='kernel'"):
        call.select("x")


def test_stalls_select():
    kernels = [KernelStalls("flash_fwd(Params)", 10, {"wait": 10}, {}),
               KernelStalls("gemm(float*)", 5, {"barrier": 5}, {})]
    report = StallReport(kernels, {"total_samples": 15}, 6, [])
    picked = report.select("gemm")
    assert [k.name for k in picked.kernels] == ["gemm(float*)"] and picked.totals == {"total_samples": 15}
    assert picked.period == 6 and "kernels matching 'gemm': 1 of 2" in str(picked)


def report_args(kernel, tmp_path):
    return build_parser().parse_args(["metrics", "--kernel", kernel, "--json",
                                      str(tmp_path / "m.json"), "x.py"])


def test_kernel_that_matches_nothing_lists_the_kernels_and_exits_2(capsys, tmp_path):
    assert _report("gpuprofile metrics", three_kernels, report_args("gemm_nt", tmp_path)) == 2  # an error of the arguments (docs/cli.md, exit status)
    captured = capsys.readouterr()
    assert captured.out == "" and not (tmp_path / "m.json").exists()
    assert captured.err.splitlines()[:4] == [
        "gpuprofile metrics: error: --kernel 'gemm_nt' matched none of the 3 kernels; there were "
        "(3 distinct names):", "  flash_fwd<…>", "  gemm_tn", "  flash_fwd<…>"]


def test_kernel_that_matches_prints_only_those(capsys, tmp_path):
    assert _report("gpuprofile metrics", three_kernels, report_args("regex:^gemm", tmp_path)) == 0
    out = capsys.readouterr().out
    assert "[1] gemm_tn" in out and "flash_fwd" not in out
    assert json.loads((tmp_path / "m.json").read_text())["kernels"][0]["name"] == "void gemm_tn(float*)"


def test_stalls_kernel_filter_uses_the_same_matcher(capsys, tmp_path):
    kernels = [KernelStalls("void flash_fwd<64>(Params)", 10, {"wait": 10}, {}),
               KernelStalls("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", 5, {"barrier": 5}, {})]
    report = StallReport(kernels, {"total_samples": 15}, 6, [])
    assert [k.name for k in report.select("^flash_fwd$").kernels] == ["void flash_fwd<64>(Params)"]
    args = build_parser().parse_args(["stalls", "--kernel", "gemm", "x.py"])
    assert _report("gpuprofile stalls", lambda: report, args) == 2
    assert "  nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT" in capsys.readouterr().err


def test_stall_report_fits_a_terminal():
    long = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int>>(cutlass::gemm::"
            "kernel::GemmUniversal<int>::Params)")
    kernels = [KernelStalls(long, 123456, {"math_pipe_throttle": 50000, "branch_resolving": 40000,
                                           "short_scoreboard": 33456}, {}),
               KernelStalls("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT_with_more_suffix", 10,
                            {"wait": 10}, {})]
    lines = str(StallReport(kernels, {"total_samples": 123466}, 6, ["a note " * 30])).splitlines()
    assert max(len(line) for line in lines) == 120 and lines[2].startswith("  note a note")
    assert lines[5].startswith("cutlass::device_kernel<…>  ") and lines[6].startswith("…2_h_bz_coopA")
    short = str(StallReport(kernels[1:], {}, 6, [])).splitlines()
    assert short[3].startswith("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT_with_more_suffix  ")


@pytest.mark.parametrize("argv, expected", [([], "all"), (["--cache-control", "none"], "none")])
def test_cache_control_reaches_metrics(monkeypatch, capsys, script, argv, expected):
    from gpuprofile.counters import metrics as counters

    seen = {}

    def fake_metrics(fn, **kwargs):
        seen.update(kwargs)
        return dataclasses.replace(three_kernels(), cache_control=kwargs["cache_control"])

    monkeypatch.setattr(counters, "metrics", fake_metrics)
    assert main(["metrics", *argv, script]) == 0
    assert seen["cache_control"] == expected and seen["metrics"] == "sol"
    state = {"all": "caches: L2 flushed before each kernel", "none": "caches: not flushed"}
    assert state[expected] in capsys.readouterr().out
