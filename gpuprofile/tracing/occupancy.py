"""Theoretical occupancy of a kernel launch, from its block size, registers per thread and shared
memory per block and the SM's limits, computed the way CUDA's occupancy calculator does:

- warps: the SM holds at most max_threads_per_sm / warp_size warps;
- blocks: at most max_blocks_per_sm resident blocks;
- registers: each warp's registers are allocated in units of `register_granularity`; the
  register file is split evenly among the SM's sub-partitions and a warp lives in one of them,
  so the SM holds (registers_per_sm / partitions // registers_per_warp) * partitions warps; a
  block whose registers exceed registers_per_block (counted as if its warps were spread over all
  partitions) cannot launch;
- shared memory: each block takes its static + dynamic shared memory plus a reserved 1 KiB,
  rounded up to `shared_memory_granularity`, out of shared_memory_per_sm (the largest carveout,
  which is what the driver picks when the kernel states no preference).

Occupancy = resident warps / maximum warps. The limiter is the limit that allows the fewest
blocks; ties go to the first of 'warps', 'registers', 'shared_memory', 'blocks' (at full
occupancy the warp limit is the natural one to name). Pure functions: no device needed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

LIMITERS = ("warps", "registers", "shared_memory", "blocks")
_UNLIMITED = 1 << 30


@dataclass(frozen=True)
class SMLimits:
    """Per-SM resource limits of one GPU architecture (or one device)."""

    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_memory_per_sm: int
    shared_memory_per_block_optin: int
    warp_size: int = 32
    max_threads_per_block: int = 1024
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    register_granularity: int = 256
    register_partitions: int = 4
    reserved_shared_memory_per_block: int = 1024
    shared_memory_granularity: int = 128

    def to_dict(self) -> dict:
        return asdict(self)


# From NVIDIA's compute-capability tables (CUDA C++ Programming Guide, "Technical Specifications
# per Compute Capability"); shared memory per SM is the largest carveout.
ARCH_LIMITS = {
    (8, 0): SMLimits(2048, 32, 167936, 166912),  # A100
    (8, 6): SMLimits(1536, 16, 102400, 101376),  # GA10x
    (8, 7): SMLimits(1536, 16, 167936, 166912),  # Orin
    (8, 9): SMLimits(1536, 24, 102400, 101376),  # Ada
    (9, 0): SMLimits(2048, 32, 233472, 232448),  # H100 / H200
}


def limits_for(compute_capability, properties: dict | None = None) -> SMLimits:
    """Limits of an architecture, with the device's own reported values (from
    gpuprofile._C._device_properties) taking precedence where given."""
    cc = tuple(compute_capability)
    base = ARCH_LIMITS.get(cc)
    if properties is None:
        if base is None:
            known = ", ".join(f"sm_{a}{b}" for a, b in ARCH_LIMITS)
            raise KeyError(f"no built-in SM limits for compute capability {cc[0]}.{cc[1]} "
                           f"(known: {known}); pass the device's properties")
        return base
    p = properties
    fields = dict(
        max_threads_per_sm=p["max_threads_per_sm"], max_blocks_per_sm=p["max_blocks_per_sm"],
        shared_memory_per_sm=p["shared_memory_per_sm"],
        shared_memory_per_block_optin=p["shared_memory_per_block_optin"],
        warp_size=p["warp_size"], max_threads_per_block=p["max_threads_per_block"],
        registers_per_sm=p["registers_per_sm"], registers_per_block=p["registers_per_block"],
        reserved_shared_memory_per_block=p["reserved_shared_memory_per_block"],
    )
    return replace(base, **fields) if base else SMLimits(**fields)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def blocks_per_sm(limits: SMLimits, block_size: int, registers_per_thread: int,
                  shared_memory_per_block: int) -> dict:
    """Resident blocks per SM allowed by each limit: {'warps', 'registers', 'shared_memory',
    'blocks'}; 0 where the launch cannot fit at all."""
    L = limits
    if block_size < 1 or registers_per_thread < 0 or shared_memory_per_block < 0:
        raise ValueError(f"invalid launch: block_size={block_size}, registers_per_thread="
                         f"{registers_per_thread}, shared_memory_per_block={shared_memory_per_block}")
    warps = -(-block_size // L.warp_size)
    fits = block_size <= L.max_threads_per_block
    by_warps = L.max_threads_per_sm // L.warp_size // warps if fits else 0

    if registers_per_thread == 0:
        by_regs = _UNLIMITED
    elif registers_per_thread > L.max_registers_per_thread:
        by_regs = 0
    else:
        per_warp = _round_up(registers_per_thread * L.warp_size, L.register_granularity)
        spread = per_warp * _round_up(warps, L.register_partitions)
        if spread > L.registers_per_block or per_warp * warps > L.registers_per_block:
            by_regs = 0
        else:
            warps_per_partition = L.registers_per_sm // L.register_partitions // per_warp
            by_regs = warps_per_partition * L.register_partitions // warps

    if shared_memory_per_block > L.shared_memory_per_block_optin:
        by_smem = 0
    else:
        per_block = _round_up(shared_memory_per_block + L.reserved_shared_memory_per_block,
                              L.shared_memory_granularity)
        by_smem = L.shared_memory_per_sm // per_block if per_block else _UNLIMITED

    return {"warps": by_warps, "registers": by_regs, "shared_memory": by_smem,
            "blocks": L.max_blocks_per_sm}


def occupancy(limits: SMLimits, block_size: int, registers_per_thread: int,
              shared_memory_per_block: int) -> tuple:
    """(theoretical occupancy in [0, 1], resident blocks per SM, limiter name)."""
    limits_by = blocks_per_sm(limits, block_size, registers_per_thread, shared_memory_per_block)
    limiter = min(LIMITERS, key=lambda k: (limits_by[k], LIMITERS.index(k)))
    blocks = limits_by[limiter]
    warps = -(-block_size // limits.warp_size)
    max_warps = limits.max_threads_per_sm // limits.warp_size
    return blocks * warps / max_warps, blocks, limiter
