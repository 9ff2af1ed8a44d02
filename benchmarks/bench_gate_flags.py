"""Error rates of the gates at their default settings: false alarms on unchanged code, and
detection of a planted slowdown, for a stored baseline and for A/B in one run.

Every verdict comes from the public API and the gates' one rule (gpuprofile/bench/gate.py):
  stored, one run   gp.benchmark(fn) twice, then gp.compare: what `gpuprofile compare` does with
                    two `gpuprofile bench --json` files (issue 44's trap: one run a side)
  stored, rounds    the same with rounds=R on each side (bench --rounds R, the CI recipe)
  A/B               gp.benchmark({"A": fn, "B": fn2}): interleaved rounds, paired ratios
A pair of unchanged code times the same callable on both sides: a 'slower' or 'faster' verdict is
a false alarm ('inconclusive' is not: it passes the gate). A planted slowdown makes B's work
longer by exactly that fraction: on the host clock a busy-wait of 20 us against 20 us x (1 + p)
(perf_counter, so the planted effect is exact and only the noise is the machine's); on the GPU
the bundled spin kernel (gp.kernels.spin) for a short (5 us) and a long (500 us) duration. On
the host a second workload, issue 44's `sum(range(200))`, whose median drifts between runs on a
shared machine, is measured for false alarms only.
For the stored baseline the planted changes run up the --changes ladder, giving the smallest
change caught in >= 95 % of pairs.

Usage:
  python benchmarks/bench_gate_flags.py [--pairs 200] [--detect-pairs 50] [--rounds 3]
      [--changes 5,10,20,30] [--output gate_flags.json]          # host clock (CPU machine)
  python benchmarks/bench_gate_flags.py --gpu [--pairs 50] ...    # CUPTI clock, planted 5 %
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone

import gpuprofile as gp

# Short measurements: the error rates come from many pairs, and each round only needs enough
# samples for its median (the rounds, not their length, see the spread between runs).
OPTIONS = dict(warmup=0.005, min_time=0.01, max_time=0.03, max_noise=0.005)
HOST_BASE_US = 20.0
GPU_KERNELS_NS = {"short": 5_000, "long": 500_000}


def busy_wait(us: float) -> None:
    """Hold the CPU for `us` microseconds (perf_counter): an exactly planted host-clock time."""
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def host_pair(change_pct: float):
    """(A, B) callables: B's work longer by change_pct %."""
    a = lambda: busy_wait(HOST_BASE_US)  # noqa: E731
    b = lambda: busy_wait(HOST_BASE_US * (1 + change_pct / 100))  # noqa: E731
    return a, b


def python_call_pair(change_pct: float):
    """(A, B): issue 44's statement, a short Python call whose median drifts between runs on a
    shared machine (unchanged pairs only: its cost cannot be planted exactly)."""
    if change_pct:
        raise ValueError("the Python-call workload has no planted change")
    return (lambda: sum(range(200))), (lambda: sum(range(200)))


def gpu_pair(ns: int, change_pct: float):
    a = lambda: gp.kernels.spin(ns)  # noqa: E731
    b = lambda: gp.kernels.spin(round(ns * (1 + change_pct / 100)))  # noqa: E731
    return a, b


def stored_verdict(a, b, rounds: int, clock: str) -> str:
    """The verdict of `gpuprofile compare A.json B.json` on two separate runs of R rounds."""
    ra = gp.benchmark(a, clock=clock, rounds=rounds, name="x", **OPTIONS)
    rb = gp.benchmark(b, clock=clock, rounds=rounds, name="x", **OPTIONS)
    return gp.compare({"A": ra, "B": rb}, baseline="A").rows[1].verdict


def ab_verdict(a, b, rounds: int, clock: str) -> str:
    """The verdict of A/B in one run (gp.benchmark of both, interleaved rounds)."""
    return gp.benchmark({"A": a, "B": b}, clock=clock, rounds=rounds, **OPTIONS).verdict


def tally(verdicts: list) -> dict:
    """{'pairs', counts per verdict, 'flagged' (slower or faster: a false alarm on unchanged
    code) and 'detected' (slower) rates} of a list of verdicts."""
    n = len(verdicts)
    counts = {v: verdicts.count(v) for v in ("slower", "faster", "same", "inconclusive", "unknown")}
    return {"pairs": n, **counts,
            "flagged": (counts["slower"] + counts["faster"]) / n if n else float("nan"),
            "detected": counts["slower"] / n if n else float("nan")}


def smallest_caught(by_change: dict, rate: float = 0.95):
    """The smallest planted change (%) whose pairs were called slower in >= rate of them."""
    caught = [float(c) for c, t in by_change.items() if t["detected"] >= rate]
    return min(caught) if caught else None


