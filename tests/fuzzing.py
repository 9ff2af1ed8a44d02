"""Shared pieces of the fuzz tests (marker `fuzz`): what counts as a clear error, and junk values.

Bad input may only raise TypeError, ValueError (json and Unicode errors are ValueErrors) or a
gpuprofile error; anything else (SystemError, KeyError, AttributeError, AssertionError, a crash
or a hang) is a finding."""

from __future__ import annotations

import contextlib

from hypothesis import strategies as st

import gpuprofile as gp

CLEAR = (TypeError, ValueError, gp.GpuProfileError)


@contextlib.contextmanager
def clear_errors_only(*extra):
    """The block may raise only CLEAR errors (and `extra`); anything else fails the test."""
    try:
        yield
    except CLEAR + extra:
        pass


class Raises:
    """An object whose every conversion raises (bool, int, str, len, iteration)."""

    def _boom(self, *args):
        raise ValueError("junk: refuses")

    __bool__ = __int__ = __index__ = __float__ = __len__ = __iter__ = _boom
    __str__ = __repr__ = object.__repr__


def ints():
    """Ints around the edges that C conversions care about."""
    edges = [0, 1, -1, 2**31 - 1, 2**31, -(2**31), 2**32, 2**63 - 1, 2**63, -(2**63), 2**64, 2**64 - 1,
             2**100, -(2**100)]
    return st.one_of(st.sampled_from(edges), st.integers())


def scalars():
    return st.one_of(st.none(), st.booleans(), ints(), st.floats(), st.text(max_size=8),
                     st.binary(max_size=8), st.just(Raises()), st.just(object()))


def junk(max_leaves: int = 6):
    """Any mix of scalars, lists, tuples and dicts."""
    return st.recursive(
        scalars(),
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                st.lists(inner, max_size=4).map(tuple),
                                st.dictionaries(st.text(max_size=6), inner, max_size=4)),
        max_leaves=max_leaves,
    )


def json_values(max_leaves: int = 6):
    """What a JSON file can hold."""
    leaves = st.one_of(st.none(), st.booleans(), ints(), st.floats(), st.text(max_size=8))
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
        max_leaves=max_leaves)
