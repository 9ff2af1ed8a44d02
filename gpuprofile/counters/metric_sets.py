"""Named metric sets for gpuprofile.metrics() and region(metrics=...).

Each set is a tuple of full CUPTI metric names (Hopper / GH100 names; every one is validated
offline against CUPTI's host API in tests/counters/test_metric_sets.py) with a short note on how to read
it. docs/counters.md explains the sets at length. `gpu__time_duration.sum` is added to every
collection, so durations are always known.
"""

from __future__ import annotations

from dataclasses import dataclass

DURATION = "gpu__time_duration.sum"
SM_SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_SOL = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
TENSOR_PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"

# The 19 warp-stall reasons Hopper reports (the "stalls" set, and PC sampling's names).
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss", "lg_throttle",
    "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
    "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait",
)

# Exact FLOPs from instrumented SASS counters: thread-instructions with all predicates true.
# An FMA is two FLOPs (the convention of Nsight Compute's roofline).
FLOP_COUNTERS = {
    "fp32": {"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1,
             "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 1,
             "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2},
    "fp64": {"smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 1,
             "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum": 1,
             "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": 2},
    "fp16": {"smsp__sass_thread_inst_executed_op_hadd_pred_on.sum": 1,
             "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum": 1,
             "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum": 2},
}
# Tensor-core math ops by source type (counted by the hardware as operations, i.e. FLOPs).
TENSOR_OPS = (
    "sm__ops_path_tensor_src_fp16.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp8.sum",
    "sm__ops_path_tensor_src_int8.sum",
    "sm__ops_path_tensor_src_fp64.sum",
)


@dataclass(frozen=True)
class MetricSet:
    """A named list of metrics and how to read them."""

    name: str
    metrics: tuple
    summary: str
    how_to_read: str

    def to_dict(self) -> dict:
        return {"name": self.name, "metrics": list(self.metrics), "summary": self.summary,
                "how_to_read": self.how_to_read}


SETS = {
    "sol": MetricSet(
        "sol",
        (DURATION, SM_SOL, MEMORY_SOL, DRAM_SOL, "sm__cycles_elapsed.avg.per_second"),
        "Speed of light: how close the kernel runs to the SM's and the memory system's peak.",
        "sm__throughput is the busiest SM unit (issue, pipes) in % of its peak; "
        "gpu__compute_memory_throughput the busiest memory unit (L1, L2, DRAM); dram__throughput "
        "DRAM alone. >= 60 % on one side: bound by it; < 40 % on both: latency-bound "
        "(MetricsResult.bound()). sm__cycles_elapsed.avg.per_second is the SM clock.",
    ),
    "roofline": MetricSet(
        "roofline",
        (DURATION, DRAM_READ, DRAM_WRITE, "lts__t_bytes.sum", "l1tex__t_bytes.sum",
         *FLOP_COUNTERS["fp32"], *FLOP_COUNTERS["fp64"], *FLOP_COUNTERS["fp16"], *TENSOR_OPS),
        "Bytes moved at each memory level and exact FLOPs, for a roofline placement.",
        "Arithmetic intensity = FLOPs / DRAM bytes. FLOPs come from instrumented SASS counters "
        "(exact, FMA = 2) and tensor-path op counters; compare the achieved FLOP/s with "
        "gpuprofile.ceilings() (see MetricsResult.roofline()).",
    ),
    "occupancy": MetricSet(
        "occupancy",
        (DURATION, "sm__warps_active.avg.pct_of_peak_sustained_active",
         "sm__warps_active.avg.per_cycle_active", "smsp__warps_eligible.avg.per_cycle_active",
         "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__ctas_launched.sum",
         "sm__warps_launched.sum", "sm__cycles_active.avg"),
        "Achieved occupancy: warps resident per SM, and how many of them can issue.",
        "sm__warps_active...pct_of_peak_sustained_active is achieved occupancy in % of the "
        "SM's warp slots. Compare it with the theoretical occupancy and its limiter (registers, "
        "shared memory, block size) from the kernel records of gpuprofile.profile(). Few eligible "
        "warps per cycle with low issue activity means latency is not hidden.",
    ),
    "tensor": MetricSet(
        "tensor",
        (DURATION, TENSOR_PIPE,
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
         "sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_gmma.sum",
         "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
        "Tensor-core use: pipe utilisation, and mma.sync (HMMA) vs wgmma (GMMA) instructions.",
        "sm__pipe_tensor_cycles_active is the tensor pipe's utilisation in % of active cycles. "
        "On Hopper, sm__inst_executed_pipe_tensor_op_gmma counts wgmma (warpgroup) instructions "
        "and ..._hmma counts mma.sync ones: a kernel with only HMMA cannot reach the wgmma peak.",
    ),
    "memory": MetricSet(
        "memory",
        (DURATION, "l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct",
         "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
         "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio",
         "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", DRAM_READ, DRAM_WRITE,
         "lts__t_bytes.sum", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
         "lts__throughput.avg.pct_of_peak_sustained_elapsed", DRAM_SOL),
        "Memory hierarchy: hit rates, coalescing (sectors per request), bank conflicts, traffic.",
        "Sectors per request is 4 for perfectly coalesced 4-byte loads by a warp (32 threads x "
        "4 B = 128 B = 4 sectors); up to 32 means every thread touches its own sector. High L1/L2 "
        "hit rates mean reuse is served by caches; shared-memory bank conflicts serialize "
        "accesses.",
    ),
    "stalls": MetricSet(
        "stalls",
        (DURATION, "smsp__issue_active.avg.pct_of_peak_sustained_active",
         *(f"smsp__warp_issue_stalled_{r}_per_warp_active.pct" for r in STALL_REASONS)),
        "Warp states: the share of warps stalled on each reason, per cycle.",
        "Each ..._per_warp_active.pct is the % of active warps per cycle in that state; the "
        "largest values say what warps wait on: long_scoreboard = global/local memory, "
        "short_scoreboard = shared memory or MIO, math_pipe_throttle = a busy math pipe, "
        "barrier = __syncthreads, gmma = wgmma completion, not_selected = enough eligible "
        "warps (healthy). For per-line detail use gpuprofile.stalls() (PC sampling).",
    ),
}

# One-pass set for PM sampling (gpuprofile.sample): utilisation over time.
SAMPLE_METRICS = (
    "gr__cycles_active.sum.pct_of_peak_sustained_elapsed",
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum.per_second",
    "dram__bytes_write.sum.per_second",
    "gpc__cycles_elapsed.avg.per_second",
)


def split(name: str):
    """(base, suffix) of a metric name: the base runs up to the first dotted segment naming a
    unit__counter, the suffix is the rollup/submetric after it ('' if none)."""
    parts = name.split(".")
    for k, part in enumerate(parts):
        if "__" in part:
            return ".".join(parts[: k + 1]), "".join("." + p for p in parts[k + 1:])
    return name, ""


def expand(spec) -> list:
    """Metric names for `spec`: a set name, a metric name, or a list/tuple of either.
    Order is kept and duplicates dropped; names are not validated here."""
    if isinstance(spec, str):
        items = [spec]
    elif isinstance(spec, (list, tuple)):
        items = list(spec)
    else:
        raise TypeError(f"metrics must be a set name, a metric name or a list of them, "
                        f"got {type(spec).__name__}")
    if not items:
        raise ValueError("no metrics given")
    names = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"metric names must be str, got {type(item).__name__}")
        names.extend(SETS[item].metrics if item in SETS else [item.strip()])
    return list(dict.fromkeys(names))


def sets_in(spec) -> list:
    """The set names mentioned in `spec` (for result labels)."""
    items = [spec] if isinstance(spec, str) else list(spec)
    return [s for s in items if isinstance(s, str) and s in SETS]
