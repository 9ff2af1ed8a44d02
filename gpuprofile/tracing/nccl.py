"""NCCL kernels in a trace: which collective a kernel runs, and bandwidth by NCCL's conventions.

NCCL names its kernels after the collective, the reduction, the type, the algorithm and the
protocol, in an order that changed between versions:

    ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)   (NCCL >= 2.19)
    ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)  (older)

The kernel record holds no byte count, so bytes come from a gpuprofile.distributed.collective()
region around the call (docs/distributed.md). Bandwidths follow nccl-tests
(doc/PERFORMANCE.md there): algbw = bytes / time, busbw = algbw x a factor of the collective and
the number of ranks n that makes busbw comparable with the hardware's link bandwidth.
"""

from __future__ import annotations

import re

import numpy as np

COLLECTIVES = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "SendRecv",
               "Send", "Recv", "AllToAll")
_BY_KEY = {c.lower(): c for c in COLLECTIVES}
_ALGORITHMS = ("RING", "TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "COLLNET", "NVLS_TREE", "NVLS",
               "PAT")
_PROTOCOLS = ("LL128", "LL", "SIMPLE")
_PREFIX = re.compile(r"^(?:void\s+)?nccl(?:Dev)?Kernel_([A-Za-z]+)")


def canonical_op(op: str) -> str:
    """NCCL's spelling of a collective from either NCCL's or torch.distributed's
    ('all_reduce' -> 'AllReduce', 'reduce_scatter_tensor' -> 'ReduceScatter'); unknown names are
    kept as given."""
    key = op.replace("_", "").lower()
    stripped = True
    while key not in _BY_KEY and stripped:  # all_gather_into_tensor_coalesced -> allgather
        stripped = False
        for suffix in ("tensor", "base", "coalesced", "single", "into"):
            if key.endswith(suffix) and len(key) > len(suffix):
                key, stripped = key[: -len(suffix)], True
    return _BY_KEY.get(key, op)


def parse_kernel(name: str) -> dict | None:
    """{'op', 'algorithm', 'protocol'} of an NCCL kernel name ('' where the name does not say),
    or None for any other kernel."""
    m = _PREFIX.match(name)
    if m is None:
        return None
    tokens = set(re.split(r"[_(<,\s]", name[m.end():].split("(", 1)[0]))
    algorithm = next((a for a in _ALGORITHMS if a in tokens or a in name), "")
    protocol = next((p for p in _PROTOCOLS if p in tokens), "")
    return {"op": canonical_op(m.group(1)), "algorithm": algorithm, "protocol": protocol}


def bus_factor(op: str, ranks: int) -> float | None:
    """busbw / algbw for `op` over `ranks` ranks (nccl-tests): 2(n-1)/n for AllReduce, (n-1)/n
    for AllGather, ReduceScatter and AllToAll, 1 for Broadcast, Reduce and point-to-point; None
    for a collective it does not know."""
    n = int(ranks)
    if n < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    if op == "AllReduce":
        return 2 * (n - 1) / n
    if op in ("AllGather", "ReduceScatter", "AllToAll"):
        return (n - 1) / n
    if op in ("Broadcast", "Reduce", "SendRecv", "Send", "Recv"):
        return 1.0
    return None


def bandwidth(op: str, nbytes: int, duration_ns: float, ranks: int) -> tuple:
    """(algbw, busbw) in GB/s (bytes per ns) of `nbytes` moved in `duration_ns`; None where it
    cannot be computed (no time, unknown collective)."""
    if nbytes is None or not duration_ns or duration_ns <= 0:
        return None, None
    algbw = nbytes / duration_ns
    factor = bus_factor(op, ranks)
    return algbw, (algbw * factor if factor is not None else None)


COLLECTIVE_REGION = "collective "  # gpuprofile.distributed.collective()'s region names


def region_bytes(region: str, op: str):
    """Bytes named by a collective() region ('collective AllReduce 4096 B') when it names the
    same collective `op`, else None."""
    if not region.startswith(COLLECTIVE_REGION):
        return None
    parts = region[len(COLLECTIVE_REGION):].split()
    if (len(parts) == 3 and parts[2] == "B" and parts[1].isascii() and parts[1].isdigit()
            and len(parts[1]) <= 18 and canonical_op(parts[0]) == op):  # within int64
        return int(parts[1])
    return None


def parse_names(names) -> dict:
    """parse_kernel over many kernel names, each distinct name parsed once: {'collective',
    'nccl_algorithm', 'nccl_protocol'} as object arrays, '' for kernels that are not NCCL's."""
    cache: dict = {}
    rows = []
    for name in list(names):
        if name not in cache:
            parsed = parse_kernel(str(name))
            cache[name] = ((parsed["op"], parsed["algorithm"], parsed["protocol"])
                           if parsed is not None else ("", "", ""))
        rows.append(cache[name])
    out = np.array(rows, dtype=object).reshape(-1, 3)
    return {"collective": out[:, 0], "nccl_algorithm": out[:, 1], "nccl_protocol": out[:, 2]}
