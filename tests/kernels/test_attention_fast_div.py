"""The division of flash_wgmma's persistent kernels (attention_sm90.cuh FastDiv): a work item's
query tile, head and batch come from n // d as a multiply-high and a shift, with d's constants
made on the host. The host twin of the device code, through _C._testing.attention_fast_div, against
Python's //: every divisor up to 4096 and divisors next to powers of two, on numerators at the
edges (0, multiples of d and their neighbours, 2**31 - 1) and random ones."""

import random

import pytest

from gpuprofile import _C

TOP = 2 ** 31 - 1


def numerators(d, rng, count):
    edges = {0, 1, TOP, TOP - 1, d - 1, d, d + 1}
    for k in (1, 2, 3, TOP // d - 1, TOP // d):
        edges.update({k * d - 1, k * d, k * d + 1})
    return sorted(n for n in edges | {rng.randrange(TOP + 1) for _ in range(count)} if 0 <= n <= TOP)


def divisors():
    near_powers = {2 ** k + e for k in range(1, 32) for e in (-1, 0, 1)}
    return sorted(set(range(1, 4097)) | {d for d in near_powers if 1 <= d < 2 ** 32})


def test_every_quotient_matches_integer_division():
    rng = random.Random(27)
    wrong = []
    for d in divisors():
        for n in numerators(d, rng, 8):
            if _C._testing.attention_fast_div(d, n) != n // d:
                wrong.append((d, n, _C._testing.attention_fast_div(d, n)))
    assert not wrong, wrong[:10]


def test_the_largest_divisors_give_zero_or_one():
    for d in (2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, 2 ** 32 - 1):
        for n in (0, 1, TOP - 1, TOP):
            assert _C._testing.attention_fast_div(d, n) == n // d


@pytest.mark.parametrize("d, n", [(0, 5), (-1, 5), (2 ** 32, 5), (3, -1), (3, 2 ** 31)])
def test_out_of_range_is_a_value_error(d, n):
    with pytest.raises(ValueError, match=f"got d={d}, n={n}"):
        _C._testing.attention_fast_div(d, n)


def test_a_non_integer_is_a_type_error():
    with pytest.raises(TypeError):
        _C._testing.attention_fast_div(3.0, 7)
