"""benchmarks/bench_training.py without a GPU: its rotation, its rounds on fake steps and clocks,
its statistics and table, its argument errors, and its exit without torch or a device."""

import contextlib
import gc
import json
import os
import subprocess
import sys

import pytest
from scripts import BENCHMARKS, load_benchmark

import gpuprofile as gp
from gpuprofile.tracing.profile import Profile

SCRIPT = BENCHMARKS / "bench_training.py"


@pytest.fixture(scope="module")
def bt():
    return load_benchmark("bench_training")


def test_rotation_gives_every_mode_every_place(bt):
    order = ["plain", "a", "b"]
    assert [bt.rotation(order, i) for i in range(4)] == [
        ["plain", "a", "b"], ["a", "b", "plain"], ["b", "plain", "a"], ["plain", "a", "b"]]


def test_each_family_runs_plain_beside_its_own_modes(bt):
    assert bt.family_modes("gpuprofile", "mlp") == [
        "plain", "regions", "profile", "kernels_only", "memory_off", "stream_attribution_off",
        "regions_off", "line", "stack", "scheduled"]
    assert bt.family_modes("gpuprofile", "ddp")[-1] == "collectives"
    assert bt.family_modes("cupti", "transformer") == ["plain", "cupti_kernels"]
    assert bt.family_modes("torch", "transformer") == ["plain", "torch_cuda", "torch_cpu_cuda",
                                                       "torch_stack"]
    assert bt.family_modes("proton", "mlp") == ["plain", "proton_shadow", "proton_python"]
    traced = {m for m, (fam, _) in bt.MODES.items() if fam == "gpuprofile"} - {"regions", "scheduled"}
    assert set(bt.PROFILE_ARGS) == traced
    for kwargs in bt.PROFILE_ARGS.values():  # every set of arguments is one profile() accepts
        Profile(**kwargs)


class FakeRig:
    """A clock that only the fake steps move: a step of mode m takes cost[m] s of host time and
    gpu s more until sync() returns; `log` records what ran, in order."""

    def __init__(self, cost, gpu=0.5):
        self.now, self.cost, self.gpu, self.mode, self.log, self.pending = 0.0, cost, gpu, None, [], 0.0

    def clock(self):
        return self.now

    def context(self, mode):
        @contextlib.contextmanager
        def ctx():
            self.mode = mode
            self.log.append(("enter", mode))
            yield f"ctx-{mode}"
            self.log.append(("leave", mode))
            self.mode = None
        return ctx

    def step_of(self, mode):
        def step():
            assert self.mode == mode, "a step ran outside its mode's block"
            self.log.append(("step", mode))
            self.now += self.cost[mode]
            self.pending = self.gpu
        return step

    def sync(self):
        self.now += self.pending
        self.pending = 0.0


def test_run_rounds_rotates_blocks_warms_and_times_to_the_sync(bt):
    rig = FakeRig({"plain": 1.0, "a": 1.25})
    after = []
    asked = []

    def keep_going(i):
        asked.append(i)
        return True

    blocks = bt.run_rounds({m: rig.context(m) for m in ("plain", "a")}, rig.step_of, rig.sync,
                           steps=2, rounds=3, keep_going=keep_going,
                           clock=rig.clock, after_block=lambda *a: after.append(a))
    # wall = host cost + the GPU's remainder until sync(); host = up to the step's return
    assert blocks == {"plain": [[(1.5, 1.0)] * 2] * 3, "a": [[(1.75, 1.25)] * 2] * 3}
    assert asked == [1, 2]
    assert [a for a in after] == [("plain", "ctx-plain", 0), ("a", "ctx-a", 0),
                                  ("a", "ctx-a", 1), ("plain", "ctx-plain", 1),
                                  ("plain", "ctx-plain", 2), ("a", "ctx-a", 2)]
    # one warm-up step and two timed steps inside every block
    assert rig.log[:4] == [("enter", "plain"), ("step", "plain"), ("step", "plain"),
                           ("step", "plain")]
    assert rig.log.count(("step", "a")) == 9 and rig.log.count(("enter", "a")) == 3
    assert gc.isenabled()


