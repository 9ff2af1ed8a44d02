"""Command line: `python -m gpuprofile info | run script.py --trace t.json` (later capabilities
add subcommands)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import _C, __version__
from ._format import text_table


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
memory), then print the summary and write the outputs asked for. gpuprofile's options may come
before or after the script's name; arguments after `--` all go to the script.

options:
  --trace PATH    write a Chrome trace (Perfetto, chrome://tracing); gzip if PATH ends in .gz
  --json PATH     write the profile's to_dict() (counts, summary, clock) as JSON
  --no-memory     do not record device allocations
  --no-regions    do not attribute work to gpuprofile regions (less host cost per CUDA call)
  --no-details    leave per-kernel launch details out of the trace (a smaller file)
  --quiet         do not print the summary"""

_RUN_VALUE_OPTIONS = ("--trace", "--json")
_RUN_FLAGS = {"--no-memory": "memory", "--no-regions": "regions", "--no-details": "details",
              "--quiet": "summary"}


def parse_run_args(argv) -> tuple:
    """(options, script, script_args) from `gpuprofile run` arguments. Raises ValueError with a
    message for the user."""
    opts = {"trace": None, "json": None, "memory": True, "regions": True, "details": True,
            "summary": True}
    script, rest = None, []
    argv = list(argv)
    k = 0
    while k < len(argv):
        arg = argv[k]
        if arg == "--":
            rest += argv[k + 1:]
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
        elif script is None:
            if arg.startswith("-"):
                raise ValueError(f"unknown option {arg!r}")
            script = arg
        else:
            rest.append(arg)
        k += 1
    if script is None:
        raise ValueError("no script given")
    return opts, script, rest


def _run_script(script: str, args: list) -> int:
    """Runs `script` as __main__ with `args`; its exit code (tracebacks printed, not raised)."""
    import runpy
    import traceback

    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print("gpuprofile run: interrupted", file=sys.stderr)
        return 130
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


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

    p = profile(memory=opts["memory"], regions=opts["regions"])
    try:
        p.start()
    except _C.GpuProfileError as exc:
        print(f"gpuprofile run: cannot trace: {exc}", file=sys.stderr)
        return 1
    code = _run_script(script, args)
    try:
        p.stop()
    except KeyboardInterrupt:
        code = code or 130
    except _C.GpuProfileError as exc:
        print(f"gpuprofile run: stopping the profile: {exc}", file=sys.stderr)
        code = code or 1
    if opts["summary"]:
        print(p.summary(), file=sys.stderr)
    try:
        if opts["trace"]:
            p.export_chrome_trace(opts["trace"], details=opts["details"])
            print(f"gpuprofile run: trace written to {opts['trace']}", file=sys.stderr)
        if opts["json"]:
            with open(opts["json"], "w") as f:
                json.dump(p.to_dict(), f, indent=1)
    except OSError as exc:
        print(f"gpuprofile run: {exc}", file=sys.stderr)
        code = code or 1
    return code


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:
        if argv[1:2] in (["-h"], ["--help"]):
            print(RUN_USAGE)
            return 0
        return run(argv[1:])
    parser = argparse.ArgumentParser(prog="gpuprofile", description="GPU measurements from Python.")
    sub = parser.add_subparsers(dest="command", required=True)
    info_p = sub.add_parser("info", help="devices and what gpuprofile can do on this machine")
    info_p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub.add_parser("run", help="run a script under gpuprofile.profile() (see `run --help`)",
                   add_help=False)
    args = parser.parse_args(argv)
    if args.command == "info":
        info = collect_info()
        if args.json:
            print(json.dumps(info, indent=2))
        else:
            print_info(info)
        return 0
    return 2
