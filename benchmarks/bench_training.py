"""What tracing costs a training step: gpuprofile's modes and its peers on real steps (issue 22's
target: <= 2 % of step time). Needs a CUDA device and torch; the DDP workload needs 2 GPUs
(--ddp-ranks N: N GPUs).

    python benchmarks/bench_training.py --output bench_training.json     # about 3-4 min, 1 H100
    python benchmarks/bench_training.py --quick                          # smoke run, about 1-1.5 min

Workloads (torch only, no downloads):
- mlp: 8 Linear(4096) layers with GELU (bench_ddp.py's model), batch 64, AdamW;
- transformer: nn.TransformerEncoder, 6 layers, d=768, 12 heads, sequence 512, batch 8, bf16
  autocast, AdamW;
- ddp: the mlp step under DistributedDataParallel on 2 ranks, or --ddp-ranks (NCCL, NVLink
  multicast off).

A step's time is host wall time from its start to torch.cuda.synchronize() after it; its host time
is the part until the step's Python returns. Only one CUPTI client may exist in a process and
torch.profiler leaves state behind, so every tool family (gpuprofile, torch.profiler, Proton) runs
in its own child process, with the plain step beside its modes there. Inside a process the modes
take turns in short blocks (a warm-up step, then --steps-per-block timed steps), in an order
rotated each round; a block starts and stops its tool, outside the timed steps. Each round gives,
per mode, (median step of its block / median step of the plain block of the same round - 1):
drift over seconds hits both alike. The figure is the median of those per-round overheads with a
distribution-free 95 % interval (gpuprofile.toolkit.median_ci). A child stops starting rounds after
--rounds, or (after 6) when its time budget (--seconds-per-mode x its modes) is spent.

Prints a table last and writes JSON (--output).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile
import time

from _children import run_child, write_json

from gpuprofile.bench.ab import rotation  # A/B's rotated order (bench/ab.py)

WORKLOADS = ("mlp", "transformer", "ddp")
FAMILIES = ("gpuprofile", "torch", "proton", "cupti")
MIN_ROUNDS = 6  # the fewest samples with a 95 % interval of their median
DDP_RANKS = 2  # the default of --ddp-ranks

# mode: (tool family, what it is)
MODES = {
    "plain": (None, "the bare step"),
    "regions": ("gpuprofile", "regions only (step, forward, backward, optimizer)"),
    "profile": ("gpuprofile", "profile() (default kinds) + regions"),
    "kernels_only": ("gpuprofile", "profile(kernels only, regions=False) + regions"),
    "memory_off": ("gpuprofile", "profile(memory=False) + regions"),
    "stream_attribution_off": ("gpuprofile", "profile(stream_attribution=False) + regions"),
    "regions_off": ("gpuprofile", "profile(regions=False) + regions"),
    "line": ("gpuprofile", 'profile(python_stacks="line") + regions'),
    "stack": ("gpuprofile", 'profile(python_stacks="stack") + regions'),
    "scheduled": ("gpuprofile", "profile(schedule=...) + regions: 1 traced step per block "
                  "(wait steps-2, warmup 1, active 1), p.step() after each step"),
    "collectives": ("gpuprofile", "profile() + regions + gp.distributed.allreduce_hook (the "
                    "older way to collective sizes; profile() alone reads them from torch's "
                    "NCCL Flight Recorder)"),
    "cupti_kernels": ("cupti", "a bare CUPTI client (ctypes): CONCURRENT_KERNEL records, "
                      "discarded; the floor of any CUPTI kernel tracer"),
    "torch_cuda": ("torch", "torch.profiler(CUDA)"),
    "torch_cpu_cuda": ("torch", "torch.profiler(CPU, CUDA)"),
    "torch_stack": ("torch", "torch.profiler(CPU, CUDA, with_stack=True)"),
    "proton_shadow": ("proton", 'Proton start(context="shadow")'),
    "proton_python": ("proton", 'Proton start(context="python")'),
}
# gp.profile() arguments of the gpuprofile modes that trace
PROFILE_ARGS = {
    "profile": {},
    "kernels_only": dict(memcpy=False, memset=False, memory=False, regions=False),
    "memory_off": dict(memory=False),
    "stream_attribution_off": dict(stream_attribution=False),
    "regions_off": dict(regions=False),
    "line": dict(python_stacks="line"),
    "stack": dict(python_stacks="stack"),
    "collectives": {},
}
# profile(schedule=...) of the "scheduled" mode, from the block's steps: its one traced step and
# the stop that collects it fall inside the block's timed steps
def scheduled_args(steps: int) -> dict:
    return dict(wait=max(steps - 2, 0), warmup=1, active=1)
# (rounds, steps per block, seconds per mode, child timeout s)
PRESETS = {"default": (50, 8, 4.0, 420), "quick": (8, 4, 0.5, 150)}


def family_modes(family: str, workload: str) -> list:
    """The modes one child runs, plain first: the family's, and collective sizes only on DDP."""
    return ["plain"] + [m for m, (fam, _) in MODES.items()
                        if fam == family and (m != "collectives" or workload == "ddp")]


