"""pytest-benchmark's pedantic mode for the gpu_benchmark fixture: its argument checks (the same
errors pytest-benchmark raises), and setup/teardown as the one untimed hook the measurement loop
calls before each timed call."""

from __future__ import annotations


def check(target, setup, teardown, rounds, warmup_rounds, iterations, unknown) -> None:
    """ValueError/TypeError for what pytest-benchmark's pedantic refuses, and for `unknown`
    keywords (neither pedantic's nor benchmark options)."""
    for what, value, least in (("rounds", rounds, 1), ("iterations", iterations, 1),
                               ("warmup_rounds", warmup_rounds, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"pedantic: {what} must be an int >= {least}, got {value!r}")
    if iterations > 1 and setup is not None:
        raise ValueError("pedantic: can't use more than 1 `iterations` with a `setup` function "
                         "(as in pytest-benchmark)")
    for what, fn in (("target", target), ("setup", setup), ("teardown", teardown)):
        if fn is not None and not callable(fn):
            raise TypeError(f"pedantic: {what} must be callable, got {type(fn).__name__}")
    if unknown:
        raise TypeError(f"pedantic() got unknown options {sorted(unknown)}; target's arguments "
                        "go in args= and kwargs=")


class SetupTeardown:
    """pedantic's setup and teardown as the one untimed hook the measurement loop calls before
    each timed call: it runs the previous call's teardown, then setup; finish() runs the last
    teardown. Returns (args, kwargs) for the call."""

    def __init__(self, setup, teardown, args, kwargs, given):
        self.setup, self.teardown, self.args, self.kwargs, self.given = setup, teardown, args, kwargs, given
        self.pending = None

    def __call__(self):
        self.finish()
        call = (self.args, self.kwargs)
        if self.setup is not None:
            made = self.setup()
            if made is not None:
                if self.given:
                    raise TypeError("pedantic: can't use `args` or `kwargs` if `setup` returns "
                                    "the arguments (as in pytest-benchmark)")
                if not (isinstance(made, tuple) and len(made) == 2):
                    raise TypeError(f"pedantic: setup must return None or (args, kwargs), got {made!r}")
                call = (tuple(made[0]), dict(made[1] or {}))
        self.pending = call if self.teardown is not None else None
        return call

    def finish(self):
        if self.pending is not None:
            args, kwargs = self.pending
            self.pending = None
            self.teardown(*args, **kwargs)


def hooks(setup, teardown, args: tuple, kwargs: dict):
    """The hook for run(): None without setup and teardown."""
    if setup is None and teardown is None:
        return None
    return SetupTeardown(setup, teardown, args, kwargs, bool(args) or bool(kwargs))
