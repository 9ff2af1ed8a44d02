"""gpuprofile.nvtx as a stand-in for `import nvtx`: the nvtx package's names and arguments
(annotate as decorator and context manager, push_range/pop_range, start_range/end_range, mark,
get_domain and Domain methods, category as a name or an int, payload). The C calls are recorded
by a stand-in; the last test calls the real C functions (no tool attached: near no-ops)."""

import pytest

from gpuprofile import nvtx


@pytest.fixture
def calls(monkeypatch):
    log = []
    for name in ("push", "pop", "mark", "start", "end", "name_category"):
        def record(*a, _name=name):
            log.append((_name, *a))
            return 7 if _name == "start" else 0
        monkeypatch.setattr(nvtx._C, f"_nvtx_{name}", record)
    monkeypatch.setattr(nvtx.Domain, "_by_name", {})  # categories are numbered afresh
    monkeypatch.setattr(nvtx._C, "_nvtx_domain_create", lambda name: 0)  # no tool: default domain
    monkeypatch.setattr(nvtx, "_TOOL", True)  # decorators wrap
    monkeypatch.setattr(nvtx, "_RESOLVED", {})  # domain handles change between tests
    return log


def test_annotate_as_context_manager_and_decorator(calls):
    with nvtx.annotate("load", color="green", category=2, payload=5):
        pass

    @nvtx.annotate()
    def step():
        return 1

    assert step() == 1
    assert calls == [("push", "load", 0xFF00C000, None, 2, 5), ("pop", None),
                     ("push", step.__wrapped__.__qualname__, -1, None, 0), ("pop", None)]


def test_string_categories_are_named_once_per_domain(calls):
    nvtx.push_range("a", category="io")
    nvtx.pop_range()
    nvtx.mark("b", category="io", payload=2.5)
    nvtx.mark("c", category="compute")
    assert calls == [("name_category", 1, "io", None), ("push", "a", -1, None, 1), ("pop", None),
                     ("mark", "b", -1, None, 1, 2.5), ("name_category", 2, "compute", None),
                     ("mark", "c", -1, None, 2)]


def test_start_and_end_range_remember_the_domain(calls, monkeypatch):
    monkeypatch.setattr(nvtx._C, "_nvtx_domain_create", lambda name: 1234)  # a tool attached
    rid = nvtx.start_range("load", domain="trainer", payload=3)
    nvtx.end_range(rid)
    plain = nvtx.start_range("x")
    nvtx.end_range(plain)
    assert rid == 7 and calls == [("start", "load", -1, 1234, 0, 3), ("end", rid, 1234),
                                  ("start", "x", -1, None, 0), ("end", 7, None)]


def test_domain_objects_have_the_packages_methods(calls, monkeypatch):
    """The keyword forms go through Python (recorded here); event attributes and pop_range go
    to NVTX from C directly (test_nvtx_tool.py records those with a tool attached)."""
    monkeypatch.setattr(nvtx._C, "_nvtx_domain_create", lambda name: 99)
    d = nvtx.get_domain("trainer")
    assert d is nvtx.get_domain("trainer") and d is nvtx.Domain("trainer") and d._handle == 99
    attributes = d.get_event_attributes(message="fwd", color="red", category="io", payload=1)
    assert attributes._args == ("fwd", 0xFFFF0000, 99, 1, 1)
    d.push_range(attributes=attributes)  # by keyword: the Python path
    rid = d.start_range(message="bwd")
    d.end_range(range_id=rid)
    d.mark("here")
    assert d.get_category_id("io") == 1
    assert calls == [("name_category", 1, "io", 99), ("push", "fwd", 0xFFFF0000, 99, 1, 1),
                     ("start", "bwd", -1, 99, 0), ("mark", "here", -1, 99, 0)]
    assert nvtx.get_domain() is nvtx.get_domain(None) and nvtx.get_domain()._handle is None


def test_the_c_domain_methods_check_their_arguments():
    d = nvtx.get_domain("c-checks")
    a = d.get_event_attributes(message="x")
    with pytest.raises(TypeError, match=r"pop_range\(\) takes no arguments \(1 given\)"):
        d.pop_range(a)
    for bad, error, match in (("x", TypeError, "range_id must be an int .*got str"),
                              (True, TypeError, "range_id must be an int .*got bool"),
                              (1.0, TypeError, "got float"), (-1, OverflowError, r"2\*\*64"),
                              (2**64, OverflowError, r"\[0, 2\*\*64\)")):
        with pytest.raises(error, match=match):
            d.end_range(bad)
    with pytest.raises(TypeError, match="end_range"):
        d.end_range()  # no id: the Python method names what is missing
    with pytest.raises(TypeError, match="give event attributes or keywords, not both"):
        d.push_range(a, message="y")
    with pytest.raises(TypeError, match="message must be a str"):
        d.mark(5)  # not attributes: checked as a message
    with pytest.raises(TypeError, match="_handle must be None or an int, got str"):
        d._handle = "0x1"
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del d._handle
    assert d._handle is None  # unchanged by the refused assignments


