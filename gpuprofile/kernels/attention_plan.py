"""What `gpuprofile attention` runs on this machine, and about how long it takes: the plan of the
sweep, made before anything runs, from the device's properties, what impl="auto" picks there and
whether torch is installed. Pure functions of their inputs (tests give them fake machines);
attention_bench.py runs the plan, docs/attention.md ("The main job") explains it.

The defaults tell the story of the machine:
- implementations: ours in the table's order (naive, flash, flash_tc, flash_wgmma) up to the one
  impl="auto" picks here, so on Hopper flash_wgmma, elsewhere flash_tc; then torch SDPA's cuDNN,
  FlashAttention-2 and math backends when torch with CUDA is installed;
- sequence lengths: 512 to 16384 on Hopper (compute capability 9.x), 128 to 2048 elsewhere;
- shapes: batch = 16384 // seq and heads = 2048 // head_dim (the FlashAttention papers' 16k
  tokens), so one call is 4·16384·2048·N FLOPs: 2.2 TFLOP at N = 16384, about 4.5 ms at 500
  TFLOP/s, and every case stays short.
A default case is left out, with the reason, when its extra device memory (the naive kernel's
scores, SDPA math's) would exceed a quarter of the device's memory, or when min_iters calls would
not fit in --max-time by the FLOP count; unless both --impls and --seq-lengths are given, then
every case named runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import IMPLEMENTATIONS, attention_bytes, attention_flops

HOPPER_SEQS = (512, 1024, 2048, 4096, 8192, 16384)
OTHER_SEQS = (128, 256, 512, 1024, 2048)
PEERS = ("sdpa_cudnn", "sdpa_flash", "sdpa_math")
TOKENS, HIDDEN = 16384, 2048  # batch·seq and heads·head_dim of the default shapes
MEMORY_SHARE = 0.25  # of the device's memory, the most a default case may take beyond Q, K, V, O
# gpuprofile.benchmark's defaults that bound one case's time (bench/options.py)
WARMUP_S, MIN_TIME_S, MIN_ITERS = 0.1, 0.2, 10
# For the time estimate only: the throughput each implementation reached, as a share of the
# device's peak (tensor, fp32 or DRAM), bf16 at seq 4096 on an H100 and an H200
# (docs/benchmarks.md, docs/results/attention_story_d64), rounded down. sdpa_math and
# sdpa_efficient are not measured there: their shares are guesses (math's time is the sum of its
# fp32 GEMMs and its N² traffic).
SHARES = {"flash_wgmma": ("tensor", 0.40), "flash_tc": ("tensor", 0.30), "flash": ("fp32", 0.50),
          "sdpa_cudnn": ("tensor", 0.44), "sdpa_flash": ("tensor", 0.28), "sdpa": ("tensor", 0.28),
          "sdpa_efficient": ("tensor", 0.20), "naive": ("dram", 0.60), "sdpa_math": ("fp32", 0.50)}
# Host seconds per element of Q, K and V together to draw, round and convert the inputs, once per
# element count (measured on a 2-core VM, bf16: 2.4 s to draw and round 3 × 33.5 M elements, 0.62 s
# to convert each to bf16 bits); the copies to the device per shape are left out (milliseconds).
HOST_S_PER_ELEMENT = 4.3e-8


@dataclass(frozen=True)
class Machine:
    """What the plan needs to know of this machine. name None: no CUDA device."""

    name: str | None
    compute_capability: tuple = (0, 0)
    total_memory_bytes: int = 0
    peak_tensor_tflops: float | None = None
    peak_fp32_tflops: float | None = None
    peak_dram_gbps: float | None = None
    torch: bool = False

    @classmethod
    def from_device(cls, info, torch: bool) -> Machine:
        """From a gpuprofile.DeviceInfo (None: no device)."""
        if info is None:
            return cls(None, torch=torch)
        return cls(info.name, tuple(info.compute_capability), info.total_memory_bytes,
                   info.peak_fp16_tensor_tflops, info.peak_fp32_tflops, info.peak_dram_gbps, torch)

    @property
    def hopper(self) -> bool:
        return self.compute_capability[0] == 9


@dataclass
class Plan:
    """The sweep: its shapes per sequence length, the implementations, the cases left out (with
    why), what impl="auto" picks for each shape (and why, from the C table), and the estimate."""

    machine: Machine
    seqs: list
    impls: list
    shapes: dict = field(default_factory=dict)  # seq -> (batch, heads, seq, head_dim)
    auto: dict = field(default_factory=dict)  # seq -> (impl, reason)
    left_out: dict = field(default_factory=dict)  # (impl, seq) -> why
    estimate_s: float = 0.0  # every benchmark stopping at its minimum time
    at_most_s: float = 0.0  # every benchmark running to max_time

    @property
    def cases(self) -> list:
        """(impl, seq) in the order they run: by seq, then impl."""
        return [(i, n) for n in self.seqs for i in self.impls if (i, n) not in self.left_out]

    def auto_lines(self) -> list:
        """What impl="auto" picks for each shape, and why: the shapes that share a pick and a
        reason on one line, the reason under them."""
        groups: dict = {}
        for n, choice in self.auto.items():
            groups.setdefault(choice, []).append(_shape_text(self.shapes[n]))
        lines = []
        for (impl, reason), shapes in groups.items():
            lines += [f"  {impl} for {', '.join(shapes)}", f"    because {reason}"]
        return lines

    def describe(self, dtype) -> str:
        """The plan in words, for stderr before the sweep."""
        m = self.machine
        lines = [f'gpuprofile attention: on {m.name} (compute capability '
                 f'{m.compute_capability[0]}.{m.compute_capability[1]}), impl="auto" picks, '
                 f"for {dtype}:", *self.auto_lines(),
                 f"gpuprofile attention: {len(self.cases)} cases ({', '.join(self.impls)} at seq "
                 f"{', '.join(map(str, self.seqs))}), about {self.estimate_s:.0f} s (at most "
                 f"{self.at_most_s:.0f} s), estimated from the FLOP count 4·B·H·N²·D"]
        lines += [f"  left out: {impl} at seq {n}: {why}" for (impl, n), why in self.left_out.items()]
        if not m.torch:
            lines.append("  torch with CUDA is not installed: no SDPA backends to compare with")
        return "\n".join(lines)


def _shape_text(shape) -> str:
    b, h, n, d = shape
    return f"B={b} H={h} N={n} D={d}"


def shape_for(seq, head_dim, batch=None, heads=None) -> tuple:
    """(batch, heads, seq, head_dim): by default 16384 tokens (batch·seq) and heads·head_dim 2048."""
    return (batch or max(1, TOKENS // seq), heads or max(1, HIDDEN // head_dim), seq, head_dim)


def default_impls(machine: Machine, auto_picks) -> list:
    """Ours in the table's order up to the last one auto picks, then SDPA's backends with torch."""
    names = [i.name for i in IMPLEMENTATIONS]
    last = max((names.index(p) for p in auto_picks if p in names), default=len(names) - 1)
    return names[:last + 1] + (list(PEERS) if machine.torch else [])


def extra_memory_bytes(impl, shape) -> float:
    """Device memory a call needs beyond Q, K, V and O: the naive kernel's fp32 scores (rows
    padded to 8 floats, exact); for SDPA math an estimate, fp32 scores and probabilities; none
    for the fused kernels."""
    b, h, n, _ = shape
    if impl == "naive":
        return 4.0 * b * h * n * ((n + 7) // 8 * 8)
    if impl == "sdpa_math":
        return 8.0 * b * h * n * n
    return 0.0


def call_seconds(impl, shape, dtype, causal, machine: Machine) -> float | None:
    """Estimated seconds of one call (None where the device's peaks are unknown)."""
    b, h, n, d = shape
    kind, share = SHARES.get(impl, ("tensor", 0.2))
    if impl == "naive":
        naive_bytes = attention_bytes(b, h, n, d, dtype, "naive")
        return _at(naive_bytes / 1e9, machine.peak_dram_gbps, share)
    flops = attention_flops(b, h, n, d, causal)
    if impl == "sdpa_math":
        gemm = _at(flops / 1e12, machine.peak_fp32_tflops, share)
        traffic = _at(16.0 * b * h * n * n / 1e9, machine.peak_dram_gbps, SHARES["naive"][1])
        return None if gemm is None or traffic is None else gemm + traffic
    if dtype == "float32" or impl == "flash":
        kind, share = "fp32", SHARES["flash"][1]
    return _at(flops / 1e12, machine.peak_tensor_tflops if kind == "tensor" else machine.peak_fp32_tflops,
               share)


def _at(amount, peak, share):
    return None if not peak else amount / (peak * share)


def plan_sweep(machine: Machine, auto_choice, *, dtype="bfloat16", head_dim=64, causal=False,
               batch=None, heads=None, max_time=1.0, seqs=None, impls=None) -> Plan:
    """The sweep for this machine. auto_choice(dtype, shape, causal) -> (impl, reason) is what
    impl="auto" picks (gpuprofile._C._attention_auto_choice on a real machine; for flash_wgmma the
    reason ends with the schedule it runs for the shape: kernels/attention/NOTES.md). seqs or impls
    None: this machine's defaults for it, and each case is checked for memory and time; both
    given: every case runs as named."""
    if machine.name is None:
        return Plan(machine, [], [])
    chosen_seqs = list(seqs) if seqs else list(HOPPER_SEQS if machine.hopper else OTHER_SEQS)
    plan = Plan(machine, chosen_seqs, [])
    for n in chosen_seqs:
        plan.shapes[n] = shape_for(n, head_dim, batch, heads)
        try:
            plan.auto[n] = auto_choice(dtype, plan.shapes[n], causal)
        except ValueError as e:  # no implementation takes it: each case will say why
            plan.auto[n] = ("none", str(e))
    plan.impls = list(impls) if impls else default_impls(machine, [a for a, _ in plan.auto.values()])
    if not (impls and seqs):
        _leave_out(plan, dtype, causal, max_time)
    _estimate(plan, dtype, causal, max_time)
    return plan


def _leave_out(plan, dtype, causal, max_time):
    budget = MEMORY_SHARE * plan.machine.total_memory_bytes
    for impl in plan.impls:
        for n in plan.seqs:
            shape = plan.shapes[n]
            extra = extra_memory_bytes(impl, shape)
            if extra > budget:
                plan.left_out[impl, n] = (f"it needs {extra / 1e9:.1f} GB beyond the inputs, over a "
                                          f"quarter of the device's {plan.machine.total_memory_bytes / 1e9:.0f} GB")
                continue
            t = call_seconds(impl, shape, dtype, causal, plan.machine)
            if t is not None and MIN_ITERS * t > max_time:
                plan.left_out[impl, n] = (f"one call takes about {t * 1e3:.0f} ms by the FLOP count, "
                                          f"so {MIN_ITERS} calls exceed --max-time {max_time:g} s")


def _estimate(plan, dtype, causal, max_time):
    """Host time to draw the inputs (once per element count), then per case: its validation, first call and
    (SDPA) memory-peak calls, the benchmark's warm-up, and its timed loop, which stops between
    min_time and max_time (never before min_iters calls)."""
    sizes = {b * h * n * d for b, h, n, d in plan.shapes.values()}  # inputs drawn once per size
    host = sum(HOST_S_PER_ELEMENT * 3 * size for size in sizes)
    low = high = host
    for impl, n in plan.cases:
        t = call_seconds(impl, plan.shapes[n], dtype, causal, plan.machine) or 0.0
        fixed = WARMUP_S + (3 + impl.startswith("sdpa")) * t
        low += fixed + max(MIN_TIME_S, MIN_ITERS * t)
        high += fixed + max(max_time, MIN_ITERS * t)
    plan.estimate_s, plan.at_most_s = low, high


def plan_here(args, torch) -> Plan:
    """The plan on this machine (device 0) for parsed sweep options: its properties from
    gpuprofile.device_info, impl="auto"'s choice from the C table (_attention_auto_choice), with
    flash_wgmma's schedule per shape."""
    from .. import _C
    from ..device import device_count, device_info

    machine = Machine.from_device(device_info() if device_count() else None, torch is not None)
    return plan_sweep(machine, _C._attention_auto_choice, dtype=args.dtype, head_dim=args.head_dim,
                      causal=args.causal, batch=args.batch, heads=args.heads,
                      max_time=args.max_time, seqs=args.seq_lengths, impls=args.impls)
