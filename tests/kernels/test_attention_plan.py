"""The main job's plan and story on any machine, with fake machines: which implementations and
shapes `gpuprofile attention` runs on Hopper, on an A100 and without a GPU, what it leaves out and
why, the time estimate, what it prints about impl="auto", the gp-against-SDPA table and plot, and
the checked row blocks of the reference for long sequences."""

import os

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile import _C
from gpuprofile.cli import main
from gpuprofile.kernels import attention_bench as ab
from gpuprofile.kernels import attention_plan as ap
from gpuprofile.kernels import reference as ref
from gpuprofile.kernels.attention_plots import versus, write_plots

GB = 1e9
H100 = ap.Machine("NVIDIA H100 80GB HBM3", (9, 0), 85 * GB, 1070.0, 67.0, 3352.0, torch=True)
A100 = ap.Machine("NVIDIA A100-SXM4-80GB", (8, 0), 85 * GB, 312.0, 19.5, 2039.0, torch=True)
OURS_HOPPER = ["naive", "flash", "flash_tc", "flash_wgmma"]
PEERS = ["sdpa_cudnn", "sdpa_flash", "sdpa_math"]
no_device = pytest.mark.skipif(gp.device_count() > 0, reason="checks the choice without a device")


def picks(impl):
    return lambda dtype, shape, causal=False: (impl, f"{impl} because {dtype} {shape}")


def test_hopper_runs_flash_wgmma_to_16k_against_sdpa():
    plan = ap.plan_sweep(H100, picks("flash_wgmma"))
    assert plan.seqs == [512, 1024, 2048, 4096, 8192, 16384]
    assert plan.impls == OURS_HOPPER + PEERS
    assert plan.shapes[16384] == (1, 32, 16384, 64) and plan.shapes[512] == (32, 32, 512, 64)
    assert plan.auto[16384] == ("flash_wgmma", "flash_wgmma because bfloat16 (1, 32, 16384, 64)")
    # the N×N buffers that do not fit a quarter of 85 GB: naive's fp32 scores (exact) and math's
    assert plan.left_out == {
        ("naive", 16384): "it needs 34.4 GB beyond the inputs, over a quarter of the device's 85 GB",
        ("sdpa_math", 8192): "it needs 34.4 GB beyond the inputs, over a quarter of the device's 85 GB",
        ("sdpa_math", 16384): "it needs 68.7 GB beyond the inputs, over a quarter of the device's 85 GB"}
    assert len(plan.cases) == 7 * 6 - 3 and ("flash_wgmma", 16384) in plan.cases
    assert plan.cases[:2] == [("naive", 512), ("flash", 512)]  # by seq, then impl
    assert 10 < plan.estimate_s < 30 and 40 < plan.at_most_s < 60  # about a minute at most


def test_a100_stops_at_flash_tc_and_2048():
    plan = ap.plan_sweep(A100, picks("flash_tc"))
    assert plan.seqs == [128, 256, 512, 1024, 2048]
    assert plan.impls == ["naive", "flash", "flash_tc"] + PEERS and plan.left_out == {}
    assert len(plan.cases) == 30


def test_no_device_plans_nothing():
    plan = ap.plan_sweep(ap.Machine(None), picks("flash_tc"))
    assert plan.cases == [] and plan.impls == [] and plan.seqs == []


def test_without_torch_only_ours_and_it_says_so():
    machine = ap.Machine(H100.name, (9, 0), 85 * GB, 1070.0, 67.0, 3352.0, torch=False)
    plan = ap.plan_sweep(machine, picks("flash_wgmma"))
    assert plan.impls == OURS_HOPPER and ("naive", 16384) in plan.left_out
    assert "torch with CUDA is not installed" in plan.describe("bfloat16")


def test_float32_tells_the_story_up_to_flash():
    plan = ap.plan_sweep(H100, picks("flash"), dtype="float32")
    assert plan.impls == ["naive", "flash"] + PEERS


def test_named_cases_all_run():
    plan = ap.plan_sweep(H100, picks("flash_wgmma"), seqs=[32768], impls=["naive", "sdpa_math"])
    assert plan.cases == [("naive", 32768), ("sdpa_math", 32768)] and plan.left_out == {}
    only_impls = ap.plan_sweep(H100, picks("flash_wgmma"), impls=["naive"])
    assert list(only_impls.left_out) == [("naive", 16384)]  # the lengths are the machine's