def arms(pair, clock: str, pairs: int, detect_pairs: int, rounds: int, ab_rounds: int, changes,
         planted: float) -> dict:
    """Every arm for one workload: `pair(change_pct)` gives its (A, B) callables."""
    out: dict = {}

    def run(name, verdict_of, n, change, r):
        t0 = time.perf_counter()
        a, b = pair(change)
        out[name] = {**tally([verdict_of(a, b, r, clock) for _ in range(n)]), "change_pct": change,
                     "rounds": r, "seconds": round(time.perf_counter() - t0, 1)}
        print(f"  {name}: {out[name]}", file=sys.stderr, flush=True)

    run("stored, one run, unchanged", stored_verdict, pairs, 0.0, 1)
    run(f"stored, rounds={rounds}, unchanged", stored_verdict, pairs, 0.0, rounds)
    run("A/B, unchanged", ab_verdict, pairs, 0.0, ab_rounds)
    if planted is None:  # a workload for false alarms only
        return out
    run(f"A/B, planted {planted:g} %", ab_verdict, detect_pairs, planted, ab_rounds)
    ladder = {}
    for change in changes:
        name = f"stored, rounds={rounds}, planted {change:g} %"
        run(name, stored_verdict, detect_pairs, change, rounds)
        ladder[f"{change:g}"] = out[name]
    out["stored smallest change caught in 95 %"] = smallest_caught(ladder)
    return out


def table(results: dict) -> str:
    lines = [f"gate error rates at default settings (threshold {results['threshold_pct']:g} %), "
             f"{results['date']}, {results['machine']['cpu']}"]
    for workload, w in results["workloads"].items():
        lines.append(f"\n{workload}:")
        for name, t in w.items():
            if not isinstance(t, dict):
                lines.append(f"  {name}: {t if t is not None else 'none of the ladder'} %")
                continue
            rate = "false alarms" if t["change_pct"] == 0 else "detected"
            value = t["flagged"] if t["change_pct"] == 0 else t["detected"]
            lines.append(f"  {name}: {rate} {100 * value:.1f} % of {t['pairs']} (slower "
                         f"{t['slower']}, faster {t['faster']}, same {t['same']}, inconclusive "
                         f"{t['inconclusive']}), {t['seconds']:.0f} s")
    return "\n".join(lines)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu", action="store_true", help="the GPU mode: CUPTI clock, spin kernels")
    p.add_argument("--pairs", type=int, default=None, help="unchanged pairs per arm (200 host, 50 GPU)")
    p.add_argument("--detect-pairs", type=int, default=50, help="pairs per planted change")
    p.add_argument("--rounds", type=int, default=3, help="rounds a side for the stored baseline")
    p.add_argument("--ab-rounds", type=int, default=10, help="interleaved rounds of one A/B run")
    p.add_argument("--changes", default=None,
                   help="planted changes (%%) for the stored baseline (host 3,5,7,10,20; GPU 2,5,7,10)")
    p.add_argument("--output", default=None, help="write the results as JSON")
    args = p.parse_args(argv)
    pairs = args.pairs or (50 if args.gpu else 200)
    changes = [float(x) for x in (args.changes or ("2,5,7,10" if args.gpu else "3,5,7,10,20")).split(",")]
    if pairs < 1 or args.detect_pairs < 1 or args.rounds < 1 or args.ab_rounds < 2:
        p.error("need --pairs, --detect-pairs, --rounds >= 1 and --ab-rounds >= 2")
    if args.gpu and gp.device_count() == 0:
        p.error("--gpu needs a CUDA device")
    from gpuprofile.bench.gate import DEFAULT_THRESHOLD_PCT

    results = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"host": platform.node(), "cpu": _cpu_name(), "cores": os.cpu_count(),
                    "python": platform.python_version(),
                    "device": gp.device_info(0).name if gp.device_count() > 0 else None},
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "threshold_pct": DEFAULT_THRESHOLD_PCT, "options": OPTIONS, "gpuprofile": gp.__version__,
        "workloads": {},
    }
    if args.gpu:
        workloads = {f"GPU spin {name} ({ns / 1e3:g} us), auto clock":
                     (lambda c, ns=ns: gpu_pair(ns, c), "auto", 5.0)
                     for name, ns in GPU_KERNELS_NS.items()}
    else:
        workloads = {f"host busy-wait {HOST_BASE_US:g} us, host clock": (host_pair, "host", 10.0),
                     "python call sum(range(200)), host clock": (python_call_pair, "host", None)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short noisy rounds are what is measured
        for name, (pair, clock, planted) in workloads.items():
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            results["workloads"][name] = arms(pair, clock, pairs, args.detect_pairs, args.rounds,
                                              args.ab_rounds, changes, planted)
    print(table(results))
    if args.output:
        from gpuprofile._files import write_json

        write_json(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
