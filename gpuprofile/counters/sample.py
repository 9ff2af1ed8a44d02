"""gpuprofile.sample(): GPU utilisation over time, from CUPTI PM sampling.

The hardware samples one-pass metric sets every `interval_us` of GPU time while fn runs; each
sample has start/end timestamps in CUPTI's timestamp domain (cuptiGetTimestamp, ns), the clock
of gpuprofile's kernel trace, so samples can be drawn as counter tracks beside the kernels
(Profile.export_chrome_trace(path, samples=[result])). Samples that began before sampling
started are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import _C
from .._format import fmt, html_table, text_table
from . import catalog as _catalog
from .metric_sets import SAMPLE_METRICS

# Readable field names for the default metrics.
FIELD_NAMES = {
    "gr__cycles_active.sum.pct_of_peak_sustained_elapsed": "gpu_busy_pct",
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed": "sm_active_pct",
    "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed": "sm_issue_pct",
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed": "tensor_pipe_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "dram__bytes_read.sum.per_second": "dram_read_bytes_per_s",
    "dram__bytes_write.sum.per_second": "dram_write_bytes_per_s",
    "gpc__cycles_elapsed.avg.per_second": "gpc_clock_hz",
}

# Per-sample counter data is ~29 KB: this bounds one decode round's image (about 58 MB).
DEFAULT_MAX_SAMPLES = 2000


def field_name(metric: str) -> str:
    """The structured-array field for a metric: a readable alias or a sanitized name."""
    return FIELD_NAMES.get(metric) or re.sub(r"\W", "_", metric)


@dataclass
class SampleResult:
    """samples: NumPy structured array, one row per sample: start_ns, end_ns (CUPTI timestamp
    domain) and one float64 field per metric (see fields)."""

    samples: object
    metrics: list
    fields: dict  # metric -> field name
    interval_ns: int
    info: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.samples)

    def arrays(self) -> dict:
        """{field: 1-D array}, including start_ns and end_ns."""
        return {name: self.samples[name] for name in self.samples.dtype.names}

    def to_dict(self) -> dict:
        return {"metrics": list(self.metrics), "fields": dict(self.fields),
                "interval_ns": self.interval_ns, "info": dict(self.info), "notes": list(self.notes),
                "samples": {k: v.tolist() for k, v in self.arrays().items()}}

    def _rows(self):
        rows = []
        for m in self.metrics:
            col = self.samples[self.fields[m]]
            rows.append([self.fields[m], float(col.mean()) if len(col) else float("nan"),
                         float(col.max()) if len(col) else float("nan"), m])
        return rows

    def _title(self) -> str:
        span = (int(self.samples["end_ns"][-1]) - int(self.samples["start_ns"][0])) / 1e6 if len(self) else 0.0
        return (f"gpuprofile samples: {len(self)} x {fmt(self.interval_ns / 1e3)} µs over "
                f"{fmt(span)} ms")

    def __str__(self) -> str:
        notes = "".join(f"\nnote: {n}" for n in self.notes)
        return text_table(["field", "mean", "max", "metric"], self._rows(), title=self._title() + notes)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return html_table(["field", "mean", "max", "metric"], self._rows(), title=self._title())


def _plan(metrics):
    names = list(SAMPLE_METRICS) if metrics is None else (
        [metrics] if isinstance(metrics, str) else list(metrics))
    chip, avail = _catalog.device_chip("pm")
    _catalog.validate(names, chip, "pm", avail)
    config, passes = _catalog.configure(names, chip, "pm", avail)
    if passes != 1:
        raise ValueError(f"PM sampling needs a one-pass metric set; these {len(names)} metrics need "
                         f"{passes} passes (drop some, e.g. sm__throughput needs many)")
    return names, config, _catalog.host(chip, "pm", avail)


def sample(fn, *args, interval_us: float = 20, metrics=None, max_samples: int = DEFAULT_MAX_SAMPLES,
           hw_buffer_mb: int = 512, setup=None, **kwargs) -> SampleResult:
    """Run fn(*args, **kwargs) once while PM sampling every `interval_us` microseconds of GPU
    time. metrics: one-pass PM-sampling metrics (default: GPU busy, SM active, SM issue, tensor
    pipe, DRAM throughput and bytes, GPC clock). max_samples sizes one decode round (the image is
    ~29 KB per sample); the hardware buffer (hw_buffer_mb, device memory) must hold every sample
    of the run: an overflow raises CuptiError."""
    import numpy as np

    if not callable(fn):
        raise TypeError(f"sample(fn): fn must be callable, got {type(fn).__name__}")
    if not interval_us >= 1:
        raise ValueError(f"interval_us must be at least 1, got {interval_us}")
    _C._current_device()  # NoDeviceError first
    _catalog.require_counters_free("gpuprofile.sample()")
    names, config, host = _plan(metrics)
    if setup is not None:
        setup()
    interval_ns = int(round(interval_us * 1000))
    sampler = _C.PmSampler(config, names, host, interval_ns=interval_ns, max_samples=max_samples,
                           hw_buffer_bytes=int(hw_buffer_mb) << 20)
    try:
        sampler.start()
        fn(*args, **kwargs)
        sampler.stop()
        times, values, info = sampler.samples()
    finally:
        sampler.close()
    info = {**info, "device": _C._current_device()}  # the trace puts the counters on this GPU
    fields = {m: field_name(m) for m in names}
    if len(set(fields.values())) != len(fields):
        raise ValueError("two metrics map to the same field name; pass distinct metrics")
    t = np.frombuffer(times or b"", dtype="<u8").reshape(-1, 2)
    v = np.frombuffer(values or b"", dtype="<f8").reshape(-1, len(names))
    dtype = [("start_ns", "<u8"), ("end_ns", "<u8")] + [(fields[m], "<f8") for m in names]
    out = np.empty(len(t), dtype=dtype)
    out["start_ns"], out["end_ns"] = t[:, 0], t[:, 1]
    for k, m in enumerate(names):
        out[fields[m]] = v[:, k]
    notes = []
    if info.get("overflow"):
        notes.append("the hardware buffer overflowed: samples are missing")
    return SampleResult(out, names, fields, interval_ns, info, notes)
