"""NVTX ranges and marks, usable alone: they show up in Nsight Systems, Nsight Compute and any
tool that attaches to NVTX. Without a tool attached every call costs a few nanoseconds in C.

    from gpuprofile import nvtx
    nvtx.push("load", color="green"); ...; nvtx.pop()
    with nvtx.range("step", color=0xFF00FF00, domain="trainer"): ...
    @nvtx.range("forward")           # or bare @nvtx.range: the function's qualified name
    def forward(x): ...
"""

from __future__ import annotations

import functools

from . import _C

COLORS = {
    "red": 0xFFFF0000, "green": 0xFF00C000, "blue": 0xFF0060FF, "yellow": 0xFFFFD000,
    "orange": 0xFFFF8000, "purple": 0xFF8000C0, "cyan": 0xFF00C0C0, "magenta": 0xFFFF00FF,
    "gray": 0xFF808080, "grey": 0xFF808080, "black": 0xFF000000, "white": 0xFFFFFFFF,
}


def _color(color) -> int:
    if color is None:
        return -1
    if isinstance(color, str):
        key = color.lower()
        if key in COLORS:
            return COLORS[key]
        if key.startswith("#") and len(key) in (7, 9):
            try:
                value = int(key[1:], 16)
            except ValueError:
                pass
            else:
                return value | 0xFF000000 if len(key) == 7 else value
        raise ValueError(f"unknown color {color!r}: use one of {', '.join(sorted(COLORS))}, "
                         "'#RRGGBB', '#AARRGGBB' or an int 0xAARRGGBB")
    if isinstance(color, int) and not isinstance(color, bool):
        if not 0 <= color <= 0xFFFFFFFF:
            raise ValueError(f"color int must be 0xAARRGGBB in [0, 0xFFFFFFFF], got {color:#x}")
        return color | 0xFF000000 if color <= 0xFFFFFF else color
    raise TypeError(f"color must be None, a name, '#RRGGBB' or an int, got {type(color).__name__}")


class Domain:
    """A named NVTX domain: its ranges are grouped under that name in Nsight."""

    _by_name: dict = {}

    def __new__(cls, name: str):
        if not isinstance(name, str) or not name:
            raise TypeError(f"domain name must be a non-empty str, got {name!r}")
        if name not in cls._by_name:
            self = super().__new__(cls)
            self.name = name
            handle = _C._nvtx_domain_create(name)
            self._handle = handle or None  # None: no tool attached, the default domain is used
            cls._by_name[name] = self
        return cls._by_name[name]

    def __repr__(self) -> str:
        return f"nvtx.Domain({self.name!r})"


def _domain(domain):
    if domain is None:
        return None
    if isinstance(domain, str):
        domain = Domain(domain)
    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be None, a str or an nvtx.Domain, got {type(domain).__name__}")
    return domain._handle


def _message(message) -> str:
    if not isinstance(message, str):
        raise TypeError(f"NVTX message must be a str, got {type(message).__name__}")
    return message


def push(message: str, color=None, domain=None, category: int = 0) -> int:
    """Open a nested range on this thread; returns its depth (negative when no tool is attached)."""
    return _C._nvtx_push(_message(message), _color(color), _domain(domain), category)


def pop(domain=None) -> int:
    """Close this thread's innermost range (of `domain`)."""
    return _C._nvtx_pop(_domain(domain))


def mark(message: str, color=None, domain=None, category: int = 0) -> None:
    """An instantaneous marker."""
    _C._nvtx_mark(_message(message), _color(color), _domain(domain), category)


def start(message: str, color=None, domain=None, category: int = 0) -> int:
    """Open a range that may end on another thread; returns the id to pass to end()."""
    return _C._nvtx_start(_message(message), _color(color), _domain(domain), category)


def end(range_id: int, domain=None) -> None:
    """Close a range opened with start()."""
    _C._nvtx_end(range_id, _domain(domain))


def _qualname(fn) -> str:
    """The name a decorator without a message gives fn's range (nvtx's @annotate() habit)."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"nvtx.range() needs a message: {type(fn).__name__} has no __qualname__ "
                        "or __name__ to take one from")
    return name


class range:  # noqa: A001 - the NVTX name users know
    """`with nvtx.range("x"):` or `@nvtx.range("x")`: push on entry, pop on exit. As a decorator
    the message may be left out, `@nvtx.range()` or bare `@nvtx.range`: the range takes the
    function's qualified name."""

    __slots__ = ("message", "_color", "_domain", "category")

    def __new__(cls, message=None, *args, **kwargs):
        if callable(message) and not args and not kwargs:  # bare @range: decorate right away
            return cls(_qualname(message))(message)
        return super().__new__(cls)

    def __init__(self, message: str | None = None, color=None, domain=None, category: int = 0):
        self.message = None if message is None else _message(message)
        self._color = _color(color)
        self._domain = _domain(domain)
        self.category = category

    def __enter__(self):
        if self.message is None:
            raise TypeError("nvtx.range() without a message only decorates: use "
                            "`with nvtx.range('name'):`")
        _C._nvtx_push(self.message, self._color, self._domain, self.category)
        return self

    def __exit__(self, *exc):
        _C._nvtx_pop(self._domain)
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"nvtx.range(...) decorates a callable, got {type(fn).__name__}")
        span = self
        if self.message is None:
            span = object.__new__(range)
            span.message, span._color = _qualname(fn), self._color
            span._domain, span.category = self._domain, self.category

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with span:
                return fn(*args, **kwargs)

        return wrapper
