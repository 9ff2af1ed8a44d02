"""Command line: `python -m gpuprofile SUBCOMMAND`; `gpuprofile --help` lists them, docs/cli.md
explains them. This module holds `info` and `run` and the dispatch; each feature's subcommands
live with the feature (gpuprofile/bench/cli.py, counters/cli.py, kernels/cli.py, tracing/cli.py)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

from . import _C, __version__
from ._files import write_json
from ._format import text_table
from ._script import run_script


def _counter_permission() -> tuple[bool | None, str]:
    """Whether this process may read GPU performance counters, and why."""
    try:
        with open("/proc/driver/nvidia/params") as f:
            params = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return None, "unknown (cannot read /proc/driver/nvidia/params)"
    admin_only = params.get("RmProfilingAdminOnly", "").strip()
    if admin_only == "0":
        return True, "permitted (RmProfilingAdminOnly=0)"
    if os.geteuid() == 0:
        return True, "permitted (running as root)"
    return False, ("not permitted: counters are restricted to admin users "
                   "(run as root or set NVreg_RestrictProfilingToAdminUsers=0)")


def collect_info() -> dict:
    from .device import device_info

    status = _C._cuda_status()
    info = {
        "gpuprofile": __version__,
        "built_with_cuda": _C.build_cuda_version,
        "build_cuda_home": _C.build_cuda_home,
        "driver_version": status["driver_version"],
        "device_count": status["device_count"],
        "no_device_reason": status["reason"] or None,
        "devices": [],
        "cupti": _C._cupti_info(),
    }
    for i in range(status["device_count"]):
        info["devices"].append(device_info(i).to_dict())
    if status["device_count"]:
        ok, why = _counter_permission()
        info["hardware_counters"] = {"permitted": ok, "detail": why}
    else:
        info["hardware_counters"] = {"permitted": None, "detail": "no device"}
    return info


def _version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}" if v else "none"


def print_info(info: dict, out=sys.stdout) -> None:
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"gpuprofile {info['gpuprofile']} (built with CUDA {_version(info['built_with_cuda'])}"
      f" at {info['build_cuda_home'] or '?'})")
    p(f"CUDA driver: {_version(info['driver_version'])}")
    if not info["devices"]:
        p(f"GPU: none found ({info['no_device_reason']}).")
        p("  Regions and benchmark() time host code with the host clock; GPU-only calls raise NoDeviceError.")
    else:
        rows = []
        for d in info["devices"]:
            rows.append([d["index"], d["name"], "{}.{}".format(*d["compute_capability"]), d["sm_count"],
                         d["total_memory_bytes"] / 2**30, d["l2_cache_bytes"] / 2**20, d["sm_clock_mhz"],
                         d["peak_dram_gbps"], d["peak_fp32_tflops"], d["peak_fp16_tensor_tflops"]])
        p(text_table(["#", "name", "cc", "SMs", "mem GiB", "L2 MiB", "max SM MHz", "DRAM GB/s",
                      "FP32 TF", "FP16 TC TF"], rows))
    c = info["cupti"]
    if c["found"]:
        p(f"CUPTI: {c['path']} (API {c['version']}, {c['how']})")
    else:
        first = (c.get("error") or "").splitlines()[0]
        p(f"CUPTI: not available: {first}")
    p(f"Hardware counters: {info['hardware_counters']['detail']}")


RUN_USAGE = """usage: gpuprofile run [options] script.py [script arguments]

