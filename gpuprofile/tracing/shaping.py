"""Record shaping for gpuprofile.profile(): CUPTI's raw activity records (the C structs'
dtypes in tracing/activity.py) into the kernels, memcpy and memset tables a Profile shows, with
names, regions, attribution rules and theoretical occupancy. Pure functions of arrays: the
Profile (tracing/profile.py) collects, this module shapes, and tests feed it synthetic records.
"""

from __future__ import annotations

import numpy as np

from .attribution import RULES, attribute
from .occupancy import occupancy
from .timeline import KIND_NAMES, label_regions

KERNEL_DTYPE = np.dtype([
    ("name", object), ("start_ns", "<i8"), ("end_ns", "<i8"), ("duration_ns", "<i8"),
    ("device", "<i4"), ("context", "<u4"), ("stream", "<u4"),
    ("grid_x", "<i4"), ("grid_y", "<i4"), ("grid_z", "<i4"),
    ("block_x", "<i4"), ("block_y", "<i4"), ("block_z", "<i4"),
    ("registers_per_thread", "<i4"), ("static_smem", "<i4"), ("dynamic_smem", "<i4"),
    ("local_mem_per_thread", "<i4"), ("correlation_id", "<u4"), ("graph_id", "<u4"),
    ("region", object), ("region_record", "<i8"), ("attribution", object), ("occupancy", "<f4"),
    ("active_blocks_per_sm", "<i4"), ("occupancy_limiter", object),
    ("python_line", object), ("python_stack", "<i8"),
])
MEMCPY_DTYPE = np.dtype([
    ("start_ns", "<i8"), ("end_ns", "<i8"), ("duration_ns", "<i8"), ("bytes", "<u8"),
    ("kind", object), ("src_kind", object), ("dst_kind", object), ("device", "<i4"),
    ("context", "<u4"), ("stream", "<u4"), ("correlation_id", "<u4"), ("region", object),
    ("region_record", "<i8"), ("attribution", object), ("gbps", "<f8"),
    ("python_line", object), ("python_stack", "<i8"),
])
MEMSET_DTYPE = np.dtype([
    ("start_ns", "<i8"), ("end_ns", "<i8"), ("duration_ns", "<i8"), ("bytes", "<u8"),
    ("value", "<u4"), ("memory_kind", object), ("device", "<i4"), ("context", "<u4"),
    ("stream", "<u4"), ("correlation_id", "<u4"), ("region", object), ("region_record", "<i8"),
    ("attribution", object), ("python_line", object), ("python_stack", "<i8"),
])

COPY_KINDS = ("unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH",
              "PtoP")

def _lookup(table, codes):
    t = np.asarray(list(table) + ["unknown"], dtype=object)
    return t[np.minimum(np.asarray(codes, dtype=np.int64), len(table))]


def _config_keys(device, threads, regs, smem):
    """One int64 per launch configuration when every field fits its bit range, else None."""
    if device.size and (device.max() >= 64 or threads.max() >= 2048 or regs.max() >= 512
                        or smem.max() >= 1 << 20 or smem.min() < 0):
        return None
    return ((device * 2048 + threads) * 512 + regs) * (1 << 20) + smem


