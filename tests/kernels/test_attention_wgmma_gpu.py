"""impl='flash_wgmma' (sm_90a: TMA loads, wgmma, warp specialization) against the
float64 reference with the derived tolerance, as test_attention_gpu.py checks the other kernels.
Needs a compute capability 9.0 device (H100/H200) and a build with sm_90a code; elsewhere only
the refusal is checked. Both blocks of the kernel run wherever they are chosen: at head_dim 64
192-row blocks of three consumer warpgroups, each running S = Q·Kᵀ, softmax and P·V in
sequence; at head_dim 128 128-row blocks of two, overlapping S of one tile with P·V of the
previous one (kernels/attention/attention_flash_wgmma.cu)."""

import numpy as np
import pytest
from test_attention_gpu import CAIView, bnhd_case, check, inputs, poisoned

import gpuprofile as gp
from gpuprofile import _C, kernels
from gpuprofile.kernels import reference as ref

pytestmark = pytest.mark.gpu


def _hopper():
    return gp.device_count() > 0 and tuple(gp.device_info(0).compute_capability) == (9, 0)


hopper = pytest.mark.skipif(not _hopper(), reason="flash_wgmma needs a compute capability 9.0 device")
# Odd lengths, lengths that are not a multiple of the 128-row tiles, exact multiples, and one
# longer than a pass of the 4-stage (head_dim 64) and 2-stage (128) rings.
SEQS = [1, 17, 127, 128, 129, 256, 1000, 4097]


def run(q, k, v, dtype, causal=False, scale=None):
    out = poisoned(q.shape, dtype)
    _C._attention(*(kernels.to_device(x, dtype) for x in (q, k, v)), out, impl="flash_wgmma",
                  causal=causal, scale=scale)
    return out.numpy()


@hopper
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("seq", SEQS)
@pytest.mark.parametrize("causal", [False, True])
def test_matches_reference(dtype, head_dim, seq, causal):
    shape = (2, 3, seq, head_dim) if seq < 1000 else (1, 1, seq, head_dim)
    q, k, v = inputs(shape, dtype)
    check(run(q, k, v, dtype, causal), q, k, v, dtype, causal)


@hopper
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("batch, heads", [(1, 1), (5, 1), (1, 7), (3, 5)])
def test_batch_and_head_variety(head_dim, batch, heads):
    """The tensor maps' batch and head dimensions (grid z and y) and their strides."""
    q, k, v = inputs((batch, heads, 129, head_dim), "bfloat16")
    check(run(q, k, v, "bfloat16", True), q, k, v, "bfloat16", True)


@hopper
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_peaked_scores_and_explicit_scale(head_dim, causal):
    """Large, spread-out scores move the running max often: O's rescale must stay exact, also
    when it waits for the overlapped P·V (head_dim 128), and when a warp skips it because no
    row's max moved (head_dim 64)."""
    q, k, v = inputs((1, 4, 300, head_dim), "float16", spread=6.0)
    got = run(q, k, v, "float16", causal, scale=0.3)
    check(got, q, k, v, "float16", causal, 0.3)


@hopper
@pytest.mark.parametrize("head_dim", [64, 128])
def test_strided_inputs_and_output(head_dim):
    """Q, K, V and O as [batch, heads, seq, head_dim] views of [batch, seq, heads, head_dim]
    memory: the tensor maps take the strides, not a dense layout."""
    (q, k, v), views, out_mem, out = bnhd_case(2, 200, 3, head_dim)
    _C._attention(*views, out, impl="flash_wgmma", causal=True)
    check(out_mem.numpy().transpose(0, 2, 1, 3), q, k, v, "float16", True)


@hopper
@pytest.mark.parametrize("seq", [191, 192, 193, 320, 383, 384, 385, 577])
@pytest.mark.parametrize("causal", [False, True])
def test_192_row_block_edges(seq, causal):
    """Lengths at the edges of 192-row blocks and of their 64-row warpgroups: the last block's
    idle warpgroups, and (causal) warpgroups that compute one key tile fewer than the producer
    loads (m0 = 0: rows 0-127 stop at keys 0-127, the block loads 0-255; m0 = 192: rows 192-255
    stop at keys 0-255, the block loads 0-383)."""
    q, k, v = inputs((2, 2, seq, 64), "bfloat16")
    check(run(q, k, v, "bfloat16", causal), q, k, v, "bfloat16", causal)


