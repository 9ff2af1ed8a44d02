"""gpuprofile.nvtx.range as nvtx users decorate with it: with a message, `@range()` and bare
`@range` (the function's qualified name). The C push/pop are recorded by a stand-in."""

import pytest

from gpuprofile import nvtx


@pytest.fixture
def pushed(monkeypatch):
    calls = []
    monkeypatch.setattr(nvtx._C, "_nvtx_push", lambda *a: calls.append(("push", *a)) or 0)
    monkeypatch.setattr(nvtx._C, "_nvtx_pop", lambda *a: calls.append(("pop", *a)) or 0)
    monkeypatch.setattr(nvtx, "_TOOL", True)  # else a decorator returns fn itself
    return calls


def test_bare_range_decorator_uses_the_qualified_name(pushed):
    class Model:
        @nvtx.range
        def forward(self, x):
            """Forward."""
            return x * 2

    assert Model().forward(4) == 8 and Model.forward.__doc__ == "Forward."
    name = Model.forward.__qualname__
    assert name.endswith("<locals>.Model.forward")
    assert pushed == [("push", name, -1, None, 0), ("pop", None)]


def test_call_without_message_keeps_color_and_category(pushed):
    @nvtx.range(color="red", category=3)
    def step():
        return "done"

    assert step() == "done"
    assert pushed == [("push", step.__qualname__, 0xFFFF0000, None, 3), ("pop", None)]


def test_message_still_wins(pushed):
    @nvtx.range("fwd")
    def forward():
        pass

    forward()
    assert pushed[0] == ("push", "fwd", -1, None, 0)


def test_misuse_is_a_clear_error():
    with pytest.raises(TypeError, match="without a message only decorates"):
        with nvtx.range():
            pass
    with pytest.raises(TypeError, match="decorates a callable, got int"):
        nvtx.range("x")(5)
    import functools

    with pytest.raises(TypeError, match="partial has no __qualname__"):
        nvtx.range(functools.partial(print))


def test_without_a_tool_the_decorator_returns_the_function_itself(monkeypatch):
    monkeypatch.setattr(nvtx, "_TOOL", False)

    def step():
        return 3

    assert nvtx.range("step")(step) is step and nvtx.annotate()(step) is step
    with pytest.raises(TypeError, match="NVTX message must be a str"):
        nvtx.annotate(5)  # the arguments are still checked
