"""Which kernels `--kernel PATTERN` means, for `gpuprofile metrics`, `gpuprofile stalls` and the
results' select(): ncu's `-k regex:` semantics, plus a plain substring.

A kernel matches when the regular expression (re.search) or, failing that, the literal text is
found in any of its names: the full demangled name (`void cutlass::Kernel2<...>(Params)`), the
qualified function name without return type, parameters and template arguments
(`cutlass::Kernel2<…>`) and the bare function name ncu's `--kernel-name-base function` shows
(`Kernel2`). A leading `regex:` (as ncu's `-k regex:NAME`) is dropped. Searching the full name
finds what the short names hide (`-k sm90_xmma`, `-k bf16`, `-k "Params"`); searching the short
ones lets an anchored pattern (`-k "^nvjet_"`, `-k "Kernel2$"`) work as ncu's does.

When nothing matches, no_match_message() lists the kernels there were, so a user who guessed
`gemm` on Hopper (whose cuBLAS kernels are named `nvjet_*`) sees what to ask for instead.
"""

from __future__ import annotations

import re

from .._format import short_name

_WIDE = 1 << 20  # short_name never cuts a name this long


_LISTED = 40


def names_of(full: str) -> tuple:
    """(full demangled name, qualified function name, bare function name) of one kernel."""
    qualified = short_name(full, _WIDE)
    bare = re.sub(r"<…>", "", qualified).rsplit("::", 1)[-1]
    return full, qualified, bare


def compile_pattern(pattern: str):
    """A matcher for `pattern`: a callable(name) -> bool. ValueError names a bad pattern."""
    if not isinstance(pattern, str):
        raise TypeError(f"a kernel pattern must be a str, got {type(pattern).__name__}")
    text = pattern[len("regex:"):] if pattern.startswith("regex:") else pattern
    if not text:
        raise ValueError("the kernel pattern is empty")
    try:
        regex = re.compile(text)
    except re.error as e:
        regex = None
        if pattern.startswith("regex:"):
            raise ValueError(f"kernel pattern {pattern!r} is not a regular expression: {e}") from None

    def matches(name: str) -> bool:
        candidates = names_of(str(name))
        if regex is not None and any(regex.search(c) for c in candidates):
            return True
        return any(text in c for c in candidates)

    return matches


def match(pattern: str, names: list) -> list:
    """Indices of the names `pattern` matches, in order."""
    matches = compile_pattern(pattern)
    return [i for i, n in enumerate(names) if matches(n)]


def no_match_message(pattern: str, names: list) -> str:
    """What a user sees when `pattern` matched nothing: the kernels there were."""
    if not names:
        return f"--kernel {pattern!r}: no kernel ran"
    distinct = list(dict.fromkeys(names))
    lines = [f"--kernel {pattern!r} matched none of the {len(names)} kernels; there were "
             f"({len(distinct)} distinct names):"]
    lines += [f"  {short_name(n, 100)}" for n in distinct[:_LISTED]]
    if len(distinct) > _LISTED:
        lines.append(f"  ... and {len(distinct) - _LISTED} more")
    lines.append("(the pattern is searched as a regular expression and as text in the full "
                 "and the short names)")
    return "\n".join(lines)
