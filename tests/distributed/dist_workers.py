"""Functions that spawned ranks run (torch.multiprocessing needs them importable by name):
the CPU gloo check of rank awareness, and the NCCL job the GPU tests merge."""

from __future__ import annotations

import json
import os
import socket

# NVLink multicast stays off on shared multi-GPU hosts (it can take the host's GPUs out of
# service): NCCL, PyTorch's symmetric memory and NVSHMEM. Set in every rank and in the parent.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank: int, world: int, port: int, backend: str):
    import torch.distributed as dist

    os.environ.update(MULTICAST_OFF)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    return dist


def gloo_rank(rank: int, world: int, port: int, out: str) -> None:
    """One CPU rank: rank_info() from torch.distributed, per-rank names, a collective region."""
    import torch

    import gpuprofile as gp

    before = gp.rank_info()  # the group is not initialised yet, and no launcher variables are set
    dist = _init(rank, world, port, "gloo")
    try:
        t = torch.ones(1024) * (rank + 1)
        with gp.region("step"), gp.distributed.collective("all_reduce", t.numel() * t.element_size()):
            dist.all_reduce(t)
        report = gp.report().to_dict()
        result = gp.benchmark(sum, [1, 2], clock="host", warmup=0, min_time=0.01, max_noise=0.5)
        saved = result.save(os.path.join(out, "bench.json"))
        info = gp.rank_info()
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump({"before": list(before), "info": list(info), "sum": float(t[0]),
                       "path": gp.distributed.rank_path(os.path.join(out, "trace.json.gz")),
                       "regions": [r["name"] for r in report["regions"]],
                       "report_rank": report.get("rank"), "saved": saved}, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def nccl_rank(rank: int, world: int, port: int, out: str, steps: int, slow_rank: int,
              slow_step: int, late_rank: int = -1, late_step: int = -1,
              parquet: bool = False, slow_steps: dict | None = None) -> None:
    """One GPU rank: `steps` steps of 8 matmuls then an all_reduce in a collective() region,
    traced. `slow_steps` maps step -> {rank: factor}: that rank does `factor` times the matmuls
    in that step, so it arrives late there (several ranks may be slow in one step); without it,
    `slow_rank` does four times the work in `slow_step` ({slow_step: {slow_rank: 4}}).
    `late_rank` waits for its GPU and sleeps 20 ms on the host before launching the all_reduce
    of `late_step` (a late launch: its GPU idles). `parquet`: also export
    trace.rank{r}.parquet. mp.spawn passes the arguments by position, in this order."""
    import time

    import torch

    import gpuprofile as gp

    if slow_steps is None:
        slow_steps = {slow_step: {slow_rank: 4}}
    torch.cuda.set_device(rank)
    dist = _init(rank, world, port, "nccl")
    try:
        a = torch.randn(2048, 2048, device="cuda")
        grad = torch.randn(8 << 20, device="cuda")  # 32 MiB
        nbytes = grad.numel() * grad.element_size()
        a = (a @ a).clamp_(-1, 1)  # cuBLAS, and NCCL's communicator, are set up outside the trace
        dist.all_reduce(grad)
        torch.cuda.synchronize()
        with gp.profile() as p:
            for s in range(steps):
                with gp.region("step"):
                    for _ in range(8 * slow_steps.get(s, {}).get(rank, 1)):
                        a = (a @ a).clamp_(-1, 1)
                    if rank == late_rank and s == late_step:
                        torch.cuda.synchronize()
                        time.sleep(0.02)
                    with gp.distributed.collective("all_reduce", nbytes):
                        dist.all_reduce(grad)
            torch.cuda.synchronize()
        path = p.export_chrome_trace(os.path.join(out, "trace.json.gz"))
        columns = p.export_parquet(os.path.join(out, "trace.parquet")) if parquet else None
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump({"path": path, "parquet": columns, "nbytes": nbytes,
                       "info": list(gp.rank_info())}, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def ddp_rank(rank: int, world: int, port: int, out: str, steps: int) -> None:
    """One DDP rank with DDP's own C++ allreduce (no comm hook, no collective() region): `steps`
    traced steps; writes the NCCL sizes p.collectives found and the gradient bytes per step."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    import gpuprofile as gp

    torch.cuda.set_device(rank)
    dist = _init(rank, world, port, "nccl")
    try:
        torch.manual_seed(0)
        net = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(6)]).cuda()
        model = DistributedDataParallel(net, device_ids=[rank], bucket_cap_mb=5)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(32, 1024, device="cuda")

        def step():
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        for _ in range(3):  # DDP rebuilds its buckets after the first step
            step()
        torch.cuda.synchronize()
        with gp.profile() as p:
            for _ in range(steps):
                with gp.region("step"):
                    step()
            torch.cuda.synchronize()
        c = p.collectives
        nccl = [str(n) for n in p.kernels["name"] if "nccl" in str(n).lower()]
        path = p.export_chrome_trace(os.path.join(out, "ddp.json.gz"))
        result = {"path": path, "nccl_kernels": len(nccl), "sized": int((c["bytes"] >= 0).sum()),
                  "ops": sorted(set(c["op"])), "bytes": int(c["bytes"].sum()),
                  "grad_bytes_per_step": sum(q.numel() * q.element_size() for q in net.parameters()),
                  "notes": p.collective_notes}
        with open(os.path.join(out, f"ddp{rank}.json"), "w") as f:
            json.dump(result, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()