def test_a_slow_device_leaves_out_what_cannot_take_min_iters_calls():
    slow = ap.Machine("slow", (8, 0), 85 * GB, 312.0, 1.0, 2039.0, torch=False)
    plan = ap.plan_sweep(slow, picks("flash_tc"), seqs=None, max_time=1.0)
    # flash at 2048: 4·8·32·2048²·64 = 275 GFLOP at 0.5 TFLOP/s (half the fp32 peak) = 550 ms
    assert plan.left_out[("flash", 2048)] == ("one call takes about 550 ms by the FLOP count, so 10 "
                                              "calls exceed --max-time 1 s")
    assert ("flash_tc", 2048) not in plan.left_out


def test_estimate_of_one_case_by_hand():
    machine = ap.Machine("m", (9, 0), 85 * GB, 100.0, 10.0, 1000.0)
    plan = ap.plan_sweep(machine, picks("flash_wgmma"), seqs=[1024], impls=["flash_wgmma"],
                         batch=1, heads=1, max_time=1.0)
    call = 4 * 1024 ** 2 * 64 / (100e12 * 0.40)
    host = 4.3e-8 * 3 * 1024 * 64
    assert plan.estimate_s == pytest.approx(host + 0.1 + 3 * call + 0.2)
    assert plan.at_most_s == pytest.approx(host + 0.1 + 3 * call + 1.0)
    causal = ap.plan_sweep(machine, picks("flash_wgmma"), seqs=[1024], impls=["flash_wgmma"],
                           batch=1, heads=1, causal=True)
    assert causal.estimate_s == pytest.approx(host + 0.1 + 1.5 * call + 0.2)


def test_call_seconds_by_kind():
    shape = (4, 32, 4096, 64)
    flops = 4.0 * 4 * 32 * 4096 ** 2 * 64
    assert ap.call_seconds("flash_wgmma", shape, "bfloat16", False, H100) == pytest.approx(flops / (1070e12 * 0.40))
    assert ap.call_seconds("flash", shape, "bfloat16", True, H100) == pytest.approx(flops / 2 / (67e12 * 0.5))
    naive_bytes = 4.0 * 4 * 32 * 4096 * 64 * 2 + 12.0 * 4 * 32 * 4096 ** 2
    assert ap.call_seconds("naive", shape, "bfloat16", False, H100) == pytest.approx(naive_bytes / (3352e9 * 0.6))
    assert ap.call_seconds("flash_tc", shape, "bfloat16", False, ap.Machine("m")) is None
    assert ap.extra_memory_bytes("naive", (1, 1, 5, 64)) == 4 * 5 * 8  # rows padded to 8 floats
    assert ap.extra_memory_bytes("flash_wgmma", shape) == 0


def test_an_impossible_head_dim_is_said_not_raised():
    def refuse(dtype, shape, causal):
        raise ValueError("attention: head_dim 512 is not supported")

    plan = ap.plan_sweep(A100, refuse, head_dim=512)
    assert plan.auto[128] == ("none", "attention: head_dim 512 is not supported")
    assert plan.impls == ["naive", "flash", "flash_tc", "flash_wgmma"] + PEERS


def test_describe_groups_the_shapes_of_one_reason():
    plan = ap.plan_sweep(H100, lambda dtype, shape, causal: ("flash_wgmma", "first that runs"),
                         seqs=[512, 16384], impls=["flash_wgmma"])
    text = plan.describe("bfloat16")
    assert text.splitlines()[:3] == [
        'gpuprofile attention: on NVIDIA H100 80GB HBM3 (compute capability 9.0), impl="auto" '
        "picks, for bfloat16:",
        "  flash_wgmma for B=32 H=32 N=512 D=64, B=1 H=32 N=16384 D=64",
        "    because first that runs"]
    assert "2 cases (flash_wgmma at seq 512, 16384), about" in text and "4·B·H·N²·D" in text


def test_the_plan_asks_for_each_shape_with_its_causal():
    """flash_wgmma's schedule depends on causal, so the choice (and its reason) is asked with it;
    shapes of one schedule share a line of the description."""
    asked = []

    def choice(dtype, shape, causal):
        asked.append((shape[2], causal))
        schedule = "persist" if shape[2] <= 4096 else "fixed"
        return ("flash_wgmma", f"first that runs; its schedule for this shape: {schedule}")

    plan = ap.plan_sweep(H100, choice, causal=True, seqs=[512, 4096, 8192], impls=["flash_wgmma"])
    assert asked == [(512, True), (4096, True), (8192, True)]
    assert plan.auto_lines() == [
        "  flash_wgmma for B=32 H=32 N=512 D=64, B=4 H=32 N=4096 D=64",
        "    because first that runs; its schedule for this shape: persist",
        "  flash_wgmma for B=2 H=32 N=8192 D=64",
        "    because first that runs; its schedule for this shape: fixed"]