def test_run_rounds_stops_when_told_and_keeps_gc_off_inside(bt):
    rig = FakeRig({"plain": 1.0, "b": 2.0})
    seen = []

    def step_of(mode):
        inner = rig.step_of(mode)

        def step():
            seen.append(gc.isenabled())
            inner()
        return step

    blocks = bt.run_rounds({m: rig.context(m) for m in ("plain", "b")}, step_of, rig.sync, 1, 10,
                           keep_going=lambda i: i < 4, clock=rig.clock)
    assert [len(v) for v in blocks.values()] == [4, 4]
    assert not any(seen) and gc.isenabled()


def test_run_rounds_leaves_gc_off_if_it_was_off(bt):
    rig = FakeRig({"plain": 1.0})
    gc.disable()
    try:
        bt.run_rounds({"plain": rig.context("plain")}, rig.step_of, rig.sync, 1, 1,
                      keep_going=lambda i: True, clock=rig.clock)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_summarize_pairs_each_round_with_its_own_plain_block(bt):
    # the plain step drifts from 1 to 6 s over the rounds; mode x costs 1..6 % of each round's
    plain = [[(float(r), 0.1), (float(r), 0.1), (100.0, 0.1)] for r in range(1, 7)]
    x = [[(r * (1 + r / 100), 0.2)] * 3 for r in range(1, 7)]
    got = bt.summarize({"plain": plain, "x": x})
    assert got["plain"] == {"step_ms": 5000.0, "host_ms": pytest.approx(100.0), "rounds": 6, "steps": 18}
    assert got["x"]["overhead_pct"] == pytest.approx(3.5)
    # 6 samples: the 95 % interval of the median is their range (coverage 1 - 2/64)
    assert got["x"]["ci95_pct"] == pytest.approx([1.0, 6.0])
    assert got["x"]["host_ms"] == pytest.approx(200.0)
    assert (got["x"]["rounds"], got["x"]["steps"]) == (6, 18)


def test_summarize_gives_no_interval_below_six_rounds(bt):
    got = bt.summarize({"plain": [[(1.0, 0.5)]] * 5, "x": [[(1.02, 0.5)]] * 5})
    assert got["x"]["overhead_pct"] == pytest.approx(2.0)
    assert got["x"]["ci95_pct"] == [None, None]
    json.dumps(got, allow_nan=False)  # what is written is strict JSON


def test_summarize_on_the_fake_rig(bt):
    rig = FakeRig({"plain": 1.0, "a": 1.02}, gpu=1.0)  # wall 2.0 against 2.02: +1 %
    blocks = bt.run_rounds({m: rig.context(m) for m in ("plain", "a")}, rig.step_of, rig.sync,
                           steps=3, rounds=7, keep_going=lambda i: True, clock=rig.clock)
    got = bt.summarize(blocks)
    assert got["a"]["overhead_pct"] == pytest.approx(1.0)
    assert got["a"]["ci95_pct"] == pytest.approx([1.0, 1.0])
    assert got["a"]["step_ms"] == pytest.approx(2020.0) and got["a"]["steps"] == 21


def test_time_budget_runs_the_minimum_then_stops_at_the_deadline(bt):
    now = [100.0]
    keep = bt.time_budget(5.0, clock=lambda: now[0])
    now[0] = 200.0  # long past the deadline: the minimum rounds still run
    assert [keep(i) for i in range(1, bt.MIN_ROUNDS)] == [True] * (bt.MIN_ROUNDS - 1)
    assert keep(bt.MIN_ROUNDS) is False
    now[0] = 104.9
    assert keep(bt.MIN_ROUNDS + 3) is True


