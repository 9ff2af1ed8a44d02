"""Checking gpuprofile's counters against Nsight Compute: the ncu command line that collects the
same metrics in the same cache and clock state, a parser of its CSV, and the comparison. Pure
functions (tested on a fixed CSV on any machine); tests/counters/test_ncu_agreement_gpu.py and
benchmarks/bench_ncu_agreement.py run them on a GPU.

What agrees with what: gpuprofile.metrics(cache_control="all") flushes L2 before each counted
kernel, as `ncu --cache-control all` (its default) flushes every cache before each kernel replay
pass; neither locks clocks (`--clock-control none` here; ncu's default locks them to base).
With cache_control="none" the comparison is against `ncu --cache-control none --replay-mode
application`: both then rerun the whole program per pass, so each kernel finds the caches its
predecessors left (ncu's kernel replay would instead restore memory between passes, leaving the
caches as that restore left them).
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil

from .metric_sets import DRAM_READ, DRAM_WRITE, DURATION, SETS

# Compared with ncu: every metric of the SOL set, and the bytes moved at DRAM and L2.
AGREEMENT_METRICS = tuple(dict.fromkeys((*SETS["sol"].metrics, DRAM_READ, DRAM_WRITE,
                                         "lts__t_bytes.sum")))
TOLERANCE = 0.03  # relative, every metric but the duration (within the run-to-run noise)
# A percentage of peak below 5 % agrees within this many points: 3 % of 1 % is below what one
# extra microsecond of a short kernel moves it.
PERCENT_FLOOR = 0.5

# ncu's replay mode for each cache_control (result.CACHE_CONTROL; see the module docstring).
REPLAY = {"all": "kernel", "none": "application"}

# ncu prints values in scaled units unless --print-units base; both are read back to base units.
_SCALE = {
    "byte": ("byte", 1.0), "Kbyte": ("byte", 1e3), "Mbyte": ("byte", 1e6),
    "Gbyte": ("byte", 1e9), "Tbyte": ("byte", 1e12),
    "nsecond": ("nsecond", 1.0), "usecond": ("nsecond", 1e3), "msecond": ("nsecond", 1e6),
    "second": ("nsecond", 1e9),
    "cycle": ("cycle", 1.0), "Kcycle": ("cycle", 1e3), "Mcycle": ("cycle", 1e6),
    "Gcycle": ("cycle", 1e9),
    "hz": ("hz", 1.0), "Khz": ("hz", 1e3), "Mhz": ("hz", 1e6), "Ghz": ("hz", 1e9),
    "cycle/nsecond": ("hz", 1e9), "cycle/usecond": ("hz", 1e6), "cycle/second": ("hz", 1.0),
}


def find_ncu() -> str | None:
    """The ncu executable: on PATH, else in the CUDA toolkit's bin/."""
    found = shutil.which("ncu")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "ncu"), os.X_OK):
            return os.path.join(root, "bin", "ncu")
    return None


def ncu_command(metrics, cache_control: str, argv: list, nvtx_range: str | None = None) -> list:
    """The ncu argv that collects `metrics` from `argv` (a program and its arguments) in the
    state gpuprofile.metrics(cache_control=...) measures, as CSV on stdout. With nvtx_range,
    only the kernels inside that NVTX push/pop range are profiled."""
    if cache_control not in REPLAY:
        raise ValueError(f"cache_control must be one of {sorted(REPLAY)}, got {cache_control!r}")
    cmd = ["ncu", "--clock-control", "none", "--cache-control", cache_control, "--replay-mode",
           REPLAY[cache_control], "--metrics", ",".join(metrics), "--csv", "--print-units",
           "base"]
    if nvtx_range is not None:
        cmd += ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    return cmd + list(argv)


def _number(text: str, unit: str) -> float:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return math.nan
    return float(text) * _SCALE.get(unit, (unit, 1.0))[1]


def parse_ncu_csv(text: str) -> list:
    """Kernels from `ncu --csv` output (the details page: one row per kernel and metric), in
    profiling order: [{"id": int, "name": str, "values": {metric: float in base units},
    "units": {metric: base unit}}]. Lines before the CSV header (==PROF== lines, the program's
    own output) are skipped. ValueError when there is no CSV or a column is missing."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise ValueError("no ncu CSV in the text (expected a header line starting with \"ID\",)")
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    needed = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
    missing = [c for c in needed if rows and c not in rows[0]]
    if missing:
        raise ValueError(f"ncu CSV without the column(s) {missing}")
    kernels: dict = {}
    for row in rows:
        if row.get("ID") is None or row.get("Metric Value") is None:
            continue  # a short line (output interleaved after the CSV)
        k = kernels.setdefault(int(row["ID"]), {"id": int(row["ID"]), "name": row["Kernel Name"],
                                                "values": {}, "units": {}})
        unit = row["Metric Unit"]
        k["values"][row["Metric Name"]] = _number(row["Metric Value"], unit)
        k["units"][row["Metric Name"]] = _SCALE.get(unit, (unit, 1.0))[0]
    return [kernels[i] for i in sorted(kernels)]


def relative_difference(ours: float, theirs: float) -> float:
    """(ours - theirs) / |theirs|; 0 when both are 0, NaN when either is not finite."""
    if not (math.isfinite(ours) and math.isfinite(theirs)):
        return math.nan
    if theirs == 0:
        return 0.0 if ours == 0 else math.inf
    return (ours - theirs) / abs(theirs)


def compare(ours: list, theirs: list, metrics=AGREEMENT_METRICS, tolerance: float = TOLERANCE,
            time_tolerance: float = TOLERANCE) -> list:
    """Rows comparing kernels in launch order: `ours` are gpuprofile's KernelMetrics (or dicts
    with "name" and "values"), `theirs` parse_ncu_csv()'s kernels. Each row: kernel index, name,
    metric, ours, ncu, relative difference, and ok (within `tolerance`, `time_tolerance` for the
    duration, PERCENT_FLOOR points for a percentage below 5; a non-finite value is never ok).
    ValueError when the kernel counts differ."""
    if len(ours) != len(theirs):
        raise ValueError(f"gpuprofile counted {len(ours)} kernels and ncu {len(theirs)}: "
                         "they did not profile the same launches")
    rows = []
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        values = a["values"] if isinstance(a, dict) else a.values
        name = a["name"] if isinstance(a, dict) else a.name
        for m in metrics:
            x, y = values.get(m, math.nan), b["values"].get(m, math.nan)
            diff = relative_difference(x, y)
            limit = time_tolerance if m == DURATION else tolerance
            ok = abs(diff) <= limit or (".pct" in m and abs(y) < 5 and abs(x - y) <= PERCENT_FLOOR)
            rows.append({"kernel": i, "name": name, "metric": m, "gpuprofile": x, "ncu": y,
                         "rel_diff": diff, "ok": bool(ok)})
    return rows