@hopper
def test_numpy_in_numpy_out():
    """Host arrays: staged through the pool, then the same launcher."""
    q, k, v = inputs((2, 2, 333, 64), "float16")
    got = kernels.attention(*(x.astype(np.float16) for x in (q, k, v)), impl="flash_wgmma")
    assert isinstance(got, np.ndarray) and got.dtype == np.float16
    check(got, q, k, v, "float16")


@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("where", ["q", "k", "q_inf"])
def test_nan_and_inf_propagate_like_the_reference(causal, where):
    q, k, v = inputs((1, 2, 170, 64), "float16")
    tol = ref.tolerance(q, k, v, "float16", causal)  # of the clean inputs
    target = {"q": q, "k": k}[where[0]]
    target[0, 1, 133, 5] = np.inf if where == "q_inf" else np.nan
    got = run(q, k, v, "float16", causal)
    want = ref.reference(q, k, v, causal)
    assert not np.isfinite(want).all()
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    finite = np.isfinite(want)
    assert ref.max_error(got[finite], want[finite]) <= tol


# flash_wgmma's schedules (kernels.WGMMA_SCHEDULES, the table in C), forced through
# _C._testing.attention_wgmma: every configuration this build has, each row at the head_dims it
# takes with each O store the build has for it (the shipped build: the ones the per-shape rule
# reaches, the table's ships; a GPUPROFILE_ATTN_LAB=1 build: both), and the rule's own choice
# ("per_shape", the store chosen with it) at each head_dim.
LAB = _C._testing.ATTENTION_WGMMA_LAB
SCHEDULES = {s.name: s for s in kernels.WGMMA_SCHEDULES}


def stores(name, head_dim):
    """The O stores this build has for schedule `name` at head_dim."""
    config = SCHEDULES[name].configs.get(head_dim)
    return [] if config is None else [s for s in ("smem", "regs") if LAB or s in config.ships]


CONFIGS = [(name, store, d) for name in SCHEDULES for d in (64, 128) for store in stores(name, d)]
RUNS = [("per_shape", None, 64), ("per_shape", None, 128), *CONFIGS]
RUN_IDS = [f"{n}-{s or 'rule'}-{d}" for n, s, d in RUNS]
LOOKAHEAD = [(n, s) for n, s, d in CONFIGS if SCHEDULES[n].configs[d].order == "lookahead"]


def run_variant(q, k, v, dtype, schedule="per_shape", store=None, causal=False, scale=None):
    out = poisoned(q.shape, dtype)
    _C._testing.attention_wgmma(*(kernels.to_device(x, dtype) for x in (q, k, v)), out,
                                schedule=schedule, store=store, causal=causal, scale=scale)
    return out.numpy()


