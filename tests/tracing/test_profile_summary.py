"""Summaries of traced kernels on synthetic records: busy time, grouping by kernel name and by
region, idle time, attribution, exact values."""

import math

import numpy as np
import pytest
import synthetic as S

import gpuprofile as gp
from gpuprofile.tracing.activity import EXTCORR_RAW, KERNEL_RAW, attribute
from gpuprofile.tracing.profile import Profile
from gpuprofile.tracing.shaping import build_kernels, kernel_occupancy
from gpuprofile.tracing.summary import (
    busy_ns,
    factorize,
    group_rows,
    idle_ns_by_group,
    merged_intervals,
    region_rows,
)


def test_merged_intervals_and_busy_time():
    s, e = merged_intervals([10, 0, 5, 40, 45], [20, 6, 8, 50, 46])
    assert s.tolist() == [0, 10, 40] and e.tolist() == [8, 20, 50]
    assert busy_ns([10, 0, 5, 40, 45], [20, 6, 8, 50, 46]) == 28
    assert busy_ns([], []) == 0
    assert busy_ns([0, 10], [10, 20]) == 20  # touching intervals


def test_idle_between_a_groups_intervals():
    idle = idle_ns_by_group([1, 1, 1, 2, 2, 5], [0, 5, 20, 100, 100, 7], [10, 12, 30, 110, 105, 8])
    assert idle == {1: 8, 2: 0, 5: 0}  # group 1 runs [0, 12) and [20, 30) within [0, 30)
    assert idle_ns_by_group([], [], []) == {}


def test_idle_of_groups_far_apart_in_time_stays_exact():
    # groups interleaved in time, one of them spanning a long range
    groups = [0, 1, 0, 1]
    starts = [0, 10, 10**15, 20]
    ends = [5, 15, 10**15 + 5, 30]
    assert idle_ns_by_group(groups, starts, ends) == {0: 10**15 - 5, 1: 5}


def test_group_rows_exact():
    codes, labels = factorize(["b", "a", "b", "b"])
    rows = group_rows(codes, labels, [1000, 4000, 3000, 2000], [0.5, 1.0, 0.5, np.nan],
                      ["registers", "warps", "registers", ""], busy=8000)
    assert [r.key for r in rows] == ["b", "a"]
    b = rows[0]
    assert (b.calls, b.total_ms, b.mean_us, b.min_us, b.max_us) == (3, 0.006, 2.0, 1.0, 3.0)
    assert b.pct_busy == 75.0
    assert b.occupancy_pct == 50.0  # NaN (unknown) ignored
    assert b.limiter == "registers"
    assert rows[1].pct_busy == 50.0 and rows[1].limiter == "warps"


def test_region_rows_count_instances_and_idle():
    # region 'r' has two instances (records 0 and 2), 's' one (record 1); one kernel outside
    codes = [0, 0, 1, 0, -1]
    labels = ["r", "s"]
    records = [0, 0, 1, 2, -1]
    starts = [0, 30, 100, 200, 300]
    ends = [10, 40, 110, 260, 310]
    rows = region_rows(codes, labels, records, np.subtract(ends, starts), starts, ends,
                       [1.0] * 5, ["warps"] * 5, busy=100)
    by = {r.key: r for r in rows}
    assert by["r"].instances == 2 and by["r"].calls == 3
    assert by["r"].idle_ms == 20 / 1e6  # record 0: [0,10) and [30,40) within [0,40)
    assert by["s"].instances == 1 and by["s"].idle_ms == 0.0
    assert by["(no region)"].instances == 0 and math.isnan(by["(no region)"].idle_ms)
    assert by["r"].total_ms == 80 / 1e6


def test_attribute_maps_correlation_ids_to_records():
    ext = np.zeros(4, EXTCORR_RAW)
    ext["correlation_id"] = [7, 3, 7, 9]
    ext["external_id"] = [5, 1, 5, 2]  # record index + 1; 7 appears twice (runtime and driver)
    rec = attribute(np.array([3, 4, 7, 9, 100], np.uint32), ext)
    assert rec.tolist() == [0, -1, 4, 1, -1]
    assert attribute(np.array([1], np.uint32), np.zeros(0, EXTCORR_RAW)).tolist() == [-1]


def test_kernel_occupancy_once_per_config():
    calls = []

    def limits_of(d):
        calls.append(d)
        return S.LIMITS.get(d)

    occ, blocks, lim = kernel_occupancy(np.array([0, 0, 1, 0]), np.array([256, 256, 256, 128]),
                                        np.array([32, 32, 32, 64]), np.array([0, 0, 0, 0]),
                                        limits_of)
    assert occ[:2].tolist() == [1.0, 1.0] and math.isnan(occ[2]) and occ[3] == 0.5
    assert blocks.tolist() == [8, 8, 0, 8]
    assert lim.tolist() == ["warps", "warps", "", "registers"]
    assert sorted(calls) == [0, 0, 1]  # three distinct configs