def test_table_rows_cover_children_ranks_failures_and_skips(bt):
    single = {"rank": 0, "kernels_per_step": 67.0, "modes": {
        "plain": {"step_ms": 3.0, "host_ms": 1.0, "rounds": 6, "steps": 48},
        "profile": {"step_ms": 3.1, "host_ms": 1.2, "rounds": 6, "steps": 48,
                    "overhead_pct": 3.333, "ci95_pct": [1.04, 5.96], "kernels_per_step": 68.5},
        "line": {"step_ms": 3.2, "host_ms": 1.3, "rounds": 6, "steps": 48,
                 "overhead_pct": -0.25, "ci95_pct": [None, None]}}}
    rows = bt.table_rows({
        "mlp": {"gpuprofile": single, "proton": {"skipped": "no proton"},
                "torch": {"error": ["boom", "bang"]}},
        "ddp": {"gpuprofile": {"ranks": [single, dict(single, rank=1)]}}})
    assert rows[:3] == [
        ["mlp", "plain (gpuprofile child)", "", "", 3.0, 1.0, 67.0, 48],
        ["mlp", "profile", "+3.3", "[+1.0, +6.0]", 3.1, 1.2, 68.5, 48],
        ["mlp", "line", "-0.2", "-", 3.2, 1.3, "", 48]]
    assert rows[3] == ["mlp", "proton: no proton"] + [""] * 6
    assert rows[4] == ["mlp", "torch: error: boom bang"] + [""] * 6
    assert [r[0] for r in rows[5:]] == ["ddp r0"] * 3 + ["ddp r1"] * 3


def test_presets_and_overrides(bt):
    args = bt.parse_args([])
    assert (args.rounds, args.steps_per_block, args.seconds_per_mode) == bt.PRESETS["default"][:3]
    assert args.workloads == ["mlp", "transformer", "ddp"]
    args = bt.parse_args(["--quick", "--rounds", "9", "--workloads", "mlp,mlp, transformer"])
    assert (args.rounds, args.steps_per_block) == (9, bt.PRESETS["quick"][1])
    assert args.timeout == bt.PRESETS["quick"][3] and args.workloads == ["mlp", "transformer"]


