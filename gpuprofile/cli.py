"""Command line: `python -m gpuprofile info` (later capabilities add subcommands)."""

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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gpuprofile", description="GPU measurements from Python.")
    sub = parser.add_subparsers(dest="command", required=True)
    info_p = sub.add_parser("info", help="devices and what gpuprofile can do on this machine")
    info_p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.command == "info":
        info = collect_info()
        if args.json:
            print(json.dumps(info, indent=2))
        else:
            print_info(info)
        return 0
    return 2