@no_device
def test_the_c_table_says_why_without_a_device_with_causal_too():
    """Without a device flash_wgmma is not chosen, so no schedule is named."""
    assert _C._attention_auto_choice("bfloat16", (1, 32, 16384, 64), True) == \
        _C._attention_auto_choice("bfloat16", (1, 32, 16384, 64))


@no_device
def test_the_c_table_says_why_without_a_device():
    impl, why = _C._attention_auto_choice("bfloat16", (1, 32, 16384, 64))
    assert impl == "flash_tc"
    assert why == ("flash_wgmma runs on compute capability 9.0 (Hopper), a build with sm_90a code, "
                   "and there is no device; flash_tc is the first of flash_wgmma, flash_tc, flash, "
                   "naive that takes these arguments without a device")
    impl, why = _C._attention_auto_choice("float32", (2, 4, 256, 128))
    assert impl == "flash" and why.startswith("impl='flash_wgmma' supports float16 and bfloat16, got float32")
    assert "; impl='flash_tc' supports float16 and bfloat16" in why


@pytest.mark.parametrize("args, error", [
    (("bfloat16", (0, 1, 1, 64)), "has a dimension < 1"),
    (("bfloat16", (1, 1, 1, 512)), "head_dim 512 is not supported"),
    (("int8", (1, 1, 1, 64)), "unknown dtype 'int8'"),
])
def test_auto_choice_refuses_bad_arguments(args, error):
    with pytest.raises(ValueError, match=error):
        _C._attention_auto_choice(*args)
    with pytest.raises(TypeError):
        _C._attention_auto_choice("bfloat16", (1, 2, 3))


@pytest.mark.parametrize("causal", [False, True])
def test_reference_of_a_row_block_is_those_rows(causal):
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 40, 16)) for _ in range(3))
    whole = ref.reference(q, k, v, causal)
    np.testing.assert_array_equal(ref.reference(q[:, 30:], k, v, causal, first_row=30), whole[:, 30:])
    naive = ref.same_precision_naive(q, k, v, "bfloat16", causal)
    np.testing.assert_array_equal(
        ref.same_precision_naive(q[:, 7:9], k, v, "bfloat16", causal, first_row=7), naive[:, 7:9])
    assert ref.tolerance(q[:, :5], k, v, "float16", causal) > 0


def test_inputs_are_drawn_once_per_size():
    drawn = {}
    (a, _, _), _ = ab.random_inputs((8, 2, 16, 4), "bfloat16", drawn)
    (b, _, _), (bits, _, _) = ab.random_inputs((2, 2, 64, 4), "bfloat16", drawn)
    assert b.shape == bits.shape == (2, 2, 64, 4) and np.shares_memory(a, b)
    assert bits.dtype == np.uint16 and np.array_equal(bits, ref.bfloat16_bits(b))  # what to_device sends
    (c, k, _), _ = ab.random_inputs((1, 1, 8, 4), "bfloat16", drawn)
    assert not np.shares_memory(a, c) and list(drawn) == [(32, "bfloat16")]
    assert np.array_equal(ref.round_to(k, "bfloat16"), k)  # rounded to the dtype
    (h, _, _), (half, _, _) = ab.random_inputs((1, 1, 8, 4), "float16")
    assert half.dtype == np.float16 and np.array_equal(half.astype(np.float32), h)


def row(impl, seq, tflops, auto=False, status="ok"):
    return {"impl": impl, "seq": seq, "head_dim": 64, "causal": False, "dtype": "bfloat16",
            "status": status, "median_ms": 1.0 / tflops, "tflops": tflops, "gbps": 1.0,
            "pct_peak_flops": 1.0, "pct_peak_bw": 1.0, "rel_noise": 0.001, "max_error": 0.1,
            "tolerance": 0.2, "extra_memory_bytes": 0, "auto": auto,
            "benchmark": {"sm_clock_mhz_end": 1980.0}}


