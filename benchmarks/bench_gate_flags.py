"""How often a regression gate flags unchanged code, with and without rounds.

For each workload, K pairs of identical measurements (A, then B right after it, same callable,
same options) are compared the way `gpuprofile compare --fail-slower PCT` compares two files: B
is flagged when the lower bound of its median ratio to A exceeds 1 + PCT / 100. Since the code
did not change, every flag is a false alarm. Three intervals are judged on the same machine:
  bare      the order-statistic interval of the median alone, as gpuprofile computed it before
            intervals respected the clock's resolution (recomputed here from the samples)
  one run   the interval benchmark() reports now (rounds=1): within one run, resolution included
  rounds    benchmark(rounds=R) on each side: the interval also spans the R rounds' medians
'bare' and 'one run' judge the same K pairs; 'rounds' measures K more pairs of R rounds each.

Workloads: a host-clock Python call (adaptive stopping, the pytest plugin's way, calls grouped
into >= 10 us samples), the same call timed one call per sample for a fixed count (the plugin's
pedantic mode, where a coarse clock quantises each sample), and with a CUDA device the bundled
5 us spin kernel (CUPTI clock where it works). Options are the plugin's defaults with shorter
times (--max-time) so the whole run stays within a few minutes.

Usage: python benchmarks/bench_gate_flags.py [--pairs 20] [--rounds 5] [--fail-slower 0,5]
           [--output gate_flags.json] [--host-only]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone

import gpuprofile as gp
from gpuprofile import _stats
from gpuprofile.bench.benchmark import run
from gpuprofile.bench.options import make_options

OPTIONS = dict(warmup=0.05, min_time=0.1, max_noise=0.005)


def host_call():
    return sum(range(200))


def bare_interval(r) -> tuple[float, float]:
    """The order-statistic interval of the median, without the clock's resolution."""
    return _stats.median_ci(r.samples)


def flagged(a_interval, b_interval, pct: float) -> str:
    """'slower' when B's median is above A's by more than pct % with 95 % confidence, 'faster'
    in the other direction, else 'same' (an undefined ratio counts as 'same')."""
    low, high = _stats.ratio_interval(*b_interval, *a_interval)
    if low > 1 + pct / 100:
        return "slower"
    if high < 1 / (1 + pct / 100):
        return "faster"
    return "same"


def tally(pairs, interval, thresholds) -> dict:
    """{pct: {'slower': n, 'faster': n, 'rate': (slower + faster) / pairs}} over (A, B) pairs."""
    out = {}
    for pct in thresholds:
        verdicts = [flagged(interval(a), interval(b), pct) for a, b in pairs]
        slower, faster = verdicts.count("slower"), verdicts.count("faster")
        out[f"{pct:g}"] = {"slower": slower, "faster": faster,
                           "rate": (slower + faster) / len(pairs) if pairs else math.nan}
    return out


def measure(workload, rounds: int, max_time: float):
    fn, args, extra = workload
    opts = make_options(**{**_defaults(max_time), **extra, "rounds": rounds})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # noisy runs are part of what is measured
        return run(fn, args, {}, opts)


def _defaults(max_time: float) -> dict:
    return dict(**OPTIONS, max_time=max_time)


def workloads(host_only: bool) -> dict:
    out = {
        "host call (adaptive)": (host_call, (), {"clock": "host"}),
        "host call (pedantic, 1 call per sample)": (
            host_call, (), {"clock": "host", "fixed": True, "min_iters": 2000, "max_iters": 2000,
                            "warmup_iters": 100}),
    }
    if not host_only and gp.device_count() > 0:
        out["gpu spin 5 us (cold)"] = (gp.kernels.spin, (5_000,), {})
    return out


def one_workload(workload, pairs: int, rounds: int, thresholds, max_time: float) -> dict:
    t0 = time.perf_counter()
    single = [(measure(workload, 1, max_time), measure(workload, 1, max_time)) for _ in range(pairs)]
    repeated = [(measure(workload, rounds, max_time), measure(workload, rounds, max_time))
                for _ in range(pairs)]
    ones = [r for pair in single for r in pair]
    return {
        "clock": ones[0].clock,
        "median_ms": _stats.summary([r.median_ms for r in ones])["median"],
        "medians_spread_pct": 100 * (max(r.median_ms for r in ones) / min(r.median_ms for r in ones) - 1),
        "rel_noise_pct_one_run": 100 * _stats.summary([r.rel_noise for r in ones])["median"],
        "rel_noise_pct_rounds": 100 * _stats.summary([r.rel_noise for p in repeated for r in p])["median"],
        "bare_zero_width": sum(1 for r in ones if bare_interval(r)[0] == bare_interval(r)[1]),
        "flags": {
            "bare": tally(single, bare_interval, thresholds),
            "one run": tally(single, lambda r: (r.ci_low_ms, r.ci_high_ms), thresholds),
            f"rounds={rounds}": tally(repeated, lambda r: (r.ci_low_ms, r.ci_high_ms), thresholds),
        },
        "seconds": time.perf_counter() - t0,
    }


def table(results: dict, pairs: int, thresholds) -> str:
    lines = [f"false flags of unchanged code, out of {pairs} pairs (slower + faster)"]
    for name, w in results["workloads"].items():
        lines.append(f"\n{name}: clock {w['clock']}, median {w['median_ms'] * 1e3:.4g} us, medians "
                     f"spread {w['medians_spread_pct']:.3g} %, noise ±{w['rel_noise_pct_one_run']:.3g} % "
                     f"(one run) / ±{w['rel_noise_pct_rounds']:.3g} % (rounds), zero-width bare "
                     f"intervals {w['bare_zero_width']}/{2 * pairs}, {w['seconds']:.0f} s")
        for pct in thresholds:
            cells = []
            for kind, by_pct in w["flags"].items():
                f = by_pct[f"{pct:g}"]
                cells.append(f"{kind}: {f['slower'] + f['faster']} ({f['slower']} slower)")
            lines.append(f"  --fail-slower {pct:g}: " + ", ".join(cells))
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
    p.add_argument("--pairs", type=int, default=20, help="pairs of measurements per workload")
    p.add_argument("--rounds", type=int, default=5, help="rounds per measurement in the rounds arm")
    p.add_argument("--fail-slower", default="0,5", help="thresholds in %%, comma-separated")
    p.add_argument("--max-time", type=float, default=0.5, help="seconds per round at most")
    p.add_argument("--host-only", action="store_true", help="skip the GPU workload")
    p.add_argument("--output", default=None, help="write the results as JSON")
    args = p.parse_args(argv)
    thresholds = [float(x) for x in args.fail_slower.split(",") if x.strip()]
    if args.pairs < 1 or args.rounds < 2 or not thresholds:
        p.error("need --pairs >= 1, --rounds >= 2 and at least one --fail-slower value")
    results = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"host": platform.node(), "cpu": _cpu_name(),
                    "cores": os.cpu_count(), "python": platform.python_version(),
                    "device": gp.device_info(0).name if gp.device_count() > 0 else None},
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "pairs": args.pairs, "rounds": args.rounds, "options": {**OPTIONS, "max_time": args.max_time},
        "gpuprofile": gp.__version__,
        "workloads": {},
    }
    for name, workload in workloads(args.host_only).items():
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        results["workloads"][name] = one_workload(workload, args.pairs, args.rounds, thresholds,
                                                  args.max_time)
    print(table(results, args.pairs, thresholds))
    if args.output:
        from gpuprofile._files import write_json

        write_json(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
