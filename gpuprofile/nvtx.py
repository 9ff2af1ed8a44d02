"""NVTX ranges and marks, usable alone: they show up in Nsight Systems, Nsight Compute and any
tool that attaches to NVTX. Without a tool attached every call costs a few nanoseconds in C.

    from gpuprofile import nvtx
    nvtx.push("load", color="green"); ...; nvtx.pop()
    with nvtx.range("step", color=0xFF00FF00, domain="trainer"): ...
    @nvtx.range("forward")           # or bare @nvtx.range: the function's qualified name
    def forward(x): ...

The names of the `nvtx` package work too, so `from gpuprofile import nvtx` can replace
`import nvtx`: annotate (= range), push_range/pop_range, start_range/end_range, mark,
get_domain and Domain objects (get_event_attributes, push_range, pop_range, start_range,
end_range, mark, get_category_id). A category is an int or a name (named once per domain with
nvtxDomainNameCategory); payload= is an int or a float.
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


class EventAttributes(_C.NvtxEventAttributes):
    """A message, color, category and payload resolved once (the nvtx package's fast path:
    domain.get_event_attributes(...) then domain.push_range(attributes)). Its C half holds the
    filled NVTX attributes, so pushing them is one C call."""

    __slots__ = ("message", "color", "category", "payload", "_args")

    def __init__(self, message: str, color=None, category=None, payload=None, domain=None):
        self.message, self.color, self.category, self.payload = message, color, category, payload
        self._args = _event(message, color, domain, category, payload)
        super().__init__(*self._args)


class Domain(_C.NvtxDomain):
    """A named NVTX domain: its ranges are grouped under that name in Nsight. Domain(None), or
    get_domain(), is NVTX's default domain.

    push_range, pop_range, start_range, end_range and mark are C (NvtxDomain): given event
    attributes, one NVTX call (which returns at once without a tool); any other form (keywords,
    a message) comes back to the methods below of the same name with a leading underscore."""

    _by_name: dict = {}

    def __new__(cls, name: str | None = None):
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"domain name must be a non-empty str, got {name!r}")
        if name not in cls._by_name:
            self = super().__new__(cls)
            self.name = name
            handle = _C._nvtx_domain_create(name) if name is not None else None
            self._handle = handle or None  # None: no tool attached, the default domain is used
            self._categories = {}
            cls._by_name[name] = self
        return cls._by_name[name]

    def __repr__(self) -> str:
        return f"nvtx.Domain({self.name!r})"

    def get_category_id(self, name: str) -> int:
        """The id of category `name` in this domain, named in the tool on first use."""
        found = self._categories.get(name)
        if found is None:
            if not isinstance(name, str):
                raise TypeError(f"NVTX category must be an int or a str, got {type(name).__name__}")
            found = self._categories[name] = len(self._categories) + 1
            _C._nvtx_name_category(found, name, self._handle)
        return found

    def get_event_attributes(self, message=None, color=None, category=None, payload=None):
        return EventAttributes(message, color, category, payload, self)

    def _push_range(self, attributes=None, message=None, color=None, category=None,
                    payload=None) -> int:
        args = self._attributes(attributes, dict(message=message, color=color, category=category,
                                                 payload=payload))
        return _C._nvtx_push(*args) if _TOOL or _probe() else _NO_TOOL

    def _start_range(self, attributes=None, **kwargs) -> int:
        args = self._attributes(attributes, kwargs)
        return _C._nvtx_start(*args) if _TOOL or _probe() else 0

    def _end_range(self, range_id: int) -> None:
        self.end_range(range_id)  # by keyword: the C method takes the id positionally

    def _mark(self, attributes=None, **kwargs) -> None:
        args = self._attributes(attributes, kwargs)
        if _TOOL or _probe():
            _C._nvtx_mark(*args)

    def _attributes(self, attributes, kwargs) -> tuple:
        if isinstance(attributes, EventAttributes):
            if any(v is not None for v in kwargs.values()):
                raise TypeError("give event attributes or keywords, not both")
            return attributes._args[:2] + (self._handle,) + attributes._args[3:]
        if attributes is not None:
            kwargs = {**kwargs, "message": attributes}
        return _event(kwargs.pop("message", None), kwargs.pop("color", None), self,
                      kwargs.pop("category", None), kwargs.pop("payload", None), kwargs)


def get_domain(name: str | None = None) -> Domain:
    """The domain named `name` (NVTX's default domain for None), created on first use."""
    return Domain(name)


def _domain_of(domain) -> Domain | None:
    if domain is None or isinstance(domain, Domain):
        return domain
    if isinstance(domain, str):
        return Domain(domain)
    raise TypeError(f"domain must be None, a str or an nvtx.Domain, got {type(domain).__name__}")


def _domain(domain):
    d = _domain_of(domain)
    return None if d is None else d._handle


def _message(message) -> str:
    if not isinstance(message, str):
        raise TypeError(f"NVTX message must be a str, got {type(message).__name__}")
    return message


def _category(category, domain: Domain | None) -> int:
    if category is None:
        return 0
    if isinstance(category, str):
        return (domain or Domain(None)).get_category_id(category)
    if isinstance(category, bool) or not isinstance(category, int):
        raise TypeError(f"NVTX category must be an int or a str, got {type(category).__name__}")
    if not 0 <= category <= 0xFFFFFFFF:
        raise ValueError(f"NVTX category must be in [0, 2**32), got {category}")
    return category


_RESOLVED: dict = {}  # (message, color, domain, category and their types) -> checked C arguments
_RESOLVED_MAX = 4096  # messages made afresh each call (f-strings) must not grow it without end


def _resolve(message, color, domain, category) -> tuple:
    d = _domain_of(domain)
    return (_message(message), _color(color), None if d is None else d._handle, _category(category, d))


def _event(message, color, domain, category, payload, unknown=None) -> tuple:
    """The C call's arguments (message, color, domain handle, category[, payload]); the payload
    only when given, so the common call passes four. Checked once per distinct call (then a
    dict lookup: the checks cost more than NVTX itself without a tool attached)."""
    if color is domain is category is payload is None and message.__class__ is str and not unknown:
        return (message, -1, None, 0)  # the common call: nothing to check beyond the message
    if unknown:
        raise TypeError(f"unexpected NVTX keywords {sorted(unknown)}")
    key = (message, color, domain, category, type(color), type(category))  # True is not 1 here
    try:
        args = _RESOLVED[key]
    except KeyError:
        args = _resolve(message, color, domain, category)
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[key] = args
    except TypeError:  # an unhashable argument: checked (and refused) without the cache
        args = _resolve(message, color, domain, category)
    if payload is None:
        return args
    if isinstance(payload, bool) or not isinstance(payload, (int, float)):
        raise TypeError(f"NVTX payload must be an int or a float, got {type(payload).__name__}")
    return args + (payload,)


def push(message: str, color=None, domain=None, category=None, payload=None) -> int:
    """Open a nested range on this thread; returns its depth (negative when no tool is attached)."""
    if _TOOL is False and color is domain is category is payload is None and \
            message.__class__ is str:  # as in start_range
        return _NO_TOOL
    args = _event(message, color, domain, category, payload)
    return _C._nvtx_push(*args) if _TOOL or (_TOOL is None and _probe()) else _NO_TOOL


def pop(domain=None) -> int:
    """Close this thread's innermost range (of `domain`)."""
    handle = _domain(domain) if domain is not None else None
    return _C._nvtx_pop(handle) if _TOOL or (_TOOL is None and _probe()) else _NO_TOOL


def mark(message: str, color=None, domain=None, category=None, payload=None) -> None:
    """An instantaneous marker."""
    if _TOOL is False and color is domain is category is payload is None and \
            message.__class__ is str:  # as in start_range
        return
    args = _event(message, color, domain, category, payload)
    if _TOOL or (_TOOL is None and _probe()):
        _C._nvtx_mark(*args)


def start(message: str, color=None, domain=None, category=None, payload=None) -> int:
    """Open a range that may end on another thread; returns the id to pass to end()."""
    args = _event(message, color, domain, category, payload)
    return _C._nvtx_start(*args) if _TOOL or (_TOOL is None and _probe()) else 0


def end(range_id: int, domain=None) -> None:
    """Close a range opened with start()."""
    handle = _domain(domain)
    if _TOOL or (_TOOL is None and _probe()):
        _C._nvtx_end(range_id, handle)


_TOOL = None  # whether an NVTX tool is attached: None until the first call probes (_probe)
_NO_TOOL = -2  # what NVTX's push and pop return without a tool (NVTX_NO_PUSH_POP_TRACKING)


def _probe() -> bool:
    """Whether a tool (Nsight Systems, ...) receives NVTX calls. NVTX binds a tool at its first
    call, from the environment, and never later, so one probe answers for the process; without
    one every call here is checked but skips C (the nvtx package skips as much, unchecked)."""
    global _TOOL
    if _TOOL is None:
        _TOOL = bool(_C._nvtx_domain_create("gpuprofile"))
    return _TOOL


class _RangeId(int):
    """start_range's id when the range is in a domain: end_range(id) closes it there, as the
    nvtx package's end_range(range_id) does without being told the domain."""

    domain = None


push_range = push  # the nvtx package's names
pop_range = pop


def start_range(message: str | None = None, color=None, domain=None, category=None,
                payload=None) -> int:
    """The nvtx package's start_range: the id to pass to end_range (it remembers the domain)."""
    if _TOOL is False and color is domain is category is payload is None and \
            message.__class__ is str:  # _event's common call, inlined: nothing to check or call
        return 0
    args = _event(message, color, domain, category, payload)
    if _TOOL is False or not (_TOOL or _probe()):
        return 0
    rid = _C._nvtx_start(*args)
    if args[2] is None:
        return rid
    out = _RangeId(rid)
    out.domain = args[2]
    return out


def end_range(range_id: int, domain=None) -> None:
    """The nvtx package's end_range: close a start_range range, in the domain it was opened in."""
    if _TOOL is False and domain is None:  # nothing to close, nothing to check: return first
        return
    handle = _domain(domain) if domain is not None else getattr(range_id, "domain", None)
    if _TOOL or (_TOOL is None and _probe()):
        _C._nvtx_end(range_id, handle)


def _qualname(fn) -> str:
    """The name a decorator without a message gives fn's range (nvtx's @annotate() habit)."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"nvtx.range() needs a message: {type(fn).__name__} has no __qualname__ "
                        "or __name__ to take one from")
    return name


class annotate:
    """`with nvtx.annotate("x"):` or `@nvtx.annotate("x")`: push on entry, pop on exit (the nvtx
    package's class). As a decorator the message may be left out, `@nvtx.annotate()`: the range
    takes the function's qualified name."""

    __slots__ = ("message", "_args", "_domain")

    def __init__(self, message: str | None = None, color=None, domain=None, category=None,
                 payload=None):
        self.message = message
        # Checked now (a missing message is filled in by the decorator). Built once per `with`
        # in the usual habit, so _event's cache is read here without its call: a repeated
        # call finds its checked arguments in one dict lookup.
        if payload is None:
            try:
                args = _RESOLVED.get((message, color, domain, category, type(color), type(category)))
            except TypeError:  # unhashable: _event checks (and refuses) it
                args = None
            if args is None:
                args = _event("" if message is None else message, color, domain, category, None)
        else:
            args = _event("" if message is None else message, color, domain, category, payload)
        self._args = args
        self._domain = args[2]

    @property
    def category(self) -> int:
        return self._args[3]

    def __enter__(self):
        if self.message is None:
            raise TypeError("nvtx.range() without a message only decorates: use "
                            "`with nvtx.range('name'):`")
        if _TOOL is False:  # no tool attached: the common case, tested first
            return self
        if _TOOL or _probe():
            _C._nvtx_push(*self._args)
        return self

    def __exit__(self, exc_type, exc_value, traceback):  # named, not *exc: no tuple per exit
        if _TOOL:
            _C._nvtx_pop(self._domain)
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"nvtx.range(...) decorates a callable, got {type(fn).__name__}")
        if not (_TOOL or (_TOOL is None and _probe())):  # nothing records it: fn, as nvtx does
            return fn
        event = self._args if self.message is not None else (_qualname(fn),) + self._args[1:]
        domain = self._domain

        # The C calls themselves, not `with self`: a tool is attached (else fn came back above,
        # and NVTX binds a tool for the process's life), so __enter__'s checks would be two
        # Python calls per call for nothing (the nvtx package's decorator calls C directly too).
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            _C._nvtx_push(*event)
            try:
                return fn(*args, **kwargs)
            finally:
                _C._nvtx_pop(domain)

        return wrapper


class range(annotate):  # noqa: A001 - the NVTX name users know
    """annotate, which also decorates bare: `@nvtx.range` names the range after the function's
    qualified name (annotate itself keeps no __new__: building one per `with` is the hot path)."""

    __slots__ = ()

    def __new__(cls, message=None, color=None, domain=None, category=None, payload=None):
        if callable(message) and color is domain is category is payload is None:
            return cls(_qualname(message))(message)  # bare @range: decorate right away
        return object.__new__(cls)