Run a Python script under gpuprofile.profile() (CUPTI tracing of kernels, copies, sets and device
memory), then print the summary and write the outputs asked for. gpuprofile's options come before
the script's name; everything after it goes to the script, as with python -m cProfile, nsys and ncu
(`--` before the script's name ends the options, for a name that starts with '-').

options:
  --trace PATH    write a Chrome trace (Perfetto, chrome://tracing); gzip if PATH ends in .gz
  --json PATH     write the profile's to_dict() (counts, summary, clock) as JSON
  --python-stacks MODE
                  'line' or 'stack': note the Python line (and stack) that launched each kernel,
                  copy and set, and print GPU time per line after the summary
  --folded PATH   write GPU time per Python stack as collapsed stacks (speedscope,
                  flamegraph.pl); implies --python-stacks stack
  --no-memory     do not record device allocations
  --no-regions    do not attribute work to gpuprofile regions (less host cost per CUDA call)
  --no-details    leave per-kernel launch details out of the trace (a smaller file)
  --quiet         do not print the summary

examples:
  gpuprofile run --trace train.json.gz train.py --epochs 1
  gpuprofile run --json summary.json train.py --epochs 1 --json model.json   # the 2nd --json is train.py's
  gpuprofile run --python-stacks line train.py    # which lines of train.py the GPU time is from

The summary goes to stderr, so the script's own output keeps stdout."""

_RUN_VALUE_OPTIONS = ("--trace", "--json", "--python-stacks", "--folded")
_LINES_SHOWN = 20
_RUN_FLAGS = {"--no-memory": "memory", "--no-regions": "regions", "--no-details": "details",
              "--quiet": "summary"}


def parse_run_args(argv) -> tuple:
    """(options, script, script_args) from `gpuprofile run` arguments. Raises ValueError with a
    message for the user."""
    opts = {"trace": None, "json": None, "python-stacks": None, "folded": None, "memory": True,
            "regions": True, "details": True, "summary": True}
    script, rest = None, []
    argv = list(argv)
    k = 0
    while k < len(argv):
        arg = argv[k]
        if arg == "--":  # the script's name follows, whatever it looks like
            if k + 1 == len(argv):
                raise ValueError("no script given after '--'")
            script, rest = argv[k + 1], argv[k + 2:]
            break
        name, eq, value = arg.partition("=")
        if name in _RUN_VALUE_OPTIONS:
            if not eq:
                if k + 1 == len(argv):
                    raise ValueError(f"{name} needs a value")
                k += 1
                value = argv[k]
            opts[name[2:]] = value
        elif arg in _RUN_FLAGS:
            opts[_RUN_FLAGS[arg]] = False
        elif arg.startswith("-"):
            raise ValueError(f"unknown option {arg!r} (gpuprofile's options go before the script)")
        else:  # the script: everything after it is the script's, as cProfile, nsys and ncu do
            script, rest = arg, argv[k + 1:]
            break
        k += 1
    if script is None:
        raise ValueError("no script given")
    if opts["python-stacks"] not in (None, "line", "stack"):
        raise ValueError(f"--python-stacks takes 'line' or 'stack', not {opts['python-stacks']!r}")
    if opts["folded"] and opts["python-stacks"] is None:
        opts["python-stacks"] = "stack"
    from .tracing.options import ProfileOptions

    opts["profile"] = ProfileOptions(memory=opts["memory"], regions=opts["regions"],
                                     python_stacks=opts["python-stacks"])
    return opts, script, rest


def run(argv) -> int:
    try:
        opts, script, args = parse_run_args(argv)
    except ValueError as exc:
        print(f"{RUN_USAGE}\n\ngpuprofile run: error: {exc}", file=sys.stderr)
        return 2
    if not os.path.isfile(script):
        print(f"gpuprofile run: error: no such script: {script}", file=sys.stderr)
        return 2
    from .tracing.profile import profile

    p = profile(opts["profile"])
    try:
        p.start()
    except _C.GpuProfileError as exc:
        print(f"gpuprofile run: cannot trace: {exc}", file=sys.stderr)
        return 2
    code = run_script(script, args)
    try:
        p.stop()
    except KeyboardInterrupt:
        code = code or 130
    except _C.GpuProfileError as exc:
        print(f"gpuprofile run: stopping the profile: {exc}", file=sys.stderr)
        code = code or 2
    if opts["summary"]:
        print(p.summary(), file=sys.stderr)
        if opts["python-stacks"] and p.python_lines is not None:
            _print_lines(p)
    try:
        if opts["folded"]:
            from .distributed import rank_path

            written = p.export_collapsed_stacks(rank_path(opts["folded"]))
            print(f"gpuprofile run: collapsed stacks written to {written}", file=sys.stderr)
        if opts["trace"]:  # under torchrun each rank writes its own file (trace.rank1.json.gz)
            written = p.export_chrome_trace(opts["trace"], details=opts["details"])
            print(f"gpuprofile run: trace written to {written}", file=sys.stderr)
        if opts["json"]:
            from .distributed import rank_path

            write_json(rank_path(opts["json"]), p.to_dict())
    except (OSError, _C.GpuProfileError) as exc:
        print(f"gpuprofile run: {exc}", file=sys.stderr)
        code = code or 2
    return code


def _print_lines(p) -> None:
    from .tracing.pylines import LineTable

    table = p.by_line()
    shown = LineTable(table.rows[:_LINES_SHOWN], table.per, table.total_ms)
    print(shown, file=sys.stderr)
    if len(table.rows) > _LINES_SHOWN:
        print(f"({len(table.rows) - _LINES_SHOWN} more lines: Profile.by_line() has them all)",
              file=sys.stderr)


EPILOG = """\
examples:
  gpuprofile info                                   # what this machine can measure
  gpuprofile attention --plots plots/               # the attention demo: table and plots
  gpuprofile bench -s "import numpy as np; a = np.ones(10**6)" "a.sum()"
  gpuprofile compare before.json after.json         # exit 1 on a significant slow-down
  gpuprofile metrics --set sol train.py             # hardware counters of a script's kernels
  gpuprofile stalls --kernel flash train.py         # where those kernels' warps wait
  gpuprofile run --trace t.json.gz train.py         # kernel/copy/memory trace of a script
  gpuprofile profile-kernels --seq-len 512 --impl flash --trace t.json
  gpuprofile merge trace.rank*.json.gz -o merged.json.gz   # one trace of a distributed job

`gpuprofile SUBCOMMAND --help` shows each one's options and an example. Results go to stdout,
diagnostics to stderr. Exit status: 1 only when the measurement says no (a regression beyond
compare's gate, a kernel's wrong output); 2 for any error (bad arguments or input, no device, an
output that cannot be written); run and the script runners pass a failing script's status on.
"""


def build_parser() -> argparse.ArgumentParser:
    from .bench import cli as bench_cli
    from .counters import cli as counters_cli
    from .kernels import cli as kernels_cli
    from .tracing import cli as tracing_cli

    formatter = functools.partial(argparse.RawDescriptionHelpFormatter, max_help_position=32)
    parser = argparse.ArgumentParser(prog="gpuprofile", description="GPU measurements from Python.",
                                     epilog=EPILOG, formatter_class=formatter)
    parser.add_argument("--version", action="version", version=f"gpuprofile {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    info_p = sub.add_parser("info", help="devices and what gpuprofile can do on this machine",
                            description="Devices, CUPTI and hardware-counter permission here.",
                            epilog="example:\n  gpuprofile info --json > machine.json",
                            formatter_class=formatter)
    info_p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info_p.set_defaults(func=info_main)
    sub.add_parser("run", help="run a script under gpuprofile.profile() (see `run --help`)",
                   add_help=False)
    bench_cli.add_parsers(sub, formatter)
    counters_cli.add_parsers(sub, formatter)
    kernels_cli.add_parsers(sub, formatter)
    tracing_cli.add_parsers(sub, formatter)
    return parser


def info_main(args) -> int:
    info = collect_info()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print_info(info)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:
        if argv[1:2] in (["-h"], ["--help"]):
            print(RUN_USAGE)
            return 0
        return run(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)