@pytest.mark.parametrize("argv, message", [
    (["--rounds", "5"], "--rounds must be at least 6"),
    (["--steps-per-block", "0"], "--steps-per-block must be at least 1, got 0"),
    (["--seconds-per-mode", "nan"], "--seconds-per-mode must be a positive number, got nan"),
    (["--seconds-per-mode", "-1"], "--seconds-per-mode must be a positive number, got -1.0"),
    (["--workloads", "mlp,bert"], "unknown workload(s) ['bert']; choose from mlp, transformer, ddp"),
    (["--workloads", ","], "no workload given"),
    (["--families", "nsys"], "unknown family(s) ['nsys']"),
])
def test_bad_arguments_are_usage_errors(bt, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        bt.parse_args(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_bad_argument_from_the_command_line():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "2"], capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "--rounds must be at least 6" in proc.stderr


def test_missing_requirements_say_what_is_missing(bt):
    assert bt.missing_requirements(False, 0) == (
        "bench_training.py needs torch (not importable here); nothing was measured")
    assert bt.missing_requirements(True, 0) == (
        "bench_training.py needs a CUDA device (none found); nothing was measured")
    assert bt.missing_requirements(True, 1) is None


def _run_main(tmp_path, *argv, hide_torch=False, env=None):
    code = ("import runpy, sys\n"
            + ("sys.modules['torch'] = None\n" if hide_torch else "")
            + f"sys.argv = [{str(SCRIPT)!r}, *{list(argv)!r}]\n"
            + f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
            + f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env=env)


def test_exits_0_with_a_message_without_torch(tmp_path):
    proc = _run_main(tmp_path, "--quick", "--output", "r.json", hide_torch=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("bench_training.py needs torch (not importable here); "
                                   "nothing was measured")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.skipif(gp.device_count() > 0, reason="checks the run without a device")
def test_exits_0_with_a_message_without_a_device(tmp_path):
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('a stand-in: only found, never imported')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path / "site"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = _run_main(tmp_path, "--output", "r.json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("bench_training.py needs a CUDA device (none found); "
                                   "nothing was measured")


def _parent(bt, monkeypatch, gpus: int, answer) -> list:
    """bt.main's device and torch checks pass with `gpus` devices; each child is answer(args);
    returns the list of (script name, args, timeout) the children were started with."""
    calls = []

    def fake_child(script, args, timeout, error_lines=1):
        calls.append((os.path.basename(script), args, timeout))
        return answer(args)

    class Info:
        name = "Fake H100"

    monkeypatch.setattr(bt, "run_child", fake_child)
    monkeypatch.setattr(bt, "missing_requirements", lambda torch_found, gpus: None)
    monkeypatch.setattr(gp, "device_count", lambda: gpus)
    monkeypatch.setattr(gp, "device_info", lambda i: Info)
    return calls


def test_parent_runs_one_child_per_family_and_writes_what_they_gave(bt, monkeypatch, tmp_path,
                                                                   capsys):
    mlp = {"rank": 0, "kernels_per_step": 67.0, "modes": {
        "plain": {"step_ms": 2.8, "host_ms": 1.0, "rounds": 6, "steps": 24},
        "profile": {"step_ms": 2.9, "host_ms": 1.1, "rounds": 6, "steps": 24,
                    "overhead_pct": 1.25, "ci95_pct": [0.5, 2.0]}}}
    answers = {"gpuprofile": mlp, "torch": {"error": ["CUPTI busy"]},
               "proton": {"skipped": "no triton"}, "cupti": {"skipped": "no CUPTI"}}
    calls = _parent(bt, monkeypatch, 1, lambda args: dict(answers[args[1]]))
    out = tmp_path / "r.json"
    assert bt.main(["--quick", "--workloads", "mlp,ddp", "--output", str(out)]) == 0
    quick = ["--rounds", "8", "--steps-per-block", "4", "--seconds-per-mode", "0.5"]
    assert calls == [("bench_training.py", ["mlp", fam, *quick], bt.PRESETS["quick"][3])
                     for fam in ("gpuprofile", "torch", "proton", "cupti")]
    data = json.loads(out.read_text())
    assert data["device"] == "Fake H100" and data["notes"] == ["ddp skipped: needs 2 GPUs, found 1"]
    assert data["config"] == {"rounds": 8, "steps": 4, "seconds_per_mode": 0.5}
    children = data["workloads"]["mlp"]
    assert children["gpuprofile"]["modes"]["profile"]["overhead_pct"] == 1.25
    assert children["torch"]["error"] == ["CUPTI busy"] and "wall_s" in children["proton"]
    printed = capsys.readouterr().out
    assert "ddp skipped: needs 2 GPUs, found 1" in printed
    assert printed.splitlines()[-1] == f"target: <= 2 % of step time; results written to {out}"
    table = printed.splitlines()[-8:-1]
    assert table[0].split() == ["workload", "mode", "overhead", "%", "95%", "CI", "step", "ms",
                                "host", "ms", "kernels/step", "steps"]
    assert table[3].split()[:4] == ["mlp", "profile", "+1.2", "[+0.5,"]
    assert "torch: error: CUPTI busy" in table[4] and "cupti: no CUPTI" in table[6]


def test_ddp_runs_where_two_devices_are_and_leaves_proton_out(bt, monkeypatch, tmp_path):
    calls = _parent(bt, monkeypatch, 2, lambda args: {"error": ["stop here"]})
    out = tmp_path / "r.json"
    assert bt.main(["--workloads", "ddp", "--families", "torch,proton", "--output", str(out)]) == 0
    assert [args[:2] for _, args, _ in calls] == [["ddp", "torch"]]
    data = json.loads(out.read_text())
    assert data["workloads"]["ddp"]["proton"] == {"skipped": "Proton is not run on the DDP workload"}
    assert data["notes"] == []


def test_ddp_ranks_reach_the_child_and_the_device_check(bt, monkeypatch, tmp_path):
    calls = _parent(bt, monkeypatch, 4, lambda args: {"error": ["stop here"]})
    out = tmp_path / "r.json"
    assert bt.main(["--workloads", "mlp,ddp", "--families", "torch", "--ddp-ranks", "4",
                    "--output", str(out)]) == 0
    assert [args[:2] for _, args, _ in calls] == [["mlp", "torch"], ["ddp", "torch"]]
    assert "--ddp-ranks" not in calls[0][1] and calls[1][1][-2:] == ["--ddp-ranks", "4"]
    assert bt.parse_args(["--child", "ddp", "torch", "--ddp-ranks", "4"]).ddp_ranks == 4
    calls = _parent(bt, monkeypatch, 2, lambda args: {"error": ["stop here"]})
    assert bt.main(["--workloads", "ddp", "--ddp-ranks", "4", "--output", str(out)]) == 0
    assert calls == [] and json.loads(out.read_text())["notes"] == ["ddp skipped: needs 4 GPUs, found 2"]
    with pytest.raises(SystemExit):
        bt.parse_args(["--ddp-ranks", "1"])


# ---- a child's wiring on a stand-in torch (its GPU behaviour: test_bench_training_gpu.py) ---------

class _Tensor:
    def __init__(self, log):
        self.log = log

    def float(self):
        return self

    def square(self):
        return self

    def mean(self):
        return self

    def backward(self):
        self.log.append("backward")


def _fake_torch(log):
    """Just enough of torch for bench_ddp's MLP, AdamW, synchronize and torch.profiler."""
    import types

    class Module:
        def __init__(self, *layers):
            self.layers = layers

        def cuda(self):
            return self

        def parameters(self):
            return [1, 2]

        def __call__(self, x):
            log.append("forward")
            return _Tensor(log)

    class AdamW:
        def __init__(self, params, lr):
            self.params = list(params)

        def step(self):
            log.append("step")

        def zero_grad(self, set_to_none):
            assert set_to_none

    @contextlib.contextmanager
    def profile(activities, with_stack):
        log.append(("torch.profiler", tuple(activities), with_stack))
        yield "torch-profile"

    acts = types.SimpleNamespace(CPU="CPU", CUDA="CUDA")
    return types.SimpleNamespace(
        manual_seed=lambda seed: None, randn=lambda *shape, device: _Tensor(log),
        nn=types.SimpleNamespace(Linear=Module, GELU=Module, Sequential=Module),
        optim=types.SimpleNamespace(AdamW=AdamW),
        cuda=types.SimpleNamespace(synchronize=lambda: log.append("sync"),
                                   get_device_name=lambda: "Fake GPU"),
        profiler=types.SimpleNamespace(ProfilerActivity=acts, profile=profile))


@pytest.fixture
def fake_child(bt, monkeypatch):
    """Runs bt.child_run on the stand-in torch, gp.profile() as a stand-in that "records" three
    kernels per step, and a stand-in Proton; returns (run, log)."""
    from gpuprofile import _C

    log = []
    for key, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                       ("NVSHMEM_DISABLE_NVLS", "1")):  # bench_ddp.py sets them on import
        monkeypatch.setenv(key, value)
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(log))

    class FakeProfile(Profile):
        def __enter__(self):
            log.append(("profile", tuple(sorted(self.kinds)), self.python_stacks))
            self.forwards = log.count("forward")
            return self

        def __exit__(self, *exc):
            self.ran = log.count("forward") - self.forwards
            return False

        @property
        def kernels(self):
            return [0] * (3 * self.ran)

    class FakeScheduled:
        """gp.profile(schedule=..., on_trace_ready=...): one cycle's stand-in Profile per cycle."""

        def __init__(self, schedule, on_trace_ready, **kw):
            self.schedule, self.ready, self.steps = schedule, on_trace_ready, 0

        def __enter__(self):
            log.append(("scheduled", self.schedule.wait, self.schedule.warmup, self.schedule.active))
            return self

        def __exit__(self, *exc):
            return False

        def step(self):
            self.steps += 1
            if self.steps % self.schedule.cycle == 0:
                p = FakeProfile()
                p.ran = self.schedule.active
                self.ready(p)

    monkeypatch.setattr(gp, "profile", lambda **kw: FakeScheduled(**kw) if "schedule" in kw
                        else FakeProfile(**kw))
    monkeypatch.setattr(_C, "_synchronize", lambda: None)
    cfg = {"rounds": 6, "steps": 2, "seconds_per_mode": 0.01}
    return (lambda workload, family: bt.child_run(workload, family, cfg)), log