# ---- the interleaved blocks (pure: fake steps and clocks in tests/tracing/test_bench_training.py)

def run_rounds(modes: dict, step_of, sync, steps: int, rounds: int, keep_going,
               clock=time.perf_counter, after_block=None) -> dict:
    """Every mode's block once per round, in rotated order. `modes` maps a name to a callable
    returning the context manager that the block runs in (the tool on); `step_of(mode)` is the
    step to time; `sync()` waits for the device; `keep_going(i)` is asked before round i >= 1;
    `after_block(mode, ctx, i)` runs after the block's tool stopped. Returns {mode: [per round,
    [(wall s, host s) per timed step]]}."""
    order = list(modes)
    blocks = {m: [] for m in order}
    gc_was_on = gc.isenabled()
    gc.disable()  # a collection inside a timed step would land on one mode
    try:
        for i in range(rounds):
            if i and not keep_going(i):
                break
            gc.collect()
            for mode in rotation(order, i):
                step = step_of(mode)
                with modes[mode]() as ctx:
                    step()  # warm: the tool's first sight of this step's launches
                    sync()
                    times = []
                    for _ in range(steps):
                        t0 = clock()
                        step()
                        t1 = clock()
                        sync()
                        times.append((clock() - t0, t1 - t0))
                blocks[mode].append(times)
                if after_block is not None:
                    after_block(mode, ctx, i)
    finally:
        if gc_was_on:
            gc.enable()
    return blocks


def summarize(blocks: dict) -> dict:
    """Per mode: the median per-round overhead % against the plain block of the same round, its
    95 % interval, the median step and host ms over all timed steps, rounds and steps."""
    from gpuprofile.toolkit import median_ci

    plain = [statistics.median(w for w, _ in block) for block in blocks["plain"]]
    out = {}
    for mode, per_round in blocks.items():
        walls = [w for block in per_round for w, _ in block]
        hosts = [h for block in per_round for _, h in block]
        row = {"step_ms": statistics.median(walls) * 1e3, "host_ms": statistics.median(hosts) * 1e3,
               "rounds": len(per_round), "steps": len(walls)}
        if mode != "plain":
            over = [(statistics.median(w for w, _ in block) / base - 1) * 100
                    for block, base in zip(per_round, plain, strict=True)]
            lo, hi = median_ci(over)
            row["overhead_pct"] = statistics.median(over)
            row["ci95_pct"] = [_finite(lo), _finite(hi)]
        out[mode] = row
    return out


def _finite(x: float):
    return x if math.isfinite(x) else None


def time_budget(seconds: float, clock=time.perf_counter):
    """keep_going(i) for run_rounds: at least MIN_ROUNDS rounds, then rounds while `seconds`
    from now have not passed."""
    deadline = clock() + seconds
    return lambda i: i < MIN_ROUNDS or clock() < deadline


