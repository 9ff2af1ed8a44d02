"""`gpuprofile attention` and `gpuprofile profile-kernels` on any machine: arguments, usage errors
(exit 2), and what they say without a device (attention: exit 0, as the README's main job must;
profile-kernels: exit 1). The plots are drawn from fabricated rows."""

import os
import subprocess
import sys

import pytest

import gpuprofile as gp
from gpuprofile.cli import build_parser, main
from gpuprofile.kernels import attention_bench as ab
from gpuprofile.kernels.attention_plots import write_plots

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
no_device = pytest.mark.skipif(gp.device_count() > 0, reason="checks the no-device behaviour")


def test_attention_arguments_are_the_sweeps():
    args = build_parser().parse_args(["attention", "--seq-lengths", "256,1024", "--impls", "flash,sdpa",
                                      "--dtype", "fp16", "--plots", "out", "--output", "r.json"])
    ab.finish_arguments(args.parser, args)
    assert args.seq_lengths == [256, 1024] and args.impls == ["flash", "sdpa"]
    assert args.dtype == "float16" and args.plots == "out" and args.output == "r.json"
    assert ab.title_for(args) == ("attention forward, float16, head_dim 64, heads 32, non-causal, "
                                  "batch 16384 // seq; TFLOP/s = 4·B·H·N²·D per call / median time")
    args.causal = True
    assert ab.title_for(args).endswith("4·B·H·N²·D / 2 (causal) per call / median time")
    defaults = build_parser().parse_args(["attention"])
    ab.finish_arguments(defaults.parser, defaults)  # the machine's plan decides these
    assert defaults.seq_lengths is None and defaults.impls is None and defaults.max_time == 1.0


def test_profile_kernels_arguments_follow_the_seed_guide():
    args = build_parser().parse_args(["profile-kernels", "--seq-len", "512", "--impl", "flash",
                                      "--trace", "t.json"])
    assert (args.seq_len, args.impl, args.trace, args.iters, args.set) == (512, "flash", "t.json", 10, "sol")
    assert not args.no_counters


@pytest.mark.parametrize("argv, message", [
    (["attention", "--seq-lengths", "128,x"], "--seq-lengths must be integers"),
    (["attention", "--seq-lengths", "0"], "at least one length, each >= 1"),
    (["attention", "--impls", "cutlass"], "unknown impls ['cutlass']"),
    (["profile-kernels", "--impl", "cutlass"], "invalid choice: 'cutlass'"),
    (["profile-kernels", "--iters", "0"], "--iters must be >= 1"),
    (["profile-kernels", "--seq-len", "-4"], "--seq-len must be >= 1"),
])
def test_usage_errors_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and message in capsys.readouterr().err


@no_device
def test_attention_without_a_device_says_so_and_exits_0(capsys, tmp_path):
    assert main(["attention", "--plots", str(tmp_path / "plots")]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "no CUDA device here" in captured.err and "gpuprofile info" in captured.err
    assert not (tmp_path / "plots").exists()


@no_device
def test_profile_kernels_without_a_device_fails_clearly(capsys):
    assert main(["profile-kernels", "--seq-len", "512", "--impl", "flash"]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["attention", "--help"], ["profile-kernels", "--help"]])
def test_help_has_an_example(argv):
    out = subprocess.run([sys.executable, "-m", "gpuprofile", *argv], capture_output=True, text=True)
    assert out.returncode == 0 and "examples:" in out.stdout and f"gpuprofile {argv[0]} --" in out.stdout


@no_device
def test_the_seed_script_name_runs_the_subcommand():
    script = os.path.join(ROOT, "benchmarks", "profile_kernels.py")
    out = subprocess.run([sys.executable, script, "--seq-len", "512", "--impl", "flash"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "gpuprofile profile-kernels: error: needs a CUDA device" in out.stderr


def test_write_plots_draws_only_timed_rows(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [{"impl": impl, "seq": seq, "head_dim": 64, "causal": False, "dtype": "bfloat16",
             "status": "ok", "median_ms": ms * seq, "tflops": 1 / ms, "extra_memory_bytes": 0}
            for impl, ms in (("naive", 1.0), ("flash", 0.25)) for seq in (128, 256)]
    paths = write_plots(rows + [{"impl": "sdpa", "seq": 128, "status": "skipped: x"}], {}, tmp_path / "p")
    assert [os.path.basename(p) for p in paths] == ["latency.png", "tflops.png", "speedup.png", "memory.png"]
    with pytest.raises(ValueError, match="no timed rows"):
        write_plots([{"impl": "sdpa", "seq": 128, "status": "failed: x"}], {}, tmp_path / "q")


def test_all_ok_forgives_sdpa_but_not_ours():
    assert ab.all_ok([{"impl": "flash", "status": "ok"}, {"impl": "sdpa", "status": "failed: shape"}])
    assert not ab.all_ok([{"impl": "flash", "status": "wrong result: not timed"}])
