"""Measured ceilings and the roofline plot.

gpuprofile.ceilings() measures, once per device, what this GPU actually sustains with the
calibration workloads of kernels/harness/workloads.cu: DRAM bandwidth (a float4 copy of 1 GiB; read +
write bytes over the best time of 10 launches), the FP32 peak (independent FFMA chains) and the
tensor-core peak (fp16 -> fp32 mma.sync.m16n8k16). Measured at the clocks the GPU runs at (no
clock locking). On Hopper, wgmma kernels can exceed the mma.sync peak; the tensor ceiling is
then a floor, and the point says so by its efficiency above 1.

Results are cached in memory and in a JSON file keyed by device UUID:
$GPUPROFILE_CACHE_DIR, else $XDG_CACHE_HOME/gpuprofile, else ~/.cache/gpuprofile.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass

from .. import _C
from .._files import read_json, save_figure, write_json
from .._format import html_table, text_table

log = logging.getLogger("gpuprofile")

_VERSION = 1
_MEMORY: dict = {}


@dataclass(frozen=True)
class Ceilings:
    """What the device sustains, measured by gpuprofile's calibration kernels."""

    device_uuid: str
    device_name: str
    dram_bytes_per_s: float
    fp32_flops_per_s: float
    tensor_flops_per_s: float
    measured_at: str
    method: str

    def to_dict(self) -> dict:
        return asdict(self)

    def _rows(self):
        return [["DRAM bandwidth (copy) GB/s", self.dram_bytes_per_s / 1e9],
                ["FP32 FFMA TFLOP/s", self.fp32_flops_per_s / 1e12],
                ["tensor mma.sync fp16->fp32 TFLOP/s", self.tensor_flops_per_s / 1e12],
                ["measured at", self.measured_at]]

    def __repr__(self) -> str:
        return text_table(["ceiling", "value"], self._rows(), title=f"Ceilings: {self.device_name}")

    def _repr_html_(self) -> str:
        return html_table(["ceiling", "value"], self._rows(), title=f"Ceilings: {self.device_name}")


def cache_path() -> str:
    base = os.environ.get("GPUPROFILE_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "gpuprofile")
    return os.path.join(base, "ceilings.json")


def _read_file() -> dict:
    try:
        data = read_json(cache_path())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}
    return data.get("devices", {})


def _write_file(entry: Ceilings) -> None:
    path = cache_path()
    devices = _read_file()
    devices[entry.device_uuid] = entry.to_dict()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json(path, {"version": _VERSION, "devices": devices})
    except OSError as e:
        log.warning("gpuprofile: could not write the ceilings cache %s: %s", path, e)


def _best_rate(workload, amount: float, repeats: int) -> float:
    times_ms = workload.time(repeats=repeats)
    return amount / (min(times_ms) * 1e-3)


def _measure(uuid: str, name: str, total_memory: int) -> Ceilings:
    copy_bytes = min(1 << 30, (total_memory // 8) // 16 * 16)
    copy = _C.Workload("copy", bytes=copy_bytes)
    try:
        bw = _best_rate(copy, copy.info["bytes_read"] + copy.info["bytes_written"], 10)
    finally:
        copy.close()
    rates = []
    for kind in ("ffma", "mma"):
        w = _C.Workload(kind)
        try:
            rates.append(_best_rate(w, w.info["flops"], 10))
        finally:
            w.close()
    return Ceilings(
        device_uuid=uuid, device_name=name, dram_bytes_per_s=bw, fp32_flops_per_s=rates[0],
        tensor_flops_per_s=rates[1], measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        method=f"best of 10 launches: float4 copy of {copy_bytes} B each way; FFMA chains; "
               "mma.sync.m16n8k16 fp16->fp32",
    )


def ceilings(refresh: bool = False) -> Ceilings:
    """Measured DRAM bandwidth and FP32 / tensor peaks of the current device (cached per device
    UUID in memory and on disk; refresh=True measures again)."""
    from ..device import device_info

    info = device_info(_C._current_device())
    if not refresh:
        if info.uuid in _MEMORY:
            return _MEMORY[info.uuid]
        stored = _read_file().get(info.uuid)
        if stored is not None:
            try:
                _MEMORY[info.uuid] = Ceilings(**stored)
                return _MEMORY[info.uuid]
            except TypeError:
                pass  # written by another version: measure again
    entry = _measure(info.uuid, info.name, info.total_memory_bytes)
    _MEMORY[info.uuid] = entry
    _write_file(entry)
    return entry


def _points(results):
    """(label, flops, bytes, seconds) per kernel of results carrying the roofline set."""
    from .metric_sets import DRAM_READ, DRAM_WRITE, DURATION

    out = []
    for r in results if isinstance(results, (list, tuple)) else [results]:
        for k in r.kernels if r.ranges == "auto" else [None]:
            v = r.total if k is None else k.values
            label = r.label if k is None else k.name
            out.append((label, r.flops(k.index if k is not None else None)["total"],
                        v[DRAM_READ] + v[DRAM_WRITE], v[DURATION] * 1e-9))
    return out


def plot_roofline(results, ceilings=None, path: str | None = None, title: str | None = None):
    """A log-log roofline of MetricsResult(s) collected with the "roofline" set: one point per
    kernel, under the measured DRAM, FP32 and tensor roofs. Saves to `path` if given; returns
    the matplotlib Figure. Needs matplotlib (pip install gpuprofile[plot])."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError("plot_roofline needs matplotlib: pip install matplotlib") from e
    if ceilings is None:
        ceilings = globals()["ceilings"]()
    points = _points(results)
    fig = Figure(figsize=(7, 5))
    ax = fig.add_subplot()
    intensities = [f / b for _, f, b, _ in points if b > 0 and f > 0] or [1.0]
    lo, hi = min(intensities + [0.1]) / 4, max(intensities + [1e3]) * 4
    bw = ceilings.dram_bytes_per_s
    for peak, label in ((ceilings.fp32_flops_per_s, "FP32 (FFMA)"),
                        (ceilings.tensor_flops_per_s, "tensor (mma.sync fp16)")):
        ridge = peak / bw
        ax.plot([lo, ridge, hi], [lo * bw, peak, peak], label=f"{label} {peak / 1e12:.1f} TFLOP/s")
    for label, flops, nbytes, seconds in points:
        if flops > 0 and nbytes > 0:
            ax.scatter([flops / nbytes], [flops / seconds], zorder=3)
            ax.annotate(label[:30], (flops / nbytes, flops / seconds), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title or f"roofline: {ceilings.device_name} (DRAM {bw / 1e9:.0f} GB/s measured)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    if path is not None:
        save_figure(fig, path, dpi=120, bbox_inches="tight")
    return fig
