"""What the `%%gpuprofile` cell magic shows (gpuprofile/ipython.py runs it): the cell's kernel
summary, the regions entered in the cell and the device-memory peak, as text and as HTML. Plain
data, no IPython here: the magic builds a CellReport and IPython displays it."""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass
class CellReport:
    """One profiled cell. summary: the trace's Summary (None without a trace, `note` says why);
    regions: a regions Report of the regions entered during the cell; peak_bytes: the highest
    device memory in use above the cell's start (None when memory was not traced);
    trace_path: where a Chrome trace was written."""

    summary: object
    regions: object
    peak_bytes: int | None = None
    note: str | None = None
    trace_path: str | None = None

    def to_dict(self) -> dict:
        return {"summary": self.summary.to_dict() if self.summary is not None else None,
                "regions": self.regions.to_dict(), "peak_bytes": self.peak_bytes,
                "note": self.note, "trace_path": self.trace_path}

    def _lines(self) -> list:
        lines = []
        if self.note:
            lines.append(f"note: {self.note}")
        if self.peak_bytes is not None:
            lines.append(f"device memory peak above the cell's start: {self.peak_bytes / 2**20:.4g} MiB")
        if self.trace_path:
            lines.append(f"trace written to {self.trace_path}")
        return lines

    def __str__(self) -> str:
        parts = [str(self.summary)] if self.summary is not None else []
        if len(self.regions):
            parts.append(str(self.regions))
        parts.append("\n".join(self._lines()))
        return "\n\n".join(p for p in parts if p)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        parts = [self.summary._repr_html_()] if self.summary is not None else []
        if len(self.regions):
            parts.append(self.regions._repr_html_())
        parts += [f"<p>{html.escape(line)}</p>" for line in self._lines()]
        return "<div>" + "".join(parts) + "</div>"


def memory_peak(timeline) -> int:
    """Highest device bytes in use in a profile's memory timeline (counted from its start)."""
    from .tracing.timeline import is_device_kind

    device = timeline[is_device_kind(timeline["kind"])] if len(timeline) else timeline
    return max(0, int(device["bytes_in_use"].max())) if len(device) else 0