def kernel_occupancy(device, threads, regs, smem, limits_of):
    """Theoretical occupancy, resident blocks per SM and limiter of each launch. `limits_of(d)`
    gives device d's SMLimits or None (then NaN / 0 / ''). Computed once per distinct config."""
    device, threads, regs, smem = (np.asarray(a, dtype=np.int64) for a in (device, threads, regs, smem))
    keys = _config_keys(device, threads, regs, smem)
    if keys is None:
        _, first, inverse = np.unique(np.stack([device, threads, regs, smem], 1), axis=0,
                                              return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    occ = np.full(first.size, np.nan, np.float32)
    blocks = np.zeros(first.size, np.int32)
    limiter = np.full(first.size, "", dtype=object)
    for k, i in enumerate(first):
        limits = limits_of(int(device[i]))
        if limits is None or threads[i] < 1:
            continue
        occ[k], blocks[k], limiter[k] = occupancy(limits, int(threads[i]), int(regs[i]), int(smem[i]))
    return occ[inverse], blocks[inverse], limiter[inverse]


def _set_span(out, raw) -> None:
    """start_ns, end_ns and duration_ns of a record table from CUPTI's start and end."""
    out["start_ns"] = raw["start"].astype(np.int64)
    out["end_ns"] = raw["end"].astype(np.int64)
    out["duration_ns"] = out["end_ns"] - out["start_ns"]


def _set_region(out, region_record, region_names, rule=None) -> None:
    out["region_record"] = region_record
    out["region"] = label_regions(region_record, region_names)
    out["attribution"] = RULES[rule if rule is not None else np.where(region_record >= 0, 1, 0)]


def build_kernels(raw, names, region_record, region_names, limits_of, rule=None) -> np.ndarray:
    """The kernels array from raw records (gpuprofile.tracing.activity.KERNEL_RAW); `rule` says which
    attribution rule found each region_record (gpuprofile.tracing.attribution). Pure."""
    out = np.zeros(len(raw), KERNEL_DTYPE)  # np.empty fills object fields slowly
    table = np.asarray(list(names) + ["<unknown kernel>"], dtype=object)
    ids = raw["name_id"].astype(np.int64)
    out["name"] = table[np.where(ids < len(names), ids, len(names))]
    _set_span(out, raw)
    for f in ("device", "context", "stream", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
              "block_z", "registers_per_thread", "static_smem", "dynamic_smem",
              "local_mem_per_thread", "correlation_id", "graph_id"):
        out[f] = raw[f]
    _set_region(out, region_record, region_names, rule)
    threads = raw["block_x"].astype(np.int64) * raw["block_y"] * raw["block_z"]
    smem = raw["static_smem"].astype(np.int64) + raw["dynamic_smem"]
    occ, blocks, limiter = kernel_occupancy(raw["device"], threads, raw["registers_per_thread"],
                                            smem, limits_of)
    out["occupancy"], out["active_blocks_per_sm"], out["occupancy_limiter"] = occ, blocks, limiter
    return out


def build_memcpy(raw, region_record, region_names, rule=None) -> np.ndarray:
    out = np.zeros(len(raw), MEMCPY_DTYPE)
    _set_span(out, raw)
    out["bytes"] = raw["bytes"]
    out["kind"] = _lookup(COPY_KINDS, raw["copy_kind"])
    out["src_kind"] = _lookup(KIND_NAMES, raw["src_kind"])
    out["dst_kind"] = _lookup(KIND_NAMES, raw["dst_kind"])
    for f in ("device", "context", "stream", "correlation_id"):
        out[f] = raw[f]
    _set_region(out, region_record, region_names, rule)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["gbps"] = np.where(out["duration_ns"] > 0, out["bytes"] / out["duration_ns"], np.nan)
    return out


def build_memset(raw, region_record, region_names, rule=None) -> np.ndarray:
    out = np.zeros(len(raw), MEMSET_DTYPE)
    _set_span(out, raw)
    for f in ("bytes", "value", "device", "context", "stream", "correlation_id"):
        out[f] = raw[f]
    out["memory_kind"] = _lookup(KIND_NAMES, raw["memory_kind"])
    _set_region(out, region_record, region_names, rule)
    return out


def copy_record_ids(raw, extcorr):
    """Copies carry a driver and a runtime correlation id; either may have the external id."""
    by_driver = attribute(raw["correlation_id"], extcorr)
    by_runtime = attribute(raw["runtime_correlation_id"], extcorr)
    return np.where(by_driver >= 0, by_driver, by_runtime)


def enqueue_order(raw):
    """A copy's place in CUDA call order: its driver correlation id, else its runtime one."""
    return np.where(raw["correlation_id"] > 0, raw["correlation_id"], raw["runtime_correlation_id"])
