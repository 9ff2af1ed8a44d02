"""Overhead of regions + tracing on a DDP training step (issue 15's target: <= 2 % of step time),
and a merged multi-rank trace of it. Needs >= 2 GPUs and torch with NCCL.

    python benchmarks/bench_ddp.py --ranks 2 --output ddp.json      # spawns the ranks itself
    python benchmarks/bench_ddp.py --ranks 4 --output ddp4.json     # one per GPU: 4 GPUs
    torchrun --nproc-per-node 4 benchmarks/bench_ddp.py --output ddp.json

Each rank trains the same MLP under DistributedDataParallel. Steps run in blocks that rotate
between three modes, so drift (clocks, thermals) hits them alike:

- plain: a bare DDP step (forward, backward with DDP's bucketed allreduce, optimizer step);
- traced: the documented setup (docs/distributed.md): the same step inside gp.region("step")
  with forward/backward/optimizer regions, under gp.profile() (kernels, copies, sets, memory,
  region attribution), DDP's own C++ allreduce; the collective sizes come from torch's NCCL
  Flight Recorder when the profile stops;
- hook: traced, with DDP's allreduce through gp.distributed.allreduce_hook instead (a
  collective() region per bucket): the older way to collective sizes, kept as an option.

A step's time is host wall time from its start to torch.cuda.synchronize() after it, in every
mode alike. Overhead = median traced (or hook) step / median plain step - 1, per rank; rank 0
prints the table and writes JSON. The last traced block is exported per rank and merged
(gp.merge_traces), and the alignment error and straggler totals go into the JSON too.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1), set here before any rank starts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import tempfile
import time

from gpuprofile.bench.ab import rotation  # A/B's rotated order (bench/ab.py)

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(MULTICAST_OFF)
MODES = ["plain", "traced", "hook"]


def _model(torch, width: int, layers: int):
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*blocks)


def _step(torch, gp, ddp, opt, x, traced: bool) -> float:
    region = gp.region if traced else (lambda name: contextlib.nullcontext())
    t0 = time.perf_counter()
    with region("step"):
        with region("forward"):
            loss = ddp(x).square().mean()
        with region("backward"):
            loss.backward()
        with region("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _block(torch, gp, ddp, opt, x, traced: bool, steps: int, trace_path=None) -> tuple:
    """(step times in s, the trace written or None)."""
    if not traced:
        return [_step(torch, gp, ddp, opt, x, False) for _ in range(steps)], None
    with gp.profile() as p:
        times = [_step(torch, gp, ddp, opt, x, True) for _ in range(steps)]
    return times, (p.export_chrome_trace(trace_path) if trace_path else None)


def rank_main(rank: int, world: int, port: int, args, out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import gpuprofile as gp

    os.environ.update(MULTICAST_OFF)
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    if port:
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
    else:  # torchrun: MASTER_ADDR etc. in the environment
        dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    runs = {}
    for mode in MODES:  # identical models: DDP hooks its model's parameters
        torch.manual_seed(0)
        ddp = DistributedDataParallel(_model(torch, args.width, args.layers).cuda(), device_ids=[local])
        if mode == "hook":
            ddp.register_comm_hook(None, gp.distributed.allreduce_hook)
        runs[mode] = (ddp, torch.optim.SGD(ddp.parameters(), lr=1e-4))
    x = torch.randn(args.batch, args.width, device="cuda")
    for _ in range(args.warmup):  # both paths: NCCL set-up, cuBLAS handles, allocator growth
        for mode, (ddp, opt) in runs.items():
            _step(torch, gp, ddp, opt, x, mode != "plain")
    gp.reset()
    times = {mode: [] for mode in MODES}
    trace = None
    for b in range(args.blocks):
        last = b == args.blocks - 1
        for mode in rotation(MODES, b):
            ddp, opt = runs[mode]
            got, path = _block(torch, gp, ddp, opt, x, mode != "plain", args.steps,
                               os.path.join(out_dir, "ddp.json.gz") if last and mode == "traced" else None)
            times[mode] += got
            trace = path or trace
        gp.reset()
    plain_ms = statistics.median(times["plain"]) * 1e3
    traced_ms = statistics.median(times["traced"]) * 1e3
    hook_ms = statistics.median(times["hook"]) * 1e3
    row = {"rank": rank, "plain_ms": plain_ms, "traced_ms": traced_ms,
           "overhead_pct": (traced_ms / plain_ms - 1) * 100, "hook_ms": hook_ms,
           "hook_overhead_pct": (hook_ms / plain_ms - 1) * 100, "steps": len(times["plain"]),
           "trace": trace, "device": torch.cuda.get_device_name(local)}
    gathered = [None] * world
    dist.all_gather_object(gathered, row)
    if rank == 0:
        _report(gathered, args, out_dir)
    dist.barrier()
    dist.destroy_process_group()


def _report(rows, args, out_dir: str) -> None:
    import gpuprofile as gp

    t0 = time.perf_counter()
    merged = gp.merge_traces([r["trace"] for r in rows], os.path.join(out_dir, "ddp.merged.json.gz"))
    merge_s = time.perf_counter() - t0
    print(f"DDP step, {len(rows)} ranks, MLP {args.layers} x {args.width}, batch {args.batch} "
          f"({rows[0]['device']}); {rows[0]['steps']} steps per mode, {args.blocks} blocks")
    print(f"{'rank':>4}  {'plain ms':>9}  {'traced ms':>9}  {'overhead %':>10}  {'hook ms':>9}  "
          f"{'hook overhead %':>15}")
    for r in rows:
        print(f"{r['rank']:>4}  {r['plain_ms']:>9.3f}  {r['traced_ms']:>9.3f}  {r['overhead_pct']:>10.2f}  "
              f"{r['hook_ms']:>9.3f}  {r['hook_overhead_pct']:>15.2f}")
    worst = max(r["overhead_pct"] for r in rows)
    print(f"worst rank, traced (the documented setup): {worst:.2f} % (target <= 2 %); with the "
          f"older allreduce_hook: {max(r['hook_overhead_pct'] for r in rows):.2f} %")
    print(merged)
    print(f"merge took {merge_s:.2f} s; merged trace: {merged.path}")
    if args.output:
        from _children import write_json

        write_json(args.output, {"config": vars(args), "world_size": len(rows), "ranks": rows,
                                 "worst_overhead_pct": worst, "merge_s": merge_s,
                                 "merge": merged.to_dict()})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--ranks", type=int, default=2, help="ranks to spawn (without torchrun)")
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="steps per block")
    p.add_argument("--blocks", type=int, default=5, help="blocks per mode, alternating")
    p.add_argument("--output", default=None, help="JSON results (rank 0)")
    p.add_argument("--trace-dir", default=None, help="where traces go (default: a temp folder)")
    args = p.parse_args()
    out_dir = args.trace_dir or tempfile.mkdtemp(prefix="bench_ddp_")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun
        rank_main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), 0, args, out_dir)
        return
    import torch
    import torch.multiprocessing as mp

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not 1 <= args.ranks <= gpus:  # one GPU per rank: set_device(rank) in each
        p.error(f"--ranks {args.ranks} needs {args.ranks} GPUs (one per rank); this machine has {gpus}")
    mp.spawn(_spawned, args=(args.ranks, _free_port(), args, out_dir), nprocs=args.ranks, join=True)


def _spawned(rank, world, port, args, out_dir):
    rank_main(rank, world, port, args, out_dir)


if __name__ == "__main__":
    main()
