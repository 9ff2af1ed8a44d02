"""--gpu-benchmark-histogram: one SVG per group, a box plot of each result's samples (as
pytest-benchmark draws them), written atomically. Needs matplotlib (imported here only)."""

from __future__ import annotations

import os
import re


def _file_name(prefix: str, group) -> str:
    if not group:
        return f"{prefix}.svg"
    return f"{prefix}-{re.sub(r'[^A-Za-z0-9._-]+', '_', str(group))}.svg"


def probe_path(prefix: str) -> str:
    """A file the histograms' folder must take, checked before the tests run: PREFIX.svg, its
    folder made now (OSError when it cannot be)."""
    folder = os.path.dirname(prefix)
    if folder:
        os.makedirs(folder, exist_ok=True)
    return _file_name(prefix, None)


def write_histograms(entries, prefix: str) -> list:
    """Write PREFIX.svg (results without a group) and PREFIX-GROUP.svg (one per group) from the
    plugin's entries ({name, group, result with samples in ms}); returns the paths written. A
    result without samples is left out of the plot and named in its title."""
    from matplotlib.figure import Figure  # no pyplot: the user's backend stays as it is

    from .._files import save_figure

    paths = []
    groups: dict = {}
    for e in entries:
        groups.setdefault(e["group"] or "", []).append(e)
    folder = os.path.dirname(prefix)
    if folder:
        os.makedirs(folder, exist_ok=True)
    for group, members in sorted(groups.items()):
        shown = [e for e in members if e["result"].get("samples")]
        missing = [e["name"] for e in members if not e["result"].get("samples")]
        fig = Figure(figsize=(max(6.0, 1.2 * len(shown) + 2), 5))
        ax = fig.add_subplot()
        if shown:
            ax.boxplot([e["result"]["samples"] for e in shown], whis=1.5, showfliers=True)
            ax.set_xticks(range(1, len(shown) + 1),
                          [e["name"].rpartition("::")[2] for e in shown], rotation=30, ha="right")
        ax.set_ylabel("time per call (ms)")
        title = f"gpu benchmarks: {group}" if group else "gpu benchmarks"
        if missing:
            title += f" ({len(missing)} without samples)"
        ax.set_title(title)
        fig.tight_layout()
        path = _file_name(prefix, group)
        save_figure(fig, path)
        paths.append(path)
    return paths