def test_event_attributes_c_half_checks_and_owns_its_message():
    C = nvtx._C.NvtxEventAttributes
    for args, error, match in ((("x", -1, None, 0, "p"), TypeError, "payload must be an int or"),
                               (("x", -1, None, 2**32), ValueError, "category"),
                               ((5,), TypeError, "str"), (("a\0b",), ValueError, "null")):
        with pytest.raises(error, match=match):
            C(*args)
    with pytest.raises(TypeError, match="positional arguments only"):
        C("x", color=-1)

    class Lazy(nvtx.EventAttributes):
        def __init__(self):  # never fills the C half
            pass

    with pytest.raises(TypeError, match="never initialized"):
        nvtx.get_domain().push_range(Lazy())
    message = "".join(["own", "ed"])  # a fresh str: only the attributes keep it alive
    a = nvtx.get_domain().get_event_attributes(message=message)
    del message
    assert nvtx.get_domain().push_range(a) == nvtx.get_domain().pop_range()  # both -2: no tool


def test_domain_subclasses_get_their_own_c_methods():
    class Sub(nvtx._C.NvtxDomain):
        def mark(self, *args):  # a subclass's own method is kept
            return "own"

    assert Sub.__dict__["push_range"] is not nvtx._C.NvtxDomain.__dict__["push_range"]
    assert Sub().mark() == "own" and Sub().pop_range() == -2
    with pytest.raises(TypeError, match="no class arguments"):
        class Bad(nvtx._C.NvtxDomain, flag=True):
            pass
    with pytest.raises(AttributeError, match="_push_range"):
        Sub().push_range(message="x")  # no Python half to take the keyword form


@pytest.mark.parametrize("kwargs, error, match", [
    ({"category": 1.5}, TypeError, "category must be an int or a str"),
    ({"category": -1}, ValueError, r"category must be in \[0, 2\*\*32\)"),
    ({"category": 2**32}, ValueError, "category"),
    ({"payload": "x"}, TypeError, "payload must be an int or a float"),
    ({"payload": True}, TypeError, "payload must be an int or a float"),
    ({"domain": 3}, TypeError, "domain must be None, a str or an nvtx.Domain"),
])
def test_bad_arguments_are_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        nvtx.push_range("x", **kwargs)
    with pytest.raises(error, match=match):
        nvtx.annotate("x", **kwargs)


def test_the_c_functions_take_payloads_and_category_names():
    from gpuprofile import _C

    for payload in (None, 3, -(2**63), 2**64 - 1, 2.5):
        depth = _C._nvtx_push("x", -1, None, 0, payload)
        _C._nvtx_pop(None)
        _C._nvtx_mark("x", -1, None, 0, payload)
        _C._nvtx_end(_C._nvtx_start("x", -1, None, 0, payload), None)
        assert isinstance(depth, int)
    _C._nvtx_name_category(1, "io", None)
    with pytest.raises(OverflowError, match="64 bits"):
        _C._nvtx_push("x", -1, None, 0, 2**64)
    with pytest.raises(TypeError, match="payload must be an int or a float, got str"):
        _C._nvtx_mark("x", -1, None, 0, "p")
    with pytest.raises(ValueError, match="category"):
        _C._nvtx_mark("x", -1, None, 2**32)
    # parsed by hand (METH_FASTCALL): each argument checked, each error named
    for call, args, error, match in (
            (_C._nvtx_push, (), TypeError, "1 to 5 arguments, got 0"),
            (_C._nvtx_mark, ("x",) * 6, TypeError, "1 to 5 arguments, got 6"),
            (_C._nvtx_push, (5,), TypeError, "message must be a str, got int"),
            (_C._nvtx_start, ("a\0b",), ValueError, "null character"),
            (_C._nvtx_push, ("x", "red"), TypeError, "integer"),
            (_C._nvtx_mark, ("x", -1, None, 1.5), TypeError, "category must be an int, got float"),
            (_C._nvtx_mark, ("x", -1, None, -1), ValueError, r"\[0, 2\*\*32\)"),
            (_C._nvtx_pop, (None, None), TypeError, "got 2 arguments"),
            (_C._nvtx_end, (), TypeError, "got 0 arguments"),
            (_C._nvtx_end, ("7",), TypeError, "range id must be an int, got str")):
        with pytest.raises(error, match=match):
            call(*args)
    with nvtx.annotate("real", category="io", payload=1.0):
        nvtx.mark("inside", domain="compat-test", category="io")


def test_without_a_tool_arguments_are_still_checked_and_c_is_skipped(calls, monkeypatch):
    monkeypatch.setattr(nvtx, "_TOOL", False)  # no tool attached: the fast paths
    for _ in range(2):  # the second time the checked arguments come from the cache
        with nvtx.annotate("x", color="blue", category=3) as a:
            pass
        assert a._args == ("x", nvtx.COLORS["blue"], None, 3)
        with pytest.raises(ValueError, match="unknown color"):
            nvtx.annotate("x", color="nope")
        with pytest.raises(TypeError, match="message must be a str"):
            nvtx.annotate(5, color="blue")
        with pytest.raises(TypeError, match="color must be"):
            nvtx.annotate("x", color=[1])  # unhashable: checked without the cache
    assert nvtx.start_range("x") == 0 and nvtx.end_range(0) is None
    dom = nvtx.get_domain("fast")
    assert dom.push_range(dom.get_event_attributes(message="x")) == -2 and dom.pop_range() == -2
    with pytest.raises(TypeError, match="nvtx.range\\(\\) without a message only decorates"):
        with nvtx.annotate():
            pass
    assert calls == []  # nothing reached C