SWEEP = [row("flash_tc", 512, 300.0), row("flash_wgmma", 512, 400.0, auto=True),
         row("sdpa_cudnn", 512, 500.0), row("sdpa_flash", 512, 250.0),
         row("sdpa_math", 512, 1.0, status="failed: OutOfMemoryError"),
         row("flash_wgmma", 16384, 480.0, auto=True), row("sdpa_cudnn", 16384, 480.0)]


def test_versus_table_compares_autos_pick_with_each_backend():
    assert ab.versus_rows(SWEEP) == [
        (512, "flash_wgmma", 400.0, {"sdpa_cudnn": (500.0, 0.8), "sdpa_flash": (250.0, 1.6)}, 1980.0),
        (16384, "flash_wgmma", 480.0, {"sdpa_cudnn": (480.0, 1.0)}, 1980.0)]
    lines = ab.versus_table(SWEEP).splitlines()
    assert "4·B·H·N²·D / median time" in lines[0]
    assert lines[1].split() == ["seq", "gp", "impl", "gp", "TFLOP/s", "cuDNN", "TFLOP/s", "FA2",
                                "TFLOP/s", "gp/cuDNN", "gp/FA2", "SM", "MHz"]
    assert "/ 2" in ab.versus_table(SWEEP, causal=True).splitlines()[0]
    assert ab.versus_table([row("flash_tc", 512, 300.0)]) is None
    assert ab.table_row(SWEEP[1])[0] == "flash_wgmma (auto)" and ab.table_row(SWEEP[0])[0] == "flash_tc"


def test_plots_include_gp_against_sdpa(tmp_path):
    pytest.importorskip("matplotlib")
    ratios = {(r["seq"], r["impl"]): r["ratio"] for r in versus(SWEEP)}
    assert ratios == {(512, "flash_wgmma / sdpa_cudnn"): 0.8, (512, "flash_wgmma / sdpa_flash"): 1.6,
                      (16384, "flash_wgmma / sdpa_cudnn"): 1.0}
    paths = write_plots(SWEEP, {"device": {"name": "H100"}}, tmp_path / "p")
    names = [os.path.basename(p) for p in paths]
    assert names == ["latency.png", "tflops.png", "speedup.png", "memory.png", "versus_sdpa.png"]
    assert all(os.path.getsize(p) > 1000 for p in paths)


def test_the_main_job_prints_the_plan_the_tables_and_draws(monkeypatch, capsys, tmp_path):
    """`gpuprofile attention` end to end with a fake device: plan, sweep and torch are fakes."""
    pytest.importorskip("matplotlib")
    from gpuprofile.kernels import cli

    plan = ap.plan_sweep(H100, picks("flash_wgmma"), seqs=[512, 16384],
                         impls=["flash_tc", "flash_wgmma", "sdpa_cudnn", "sdpa_flash", "sdpa_math"])
    calls = {}

    def fake_run_all(impls, seqs, *args, left_out=None, auto=None, **kw):
        calls.update(impls=impls, seqs=seqs, auto=auto, left_out=left_out)
        return SWEEP

    monkeypatch.setattr(cli, "no_device_reason", lambda: None)
    monkeypatch.setattr(ap, "plan_here", lambda args, torch: plan)
    monkeypatch.setattr(ab, "import_torch", lambda: None)
    monkeypatch.setattr(ab, "run_all", fake_run_all)
    monkeypatch.setattr(ab, "environment", lambda torch: {"device": {"name": "H100"}})
    out_json = tmp_path / "r.json"
    assert main(["attention", "--plots", str(tmp_path / "plots"), "--output", str(out_json)]) == 0
    captured = capsys.readouterr()
    assert calls["auto"] == {512: "flash_wgmma", 16384: "flash_wgmma"} and calls["seqs"] == [512, 16384]
    assert 'impl="auto" picks, for bfloat16' in captured.err and "because flash_wgmma because" in captured.err
    assert "flash_wgmma (auto)" in captured.out and "gp/cuDNN" in captured.out
    assert "TFLOP/s = 4·B·H·N²·D per call / median time" in captured.out
    assert "versus_sdpa.png" in captured.err
    import json

    config = json.loads(out_json.read_text())["config"]
    assert config["auto"]["16384"]["impl"] == "flash_wgmma" and config["estimate_s"]["about"] > 0


def test_max_time_below_the_benchmarks_min_time_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["attention", "--max-time", "0.1"])
    assert info.value.code == 2 and "--max-time must be >= 0.2" in capsys.readouterr().err