def test_child_gpuprofile_family_on_a_stand_in(bt, fake_child):
    run, log = fake_child
    res = run("mlp", "gpuprofile")
    names = bt.family_modes("gpuprofile", "mlp")
    assert list(res["modes"]) == names and res["device"] == "Fake GPU"
    assert res["kernels_per_step"] == 3.0
    for mode in names:
        m = res["modes"][mode]
        assert (m["rounds"], m["steps"]) == (6, 12), mode
        traced = mode in bt.PROFILE_ARGS or mode == "scheduled"  # scheduled: its one traced step
        assert m.get("kernels_per_step") == (3.0 if traced else None), mode
    assert res["modes"]["regions"]["ci95_pct"][0] is not None
    # the profiles' arguments reached profile(): python_stacks and kinds per mode
    assert ("profile", ("kernels", "memcpy", "memset", "regions", "stream_attribution"),
            None) in log  # memory=False
    assert any(e[0] == "profile" and e[2] == "stack" for e in log if isinstance(e, tuple))
    assert ("scheduled", 0, 1, 1) in log  # 2 timed steps per block: wait 0, warmup 1, active 1
    # every step a forward, a backward and an optimizer step; 3 warm-ups, the first-start
    # blocks (the scheduled mode's runs a block's 1 + 2 steps), the kernel count, then 6 rounds
    # of 10 blocks of 1 + 2 steps
    forwards = 3 + len(names) + 2 + 3 + 6 * len(names) * 3
    assert log.count("forward") == log.count("backward") == log.count("step") == forwards


