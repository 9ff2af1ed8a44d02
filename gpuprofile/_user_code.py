"""How results and errors speak of the user's code: the name of a function we were given, and a
note added to an exception it raised. Shared by benchmark() and metrics(), which both run a
user's function and both must name it and explain a failure around it."""

from __future__ import annotations


def callable_name(fn) -> str:
    """fn's qualified name, else its name, else its type's name (a callable object)."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def add_note(exc: BaseException, note: str) -> None:
    """exc.add_note(note); on Python 3.10 the note is kept in __notes__, where 3.11's traceback
    would show it."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined]