# ---- workloads -------------------------------------------------------------------------------

def _null_region(name):
    return contextlib.nullcontext()


def make_step(torch, model, opt, x, region, autocast: bool):
    """One training step (forward, backward, optimizer) with `region(name)` around its parts and
    bf16 autocast around the forward pass if `autocast`."""
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if autocast else contextlib.nullcontext

    def step():
        with region("step"):
            with region("forward"):
                with amp():
                    loss = model(x).float().square().mean()
            with region("backward"):
                loss.backward()
            with region("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
    return step


def _mlp(torch):
    from bench_ddp import _model

    return _model(torch, 4096, 8).cuda(), torch.randn(64, 4096, device="cuda"), False


def _transformer(torch):
    layer = torch.nn.TransformerEncoderLayer(768, 12, dim_feedforward=3072, batch_first=True)
    net = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).cuda()
    return net, torch.randn(8, 512, 768, device="cuda"), True


# ---- children: one tool family per process ---------------------------------------------------

def _contexts(family: str, names: list, tmp: str) -> dict:
    """{mode: callable returning the context its block runs in}."""
    import gpuprofile as gp

    out = {"plain": contextlib.nullcontext}
    if family == "gpuprofile":
        for m in names[1:]:
            out[m] = (lambda kw=PROFILE_ARGS[m]: gp.profile(**kw)) if m in PROFILE_ARGS \
                else contextlib.nullcontext
    elif family == "cupti":
        from bench_tracing import BareCupti

        out["cupti_kernels"] = BareCupti((10,)).session  # CONCURRENT_KERNEL only
    elif family == "torch":
        import torch

        acts = torch.profiler.ProfilerActivity
        kinds = {"torch_cuda": ([acts.CUDA], False), "torch_cpu_cuda": ([acts.CPU, acts.CUDA], False),
                 "torch_stack": ([acts.CPU, acts.CUDA], True)}
        for m in names[1:]:
            out[m] = lambda a=kinds[m]: torch.profiler.profile(activities=a[0], with_stack=a[1])
    else:
        import triton.profiler as proton

        contexts = {"proton_shadow": "shadow", "proton_python": "python"}

        @contextlib.contextmanager
        def session(mode):
            proton.start(os.path.join(tmp, mode), context=contexts[mode])
            try:
                yield
            finally:
                proton.finalize()

        for m in names[1:]:
            out[m] = lambda m=m: session(m)
    return out