@hopper
@pytest.mark.parametrize("schedule, store, head_dim", RUNS, ids=RUN_IDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("seq", [1, 127, 129, 193, 385, 1000])
@pytest.mark.parametrize("causal", [False, True])
def test_variant_matches_reference(schedule, store, dtype, head_dim, seq, causal):
    """Every variant: lengths inside one tile, past the 128- and 192-row blocks' edges, and
    ragged ones; fewer work items than SMs (one item per persistent block)."""
    shape = (2, 3, seq, head_dim) if seq < 1000 else (1, 2, seq, head_dim)
    q, k, v = inputs(shape, dtype)
    check(run_variant(q, k, v, dtype, schedule, store, causal), q, k, v, dtype, causal)


@hopper
@pytest.mark.parametrize("schedule, store, head_dim", RUNS, ids=RUN_IDS)
@pytest.mark.parametrize("causal", [False, True])
def test_variant_many_items_per_block(schedule, store, head_dim, causal):
    """More work items than SMs: a persistent block runs two to four (query tile, head, batch)
    items, so both Q buffers are reused, the K/V ring's phases run on across items, and (causal,
    192-row block) a warpgroup releases the tiles it skips. 2·70 heads of 520 rows: 420 items of
    192 rows (3 tiles a head, the last one 136 rows), 700 of 128; an H100 has 132 SMs."""
    q, k, v = inputs((2, 70, 520, head_dim), "bfloat16")
    check(run_variant(q, k, v, "bfloat16", schedule, store, causal), q, k, v, "bfloat16", causal)


@hopper
@pytest.mark.parametrize("schedule, store, head_dim", RUNS, ids=RUN_IDS)
@pytest.mark.parametrize("causal", [False, True])
def test_variant_peaked_scores(schedule, store, head_dim, causal):
    q, k, v = inputs((1, 4, 300, head_dim), "float16", spread=6.0)
    check(run_variant(q, k, v, "float16", schedule, store, causal, 0.3), q, k, v, "float16", causal,
          0.3)


@hopper
@pytest.mark.parametrize("schedule, store", [(n, s) for n, s, d in RUNS if d == 64])
def test_variant_strided_inputs_and_output(schedule, store):
    (q, k, v), views, out_mem, out = bnhd_case(2, 200, 3, 64)
    _C._testing.attention_wgmma(*views, out, schedule=schedule, store=store, causal=True)
    check(out_mem.numpy().transpose(0, 2, 1, 3), q, k, v, "float16", True)


@hopper
@pytest.mark.parametrize("schedule, store, head_dim", RUNS, ids=RUN_IDS)
@pytest.mark.parametrize("seq", [40, 100, 200])
@pytest.mark.parametrize("causal", [False, True])
def test_nothing_is_written_past_the_sequence(schedule, store, head_dim, seq, causal):
    """O as the first seq rows of each head in a buffer with 200 more, which hold a sentinel:
    warpgroups whose 64 rows lie wholly past the sequence (seq 40: the second of a 128-row block,
    the second and third of a 192-row one) still issue their TMA stores, which the tensor map
    must clip at seq, not spill into the head's next rows."""
    b, h, spare, sentinel = 2, 3, 200, 7.0
    q, k, v = inputs((b, h, seq, head_dim), "float16")
    rows = seq + spare
    out_mem = kernels.to_device(np.full((b, h, rows, head_dim), sentinel, np.float32), "float16")
    out = CAIView(out_mem, (b, h, seq, head_dim), (h * rows * head_dim, rows * head_dim, head_dim, 1))
    _C._testing.attention_wgmma(*(kernels.to_device(x, "float16") for x in (q, k, v)), out,
                                schedule=schedule, store=store, causal=causal)
    got = out_mem.numpy()
    assert (got[:, :, seq:] == sentinel).all()
    check(got[:, :, :seq], q, k, v, "float16", causal)


@hopper
@pytest.mark.parametrize("schedule, head_dim", [(n, d) for n in SCHEDULES for d in (64, 128)
                                                if len(stores(n, d)) == 2])
@pytest.mark.parametrize("causal", [False, True])
def test_both_ways_of_storing_o_give_the_same_bits(schedule, head_dim, causal):
    """O / l rounded in registers and stored from them, or written to shared memory and stored
    by TMA: the same arithmetic, so the same bits, over ragged rows and many items per block."""
    q, k, v = inputs((3, 70, 300, head_dim), "bfloat16")
    smem = run_variant(q, k, v, "bfloat16", schedule, "smem", causal)
    np.testing.assert_array_equal(smem, run_variant(q, k, v, "bfloat16", schedule, "regs", causal))
    check(smem, q, k, v, "bfloat16", causal)


@hopper
@pytest.mark.parametrize("seq", [255, 256, 257, 640, 769])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("schedule, store", LOOKAHEAD)
def test_lookahead_every_tile_count(schedule, store, seq, causal):
    """persist_lookahead runs its key tiles in pairs (S alternating between two register
    arrays), with the last tile apart: an item of 1 to 7 tiles ends in either array, and (causal)
    a block's items differ in their counts, so the K/V ring's stage and parity start anywhere.
    Chained, each item starts in the same array wherever the last one ended, and the next item's
    first tile is in flight while this one stores O. 2·40 heads: 160 to 560 items of 128 rows, one
    to five per block on 132 SMs."""
    q, k, v = inputs((2, 40, seq, 64), "bfloat16")
    check(run_variant(q, k, v, "bfloat16", schedule, store, causal), q, k, v, "bfloat16", causal)


TWOS = [((8, 33, 512, 64), "persist_lookahead"), ((8, 33, 512, 64), "persist"),
        ((8, 33, 512, 64), "persist_bm128"), ((8, 33, 512, 128), "persist"),
        ((8, 33, 512, 64), "persist_lookahead_chained"),
        ((1, 211, 640, 64), "persist_lookahead"), ((1, 211, 640, 64), "persist_lookahead_chained"),
        ((1, 211, 640, 128), "persist")]


@hopper
@pytest.mark.parametrize("shape, name", TWOS,
                         ids=[f"{n}-{'x'.join(map(str, s))}" for s, n in TWOS])
def test_causal_items_in_twos(shape, name):
    """Causal items handed out in twos of a query tile and its complement (work_item): 4 or 3
    query tiles a head (128- and 192-row items), and 5, odd, over an odd count of heads, where
    the middle tiles of two heads make a two and the last item is alone. Every block takes 4
    twos on 132 SMs (H100, H200); every row is checked against the float64 reference, and O's
    buffer is poisoned first, so an item no block computed fails."""
    if _C._testing.attention_wgmma_order(shape, True, name) != "twos":
        pytest.skip(f"{name} does not run {shape} in twos on this device's SM count")
    q, k, v = inputs(shape, "bfloat16")
    first, *rest = [run_variant(q, k, v, "bfloat16", name, store, True)
                    for store in stores(name, shape[3])]
    for other in rest:  # both O stores where the build has both
        np.testing.assert_array_equal(first, other)
    check(first, q, k, v, "bfloat16", True)


@hopper
@pytest.mark.parametrize("shape, causal", [
    ((2, 3, 385, 64), False), ((2, 3, 385, 64), True), ((4, 8, 1500, 64), True),
    ((1, 2, 3000, 64), True),
    ((1, 1, 5000, 64), False), ((1, 1, 16384, 64), True), ((1, 3, 8192, 64), True),
    ((2, 3, 385, 128), False), ((2, 3, 385, 128), True)])
def test_the_default_runs_the_schedule_chosen_for_the_shape(shape, causal):
    """The per-shape rule (impl='flash_wgmma' and 'auto') runs the schedule that
    _C._testing.attention_wgmma_schedule names for the shape on this device: bit for bit the
    output of that schedule forced, with the O store attention_wgmma_out names (a configuration
    the shipped build has: the table's ships); auto's reason names it."""
    q, k, v = inputs(shape, "bfloat16")
    name = _C._testing.attention_wgmma_schedule(shape, causal)
    got = run_variant(q, k, v, "bfloat16", "per_shape", None, causal)
    np.testing.assert_array_equal(got, run_variant(q, k, v, "bfloat16", name, None, causal))
    store = _C._testing.attention_wgmma_out(shape, causal, name)
    assert store in SCHEDULES[name].configs[shape[3]].ships
    np.testing.assert_array_equal(got, run_variant(q, k, v, "bfloat16", name, store, causal))
    impl, why = _C._attention_auto_choice("bfloat16", shape, causal)
    assert impl == "flash_wgmma" and f"its schedule for this shape (causal={causal}, " in why
    assert why.split("SMs): ")[1].startswith(name + " (")
    if shape[2] <= 4097:
        check(got, q, k, v, "bfloat16", causal)


@pytest.mark.skipif(_hopper(), reason="the refusal is for devices other than compute capability 9.0")
def test_other_devices_are_refused_clearly():
    q, k, v = inputs((1, 1, 64, 64), "bfloat16")
    with pytest.raises(gp.GpuProfileError, match="flash_wgmma' needs a compute capability 9.0"):
        run(q, k, v, "bfloat16")


@hopper
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_auto_runs_flash_wgmma_on_hopper(dtype):
    """impl='auto' on a compute capability 9.0 device: the wgmma kernel is the one launched, for
    device arrays and host arrays alike, and its result is right."""
    q, k, v = inputs((2, 3, 200, 128), dtype)
    dq, dk, dv = (kernels.to_device(x, dtype) for x in (q, k, v))
    with gp.profile(memcpy=False, memset=False, memory=False) as p:
        got = kernels.attention(dq, dk, dv, impl="auto", causal=True)
        host = kernels.attention(*(x.astype(np.float16) for x in (q, k, v)), impl="auto") \
            if dtype == "float16" else None
    names = [n for n in p.kernels["name"].tolist()]
    assert len(names) == (2 if host is not None else 1)
    assert all("flash_wgmma" in n for n in names), names
    check(got.numpy(), q, k, v, dtype, True)
    if host is not None:
        check(host, q, k, v, dtype)