def test_child_torch_family_on_a_stand_in(bt, fake_child):
    run, log = fake_child
    res = run("mlp", "torch")
    assert list(res["modes"]) == ["plain", "torch_cuda", "torch_cpu_cuda", "torch_stack"]
    assert "kernels_per_step" not in res and not any(
        isinstance(e, tuple) and e[0] == "profile" for e in log)
    starts = [e for e in log if isinstance(e, tuple)]
    assert starts[:3] == [("torch.profiler", ("CUDA",), False),
                          ("torch.profiler", ("CPU", "CUDA"), False),
                          ("torch.profiler", ("CPU", "CUDA"), True)]
    assert len(starts) == 3 + 6 * 3


def test_child_proton_family_on_a_stand_in_and_its_skips(bt, fake_child, monkeypatch):
    import types

    run, log = fake_child
    sessions = []
    proton = types.SimpleNamespace(
        start=lambda name, context: sessions.append((os.path.basename(name), context)),
        finalize=lambda: sessions.append("finalize"))
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(profiler=proton))
    monkeypatch.setitem(sys.modules, "triton.profiler", proton)
    res = run("mlp", "proton")
    assert list(res["modes"]) == ["plain", "proton_shadow", "proton_python"]
    assert sessions[:4] == [("proton_shadow", "shadow"), "finalize", ("proton_python", "python"),
                            "finalize"]

    def refuse(name, context):
        raise RuntimeError("CUPTI is busy")

    monkeypatch.setattr(proton, "start", refuse)
    assert run("mlp", "proton") == {"skipped": "Proton did not run (RuntimeError: CUPTI is busy)"}
    monkeypatch.setitem(sys.modules, "triton.profiler", None)
    got = run("mlp", "proton")
    assert got["skipped"].startswith("triton.profiler is not importable (ModuleNotFoundError")
