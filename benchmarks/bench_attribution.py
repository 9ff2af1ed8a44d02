"""Region attribution on a real training step: share of kernels attributed to the right region.

A 4-layer GPT-2-sized decoder (d=768, 12 heads, seq 256, batch 8, vocab 8192; built here, nothing
downloaded), one AdamW step profiled with forward / backward / optimizer regions. The right
region of each kernel is known by construction: the same step run phase by phase (forward alone,
forward+backward) gives each phase's kernel count. Also the host cost of a region's enter+exit
while tracing with attribution (an external id pushed and popped, the region's CUPTI stream id
looked up) against tracing without it and against no tracing, interleaved over rounds.

    python benchmarks/bench_attribution.py --json attribution.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import numpy as np
import torch

import gpuprofile as gp
from gpuprofile.bench.ab import rotation  # A/B's rotated order (bench/ab.py)


def model(layers=4, d=768, heads=12, vocab=8192):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                             norm_first=True)
    body = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    return torch.nn.Sequential(torch.nn.Embedding(vocab, d), body, torch.nn.Linear(d, vocab)).cuda()


def step(m, opt, x, y, phases):
    mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1], device="cuda")
    with gp.region("forward"):
        h = m[0](x)
        h = m[1](h, mask=mask, is_causal=True)
        loss = torch.nn.functional.cross_entropy(m[2](h).flatten(0, 1), y.flatten())
    if "backward" in phases:
        with gp.region("backward"):
            loss.backward()
    if "optimizer" in phases:
        with gp.region("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)


def attribution(rounds: int, stream: bool) -> dict:
    m = model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    x = torch.randint(0, 8192, (8, 256), device="cuda")
    y = torch.randint(0, 8192, (8, 256), device="cuda")
    for _ in range(3):
        step(m, opt, x, y, ("forward", "backward", "optimizer"))
    torch.cuda.synchronize()
    rows = []
    for _ in range(rounds):
        counts = []
        for phases in (("forward",), ("forward", "backward"), ("forward", "backward", "optimizer")):
            with gp.profile(memory=False, stream_attribution=stream) as p:
                step(m, opt, x, y, phases)
            counts.append(p)
            opt.zero_grad(set_to_none=True)  # every run starts without gradients
        full = counts[-1].kernels
        fwd, fwd_bwd = len(counts[0].kernels), len(counts[1].kernels)
        truth = {"forward": fwd, "backward": fwd_bwd - fwd, "optimizer": len(full) - fwd_bwd}
        got = {r: int((full["region"] == r).sum()) for r in truth}
        rows.append({
            "kernels": len(full), "truth": truth, "attributed": got,
            "unattributed": int((full["region"] == "").sum()),
            "by_rule": {rule or "none": int((full["attribution"] == rule).sum())
                        for rule in ("launch", "stream", "")},
            "right_region_share": sum(min(got[r], truth[r]) for r in truth) / len(full),
        })
    return {"rounds": rows}


def region_cost(n: int, rounds: int) -> dict:
    """Host ns per region enter+exit while a profile traces, with and without attribution (on the
    default stream and on a torch stream), and without a profile."""
    side = torch.cuda.Stream()
    cases = (("attribution", True, None), ("attribution_torch_stream", True, side),
             ("no_attribution", False, None), ("not_tracing", None, None))
    out = {key: [] for key, _, _ in cases}
    for i in range(rounds):
        for key, regions, stream in rotation(cases, i):  # no case always first or last
            r = gp.region("r", stream=stream)
            with (gp.profile(memory=False, regions=regions) if regions is not None
                  else contextlib.nullcontext()):
                t0 = time.perf_counter_ns()
                for _ in range(n):
                    with r:
                        pass
                t1 = time.perf_counter_ns()
            out[key].append((t1 - t0) / n)
            torch.cuda.synchronize()
            gp.reset()
    return {k: float(np.median(v)) for k, v in out.items()} | {"rounds": rounds, "n": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res = {"device": gp.device_info().name, "date": time.strftime("%Y-%m-%d"),
           "torch": torch.__version__, "attribution": attribution(args.rounds, True),
           "launch_rule_only": attribution(1, False),
           "region_enter_exit_ns": region_cost(20_000, 7)}
    for row in res["attribution"]["rounds"]:
        print(f"kernels {row['kernels']}: truth {row['truth']} attributed {row['attributed']} "
              f"unattributed {row['unattributed']} rules {row['by_rule']} "
              f"right region {100 * row['right_region_share']:.2f} %")
    row = res["launch_rule_only"]["rounds"][0]
    print(f"launch rule only: attributed {row['attributed']} of truth {row['truth']}")
    c = res["region_enter_exit_ns"]
    print(f"region enter+exit while tracing: {c['attribution']:.0f} ns with attribution "
          f"({c['attribution_torch_stream']:.0f} ns on a torch stream), {c['no_attribution']:.0f} ns "
          f"without; {c['not_tracing']:.0f} ns not tracing")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
