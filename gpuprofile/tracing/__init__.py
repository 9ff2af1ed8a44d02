"""CUPTI activity tracing, the Python side of csrc/tracing/: gpuprofile.profile (profile.py), the
record collection shared by every consumer (activity.py), attribution of GPU work to regions
(attribution.py), device-memory tracking (gpuprofile.memory: memory.py), the summary tables
(summary.py), Chrome trace export (chrome_trace.py) and occupancy (occupancy.py); for
multi-rank jobs, merging per-rank traces (merge.py, `gpuprofile merge` in cli.py) with clock
alignment (align.py), NCCL kernel names and bandwidth (nccl.py) and the straggler table
(straggler.py). See docs/tracing.md and docs/distributed.md."""
