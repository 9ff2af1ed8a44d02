"""benchmarks/bench_attention_grid.py's pure parts (the grid, FLOPs, the ratio to cuDNN, the
table, the checked rows); its GPU run is the lead's (issue 27)."""

import pytest
from scripts import load_benchmark

import gpuprofile as gp

grid = load_benchmark("bench_attention_grid")


def test_the_grid_and_the_one_wave_cases():
    cases = grid.grid_cases(quick=False)
    assert len(cases) == 6 * 2 * 2 * 2 + 2 * len(grid.ONE_WAVE)
    assert ((8, 32, 2048, 64), "bfloat16", True) in cases
    assert ((1, 16, 16384, 128), "float16", False) in cases
    assert all(b * n == 16384 and h * d == 2048 for (b, h, n, d), _, _ in cases[:48])
    # one wave: the default blocks (192 rows at head_dim 64, 128 at 128) fit 132 SMs
    for b, h, n, d in grid.ONE_WAVE:
        assert b * h * -(-n // (192 if d == 64 else 128)) <= 132
    quick = grid.grid_cases(quick=True)
    assert ((16, 12, 1024, 64), "bfloat16", False) in quick and len(quick) == len(grid.QUICK)


def test_flops_halved_when_causal():
    assert grid.flops((2, 3, 100, 64), False) == 4.0 * 2 * 3 * 100 * 100 * 64
    assert grid.flops((2, 3, 100, 64), True) == 2.0 * 2 * 3 * 100 * 100 * 64


def test_variants_by_name():
    assert grid.parse_variants("gp, cudnn") == ["gp", "cudnn"]
    # the variants come from the table of schedules: the rule, each row forced, the rule with
    # either O store
    names = tuple(s.name for s in gp.kernels.WGMMA_SCHEDULES)
    variants = {"gp": ("per_shape", None), **{f"gp_{n}": (n, None) for n in names},
                "gp_out_smem": ("per_shape", "smem"), "gp_out_regs": ("per_shape", "regs")}
    assert variants == grid.GP_VARIANTS
    # the default list: the per-shape choice, every schedule forced, the peers; the two ways of
    # storing O forced only when asked for
    assert ("gp", *(f"gp_{n}" for n in names), "cudnn", "fa2") == grid.DEFAULT
    assert grid.parse_args([]).variants == list(grid.DEFAULT)
    assert grid.parse_variants("gp_out_smem,gp_out_regs") == ["gp_out_smem", "gp_out_regs"]
    assert names == grid.SCHEDULES
    with pytest.raises(ValueError, match=r"unknown \['gp_v9'\]"):
        grid.parse_variants("gp,gp_v9")
    with pytest.raises(SystemExit):
        grid.parse_args(["--variants", ""])
    assert grid.parse_args([]).head_dims == (64, 128)
    assert grid.parse_args(["--head-dims", "64"]).head_dims == (64,)
    for bad in ("", "32", "64,x"):
        with pytest.raises(SystemExit):
            grid.parse_args(["--head-dims", bad])
        with pytest.raises(ValueError, match=f"a comma list of 64 and 128, got {bad!r}"):
            grid.parse_head_dims(bad)
    assert grid.parse_args([]).causal == "both"
    assert grid.parse_args(["--causal", "yes"]).causal == "yes"
    with pytest.raises(SystemExit):
        grid.parse_args(["--causal", "maybe"])


def row(impl, tflops, case=((1, 1, 512, 64), "bfloat16", False), status="ok"):
    (shape, dtype, causal) = case
    return {"case": case, "impl": impl, "shape": list(shape), "dtype": dtype, "causal": causal,
            "status": status, "median_ms": 1.0, "tflops": tflops, "pct_989": 100 * tflops / 989,
            "sm_mhz_start": 1980.0, "sm_mhz_end": 1755.0}


def test_ratio_table_and_summary():
    other = ((1, 1, 1024, 128), "float16", True)
    rows = grid.add_ratios([row("gp", 400.0), row("gp_persist", 480.0), row("cudnn", 460.0),
                            row("gp", 300.0, other), row("cudnn", 0, other, status="failed: x")])
    assert [r["vs_cudnn"] for r in rows] == [400 / 460, 480 / 460, 1.0, None, None]
    table = grid.table_rows(rows)
    assert table[0] == ["1,1,512,64", "bf16", "no", "gp", None, 1.0, 400.0, 100 * 400 / 989,
                        400 / 460, "1755-1980"]
    assert table[4][:6] == ["1,1,1024,128", "fp16", "yes", "cudnn", None, "failed: x"]
    assert all(len(t) == len(grid.COLUMNS) for t in table)
    assert grid.summary(rows) == ["gp: >= cuDNN on 0/1 cases, worst 0.870, median 0.870",
                                  "gp_persist: >= cuDNN on 1/1 cases, worst 1.043, median 1.043"]


def test_rows_at_another_sm_clock_than_cudnn_are_marked():
    """A row whose mean SM clock is more than 5 % off cuDNN's on its case: '!' in the table, a
    count in the summary, and a legend (a throttled H100 read 870-1350 MHz, 2026-11-26)."""
    def clocked(impl, tflops, start, end):
        return {**row(impl, tflops), "sm_mhz_start": start, "sm_mhz_end": end}

    rows = grid.add_ratios([clocked("gp", 400.0, 1425.0, 1980.0),      # mean 1702.5
                            clocked("gp_fixed", 260.0, 1080.0, 1140.0),  # mean 1110: within 5 %
                            clocked("gp_persist", 300.0, None, None),    # no reading: not marked
                            clocked("cudnn", 290.0, 1080.0, 1110.0)])    # mean 1095
    assert rows[0]["clock_vs_cudnn"] == pytest.approx(1702.5 / 1095)
    assert rows[1]["clock_vs_cudnn"] == pytest.approx(1110 / 1095)
    assert rows[2]["clock_vs_cudnn"] is None and rows[3]["clock_vs_cudnn"] == 1.0
    assert [grid.clock_off(r) for r in rows] == [True, False, False, False]
    table = grid.table_rows(rows)
    assert [t[-1] for t in table] == ["1425-1980 !", "1080-1140", None, "1080-1110"]
    lines = grid.summary(rows)
    assert lines[0] == ("gp: >= cuDNN on 1/1 cases, worst 1.379, median 1.379, 1 at an SM clock "
                        "more than 5% off cuDNN's (!)")
    assert lines[1].startswith("gp_fixed: >= cuDNN on 0/1 cases") and "(!)" not in lines[1]
    assert lines[-1].startswith("!: the row's SM clock")
    # cuDNN without a clock reading: nothing to compare with
    bare = grid.add_ratios([clocked("gp", 400.0, 1425.0, 1980.0), clocked("cudnn", 290.0, None, None)])
    assert bare[0]["clock_vs_cudnn"] is None and not any(grid.clock_off(r) for r in bare)


def test_ratios_pair_the_rounds():
    """With rounds, the ratio to cuDNN is the median of the rounds' paired ratios (cuDNN's time
    over the row's, each pair timed next to each other), not the ratio of the medians; the clock
    range covers every round's readings."""
    def rounded(impl, ms, mhz):
        return {**row(impl, 1.0), "round_ms": ms, "round_mhz": mhz}

    rows = grid.add_ratios([rounded("gp", [1.0, 2.0, 4.0], [(1980.0, 1900.0), (1700.0, 1650.0),
                                                            (1800.0, None)]),
                            rounded("cudnn", [1.1, 1.9, 4.8], [(1950.0, 1890.0), (1690.0, 1640.0),
                                                               (1810.0, 1790.0)])])
    assert rows[0]["vs_cudnn_rounds"] == pytest.approx([1.1, 0.95, 1.2])
    assert rows[0]["vs_cudnn"] == pytest.approx(1.1)  # the ratio of the medians: 1.9 / 2.0
    assert grid.clocks_of(rows[0]) == [1980.0, 1900.0, 1700.0, 1650.0, 1800.0]
    assert grid.table_rows(rows)[0][-1] == "1650-1980"
    # rounds that do not pair (another count): the ratio of TFLOP/s, as with one timing each
    odd = grid.add_ratios([rounded("gp", [1.0, 2.0], [(1980.0, 1980.0)] * 2), row("cudnn", 0.5)])
    assert odd[0]["vs_cudnn"] == 2.0 and "vs_cudnn_rounds" not in odd[0]


def test_rounds_rotate_the_order(monkeypatch):
    """run_case times every checked implementation --rounds times, each round's order rotated by
    one, and keeps each round's time; a row that was not ready (skipped) is never timed."""
    import types

    order = []

    def prepare(impl, case, causal):
        status = "skipped: head_dim 128" if impl == "gp_persist_lookahead" else "ready"
        return {"case": (case.shape, case.dtype, causal), "impl": impl, "flops": 2e12,
                "status": status}

    def time_once(impl, case, causal, flops, max_time):
        order.append(impl)
        ms = {"gp": 1.0, "gp_fixed": 2.0, "cudnn": 4.0}[impl] * (1 + len(order) / 100)
        r = types.SimpleNamespace(median_ms=ms, rel_noise=0.001 * len(order), clock="cupti",
                                  sm_clock_mhz_start=1980.0 - len(order),
                                  sm_clock_mhz_end=1900.0 - len(order), sm_clock_source="nvml")
        return r, [f"w{len(order)}"] if impl == "gp" else []

    monkeypatch.setattr(grid, "prepare", prepare)
    monkeypatch.setattr(grid, "time_once", time_once)
    case = types.SimpleNamespace(shape=(1, 2, 512, 128), dtype="bfloat16")
    impls = ["gp", "gp_persist_lookahead", "gp_fixed", "cudnn"]
    rows = grid.run_case(impls, case, False, 0.1, 3)
    assert order == ["gp", "gp_fixed", "cudnn", "gp_fixed", "cudnn", "gp", "cudnn", "gp", "gp_fixed"]
    assert [r["impl"] for r in rows] == impls
    assert rows[1]["status"] == "skipped: head_dim 128" and "round_ms" not in rows[1]
    gp_row = rows[0]
    assert gp_row["status"] == "ok"
    assert gp_row["round_ms"] == pytest.approx([1.01, 1.06, 1.08])
    assert gp_row["median_ms"] == pytest.approx(1.06)
    assert gp_row["tflops"] == pytest.approx(2e12 / 1.06e-3 / 1e12)
    assert gp_row["rel_noise"] == pytest.approx(0.008) and gp_row["warnings"] == ["w1", "w6", "w8"]
    assert gp_row["round_mhz"] == [(1979.0, 1899.0), (1974.0, 1894.0), (1972.0, 1892.0)]
    assert (gp_row["sm_mhz_start"], gp_row["sm_mhz_end"]) == (1979.0, 1892.0)
    ratios = grid.add_ratios(rows)[0]["vs_cudnn_rounds"]
    assert ratios == pytest.approx([4.12 / 1.01, 4.20 / 1.06, 4.28 / 1.08])
    assert grid.parse_args([]).rounds == 3 and grid.parse_args(["--rounds", "1"]).rounds == 1
    with pytest.raises(SystemExit):
        grid.parse_args(["--rounds", "0"])


def test_the_schedule_of_each_variant():
    assert grid.schedule_of("cudnn", (1, 1, 512, 64), False) is None
    assert [grid.schedule_of(v, (1, 1, 512, 64), False) for v in
            ("gp_fixed", "gp_persist", "gp_bm128", "gp_persist_bm128", "gp_persist_lookahead",
             "gp_persist_lookahead_chained")] == \
        ["fixed", "persist", "bm128", "persist_bm128", "persist_lookahead",
         "persist_lookahead_chained"]
    rows = grid.add_ratios([{**row("gp", 400.0), "schedule": "persist"}, row("cudnn", 460.0)])
    assert grid.table_rows(rows)[0][4] == "persist"


@pytest.mark.parametrize("name", ["persist_lookahead", "persist_lookahead_chained"])
def test_the_lookahead_variants_skip_head_dim_128(name):
    """gp_persist_lookahead and its chained form exist at head_dim 64 only: at 128 their rows are
    skipped before any device work (a skipped row does not fail the run), at 64 they are not."""
    import types

    case = types.SimpleNamespace(shape=(1, 2, 512, 128), dtype="bfloat16", torch=None)
    [r] = grid.run_case(["gp_" + name], case, True, 0.1, 1)
    assert r["status"] == "skipped: head_dim 128" and r["schedule"] == name
    assert "skipped" in grid.table_rows(grid.add_ratios([r]))[0][5]
    head_dims = {f"gp_{s.name}": (64,) for s in gp.kernels.WGMMA_SCHEDULES if 128 not in s.configs}
    assert head_dims == grid.HEAD_DIMS


def test_quick_holds_the_worst_shapes_and_the_rule_s_edges():
    """The fixed schedule's worst ratios to cuDNN in the 2026-11-26 grid (H200) and a case of
    every schedule the rule picks (on 132 SMs)."""
    from gpuprofile import _C

    quick = grid.grid_cases(quick=True)
    for case in [((32, 32, 512, 64), "bfloat16", True), ((32, 32, 512, 64), "bfloat16", False),
                 ((16, 32, 1024, 64), "bfloat16", True), ((1, 1, 16384, 64), "bfloat16", False),
                 ((32, 16, 512, 128), "bfloat16", False), ((1, 3, 8192, 64), "bfloat16", True)]:
        assert case in quick
    picked = {_C._testing.attention_wgmma_schedule(shape, causal, sms=132) for shape, _, causal in quick}
    assert picked == {"persist", "persist_lookahead", "persist_lookahead_chained", "persist_bm128",
                      "bm128", "fixed"}
    assert len(quick) <= 14  # with 8 implementations, about a minute and a half on an H200


def test_checked_rows():
    every = slice(0, 4096)
    assert grid.checked_slices((2, 3, 4096, 64), True) == [(0, 0, every, every), (1, 2, every, every)]
    first, last, keys = slice(0, 512), slice(7680, 8192), slice(0, 8192)
    assert grid.checked_slices((1, 1, 8192, 64), True) == [(0, 0, first, first)]
    assert grid.checked_slices((1, 1, 8192, 64), False) == [(0, 0, first, keys), (0, 0, last, keys)]


@pytest.mark.skipif(gp.device_count() > 0, reason="the refusal without a Hopper device")
def test_needs_hopper(capsys):
    assert grid.main(["--quick"]) == 2
    assert "needs a compute capability 9.0 device" in capsys.readouterr().err