def child_run(workload: str, family: str, cfg: dict, rank: int = 0, setup=None, share=None) -> dict:
    """Time one family's modes on one workload in this process. A DDP rank passes `setup`
    ({"plain": model, "collectives": model with gp's hook}, input, autocast) and `share`, which
    turns its own keep-going flag into rank 0's."""
    import torch

    import gpuprofile as gp
    from gpuprofile.tracing.profile import Profile

    names = family_modes(family, workload)
    if family == "proton":
        try:
            import triton.profiler  # noqa: F401
        except Exception as exc:  # ImportError, or a triton built without Proton
            return {"skipped": f"triton.profiler is not importable ({type(exc).__name__}: {exc})"}
    if setup is None:
        torch.manual_seed(0)
        net, x, autocast = _transformer(torch) if workload == "transformer" else _mlp(torch)
        setup = ({"plain": net}, x, autocast)
    models, x, autocast = setup
    opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-4) for k, m in models.items()}
    for _ in range(3):  # cuBLAS handles, the allocator's pool, AdamW's state
        for k, m in models.items():
            make_step(torch, m, opts[k], x, _null_region, autocast)()
    torch.cuda.synchronize()
    steps = {}
    for m in names:
        key = "collectives" if m == "collectives" else "plain"
        region = gp.region if MODES[m][0] == "gpuprofile" else _null_region
        steps[m] = make_step(torch, models[key], opts[key], x, region, autocast)
    scheduled = {}  # the running ScheduledProfile of the "scheduled" mode's block
    if "scheduled" in names:
        bare = steps["scheduled"]

        def scheduled_step():
            bare()
            scheduled["p"].step()
        steps["scheduled"] = scheduled_step
    out = {"workload": workload, "family": family, "rank": rank,
           "steps_per_block": cfg["steps"], "device": torch.cuda.get_device_name()}
    with tempfile.TemporaryDirectory() as tmp:
        contexts = _contexts(family, names, tmp)
        if "scheduled" in names:
            traced = []

            def scheduled_ctx():
                scheduled["p"] = gp.profile(schedule=gp.schedule(**scheduled_args(cfg["steps"])),
                                            on_trace_ready=traced.append)
                return scheduled["p"]
            contexts["scheduled"] = scheduled_ctx
        try:
            for m in names:  # each tool's first start in this process (CUPTI, Kineto) is untimed
                with contexts[m]():
                    for _ in range(cfg["steps"] + 1 if m == "scheduled" else 1):
                        steps[m]()
                    torch.cuda.synchronize()
        except Exception as exc:
            if family != "proton":
                raise
            return {"skipped": f"Proton did not run ({type(exc).__name__}: {exc})"}
        gp.reset()
        if family == "gpuprofile":
            from bench_pylines import _kernels_per_unit

            def run(n):
                for _ in range(n):
                    steps["plain"]()
            out["kernels_per_step"] = _kernels_per_unit(run, 3)
        counted = {}

        def after_block(mode, ctx, i):
            if i == 0 and isinstance(ctx, Profile):  # the block's warm-up step and timed steps
                counted[mode] = len(ctx.kernels) / (cfg["steps"] + 1)
            if mode == "scheduled":
                if i == 0:  # one traced step per block: its kernels are one step's
                    counted[mode] = len(traced[-1].kernels) if traced else 0
                traced.clear()
            gp.reset()

        budget = time_budget(cfg["seconds_per_mode"] * len(names))
        t0 = time.perf_counter()
        blocks = run_rounds(contexts, steps.__getitem__, torch.cuda.synchronize, cfg["steps"],
                            cfg["rounds"], budget if share is None else lambda i: share(budget(i)),
                            after_block=after_block)
        out["timed_s"] = time.perf_counter() - t0
    out["modes"] = summarize(blocks)
    for mode, n in counted.items():
        out["modes"][mode]["kernels_per_step"] = n
    out["plain_step_ms"] = out["modes"]["plain"]["step_ms"]
    return out


