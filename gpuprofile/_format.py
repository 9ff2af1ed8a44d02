"""Plain-text and HTML tables for result objects."""

from __future__ import annotations

import html
import math


def fmt(value, digits: int = 4) -> str:
    """A number for a table cell: NaN/None as '-', floats to `digits` significant digits."""
    if type(value) is float:  # most cells: the checks below in the order that costs least
        if value != value:
            return "-"
        if value == 0:
            return "0"
        return f"{value:.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"
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


def fmt_column(values, digits: int = 4) -> list:
    """[fmt(v, digits) for v in values], the common floats without a call each (a table of 400k
    rows: `gpuprofile compare` of 200k pairs)."""
    spec, big = f".{digits}g", 10 ** digits
    return [format(v, spec) if type(v) is float and 0 < abs(v) < big else fmt(v, digits) for v in values]


NAME_WIDTH = 60
_ANON = "(anonymous namespace)"
_OPEN, _CLOSE = "<([{", ">)]}"


def _strip_templates(name: str) -> str:
    """Template arguments collapsed to <…> (nested ones included); `operator<` and the like kept."""
    out, depth = [], 0
    for i, ch in enumerate(name):
        if ch == "<" and not name[:i].endswith("operator") and not name[:i].endswith("<"):
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">" and depth > 0 and not name[:i].endswith("-"):
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _drop_parameters(name: str) -> str:
    """The name without its trailing parameter list (and `const`), found by bracket depth."""
    text = name.rstrip()
    if text.endswith(" const"):
        text = text[: -len(" const")]
    if not text.endswith(")"):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch in _CLOSE:
            depth += 1
        elif ch in _OPEN:
            depth -= 1
            if depth == 0:
                return text[:i] if i else text
    return text


def short_name(name: str, width: int = NAME_WIDTH) -> str:
    """A kernel name short enough for a table: the qualified function name without its return
    type, parameter list and template arguments (`void at::native::kernel<4, F>(int, F)` ->
    `at::native::kernel<…>`), cut from the left with … past `width` characters. Names that are no
    C++ signature (Triton's `triton_poi_fused_add_0`) pass unchanged when they fit."""
    text = str(name).replace(_ANON, "{anon}")
    text = _strip_templates(_drop_parameters(text))
    depth, cut = 0, -1
    for i, ch in enumerate(text):  # the return type ends at the last top-level space
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i
    text = text[cut + 1:].replace("{anon}", _ANON) or str(name)
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


class Label(str):
    """A table cell shown shortened (short_name) whose full text stays available: as the HTML
    cell's title attribute, and as `full`."""

    full: str

    def __new__(cls, full: str, width: int = NAME_WIDTH):
        obj = super().__new__(cls, short_name(full, width))
        obj.full = str(full)
        return obj


def text_table(headers, rows, title: str | None = None) -> str:
    cells = [[v if type(v) is str else fmt(v) for v in row] for row in rows]
    if any(len(r) != len(headers) for r in cells):
        raise ValueError(f"text_table: a row's cells are not the {len(headers)} headers'")
    widths = [max(len(h), *map(len, column)) for h, column in zip(headers, zip(*cells, strict=True), strict=True)] \
        if cells else [len(h) for h in headers]
    # first column left-aligned (names), numbers right-aligned; one format for every line
    # (a compare of 200k results prints 400k of them)
    line = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths)).format
    out = [title] if title else []
    out += [line(*headers), "  ".join("-" * w for w in widths)]
    out += [line(*r) for r in cells]
    return "\n".join(out)


def html_table(headers, rows, title: str | None = None) -> str:
    head = "".join(f"<th style='text-align:right'>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(
            f"<td style='text-align:{'left' if i == 0 else 'right'}'"
            + (f" title='{html.escape(v.full, quote=True)}'" if isinstance(v, Label) else "")
            + f">{html.escape(fmt(v))}</td>"
            for i, v in enumerate(row)
        ) + "</tr>"
        for row in rows
    )
    caption = f"<caption style='text-align:left'><b>{html.escape(title)}</b></caption>" if title else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
