"""benchmark() accuracy before and after torch.profiler ran in the same process.

A Triton kernel (~17 µs on an H100) is timed by gp.benchmark in a fresh process, then again after
torch.profiler has run and stopped once (the usual notebook sequence); CUPTI truth is the median
duration of the same kernel in a gpuprofile trace. Each case runs in its own process: default
(gpuprofile takes CUPTI over from the idle Kineto subscriber) and GPUPROFILE_CUPTI_TAKEOVER=0
(the behaviour before: CUDA events, +~3 µs).

    python benchmarks/bench_coexist.py --json coexist.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, numpy as np, torch, triton, triton.language as tl, gpuprofile as gp

@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + i, mask=i < n)
    tl.store(x_ptr + i, v * 1.0001, mask=i < n)

n = 1 << 24
x = torch.ones(n, device="cuda")
def run():
    scale[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024)
run(); torch.cuda.synchronize()

def measure():
    r = gp.benchmark(run, mode="hot")
    return {"median_us": r.median_ms * 1e3, "clock": r.clock, "note": r.clock_note}

out = {"fresh": measure()}
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
    run(); torch.cuda.synchronize()
out["after_torch_profiler"] = measure()
try:
    with gp.profile(memory=False) as p:
        for _ in range(200):
            run()
    out["truth_us"] = float(np.median(p.kernels["duration_ns"])) / 1e3
except gp.CuptiError as e:
    out["truth_us"] = None
out["subscriber"] = gp._C._subscriber_state()
print(json.dumps(out))
"""


def child(env_extra: dict) -> dict:
    env = dict(os.environ, **env_extra)
    with tempfile.TemporaryDirectory() as tmp:  # Triton's @jit needs its source in a file
        script = os.path.join(tmp, "coexist_child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        out = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env,
                             timeout=600)
    if out.returncode:
        raise SystemExit(out.stdout + out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import gpuprofile as gp

    res = {"device": gp.device_info().name, "date": time.strftime("%Y-%m-%d"),
           "takeover": child({}), "no_takeover": child({"GPUPROFILE_CUPTI_TAKEOVER": "0"})}
    truth = res["takeover"]["truth_us"]
    for case in ("takeover", "no_takeover"):
        r = res[case]
        for when in ("fresh", "after_torch_profiler"):
            m = r[when]
            err = 100 * (m["median_us"] / truth - 1)
            print(f"{case:12s} {when:22s} {m['median_us']:8.3f} us  clock {m['clock']:5s}  "
                  f"{err:+6.2f} % vs CUPTI truth {truth:.3f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
