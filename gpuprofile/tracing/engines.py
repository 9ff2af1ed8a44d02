"""Who computes the analyses of `gpuprofile merge`: the engines, one table (ENGINES), and
which one each analysis gets when none is named (DEFAULTS, measured). The merge takes one by
name, or none.

- summaries (pass 1: each rank's steps and NCCL kernels, analyses.RankSummary), by
  - numpy: the hand-written pass, one rank at a time (analyses.summarize);
  - duckdb: the analyses as SQL (queries.py), one query over every rank's Parquet file,
    in-process, out of core under `memory_limit`, spilling to `temp_directory`;
  - dask: the hand-written pass mapped over a Dask cluster, one task per rank file; the files
    must be readable where the workers run. `scheduler`: a scheduler's address, or None for
    a local cluster of `workers` processes.
- held_back (the held-back steps and why), by numpy (analyses.held_back) or duckdb
  (queries.HELD_BACK).

Every engine gives identical tables (tests/distributed/test_engines.py, test_queries.py); the
rest of the cross-rank work (matching, alignment, the collectives and straggler tables) is
small (ranks x steps and ranks x collectives numbers) and NumPy's for every engine.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import tempfile

import numpy as np

from . import analyses, queries
from .columns import KINDS, META_KEY
from .rank_input import Scan, is_parquet, scan
from .trace_input import TraceFileError, _check_meta

ENGINES = {
    "numpy": "the hand-written NumPy passes, one rank at a time",
    "duckdb": "the analyses as SQL, DuckDB in-process, out of core (pip install duckdb)",
    "dask": "the NumPy pass as one task per rank on a Dask cluster (pip install 'dask[distributed]')",
}
DEFAULT_MEMORY_LIMIT = "2GB"

# Who computes each analysis when no engine is named: the faster of the hand-written NumPy pass
# and DuckDB's SQL, measured (docs/distributed.md, "Engines", has the numbers). A named engine
# computes both itself (dask: the summaries on the cluster, held_back as the default does).
DEFAULTS = {
    # per rank: the step table's compute, communication, overlap, exposed communication and
    # idle time; the NCCL kernels with the GPU's idle time before each
    "summaries": "numpy",
    # the held-back steps and why, from the first collective of each step on every rank
    "held_back": "duckdb",
}


def default_engine(analysis: str) -> tuple:
    """(engine, note) for `analysis` when no engine is named: DEFAULTS's, NumPy when that is
    DuckDB and DuckDB is not installed, the note saying so (None when nothing fell back)."""
    engine = DEFAULTS[analysis]
    if engine == "duckdb" and importlib.util.find_spec("duckdb") is None:
        return "numpy", (f"{analysis} by NumPy: duckdb, faster at it, is not installed "
                         "(pip install duckdb); the tables are the same")
    return engine, None


def rank_of(meta: dict, i: int, path: str) -> int:
    """The rank a file's metadata names (its position among the files when it names none);
    TraceFileError naming the file for a rank that is not an int from 0 to 2**31 - 1."""
    if meta.get("rank") is None:
        return i
    rank = meta["rank"]
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < 2**31:
        raise TraceFileError(f"{path}: its rank is {rank!r}, not an int from 0 to 2**31 - 1")
    return rank


def summaries(paths, step: str, engine: str | None = None, memory_limit: str = DEFAULT_MEMORY_LIMIT,
              temp_directory: str | None = None, scheduler: str | None = None,
              workers: int = 2) -> list:
    """Every rank reduced (analyses.RankSummary), in the order of `paths`."""
    engine = default_engine("summaries")[0] if engine is None else engine
    if engine == "numpy":
        return [_summary(path, step, i) for i, path in enumerate(paths)]
    if engine == "duckdb":
        return duckdb_summaries(paths, step, memory_limit, temp_directory)
    if engine == "dask":
        return dask_summaries(paths, step, scheduler, workers)
    raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")


def _summary(path: str, step: str, i: int) -> analyses.RankSummary:
    s = scan(path, step)
    return analyses.summarize(rank_of(s.meta, i, path), path, s)


# ---- Dask ------------------------------------------------------------------------------------

def _require(module: str, extra: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"engine needs {module}, which is not installed: pip install "
                          f"{extra}") from None


def dask_summaries(paths, step: str, scheduler: str | None, workers: int) -> list:
    """One task per rank on a Dask cluster; results gathered in order. A TraceFileError in a
    task is raised here as it was raised there."""
    distributed = _require("distributed", "'dask[distributed]'")
    if scheduler is None:
        # silence_logs: a rank's TraceFileError is raised here, not logged by a worker too
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                           processes=True, dashboard_address=None,
                                           silence_logs=logging.CRITICAL)
        client = distributed.Client(cluster)
    else:
        cluster, client = None, distributed.Client(scheduler)
    try:
        futures = client.map(_summary, list(paths), [step] * len(paths), range(len(paths)),
                             pure=False)
        return client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# ---- DuckDB ----------------------------------------------------------------------------------

# the scanned columns as Profile.export_parquet writes them: a file of this shape is read by
# DuckDB itself; any other shape goes through rank_input.scan, which checks it value by value
_INTS = {"start_ns": 64, "end_ns": 64, "device": 32, "record": 64, "collective_bytes": 64}
_STRINGS = ("kind", "name", "collective", "nccl_algorithm", "nccl_protocol")


def parquet_footer(path: str):
    """The metadata of a Parquet file whose scanned columns have the types export_parquet
    writes, from its footer alone; None for any other file (rank_input.scan reads those)."""
    if not is_parquet(path):
        return None
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        meta = json.loads((schema.metadata or {})[META_KEY])
        if not isinstance(meta, dict) or "gpuprofile" not in meta:
            return None
        _check_meta(meta)
        for name, bits in _INTS.items():
            t = schema.field(name).type
            if not (pa.types.is_signed_integer(t) and t.bit_width <= bits):
                return None
        for name in _STRINGS:
            t = schema.field(name).type
            t = t.value_type if pa.types.is_dictionary(t) else t
            if not pa.types.is_string(t):
                return None
    except Exception:  # noqa: BLE001  (any doubt: the checked path names the problem)
        return None
    zero = meta.get("time_zero_cupti_ns") or 0
    return meta if isinstance(zero, int) and not isinstance(zero, bool) else None


def _connect(memory_limit: str, temp_directory: str | None):
    duckdb = _require("duckdb", "duckdb")
    con = duckdb.connect(config={"memory_limit": memory_limit,
                                 "temp_directory": temp_directory or tempfile.gettempdir(),
                                 "preserve_insertion_order": False})
    con.execute("SET enable_progress_bar = false")
    return duckdb, con


def _scanned_relations(con, scans: dict) -> tuple:
    """The kernels and windows of the ranks scanned in Python, registered as DuckDB views."""
    k = {c: [] for c in ("idx", "row", "s", "e", "op", "alg", "proto", "nbytes")}
    w = {c: [] for c in ("idx", "step", "lo", "hi")}
    for idx, s in scans.items():
        n = s.start.size
        k["idx"].append(np.full(n, idx, np.int64))
        for col, values in (("row", s.row), ("s", s.start), ("e", s.end), ("nbytes", s.nbytes)):
            k[col].append(np.asarray(values, np.int64))
        for col, values in (("op", s.collective), ("alg", s.algorithm), ("proto", s.protocol)):
            k[col].append(np.asarray(values, dtype=object).astype(str))
        m = len(s.steps)
        w["idx"].append(np.full(m, idx, np.int64))
        w["step"].append(np.arange(m, dtype=np.int64))
        w["lo"].append(s.steps[:, 0].astype(np.int64))
        w["hi"].append(s.steps[:, 1].astype(np.int64))
    kernels = {c: np.concatenate(v) if v else np.zeros(0, np.int64 if c not in ("op", "alg", "proto")
                                                        else str) for c, v in k.items()}
    windows = {c: np.concatenate(v) if v else np.zeros(0, np.int64) for c, v in w.items()}
    con.register("scanned_kernels", kernels)
    con.register("scanned_windows", windows)
    return "SELECT * FROM scanned_kernels", "SELECT * FROM scanned_windows"


def _check_parquet(con, paths, direct: dict, files: str) -> dict:
    """{idx: gpus} of the Parquet files read directly; a file whose values read_parquet would
    refuse is scanned by it, which raises the TraceFileError that names the problem."""
    from .trace_input import _MAX_CLOCK_NS, _MAX_TIME_NS

    kinds = "(" + ", ".join(f"'{k}'" for k in KINDS) + ")"
    rows = con.execute(queries.PARQUET_CHECKS.format(files=files, kinds=kinds)).fetchall()
    gpus = {}
    for idx, nulls, unknown, max_clock, max_time, lo_dev, hi_dev, seen in rows:
        if (nulls or unknown or max_clock > _MAX_CLOCK_NS or max_time > _MAX_TIME_NS
                or lo_dev < -1 or hi_dev >= 2**20):
            scan(paths[idx], "")  # raises; if it does not, DuckDB and it disagree:
            raise TraceFileError(f"{paths[idx]}: a value out of range in a scanned column")
        gpus[idx] = sorted(seen or [])
    return {i: gpus.get(i, []) for i in direct}


def duckdb_summaries(paths, step: str, memory_limit: str = DEFAULT_MEMORY_LIMIT,
                     temp_directory: str | None = None) -> list:
    """Every rank reduced by one DuckDB query (queries.py)."""
    duckdb, con = _connect(memory_limit, temp_directory)
    try:
        return _duckdb_summaries(duckdb, con, list(paths), step)
    finally:
        con.close()


def _literal(text: str) -> str:
    """`text` as an SQL string literal (views take no prepared parameters)."""
    return "'" + str(text).replace("'", "''") + "'"


def _duckdb_summaries(duckdb, con, paths: list, step: str) -> list:

    metas = {i: parquet_footer(p) for i, p in enumerate(paths)}
    direct = {i: m for i, m in metas.items() if m is not None}
    scans = {i: scan(p, step) for i, p in enumerate(paths) if i not in direct}
    kernels, windows = _scanned_relations(con, scans)
    gpus = {i: s.gpus for i, s in scans.items()}
    try:
        if direct:
            con.execute("CREATE TEMP TABLE files (file VARCHAR, idx BIGINT, zero BIGINT)")
            con.executemany("INSERT INTO files VALUES (?, ?, ?)",
                            [(paths[i], i, int(m.get("time_zero_cupti_ns") or 0))
                             for i, m in direct.items()])
            files = "[" + ", ".join(_literal(paths[i]) for i in direct) + "]"
            gpus.update(_check_parquet(con, paths, direct, files))
            kernels += f" UNION ALL SELECT * FROM ({queries.PARQUET_KERNELS.format(files=files)})"
            parquet_windows = queries.PARQUET_WINDOWS.format(files=files, step=_literal(step))
            windows += f" UNION ALL SELECT * FROM ({parquet_windows})"
        con.execute(f"CREATE TEMP VIEW kernels AS {kernels}")
        con.execute(f"CREATE TEMP VIEW windows AS {windows}")
        step_cols = con.execute(queries.STEPS).fetchnumpy()
        nccl_cols = con.execute(queries.NCCL).fetchnumpy()
    except duckdb.Error as exc:
        if isinstance(exc, (duckdb.ParserException, duckdb.BinderException,
                            duckdb.CatalogException)):
            raise  # the query's fault, not a file's
        _blame(paths, direct, exc)
    meta = {**direct, **{i: s.meta for i, s in scans.items()}}
    return [_rank_summary(i, paths[i], meta[i], gpus[i], step_cols, nccl_cols)
            for i in range(len(paths))]


def _blame(paths, direct, exc):
    """DuckDB could not read a file: scan each in turn so that the one at fault raises its
    TraceFileError; if none does, the DuckDB error, as a TraceFileError."""
    for i in direct:
        scan(paths[i], "")
    raise TraceFileError(f"{', '.join(paths[i] for i in direct)}: DuckDB could not read them "
                         f"({type(exc).__name__}: {exc})") from None


def _rows_of(cols: dict, idx: int) -> dict:
    idx_col = np.asarray(cols["idx"])
    lo, hi = np.searchsorted(idx_col, idx, "left"), np.searchsorted(idx_col, idx, "right")
    return {k: np.asarray(v)[lo:hi] for k, v in cols.items()}


def _rank_summary(idx: int, path: str, meta: dict, gpus: list, step_cols: dict,
                  nccl_cols: dict) -> analyses.RankSummary:
    st = _rows_of(step_cols, idx)
    nc = _rows_of(nccl_cols, idx)
    ints = {k: np.asarray(st[k], np.int64) for k in ("lo", "hi", *analyses.STEP_FIELDS)}
    windows = np.stack([ints["lo"], ints["hi"]], axis=1).reshape(-1, 2)
    per_step = {f: ints[f] for f in analyses.STEP_FIELDS}
    text = {k: np.asarray(nc[k], dtype=object).astype(str) for k in ("op", "alg", "proto")}
    nccl = {"start": np.asarray(nc["s"], np.int64), "end": np.asarray(nc["e"], np.int64),
            "collective": text["op"], "algorithm": text["alg"], "protocol": text["proto"],
            "nbytes": np.asarray(nc["nbytes"], np.int64), "row": np.asarray(nc["row"], np.int64),
            "idle_before": np.asarray(nc["idle_before"], np.int64)}
    return analyses.RankSummary(rank_of(meta, idx, path), path, meta, list(gpus), windows, per_step, nccl)


# ---- the held-back table ---------------------------------------------------------------------

def held_back(ranks, matched, starts, last, first, engine: str | None = None,
              memory_limit: str = DEFAULT_MEMORY_LIMIT, temp_directory: str | None = None,
              **_) -> list:
    """analyses.held_back's rows, by NumPy or by DuckDB (queries.HELD_BACK); `engine` as for
    summaries (dask: as the default)."""
    if engine in (None, "dask"):
        engine = default_engine("held_back")[0]
    if engine == "numpy":
        return analyses.held_back(ranks, matched, starts, last, first)
    steps = [k for k, who in enumerate(last) if who is not None]
    if len(ranks) < 2 or not steps:
        return []
    duckdb, con = _connect(memory_limit, temp_directory)
    try:
        con.register("arrivals", _arrivals(ranks, matched, starts, last, first, steps))
        con.register("labels", {"step": np.array(steps, np.int64), "collective": np.array(
            [f"{matched['op'][first[k]]} #{int(matched['index'][first[k]])}" for k in steps])})
        keys = ("step", "rank", "ranks", "collective", "held_ns", "idle_before_ns",
                "others_idle_before_ns", "compute_ns", "others_compute_ns", "reason")
        return [dict(zip(keys, row, strict=True)) for row in con.execute(queries.HELD_BACK).fetchall()]
    finally:
        con.close()


def _arrivals(ranks, matched, starts, last, first, steps) -> dict:
    """The columns of queries.HELD_BACK's `arrivals`, a row per step and rank, built a rank
    at a time."""
    ks = np.array(steps, np.int64)
    cs = np.array([first[k] for k in steps], np.int64)
    world = len(ranks)
    cols = {c: np.empty((ks.size, world), np.int64) for c in ("idle", "own", "lo", "compute")}
    for i, r in enumerate(ranks):
        j = matched["pos"][cs, i]
        cols["idle"][:, i] = r.nccl["idle_before"][j]
        cols["own"][:, i] = r.nccl["start"][j]
        cols["lo"][:, i] = r.steps[ks, 0]
        cols["compute"][:, i] = r.per_step["compute_ns"][ks]
    out = {"step": np.repeat(ks, world), "pos": np.tile(np.arange(world, dtype=np.int64), ks.size),
           "rank": np.tile(np.array([r.rank for r in ranks], np.int64), ks.size),
           "s": starts[cs].reshape(-1).astype(np.int64),
           "who": np.repeat(np.array([last[k] for k in steps], np.int64), world)}
    out.update({c: v.reshape(-1) for c, v in cols.items()})
    return out


__all__ = ["DEFAULTS", "ENGINES", "Scan", "default_engine", "held_back", "summaries"]
