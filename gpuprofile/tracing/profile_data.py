"""What a stopped gpuprofile.profile() holds: its record tables (p.kernels, p.memcpy, p.memset,
p.memory, p.collectives), the grouped results (p.summary(), p.region_spans(), p.by_line()) and
the exports (Chrome trace, collapsed stacks, Arrow, Parquet, pandas).

ProfileData is the data half of tracing/profile.py's Profile; tracing/session.py is the other half
(the collectors and start/stop). It reads only what the session left behind: the activity
Window, the region records, the Python lines and the Flight Recorder's entries, and builds each
table once, on first use.
"""

from __future__ import annotations

import html
import os
from typing import TYPE_CHECKING

import numpy as np

from .. import _C
from .._files import atomic_write
from . import collectives, nccl, pylines
from .activity import MEMORY, Chunk, Window
from .attribution import attribute, combine, region_intervals
from .occupancy import limits_for
from .shaping import build_kernels, build_memcpy, build_memset, copy_record_ids, enqueue_order
from .summary import Summary, busy_ns, factorize, group_rows, region_rows
from .timeline import build_timeline, region_memory

if TYPE_CHECKING:  # pandas stays optional at run time
    import pandas


class ProfileData:
    """The tables and exports of a stopped profile (see the module docstring)."""

    state: str
    mask: int
    kinds: list
    errors: list
    stream_attribution: bool
    python_lines: pylines.PyLines | None
    _window: Window | None
    _records: np.ndarray | None
    _cache: dict
    _limits: dict
    _recorded_collectives: tuple

    def _attributed(self, table: str) -> tuple:
        """(region record, start_ns, end_ns, device, stream, call order) of each kernel, copy or
        set of the trace, by the same rules as p.kernels / p.memcpy / p.memset, without building
        those tables."""
        c = self._chunk
        raw = getattr(c, table)
        rec, _ = self._row_regions(table)
        order = enqueue_order(raw) if table == "memcpy" else raw["correlation_id"]
        return (rec, raw["start"].astype(np.int64), raw["end"].astype(np.int64),
                raw["device"].astype(np.int64), raw["stream"].astype(np.int64),
                np.asarray(order, np.int64))

    def _row_regions(self, table: str) -> tuple:
        """(record, rule) of each row of the raw "kernels", "memcpy" or "memset" records
        (_attribute), computed once: for the CUPTI region clock at stop and for the tables."""
        def build():
            c = self._chunk
            raw = getattr(c, table)
            if table == "memcpy":
                return self._attribute(raw, copy_record_ids(raw, c.extcorr), enqueue_order(raw))
            return self._attribute(raw, attribute(raw["correlation_id"], c.extcorr),
                                   raw["correlation_id"])
        return self._cached(f"regions of {table}", build)


    def _stopped(self) -> Window:
        if self.state != "stopped" or self._window is None:
            raise _C.GpuProfileError(f"the profile is {self.state}: results exist once it stopped")
        return self._window

    @property
    def _chunk(self) -> Chunk:
        return self._stopped().chunk

    @property
    def partial(self) -> bool:
        """True when stopping was interrupted (Ctrl-C) or failed: some records may be missing."""
        return self._stopped().partial

    @property
    def dropped(self) -> int:
        """Activity records CUPTI could not store (0 unless buffers ran out)."""
        return self._chunk.dropped

    @property
    def clock_offset_ns(self) -> int:
        """CUPTI clock minus the host clock (time.monotonic_ns), measured at start and stop."""
        return self._stopped().offset_ns

    @property
    def start_ns(self) -> int:
        return self._stopped().t0

    @property
    def stop_ns(self) -> int:
        return self._stopped().t1

    def _region_names(self):
        return self._records["name"] if self._records is not None else None

    def _limits_of(self, device: int):
        if device not in self._limits:
            try:
                props = _C._device_properties(device)
                self._limits[device] = limits_for((props["major"], props["minor"]), props)
            except Exception:
                self._limits[device] = None
        return self._limits[device]

    def _intervals(self) -> dict:
        """Each traced region's interval in correlation order (_attribution.region_intervals)."""
        def build():
            w = self._stopped()
            rec = self._records
            if not self.stream_attribution:
                return region_intervals(w.chunk.region_streams[:0], w.chunk.extcorr)

            def open_at_stop(r):
                if rec is None or not len(rec):
                    return np.zeros(len(r), dtype=bool)
                valid = (r >= 0) & (r < len(rec))
                at = np.where(valid, r, 0)
                host_end = rec["host_end_ns"][at]
                ended_late = (host_end > 0) & (host_end + w.offset_ns > w.t1)
                return valid & (rec["open"][at].astype(bool) | ended_late)

            return region_intervals(w.chunk.region_streams, w.chunk.extcorr, open_at_stop)
        return self._cached("intervals", build)

    def _attribute(self, raw, launch, correlation):
        """(record, rule) of each kernel/copy/set row: launch thread first, else stream order."""
        depth = self._records["depth"] if self._records is not None and len(self._records) else None
        return combine(launch, raw["device"], raw["stream"], correlation, self._intervals(), depth)

    def _cached(self, key, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    @property
    def kernels(self) -> np.ndarray:
        """One row per kernel: name (demangled), start_ns/end_ns/duration_ns (CUPTI clock),
        device, context, stream, grid_*/block_*, registers_per_thread, static_smem,
        dynamic_smem (bytes per block), local_mem_per_thread, correlation_id, graph_id, region
        (the gpuprofile region it belongs to, '' if none), region_record (its index in
        gpuprofile.records(), -1), attribution (the rule that found the region: 'launch' when
        it was launched from a thread inside the region, 'stream' when another thread enqueued
        it on the region's stream between the region's events, '' if none; docs/tracing.md),
        occupancy (theoretical, 0..1), active_blocks_per_sm and occupancy_limiter. In order of
        arrival; sort by start_ns for time order."""
        def build():
            c = self._chunk
            rec, rule = self._row_regions("kernels")
            out = build_kernels(c.kernels, c.names, rec, self._region_names(), self._limits_of, rule)
            out["python_line"], _, out["python_stack"] = pylines.columns(
                self.python_lines, c.kernels["correlation_id"])
            return out
        return self._cached("kernels", build)

    @property
    def memcpy(self) -> np.ndarray:
        """One row per memory copy: times, bytes, kind ('HtoD', 'DtoH', 'DtoD', ...), source and
        destination memory kinds, device/context/stream, region, gbps (bytes per ns = GB/s)."""
        def build():
            c = self._chunk
            rec, rule = self._row_regions("memcpy")
            out = build_memcpy(c.memcpy, rec, self._region_names(), rule)
            out["python_line"], _, out["python_stack"] = pylines.columns(
                self.python_lines, c.memcpy["runtime_correlation_id"], c.memcpy["correlation_id"])
            return out
        return self._cached("memcpy", build)

    @property
    def memset(self) -> np.ndarray:
        """One row per memory set: times, bytes, value, memory kind, device/context/stream, region."""
        def build():
            c = self._chunk
            rec, rule = self._row_regions("memset")
            out = build_memset(c.memset, rec, self._region_names(), rule)
            out["python_line"], _, out["python_stack"] = pylines.columns(
                self.python_lines, c.memset["correlation_id"])
            return out
        return self._cached("memset", build)

    @property
    def memory(self) -> np.ndarray:
        """Timeline of device allocations and frees (gpuprofile.memory.build_timeline): timestamp,
        op, kind, device, address, bytes, delta, bytes_in_use (since the profile started)."""
        def build():
            c = self._chunk
            return build_timeline(c.memory, attribute(c.memory["correlation_id"], c.extcorr),
                                  self._region_names())
        return self._cached("memory", build)

    def _matched_collectives(self) -> collectives.Matched:
        def build():
            entries, why = self._recorded_collectives
            k = self.kernels
            if entries is None:
                if any(nccl.parse_kernel(str(n)) for n in np.unique(k["name"])):
                    return collectives.Matched(np.zeros(0, dtype=collectives.COLUMNS),
                                               [f"NCCL kernels have no sizes: {why}"])
                return collectives.Matched(np.zeros(0, dtype=collectives.COLUMNS), [])
            w = self._stopped()
            pair = w.clock_pair
            wall_t1 = w.t1 - (pair["cupti_ns"] - pair["wall_ns"]) if pair else 2**63 - 1
            return collectives.match(k["name"], k["start_ns"], k["stream"], entries, wall_t1)
        return self._cached("collectives", build)

    @property
    def collectives(self) -> np.ndarray:
        """NCCL kernels with their sizes, read from torch's NCCL Flight Recorder when the profile
        stopped (no hook or region needed): kernel (row in p.kernels), op ('AllReduce', ...),
        bytes (nccl-tests' size; -1 if the dtype is unknown), dtype, group (process group) and
        seq (its sequence number). Empty without torch.distributed; p.collective_notes says why
        NCCL kernels got no size (docs/distributed.md)."""
        return self._matched_collectives().table

    @property
    def collective_notes(self) -> list:
        """Why some NCCL kernels have no size in p.collectives (empty when all have one)."""
        return list(self._matched_collectives().notes)

    def _kernel_codes(self) -> dict:
        """Integer codes of the kernels' names and region names, with their labels, for grouping
        without touching the object columns (ids come straight from the C name table)."""
        def build():
            c = self._chunk
            ids = c.kernels["name_id"].astype(np.int64)
            names = list(c.names) + ["<unknown kernel>"]
            rec = self.kernels["region_record"]
            if self._records is not None and len(self._records):
                per_record, labels = factorize(self._records["name"])
                valid = (rec >= 0) & (rec < len(per_record))
                region = np.where(valid, per_record[np.where(valid, rec, 0)], -1)
            else:
                labels, region = [], np.full(len(rec), -1, np.int64)
            return {"name": np.where(ids < len(c.names), ids, len(c.names)), "name_labels": names,
                    "region": region, "region_labels": labels}
        return self._cached("codes", build)

    def summary(self, sort_by: str = "total_ms", row_limit: int | None = None) -> Summary:
        """Kernels grouped by name and by region: calls, total/mean/min/max GPU time, share of the
        GPU busy time, mean theoretical occupancy and its usual limiter; GPU idle time between a
        region's kernels; memory peaks of memory=True regions. With concurrent kernels the
        shares of busy time add up to more than 100%. sort_by and row_limit: Summary.sorted()."""
        w = self._stopped()
        k = self.kernels
        busy = sum(busy_ns(k["start_ns"][k["device"] == d], k["end_ns"][k["device"] == d])
                   for d in np.unique(k["device"]))
        mem_rows = []
        if self.mask & MEMORY:
            mem_rows = region_memory(self.memory, self._records, w.offset_ns, (w.t0, w.t1))
        codes = self._kernel_codes()
        return Summary(
            by_kernel=group_rows(codes["name"], codes["name_labels"], k["duration_ns"],
                                 k["occupancy"], k["occupancy_limiter"], busy),
            by_region=region_rows(codes["region"], codes["region_labels"], k["region_record"],
                                  k["duration_ns"], k["start_ns"], k["end_ns"], k["occupancy"],
                                  k["occupancy_limiter"], busy),
            memory_by_region=mem_rows, kernels=len(k), kernel_ms=int(k["duration_ns"].sum()) / 1e6,
            busy_ms=busy / 1e6, span_ms=(w.t1 - w.t0) / 1e6, dropped=self.dropped,
            partial=w.partial, notes=self._other_stream_notes(),
        ).sorted(sort_by, row_limit)

    def region_spans(self) -> np.ndarray:
        """One row per region record with traced work: record (its index in
        gpuprofile.records()), name, events_ms (the region's CUDA-event time on its own stream;
        NaN for a region on the CUPTI clock, which records no events: its gpu_ms in records() is
        the span of its work and of the regions inside it),
        span_ms (CUPTI: first start to last end of the kernels, copies and sets attributed to it,
        on any stream), items, other_stream_items and other_stream_ms (work on streams other than
        the region's). A region whose work ran on another stream (a torch side stream, JAX's)
        has events that do not cover it: span_ms is its GPU time."""
        dtype = [("record", "<i8"), ("name", "O"), ("events_ms", "<f8"), ("span_ms", "<f8"),
                 ("items", "<i8"), ("other_stream_items", "<i8"), ("other_stream_ms", "<f8")]
        parts = [self.kernels, self.memcpy, self.memset]
        rec = np.concatenate([t["region_record"] for t in parts]).astype(np.int64)
        start = np.concatenate([t["start_ns"] for t in parts]).astype(np.int64)
        end = np.concatenate([t["end_ns"] for t in parts]).astype(np.int64)
        stream = np.concatenate([t["stream"] for t in parts]).astype(np.int64)
        keep = rec >= 0
        rec, start, end, stream = rec[keep], start[keep], end[keep], stream[keep]
        records = np.unique(rec)
        group = np.searchsorted(records, rec)  # each row's place in `records`
        # each record's own stream (CUPTI's id), where attribution named one; -1: none, so no
        # row counts as on another stream
        iv = self._intervals()
        own = np.full(records.size, -1, np.int64)
        at = np.searchsorted(records, iv["record"])
        named = (at < records.size) & (records[np.minimum(at, max(records.size - 1, 0))] == iv["record"])
        own[at[named]] = iv["stream"][named]
        other = (own[group] >= 0) & (stream != own[group])
        out = np.zeros(records.size, dtype=dtype)
        out["record"] = records
        out["items"] = np.bincount(group, minlength=records.size)
        out["other_stream_items"] = np.bincount(group, weights=other, minlength=records.size)
        out["other_stream_ms"] = np.bincount(group, weights=np.where(other, end - start, 0),
                                             minlength=records.size) / 1e6
        if records.size:
            lo = np.full(records.size, np.iinfo(np.int64).max)
            hi = np.full(records.size, np.iinfo(np.int64).min)
            np.minimum.at(lo, group, start)
            np.maximum.at(hi, group, end)
            out["span_ms"] = (hi - lo) / 1e6
        regions = self._records
        known = records < (len(regions) if regions is not None else 0)
        out["name"] = ""
        out["events_ms"] = np.nan
        if known.any():
            out["name"][known] = regions["name"][records[known]]
            by_events = (regions["gpu_clock"][records[known]] == "events"
                         if "gpu_clock" in regions.dtype.names else True)
            out["events_ms"][known] = np.where(by_events, regions["gpu_ms"][records[known]], np.nan)
        return out

    def _other_stream_notes(self) -> list:
        """Lines naming the regions whose events missed work on other streams (a region on the
        CUPTI clock has no events: its time is the span of all its work, on every stream)."""
        if not self.stream_attribution:
            return []
        try:
            spans = self.region_spans()
        except Exception:  # a note must never break the summary
            return []
        spans = spans[np.isfinite(spans["events_ms"])]
        notes = []
        for name in dict.fromkeys(spans["name"][spans["other_stream_items"] > 0].tolist()):
            row = spans[spans["name"] == name]
            notes.append(
                f"region {name!r}: {int(row['other_stream_items'].sum())} kernels/copies/sets ran "
                f"on streams other than its own ({row['other_stream_ms'].sum():.4g} ms); its event "
                f"time ({np.nansum(row['events_ms']):.4g} ms) does not cover them: CUPTI's span is "
                f"{row['span_ms'].sum():.4g} ms (p.region_spans()); enter the region on the stream "
                "the work runs on (gp.region(name, stream=s)) for events that see it")
        return notes

    def _python_rows(self):
        """(site, stack, leaf name, duration_ns, is_kernel, backward) over kernels, copies and
        sets."""
        lines = self._python_lines_or_raise()
        c = self._chunk
        parts = [(lines.find(c.kernels["correlation_id"]), self.kernels["name"],
                  self.kernels["duration_ns"], True),
                 (lines.find(c.memcpy["runtime_correlation_id"], c.memcpy["correlation_id"]),
                  np.array([f"Memcpy {k}" for k in self.memcpy["kind"]], dtype=object),
                  self.memcpy["duration_ns"], False),
                 (lines.find(c.memset["correlation_id"]),
                  np.full(len(self.memset), "Memset", dtype=object), self.memset["duration_ns"],
                  False)]
        site = np.concatenate([p[0][0] for p in parts])
        stack = np.concatenate([p[0][1] for p in parts])
        backward = np.concatenate([p[0][2] for p in parts])
        leaf = np.concatenate([p[1] for p in parts])
        duration = np.concatenate([p[2] for p in parts])
        kernel = np.concatenate([np.full(len(p[2]), p[3]) for p in parts])
        return lines, site, stack, leaf, duration, kernel, backward

    def _python_lines_or_raise(self) -> pylines.PyLines:
        self._stopped()
        if self.python_lines is None:
            raise _C.GpuProfileError("this profile has no Python lines: record them with "
                                     "gpuprofile.profile(python_stacks=True) (or 'stack')")
        return self.python_lines

    def by_line(self, per: str = "line") -> pylines.LineTable:
        """GPU time per Python source line (per="function": per function) that launched the
        kernels, copies and sets, largest first, with the line's source; autograd's backward
        work on the line of its forward op, in rows of its own (backward: True), when torch was
        imported; work from threads without a Python frame in one row. Needs
        profile(python_stacks=...)."""
        lines, site, _, _, duration, kernel, backward = self._python_rows()
        return pylines.by_line(lines, site, duration, kernel, per, backward)

    def to_pandas(self, table: str = "kernels") -> pandas.DataFrame:
        """One record table as a pandas DataFrame (needs pandas): 'kernels' (default), 'memcpy',
        'memset' or 'memory', the columns of the NumPy array of that name, or 'events': all of them
        in one table, the columns of to_arrow() (docs/tracing.md). The grouped tables:
        p.summary().to_pandas(by="kernel" | "region" | "memory"), p.by_line().to_pandas()."""
        from .._tables import array_frame

        tables = ("kernels", "memcpy", "memset", "memory", "events")
        if table not in tables:
            raise ValueError(f"table must be one of {tables}, got {table!r}")
        if table == "events":  # the columns of to_arrow(), without needing pyarrow
            from .columns import to_frame

            return to_frame(self._columns()[0])
        return array_frame(getattr(self, table))

    def export_collapsed_stacks(self, path, collapse_libraries: bool = False) -> str:
        """Write GPU time by Python stack as collapsed stacks ('frame;...;kernel ns' lines) for
        speedscope or flamegraph.pl; full stacks with python_stacks='stack', the launching line
        alone with 'line'. collapse_libraries merges runs of library frames. Returns the path."""
        lines, site, stack, leaf, duration, _, backward = self._python_rows()
        text = pylines.collapsed_stacks(lines, site, stack, leaf, duration, collapse_libraries,
                                        backward)
        path = os.fspath(path)
        with atomic_write(path, "w") as f:
            f.write(text)
        return path

    def export_chrome_trace(self, path, details: bool = True, samples=None) -> str:
        """Write a Chrome trace (JSON; gzip-compressed when `path` ends in .gz) that opens in
        Perfetto (ui.perfetto.dev) and chrome://tracing. `details=False` leaves out per-kernel
        launch arguments (grid, block, registers, ...) for a smaller file. `samples`: results of
        gpuprofile.sample() (PM sampling) taken during the profile, added as counter tracks of
        their GPU. In a multi-rank job the file is per rank (trace.rank1.json.gz, or `{rank}` in
        `path`; docs/distributed.md). Returns the path written."""
        from ..distributed import rank_path
        from .chrome_trace import write_chrome_trace

        w = self._stopped()
        codes = self._kernel_codes()
        region = codes["region"]
        return write_chrome_trace(
            rank_path(path), kernels=self.kernels, memcpy=self.memcpy, memset=self.memset,
            memory=self.memory if self.mask & MEMORY else None, regions=self._records,
            offset_ns=w.offset_ns, t0_ns=w.t0, t1_ns=w.t1, details=details,
            metadata=self._trace_metadata(),
            kernel_codes={"name": codes["name"], "region": region}, samples=samples,
            nccl_bytes=collectives.per_kernel_bytes(self._matched_collectives(), len(self.kernels)),
        )

    def _trace_metadata(self) -> dict:
        """What every exported file says about its rank, records and clocks (Chrome trace's
        otherData, the Parquet file's metadata)."""
        from ..distributed import clock_pair, trace_metadata

        w = self._stopped()
        return {"dropped_records": self.dropped, "partial": w.partial,
                "clock_offset_ns": w.offset_ns,
                "clock_offset_uncertainty_ns": w.offset_uncertainty_ns,
                **trace_metadata(self._cached("pair", lambda: w.clock_pair or clock_pair(
                    w.offset_ns, w.offset_uncertainty_ns)))}

    def _columns(self) -> tuple:
        from .columns import profile_columns

        return profile_columns(self, self._trace_metadata())

    def to_arrow(self):
        """Every kernel, copy, set, region, region GPU span and memory event as one
        pyarrow.Table, a row each (needs pyarrow); the rank, clock pair and time zero are in its
        schema metadata (b"gpuprofile", JSON). The columns are in docs/tracing.md."""
        from .columns import require_pyarrow, to_arrow

        require_pyarrow()
        return to_arrow(*self._columns())

    def export_parquet(self, path) -> str:
        """Write to_arrow() as a Parquet file (needs pyarrow), beside or instead of the Chrome
        trace: `gpuprofile merge` reads it a rank at a time, and DuckDB or pandas query it
        (docs/distributed.md). In a multi-rank job the file is per rank (trace.rank1.parquet).
        Returns the path written."""
        from ..distributed import rank_path
        from .columns import require_pyarrow, to_arrow, write_parquet

        require_pyarrow()
        return write_parquet(rank_path(path), to_arrow(*self._columns()))

    def to_dict(self) -> dict:
        """Counts, the summary and how it was measured (the record arrays stay NumPy arrays:
        p.kernels, p.memcpy, p.memset, p.memory)."""
        w = self._stopped()
        return {
            "kinds": self.kinds, "kernels": len(self.kernels), "memcpy": len(self.memcpy),
            "memset": len(self.memset), "memory_events": len(self.memory),
            "dropped": self.dropped, "partial": w.partial, "errors": list(self.errors),
            "start_ns": w.t0, "stop_ns": w.t1, "clock": "CUPTI timestamp (ns)",
            "clock_offset_ns": w.offset_ns, "clock_offset_uncertainty_ns": w.offset_uncertainty_ns,
            "summary": self.summary().to_dict(),
        }

    def __repr__(self) -> str:
        if self.state != "stopped":
            return f"<gpuprofile.profile {self.state}: {', '.join(self.kinds)}>"
        c = self._chunk
        return (f"<gpuprofile.profile stopped: {len(c.kernels)} kernels, {len(c.memcpy)} copies, "
                f"{len(c.memset)} sets, {len(c.memory)} memory events, {c.dropped} dropped"
                f"{', partial' if self.partial else ''}>")

    def _repr_html_(self) -> str:
        if self.state != "stopped":
            return f"<p>{html.escape(repr(self))}</p>"
        return self.summary()._repr_html_()

