"""flash_wgmma's schedule per shape (gp_attn_flash_wgmma_schedule, kernels/attention/NOTES.md,
"Schedule per shape"): the rule is pure, so it is checked here without a device, through
_C._attention_wgmma_schedule with the SM count given. The shapes are issue 27's grid on an H200
(132 SMs) and the rule's edges."""

import pytest

import gpuprofile as gp
from gpuprofile import _C

H200_SMS = 132


def schedule(shape, causal, sms=H200_SMS):
    return _C._attention_wgmma_schedule(shape, causal, sms=sms)


@pytest.mark.parametrize("shape, causal, want", [
    # head_dim 64, the grid: 16k tokens, 32 heads
    ((32, 32, 512, 64), False, "persist"),
    ((32, 32, 512, 64), True, "persist_bm128"),
    ((16, 32, 1024, 64), False, "persist"),
    ((16, 32, 1024, 64), True, "persist_bm128"),
    ((8, 32, 2048, 64), False, "persist"),
    ((8, 32, 2048, 64), True, "persist"),
    ((4, 32, 4096, 64), False, "persist"),
    ((4, 32, 4096, 64), True, "fixed"),
    ((2, 32, 8192, 64), False, "fixed"),
    ((2, 32, 8192, 64), True, "fixed"),
    ((1, 32, 16384, 64), False, "fixed"),
    ((1, 32, 16384, 64), True, "fixed"),
    # one wave: 86 blocks of 192 rows fill 0.65 of 132 SMs, 128 of 128 rows 0.97
    ((1, 1, 16384, 64), False, "bm128"),
    ((1, 1, 16384, 64), True, "bm128"),
    # 129 blocks of 192 rows fill 0.98, 192 of 128 rows 0.73 of two waves
    ((1, 3, 8192, 64), False, "fixed"),
    ((1, 3, 8192, 64), True, "fixed"),
    # head_dim 128: persist only for short non-causal sequences
    ((32, 16, 512, 128), False, "persist"),
    ((32, 16, 512, 128), True, "fixed"),
    ((16, 16, 1024, 128), False, "fixed"),
    ((1, 16, 16384, 128), False, "fixed"),
    ((1, 2, 8192, 128), True, "fixed"),
    ((1, 4, 4096, 128), False, "fixed"),
])
def test_the_grid(shape, causal, want):
    assert schedule(shape, causal) == want


@pytest.mark.parametrize("seq, causal, want", [
    (1, False, "persist"), (1, True, "persist_bm128"),
    (1024, False, "persist"), (1025, False, "persist"),
    (1024, True, "persist_bm128"), (1025, True, "persist"),
    (2048, True, "persist"), (2049, True, "fixed"),
    (4096, False, "persist"), (4097, False, "fixed"),
])
def test_the_edges_at_head_dim_64(seq, causal, want):
    assert schedule((4, 32, seq, 64), causal) == want


@pytest.mark.parametrize("seq, causal, want", [
    (1, False, "persist"), (512, False, "persist"), (513, False, "fixed"), (1, True, "fixed"),
])
def test_the_edges_at_head_dim_128(seq, causal, want):
    assert schedule((2, 16, seq, 128), causal) == want


def test_the_wave_rule_follows_the_sm_count():
    """(1, 1, 16384): 86 blocks of 192 rows, 128 of 128. On 114 SMs (H100 PCIe) that is 0.75 of
    one wave against 0.56 of two: the 192-row block stays; on 132 it is 0.65 against 0.97."""
    assert schedule((1, 1, 16384, 64), False, sms=132) == "bm128"
    assert schedule((1, 1, 16384, 64), False, sms=114) == "fixed"
    # 0.15 is the margin: 2 heads at 16384 on 132 SMs, 172 blocks (0.65 of two waves) against
    # 256 (0.97); on 200 SMs, 172 (0.86) against 256 (0.64 of two waves)
    assert schedule((1, 2, 16384, 64), False, sms=132) == "bm128"
    assert schedule((1, 2, 16384, 64), False, sms=200) == "fixed"


def test_dtype_and_sm_count_do_not_change_the_short_rules():
    for sms in (1, 78, 132, 1 << 20):
        assert schedule((1, 1, 512, 64), True, sms=sms) == "persist_bm128"


@pytest.mark.parametrize("args, kwargs, error, match", [
    (((1, 1, 512, 96), False), {"sms": 132}, ValueError, "supports head_dim 64 and 128, got 96"),
    (((1, 0, 512, 64), False), {"sms": 132}, ValueError, "has a dimension < 1"),
    (((1, 1, 512, 64), False), {"sms": 0}, ValueError, r"sms must be an int from 1 to 2\*\*20, got 0"),
    (((1, 1, 512, 64), False), {"sms": True}, ValueError, "got True"),
    (((1, 1, 512, 64), False), {"sms": 2 ** 70}, ValueError, "got 1180591620717411303424"),
    (((1, 1, 512, 64), False), {"sms": 1.5}, ValueError, "got 1.5"),
    (((1, 1, 512),), {}, TypeError, ""),
])
def test_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        _C._attention_wgmma_schedule(*args, **kwargs)


@pytest.mark.skipif(gp.device_count() > 0, reason="without a device the SM count is unknown")
def test_without_a_device_the_sm_count_must_be_given():
    with pytest.raises(gp.CudaError):
        _C._attention_wgmma_schedule((1, 1, 512, 64))


@pytest.mark.skipif(gp.device_count() == 0, reason="needs a device for its SM count")
def test_on_a_device_its_sm_count_is_used():
    sms = gp.device_info(0).sm_count
    for causal in (False, True):
        assert _C._attention_wgmma_schedule((1, 1, 16384, 64), causal) == schedule(
            (1, 1, 16384, 64), causal, sms=sms)