def test_build_kernels_fields_and_region_names():
    k, ext = S.kernels(4, regions=[0, 1, -1, 0])
    k["dynamic_smem"][1] = 1024
    k["name_id"][3] = 99  # an id beyond the table
    out = build_kernels(k, ["a(int)", "b", "c"], attribute(k["correlation_id"], ext),
                        np.array(["outer", "inner"], dtype=object), S.LIMITS.get)
    assert out["name"].tolist() == ["a(int)", "b", "c", "<unknown kernel>"]
    assert out["region"].tolist() == ["outer", "inner", "", "outer"]
    assert out["region_record"].tolist() == [0, 1, -1, 0]
    assert (out["duration_ns"] == 1000).all()
    assert out["dynamic_smem"].tolist() == [0, 1024, 0, 0]
    assert out["grid_x"][0] == 128 and out["block_x"][0] == 256
    # 256 threads, 32 regs, 4096 B static smem on sm_90: 8 blocks by warps and registers
    assert out["occupancy"][0] == 1.0 and out["occupancy_limiter"][0] == "warps"


def _profile(n=6, regions=None, records=None, **window_kw):
    k, ext = S.kernels(n, regions=regions)
    return Profile._from_window(S.window(k, ext, **window_kw), records, S.LIMITS)


def test_profile_summary_exact():
    recs = S.region_records([("step", -1, 0, 10**9, False), ("attn", 0, 10, 10**8, False)])
    # 6 kernels on 2 streams, 1000 ns each, 500 ns apart per stream
    p = _profile(6, regions=[1, 1, 0, 0, -1, -1], records=recs)
    s = p.summary()
    assert s.kernels == 6 and s.kernel_ms == 0.006
    # both streams run slots [1000, 2000), [2500, 3500), [4000, 5000): busy 3000 ns
    assert s.busy_ms == 0.003
    assert [r.key for r in s.by_kernel] == ["kernel_0(float*)", "kernel_1(float*)",
                                            "kernel_2(float*)"]
    assert all(r.calls == 2 and r.pct_busy == pytest.approx(200 / 3) for r in s.by_kernel)
    by = {r.key: r for r in s.by_region}
    assert by["attn"].calls == 2 and by["attn"].idle_ms == 0.0  # both run at [1000, 2000)
    assert by["step"].calls == 2 and by["(no region)"].calls == 2
    text = str(s)
    assert "by kernel" in text and "by region" in text and "attn" in text
    assert "<table>" in s._repr_html_()
    d = s.to_dict()
    assert d["kernels"] == 6 and len(d["by_kernel"]) == 3


def test_profile_results_and_dict():
    p = _profile(4, dropped=3)
    assert p.dropped == 3
    assert len(p.kernels) == 4 and len(p.memcpy) == 0 and len(p.memset) == 0
    assert p.clock_offset_ns == S.OFFSET
    d = p.to_dict()
    assert d["kernels"] == 4 and d["dropped"] == 3 and d["summary"]["kernels"] == 4
    assert "3 dropped" in repr(p)
    assert "DROPPED" in str(p.summary())


def test_profile_arguments_are_checked():
    with pytest.raises(TypeError, match="kernels"):
        Profile(kernels=1)
    with pytest.raises(ValueError, match="nothing to record"):
        Profile(kernels=False, memcpy=False, memset=False, memory=False)


def test_results_before_stop_raise():
    import gpuprofile as gp

    p = gp.profile()
    with pytest.raises(gp.GpuProfileError, match="results exist once it stopped"):
        p.kernels  # noqa: B018
    assert "new" in repr(p)
    with pytest.raises(gp.GpuProfileError, match="not running"):
        p.stop()


def test_empty_profile():
    p = _profile(0)
    s = p.summary()
    assert s.kernels == 0 and s.by_kernel == [] and s.busy_ms == 0
    assert KERNEL_RAW.itemsize == 88


def test_profile_options_are_defined_once():
    """gp.profile, Profile and `gpuprofile run` take the options of tracing/options.py: one
    signature, one check, one help (issue 24)."""
    import dataclasses
    import inspect

    from gpuprofile.cli import parse_run_args
    from gpuprofile.tracing.options import HELP, ProfileOptions

    names = [f.name for f in dataclasses.fields(ProfileOptions)]
    assert names == ["kernels", "memcpy", "memset", "memory", "regions", "stream_attribution",
                     "python_stacks", "region_clock"] == list(HELP)
    # gp.profile adds torch.profiler's step schedule (tracing/schedule.py) to the options
    assert list(inspect.signature(gp.profile).parameters) == names + ["schedule", "on_trace_ready"]
    assert all(f"{name}: " in gp.profile.__doc__ for name in names)
    p = Profile(memory=False, python_stacks=True)
    assert p.options == ProfileOptions(memory=False, python_stacks="line")
    assert p.kinds == ["kernels", "memcpy", "memset", "regions", "stream_attribution"]
    assert Profile(p.options).options is p.options
    opts, script, _ = parse_run_args(["--no-regions", "--folded", "out.folded", "x.py"])
    assert script == "x.py"
    assert opts["profile"] == ProfileOptions(regions=False, python_stacks="stack")
    with pytest.raises(TypeError, match=r"profile\(regions=...\) must be True or False"):
        ProfileOptions(regions=None)
    # region_clock: a choice of two, not a flag (kinds leaves it out)
    assert ProfileOptions().region_clock == "cupti" and Profile().cupti_region_clock
    assert not Profile(region_clock="events").cupti_region_clock
    assert not Profile(regions=False).cupti_region_clock  # no attribution: no trace to read
    for bad in ("CUPTI", "", None, True):
        with pytest.raises(ValueError, match=r"region_clock must be one of \('cupti', 'events'\)"):
            ProfileOptions(region_clock=bad)