def child_ddp(family: str, cfg: dict, world: int = DDP_RANKS) -> dict:
    """Spawns `world` ranks that run child_run's rounds in lockstep; every rank's result."""
    import torch.multiprocessing as mp
    from bench_ddp import MULTICAST_OFF, _free_port

    os.environ.update(MULTICAST_OFF)  # NVLink multicast off in every rank, from its start
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_ddp_rank, args=(world, _free_port(), family, cfg, tmp), nprocs=world, join=True)
        ranks = []
        for r in range(world):
            with open(os.path.join(tmp, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
    return {"workload": "ddp", "family": family, "ranks": ranks}


def _ddp_rank(rank: int, world: int, port: int, family: str, cfg: dict, tmp: str) -> None:
    import torch
    import torch.distributed as dist
    from bench_ddp import MULTICAST_OFF
    from torch.nn.parallel import DistributedDataParallel

    import gpuprofile as gp

    os.environ.update(MULTICAST_OFF)
    torch.cuda.set_device(rank)
    # a rank that failed must not leave the other waiting in a collective past the child's
    # timeout: NCCL's watchdog ends it, and mp.spawn the rest
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    models = {}
    for key in ("plain", "collectives") if family == "gpuprofile" else ("plain",):
        torch.manual_seed(0)  # DDP hooks its own model's parameters: one model per hook
        net, x, autocast = _mlp(torch)
        models[key] = DistributedDataParallel(net, device_ids=[rank])
        if key == "collectives":
            models[key].register_comm_hook(None, gp.distributed.allreduce_hook)

    def share(flag: bool) -> bool:  # rank 0's clock decides: every rank runs the same rounds
        t = torch.tensor([int(flag)], device="cuda")
        dist.broadcast(t, 0)
        return bool(t.item())

    result = child_run("ddp", family, cfg, rank, (models, x, autocast), share)
    write_json(os.path.join(tmp, f"rank{rank}.json"), result)
    dist.barrier()
    dist.destroy_process_group()


# ---- parent ----------------------------------------------------------------------------------

def missing_requirements(torch_found: bool, gpus: int) -> str | None:
    """Why this benchmark cannot run here, or None."""
    if not torch_found:
        return "bench_training.py needs torch (not importable here); nothing was measured"
    if gpus == 0:
        return "bench_training.py needs a CUDA device (none found); nothing was measured"
    return None


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated: mlp, transformer, ddp (ddp only where 2 GPUs exist)")
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help="comma-separated tool families: gpuprofile, torch, proton, cupti (a bare "
                    "CUPTI client: the floor of any CUPTI kernel tracer)")
    ap.add_argument("--rounds", type=int, help=f"most rounds per child (default {PRESETS['default'][0]}, "
                    f"--quick {PRESETS['quick'][0]}; at least {MIN_ROUNDS})")
    ap.add_argument("--steps-per-block", type=int,
                    help=f"timed steps per block (default {PRESETS['default'][1]}, --quick "
                    f"{PRESETS['quick'][1]})")
    ap.add_argument("--seconds-per-mode", type=float,
                    help="time budget of a child's rounds, per mode it runs (default "
                    f"{PRESETS['default'][2]}, --quick {PRESETS['quick'][2]})")
    ap.add_argument("--quick", action="store_true", help="a smoke run: fewer, shorter rounds")
    ap.add_argument("--ddp-ranks", type=int, default=DDP_RANKS,
                    help=f"ranks of the ddp workload, one GPU each (default {DDP_RANKS})")
    ap.add_argument("--output", default="bench_training.json", help="JSON results")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    rounds, steps, seconds, timeout = PRESETS["quick" if args.quick else "default"]
    args.rounds = rounds if args.rounds is None else args.rounds
    args.steps_per_block = steps if args.steps_per_block is None else args.steps_per_block
    args.seconds_per_mode = seconds if args.seconds_per_mode is None else args.seconds_per_mode
    args.timeout = timeout
    args.workloads = _names(ap, "workload", args.workloads, WORKLOADS)
    args.families = _names(ap, "family", args.families, FAMILIES)
    if args.rounds < MIN_ROUNDS:
        ap.error(f"--rounds must be at least {MIN_ROUNDS} (a 95 % interval of the median needs "
                 f"{MIN_ROUNDS} rounds), got {args.rounds}")
    if args.ddp_ranks < 2:
        ap.error(f"--ddp-ranks must be at least 2, got {args.ddp_ranks}")
    if args.steps_per_block < 1:
        ap.error(f"--steps-per-block must be at least 1, got {args.steps_per_block}")
    if not (math.isfinite(args.seconds_per_mode) and args.seconds_per_mode > 0):
        ap.error(f"--seconds-per-mode must be a positive number, got {args.seconds_per_mode}")
    return args


def _names(ap, what: str, text: str, known: tuple) -> list:
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    bad = [n for n in names if n not in known]
    if bad:
        ap.error(f"unknown {what}(s) {bad}; choose from {', '.join(known)}")
    if not names:
        ap.error(f"no {what} given; choose from {', '.join(known)}")
    return names


def table_rows(workloads: dict) -> list:
    """[workload, mode, overhead %, 95 % CI, step ms, host ms, kernels per step, steps] for every
    measured mode, plain first in each child's rows (its kernels counted by a kernels-only trace
    of plain steps, the traced modes' from their first block); a child that failed or was
    skipped gives one row saying so."""
    rows = []
    for name, children in workloads.items():
        for family, res in children.items():
            if "error" in res or "skipped" in res:
                why = "error: " + " ".join(res["error"]) if "error" in res else res["skipped"]
                rows.append([name, f"{family}: {why}", "", "", "", "", "", ""])
                continue
            for r in res.get("ranks", [res]):
                label = f"{name} r{r['rank']}" if "ranks" in res else name
                for mode, m in r["modes"].items():
                    lo, hi = m.get("ci95_pct", (None, None))
                    ci = "" if mode == "plain" else ("-" if lo is None else f"[{lo:+.1f}, {hi:+.1f}]")
                    over = "" if mode == "plain" else f"{m['overhead_pct']:+.1f}"
                    kernels = r.get("kernels_per_step") if mode == "plain" else m.get("kernels_per_step")
                    rows.append([label, mode if mode != "plain" else f"plain ({family} child)", over,
                                 ci, m["step_ms"], m["host_ms"], "" if kernels is None else kernels,
                                 m["steps"]])
    return rows


def _child(args, workload: str, family: str) -> dict:
    cfg = ["--rounds", str(args.rounds), "--steps-per-block", str(args.steps_per_block),
           "--seconds-per-mode", str(args.seconds_per_mode)]
    if workload == "ddp" and args.ddp_ranks != DDP_RANKS:
        cfg += ["--ddp-ranks", str(args.ddp_ranks)]
    return run_child(os.path.abspath(__file__), [workload, family, *cfg], args.timeout, error_lines=3)


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = {"rounds": args.rounds, "steps": args.steps_per_block,
           "seconds_per_mode": args.seconds_per_mode}
    if args.child:
        workload, family = args.child
        result = (child_ddp(family, cfg, args.ddp_ranks) if workload == "ddp"
                  else child_run(workload, family, cfg))
        print(json.dumps(result), flush=True)
        os._exit(0)  # CUPTI's exit-time flush must not call a finalized interpreter's callbacks

    import gpuprofile as gp

    why = missing_requirements(importlib.util.find_spec("torch") is not None, gp.device_count())
    if why:
        print(why)
        return 0
    results = {"device": gp.device_info(0).name, "date": time.strftime("%Y-%m-%d"),
               "command": " ".join(["python", "benchmarks/bench_training.py",
                                    *(sys.argv[1:] if argv is None else argv)]),
               "config": cfg, "modes": {m: text for m, (_, text) in MODES.items()},
               "notes": [], "workloads": {}}
    for workload in args.workloads:
        if workload == "ddp" and gp.device_count() < args.ddp_ranks:
            results["notes"].append(f"ddp skipped: needs {args.ddp_ranks} GPUs, found "
                                    f"{gp.device_count()}")
            continue
        children = results["workloads"][workload] = {}
        for family in args.families:
            if workload == "ddp" and family == "proton":
                children[family] = {"skipped": "Proton is not run on the DDP workload"}
                continue
            t0 = time.perf_counter()
            children[family] = _child(args, workload, family)
            children[family]["wall_s"] = time.perf_counter() - t0
            write_json(args.output, results)  # what is measured so far survives a later failure
    write_json(args.output, results)

    print(f"device: {results['device']}; {args.rounds} rounds at most, {args.steps_per_block} "
          f"timed steps per block, {args.seconds_per_mode} s per mode")
    for note in results["notes"]:
        print(note)
    for mode, (_, text) in MODES.items():
        print(f"  {mode:<23} {text}")
    from gpuprofile.toolkit import text_table

    print(text_table(["workload", "mode", "overhead %", "95% CI", "step ms", "host ms",
                      "kernels/step", "steps"],
                     table_rows(results["workloads"])))
    print(f"target: <= 2 % of step time; results written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
