"""Tables out of results: the one way every table-like result becomes a pandas DataFrame
(`to_pandas()`) or a CSV file (`to_csv(path)`, the CLI's `--csv`).

A result lists its rows as dicts (`table_rows()`); columns are the keys in the order first seen.
pandas is optional: only to_pandas() imports it, and says how to get it when it is missing. CSV
needs nothing beyond the standard library, and is written atomically (gpuprofile._files): a list
or dict in a cell is written as JSON, None and NaN as an empty cell.
"""

from __future__ import annotations

import csv
import json
import math
import numbers
from typing import TYPE_CHECKING

from ._files import atomic_write, finite_or_none

if TYPE_CHECKING:  # pandas stays optional at run time
    import pandas


def require_pandas():
    """The pandas module, or ImportError saying that to_pandas() needs it."""
    try:
        import pandas
    except ImportError:
        raise ImportError("to_pandas() needs pandas, which is not installed: pip install pandas "
                          "(or use to_dict() / to_csv(), which need nothing more)") from None
    return pandas


def columns(rows) -> list:
    """Every key of the rows, in the order first seen."""
    seen: dict = {}
    for row in rows:
        for key in row:
            seen.setdefault(key, None)
    return list(seen)


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _typed(df: pandas.DataFrame) -> pandas.DataFrame:
    """Object columns that hold only numbers (a None among them: float64 with NaN), only
    booleans (pandas' nullable 'boolean') or nothing at all (float64 NaN, as pandas reads an
    empty CSV column) given their dtype: a missing value must not leave a column of numbers as
    objects that .mean() or a plot cannot use."""
    for name in df.columns:
        col = df[name]
        if col.dtype != object:
            continue
        present = [v for v in col if not _is_missing(v)]
        if not present:
            df[name] = col.astype("float64")
        elif all(isinstance(v, bool) for v in present):
            df[name] = col.astype("boolean")
        elif all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in present):
            df[name] = col.astype("float64")
    return df


def frame(rows, index: str | None = None) -> pandas.DataFrame:
    """A DataFrame of `rows` (dicts; keys missing from a row are NaN there), indexed by the
    column `index` when given; numbers and booleans typed as such (_typed)."""
    pd = require_pandas()
    rows = list(rows)
    df = _typed(pd.DataFrame.from_records(rows, columns=columns(rows)))
    return df.set_index(index) if index is not None else df


def column_name(header: str) -> str:
    """The DataFrame/CSV column of a printed header: `total ms` -> total_ms, `% busy` ->
    pct_busy, `occupancy %` -> occupancy_pct, `GPU idle before us` -> gpu_idle_before_us
    (the unit stays the last word, one unit per column; `mean µs` -> mean_us, ASCII names)."""
    words = header.replace("%", " pct ").replace("'", "").replace("µ", "u").lower().split()
    if words[:1] == ["pct"] and len(words) > 1:  # "% busy" reads as pct_busy
        words = ["pct", *words[1:]]
    return "_".join(words)


def named_row(headers, cells) -> dict:
    """A table row keyed by its printed headers' column names (column_name), so that to_pandas()
    and to_csv() name and scale each value as the printed table does."""
    return {column_name(h): v for h, v in zip(headers, cells, strict=True)}


def array_frame(array) -> pandas.DataFrame:
    """A DataFrame of a NumPy structured array (a profile's kernels, memcpy, memset, memory):
    one column per field; a field holding an array per row becomes a column of lists."""
    pd = require_pandas()
    data = {}
    for name in array.dtype.names or ():
        col = array[name]
        data[name] = list(col) if col.ndim > 1 else col
    return pd.DataFrame(data, columns=list(array.dtype.names or ()))


def _cell(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(finite_or_none(value), allow_nan=False)
    return value


def write_csv(path, rows) -> str:
    """Write `rows` (dicts) as CSV with a header line to `path`, atomically. Returns the path."""
    rows = list(rows)
    names = columns(rows)
    with atomic_write(path, "w") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(names)
        for row in rows:
            writer.writerow([_cell(row.get(name)) for name in names])
    return str(path)


def factorize(keys, dtype="int64") -> tuple:
    """(codes, labels) of a sequence of hashable keys (an object array of names, say): labels in
    order of first appearance, codes[i] the index of keys[i] in labels. The one grouping of rows
    by key that reports, summaries and the columnar export share."""
    import numpy as np  # first use of results: `import gpuprofile` stays free of NumPy

    seen: dict = {}
    keys = keys.tolist() if isinstance(keys, np.ndarray) else list(keys)
    codes = np.fromiter((seen.setdefault(k, len(seen)) for k in keys), dtype, len(keys))
    return codes, list(seen)


def groups(codes, n: int) -> list:
    """Row indices of each of the `n` codes 0..n-1 (factorize's), each in row order: one stable
    sort instead of one pass over the rows per key."""
    import numpy as np

    codes = np.asarray(codes)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(n + 1))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


class Tabular:
    """Mixin of table-like results: to_pandas() and to_csv(path) from the class's table_rows();
    `_frame_index` names the column a DataFrame is indexed by (None: a plain range index)."""

    _frame_index: str | None = None

    def table_rows(self) -> list:
        """The result as rows (dicts), the rows of to_pandas() and to_csv()."""
        raise NotImplementedError

    def to_pandas(self) -> pandas.DataFrame:
        """The result as a pandas DataFrame (needs pandas)."""
        return frame(self.table_rows(), self._frame_index)

    def to_csv(self, path) -> str:
        """Write the result as CSV to `path` (atomically); returns the path."""
        return write_csv(path, self.table_rows())
