"""What the autograd marks of python_stacks cost, on a CPU (no GPU needed; needs torch).

Each launch noted by python_stacks also reads torch's autograd state (csrc/tracing/autograd.c):
in the forward the thread's next sequence number, in the backward the node being run. This
times one note (gpuprofile._C._testing.pylines_capture: the frame capture and the note, as the launch
callback makes them) with the marks off and on, in blocks that alternate, in the forward and
inside a backward node's pre-hook, and the once-per-process calibration. Prints medians.

    python benchmarks/bench_autograd_marks.py [--notes 200000] [--blocks 7]
"""

from __future__ import annotations

import argparse
import statistics
import time


def _per_note_ns(capture, n: int) -> float:
    t = time.perf_counter()
    for i in range(n):
        capture(i + 1)
    return (time.perf_counter() - t) / n * 1e9


def _alternate(n: int, blocks: int, words) -> dict:
    from gpuprofile import _C

    out: dict = {"off": [], "on": []}
    for _ in range(blocks):
        for mode in ("off", "on"):
            if mode == "on":
                _C._autograd_enable(*words)
            else:
                _C._autograd_disable()
            out[mode].append(_per_note_ns(_C._testing.pylines_capture, n))
            _C._pylines_take()  # the notes go, as a profile's take does
    _C._autograd_disable()
    return {k: statistics.median(v) for k, v in out.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=200_000, help="notes per block")
    parser.add_argument("--blocks", type=int, default=7, help="blocks per mode")
    args = parser.parse_args(argv)
    import torch

    from gpuprofile import _C
    from gpuprofile.tracing import autograd_nodes, pylines

    t = time.perf_counter()
    why = autograd_nodes.calibrate()
    calibration_ms = (time.perf_counter() - t) * 1e3
    if why is not None:
        raise SystemExit(why)
    words = autograd_nodes._found[1]
    _C._pylines_reset(pylines.excluded_prefixes())
    rows = {"forward": _alternate(args.notes, args.blocks, words)}
    x = torch.ones(1, requires_grad=True)
    y = x * 2

    def in_backward(grad):
        rows["backward node"] = _alternate(args.notes, args.blocks, words)

    y.grad_fn.register_prehook(in_backward)
    y.sum().backward()
    print(f"torch {torch.__version__}; calibration {calibration_ms:.2f} ms (once per process)")
    print(f"{'where':<15} {'marks off ns':>13} {'marks on ns':>12} {'added ns':>9}")
    for where, r in rows.items():
        print(f"{where:<15} {r['off']:>13.1f} {r['on']:>12.1f} {r['on'] - r['off']:>9.1f}")


if __name__ == "__main__":
    main()
