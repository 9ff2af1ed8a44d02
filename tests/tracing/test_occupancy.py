"""Theoretical occupancy against cases computed by hand from the sm_80 and sm_90 limits."""

import pytest

from gpuprofile.tracing.occupancy import ARCH_LIMITS, SMLimits, blocks_per_sm, limits_for, occupancy

SM80 = ARCH_LIMITS[(8, 0)]  # 2048 threads, 32 blocks, 164 KiB shared memory per SM
SM90 = ARCH_LIMITS[(9, 0)]  # 2048 threads, 32 blocks, 228 KiB shared memory per SM
SM86 = ARCH_LIMITS[(8, 6)]  # 1536 threads, 16 blocks, 100 KiB


@pytest.mark.parametrize(
    "limits, block, regs, smem, expected",
    [
        # 8 warps; 32 regs -> 1024 regs/warp -> 16 warps per 16K-register partition -> 8 blocks,
        # same as the warp limit (64 / 8): full occupancy, the warp limit named on the tie.
        (SM90, 256, 32, 0, (1.0, 8, "warps")),
        (SM80, 256, 32, 0, (1.0, 8, "warps")),
        # 4 warps; 64 regs -> 2048 regs/warp -> 8 warps per partition -> 32 warps -> 8 blocks.
        (SM90, 128, 64, 0, (0.5, 8, "registers")),
        # 48 KiB + 1 KiB reserved = 50176 B per block: 233472 // 50176 = 4 blocks of 8 warps.
        (SM90, 256, 16, 48 * 1024, (0.5, 4, "shared_memory")),
        # on sm_80: 167936 // 50176 = 3 blocks of 8 warps.
        (SM80, 256, 16, 48 * 1024, (0.375, 3, "shared_memory")),
        # one warp per block: 32 resident blocks is the limit, half the 64 warp slots.
        (SM90, 32, 16, 0, (0.5, 32, "blocks")),
        # 255 regs -> 8160 rounded up to 8192 per warp -> 2 warps per partition -> 8 warps -> 2
        # blocks of 3 warps.
        (SM90, 96, 255, 0, (6 / 64, 2, "registers")),
        # 40 regs -> 1280 per warp -> 12 warps per partition -> 48 warps -> 24 blocks of 2 warps.
        (SM80, 64, 40, 0, (0.75, 24, "registers")),
        # 1024 threads at 64 regs use exactly the 64K registers of a block: 1 block.
        (SM90, 1024, 64, 0, (0.5, 1, "registers")),
        # 65 regs -> 2080 rounded to 2304 per warp x 32 warps > 65536: cannot launch.
        (SM90, 1024, 65, 0, (0.0, 0, "registers")),
        # more registers than a thread may have
        (SM90, 128, 256, 0, (0.0, 0, "registers")),
        # more shared memory than a block may opt in to (227 KiB on sm_90)
        (SM90, 128, 32, 232448 + 1, (0.0, 0, "shared_memory")),
        # more threads than a block may have
        (SM90, 2048, 16, 0, (0.0, 0, "warps")),
        # sm_86: 48 warp slots, 16 blocks; 4 warps per block -> 12 blocks by warps.
        (SM86, 128, 32, 0, (1.0, 12, "warps")),
        # a partial warp counts as a whole one: 33 threads = 2 warps, 32 blocks by warps and by
        # the block limit (the tie names warps).
        (SM90, 33, 16, 0, (1.0, 32, "warps")),
        # registers 0 (a kernel that needs none): only warps, blocks and shared memory limit.
        (SM90, 64, 0, 0, (1.0, 32, "warps")),
    ],
)
def test_hand_computed_cases(limits, block, regs, smem, expected):
    occ, blocks, limiter = occupancy(limits, block, regs, smem)
    assert (blocks, limiter) == expected[1:]
    assert occ == pytest.approx(expected[0], abs=1e-12)


def test_blocks_per_sm_reports_every_limit():
    assert blocks_per_sm(SM90, 256, 32, 48 * 1024) == {
        "warps": 8, "registers": 8, "shared_memory": 4, "blocks": 32}


def test_limits_for_uses_device_properties_over_the_table():
    props = dict(max_threads_per_sm=1536, max_blocks_per_sm=24, shared_memory_per_sm=102400,
                 shared_memory_per_block_optin=101376, warp_size=32, max_threads_per_block=1024,
                 registers_per_sm=65536, registers_per_block=65536,
                 reserved_shared_memory_per_block=1024)
    lim = limits_for((8, 9), props)
    assert lim == ARCH_LIMITS[(8, 9)]
    odd = limits_for((12, 0), props)  # no table entry: the device's values and the defaults
    assert isinstance(odd, SMLimits) and odd.max_blocks_per_sm == 24
    assert odd.register_granularity == 256


def test_limits_for_unknown_architecture_without_properties():
    with pytest.raises(KeyError, match="compute capability 7.5"):
        limits_for((7, 5))


def test_bad_launch_is_rejected():
    with pytest.raises(ValueError, match="invalid launch"):
        occupancy(SM90, 0, 32, 0)
    with pytest.raises(ValueError, match="invalid launch"):
        occupancy(SM90, 32, -1, 0)
