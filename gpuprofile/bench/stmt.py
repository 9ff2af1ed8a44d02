"""Statements as callables, for `gpuprofile bench STMT` and the `%gpu_timeit` magic: the timeit
way of turning source text into something gpuprofile.benchmark can call.

Setup runs once, in the namespace; the statement becomes the body of a function defined in that
namespace, so it sees setup's names (and, in IPython, the user's) as globals. A statement that is
a single expression returns its value, so benchmark's first call sees what the code produced.
"""

from __future__ import annotations

import ast
import textwrap

_FN_NAME = "__gpuprofile_stmt__"


class BadStatement(ValueError):
    """The statement or setup text is empty or does not compile (nothing ran)."""


def _check(source: str, what: str) -> str:
    source = textwrap.dedent(source).strip("\n")
    if not source.strip():
        raise BadStatement(f"{what} is empty")
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as e:  # bytes of another encoding, passed on as lone surrogates
        code = ord(source[e.start])
        bad = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise BadStatement(f"{what} is not valid UTF-8 ({bad} at character {e.start + 1}): "
                           f"{source!r}") from None
    try:
        ast.parse(source)
    except SyntaxError as e:
        raise BadStatement(f"{what} is not valid Python: {e.msg} (line {e.lineno}): {source!r}") from None
    return source


def compile_stmt(stmt: str, setup: str = "", namespace: dict | None = None, name: str | None = None):
    """(fn, namespace): runs `setup` in `namespace` (a new dict when None) and returns a function
    of no arguments whose body is `stmt`. BadStatement for empty or invalid text, found before
    anything runs; an exception raised by setup propagates."""
    ns = {} if namespace is None else namespace
    stmt = _check(stmt, "the statement")
    setup = _check(setup, "the setup") if setup and setup.strip() else ""
    if setup:
        exec(compile(setup, "<setup>", "exec"), ns)  # noqa: S102
    label = name or stmt_name(stmt)
    body = ast.parse(stmt).body
    if len(body) == 1 and isinstance(body[0], ast.Expr):
        stmt = f"return ({stmt}\n)"
    tree = ast.parse(f"def {_FN_NAME}():\n{textwrap.indent(stmt, '    ')}\n")
    ast.increment_lineno(tree, -1)  # tracebacks count the statement's own lines from 1
    exec(compile(tree, "<stmt>", "exec"), ns)  # noqa: S102
    fn = ns.pop(_FN_NAME)
    fn.__qualname__ = fn.__name__ = label
    return fn, ns


def stmt_name(stmt: str, width: int = 48) -> str:
    """A result name for a statement: its first line, cut to `width` characters."""
    first = stmt.strip().splitlines()[0].strip() if stmt.strip() else "stmt"
    more = len(stmt.strip().splitlines()) > 1
    text = first + (" …" if more else "")
    return text if len(text) <= width else text[: width - 1] + "…"
