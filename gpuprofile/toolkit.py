"""Building blocks for benchmark scripts and notebooks that report numbers the way gpuprofile's
own results do: the plain-text table every report prints, and the distribution-free statistics
of the median that benchmark() stops on. Public and stable; the scripts in benchmarks/ use these
instead of gpuprofile's private modules.

    from gpuprofile.toolkit import median_ci, rel_half_width, text_table
    low, high = median_ci(samples)            # 95 % interval of the median, from order statistics
    noise = rel_half_width(low, high, median) # its half-width relative to the median
    print(text_table(["case", "ms"], rows))
"""

from __future__ import annotations

from ._format import text_table
from ._stats import median_ci, rel_half_width

__all__ = ["median_ci", "rel_half_width", "text_table"]
