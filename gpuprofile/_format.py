"""Plain-text and HTML tables for result objects."""

from __future__ import annotations

import html
import math


def fmt(value, digits: int = 4) -> str:
    """A number for a table cell: NaN/None as '-', floats to `digits` significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value == 0:
            return "0"
        if abs(value) >= 10 ** digits:
            return f"{value:.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def text_table(headers, rows, title: str | None = None) -> str:
    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values):
        # first column left-aligned (names), numbers right-aligned
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths, strict=True)))

    out = [title] if title else []
    out += [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def html_table(headers, rows, title: str | None = None) -> str:
    head = "".join(f"<th style='text-align:right'>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(
            f"<td style='text-align:{'left' if i == 0 else 'right'}'>{html.escape(fmt(v))}</td>"
            for i, v in enumerate(row)
        ) + "</tr>"
        for row in rows
    )
    caption = f"<caption style='text-align:left'><b>{html.escape(title)}</b></caption>" if title else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
